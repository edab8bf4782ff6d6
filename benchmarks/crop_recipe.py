"""Crop settings chosen on the val split: the pipeline's segmenter fine-tune (the shipped weights, 300 steps at lr 3e-4)
with each candidate, scored by the selection rule.

    python benchmarks/crop_recipe.py [--steps 300] [--n-images 1000] [--no-amx]

Candidates: whole images at every step (the settings before crop training) and 32 px crops with a share of them
placed around the sphere (the rest uniform) and a final share of the steps on whole images. Uniform crops keep the
share of sphere pixels that whole images have; crops placed on the sphere raise it, which fine-tuning a network
trained on whole images turns into false detections unless the whole-image phase brings it back. Each is scored with
``eval-vision --split val`` (training photos, validation seeds): the worst precision or recall over ``composites``,
``sim`` and ``painted`` (the selection rule of docs/vision.md), among the candidates whose false detections on
sphere-free images stay within :data:`FALSE_DETECTION_MARGIN` of the whole-image baseline's on every suite.
Writes ``runs/benchmarks/crop_recipe[-noamx].json`` (``--save``: ``benchmarks/results/``); the held-out suites
take no part.
"""

from __future__ import annotations

import argparse
import sys

import isa_cap

isa_cap.cap_if_asked()  # before torch loads oneDNN; spawned DataLoader workers inherit it

import shutil
import time
from pathlib import Path

from results_io import add_save_argument, write_results

from grasp_s2r.vision.evaluation.evaluate import VisionEvalConfig, evaluate_suites
from grasp_s2r.vision.networks.segmenter import default_checkpoint_path
from grasp_s2r.vision.training.train import SegmenterTrainConfig, train

SUITES = ("composites", "sim", "painted")
CANDIDATES = {  # name -> SegmenterTrainConfig overrides
    "whole-images": {"crop_px": 0},
    "crops-sphere0.5-full0.1": {"crop_px": 32, "crop_sphere_share": 0.5, "full_size_share": 0.1},
    "crops-uniform-full0.1": {"crop_px": 32, "crop_sphere_share": 0.0, "full_size_share": 0.1},
    "crops-sphere0.5-full0.3": {"crop_px": 32, "crop_sphere_share": 0.5, "full_size_share": 0.3},
}
FALSE_DETECTION_MARGIN = 0.02
"""A candidate is eligible when its false detections on sphere-free val images exceed the whole-image baseline's by
at most this much on every suite: a mask that fires on sphere-free views sends the controller after nothing."""


def _parse() -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--steps", type=int, default=300, help="fine-tuning steps of each candidate (default 300)")
    p.add_argument("--n-images", type=int, default=1000, help="val-split images per suite (default 1000)")
    p.add_argument("--candidates", default=",".join(CANDIDATES), help="comma-separated names (default: all)")
    p.add_argument("--out", default="runs/crop-recipe", help="run folders (default runs/crop-recipe)")
    p.add_argument("--json", default=None, help="write the figures here (default: runs/benchmarks/...; with --save: "
                   "benchmarks/results/...)")
    add_save_argument(p)
    isa_cap.add_argument(p)
    return p.parse_args()


def main() -> int:
    args = _parse()
    names = [n.strip() for n in args.candidates.split(",") if n.strip()]
    unknown = sorted(set(names) - set(CANDIDATES))
    if unknown:
        raise SystemExit(f"crop_recipe: unknown candidates {unknown}; choose from {', '.join(CANDIDATES)}")
    rows = {}
    for name in names:
        cfg = SegmenterTrainConfig(steps=args.steps, lr=3e-4, seed=0, init_checkpoint=str(default_checkpoint_path()),
                                   **CANDIDATES[name])
        out = Path(args.out) / name
        shutil.rmtree(out, ignore_errors=True)
        t0 = time.perf_counter()
        model = train(cfg, out, progress=False)
        seconds = time.perf_counter() - t0
        report, _ = evaluate_suites(model, list(SUITES), latency_frames=0,
                                    cfg=VisionEvalConfig(n_images=args.n_images, split="val"))
        suites = {s: {k: report["suites"][s][k] for k in ("precision", "recall", "found_rate", "false_detection_rate")}
                  for s in SUITES}
        score = min(min(m["precision"] or 0.0, m["recall"] or 0.0) for m in suites.values())
        rows[name] = {"overrides": CANDIDATES[name], "train_seconds": seconds, "val_score": score, "suites": suites}
        print(f"{name:<26} score {score:.3f}  " + "  ".join(
            f"{s} {m['precision']:.3f}/{m['recall']:.3f} fd {m['false_detection_rate']:.3f}" for s, m in suites.items())
              + f"  ({seconds:.0f} s)", flush=True)
    base = rows.get("whole-images")
    eligible = [n for n in rows if base is None or all(
        rows[n]["suites"][s]["false_detection_rate"] <= base["suites"][s]["false_detection_rate"]
        + FALSE_DETECTION_MARGIN for s in SUITES)]
    best = max(eligible, key=lambda n: rows[n]["val_score"])
    write_results(args.json, "crop_recipe", {"candidates": rows, "eligible": eligible, "selected": best,
                                             "false_detection_margin": FALSE_DETECTION_MARGIN}, args,
                  "noamx" if args.no_amx else "")
    print(f"selected on the val split: {best} (score {rows[best]['val_score']:.3f})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
