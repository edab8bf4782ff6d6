"""Benchmark: the shipped gripper head's fingers' masks (precision, recall, IoU) on validation and held-out composites.

    python benchmarks/bench_gripper_head.py [--head CKPT]

The sets are those ``grasp-s2r train-gripper`` reports (``gripper_train.evaluate_head``: the segmenter's training
composites of the validation stream, training photos, and of the held-out photos; camera mount jitter up to 8 mm /
4 deg; threshold 0.5). Writes (``--save``) ``benchmarks/results/bench_gripper_head.json``.
"""

from __future__ import annotations

import argparse

import torch
from results_io import add_json_argument, default_json, write_results

from grasp_s2r.vision.training.gripper_train import evaluate_head, format_metrics


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--head", default=None, help="gripper head checkpoint (default: the shipped one)")
    add_json_argument(p, "bench_gripper_head")
    args = p.parse_args()
    torch.set_num_threads(1)
    metrics = evaluate_head(args.head, device="cpu")
    print(format_metrics(metrics))
    write_results(args.json or default_json("bench_gripper_head"), "bench_gripper_head",
                  {"head": args.head or "shipped", "metrics": metrics}, args)


if __name__ == "__main__":
    main()
