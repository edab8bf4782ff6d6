"""Equal wall-clock budget: the segmenter trained from random weights with the old settings and with the new ones,
each for the same minutes on this machine's cores, then scored on the val split.

    python benchmarks/train_vision_budget.py [--minutes 8] [--no-amx] [--n-images 1000]

Each setting's step count fills the budget at the steps/s that ``benchmarks/bench_train_vision.py`` measured on this
machine (its ``end_to_end`` figures, read from its results file of the same ``--no-amx`` variant); the whole
``train`` call is timed and reported beside the budget. Old: whole 64 px images, composites made in-process, torch's
threads, bf16 only with AMX. New: the defaults (32 px crops, then 10 % of the steps on whole images; a data worker;
the step split over one replica of the network per core; channels_last; bf16 where it pays).

The score is what recipes are chosen by: ``eval-vision --split val`` (training photos, validation seeds) on the
``composites``, ``sim`` and ``painted`` suites, the worst of precision and recall over the three. Writes
(``--save``) ``benchmarks/results/train_vision_budget[-noamx].json`` and the curves (in-training validation score against
wall time) to ``docs/images/train_vision_budget[-noamx].png`` with ``--save`` (else beside the JSON, in
``runs/benchmarks/``).
"""

from __future__ import annotations

import argparse
import sys

import isa_cap

isa_cap.cap_if_asked()  # before torch loads oneDNN; spawned DataLoader workers inherit it

import csv
import shutil
import time
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt
from results_io import REPO, add_save_argument, default_json, load_results, write_results

from grasp_s2r.cpu import cpu_info
from grasp_s2r.vision.evaluation.evaluate import VisionEvalConfig, evaluate_suites
from grasp_s2r.vision.training.train import SegmenterTrainConfig, train


def _parse() -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--minutes", type=float, default=8.0, help="wall-clock budget of each setting (default 8)")
    p.add_argument("--n-images", type=int, default=1000, help="val-split images per suite (default 1000)")
    p.add_argument("--out", default="runs/train-vision-budget", help="run folders (default runs/train-vision-budget)")
    p.add_argument("--json", default=None, help="write the figures here (default: runs/benchmarks/...; with --save: "
                   "benchmarks/results/...)")
    add_save_argument(p)
    isa_cap.add_argument(p)
    return p.parse_args()


SUITES = ("composites", "sim", "painted")


def score(suites: dict) -> float:
    """The worst of precision and recall over :data:`SUITES`."""
    return min(min(suites[s]["precision"] or 0.0, suites[s]["recall"] or 0.0) for s in SUITES)


def main() -> int:
    args = _parse()
    variant = "" if cpu_info().amx_bf16 else "noamx"  # a CPU without AMX, or --no-amx
    speed = load_results(default_json("bench_train_vision", variant))["figures"]["end_to_end"]
    cpu = cpu_info()
    print(f"CPU: {cpu.describe()}; budget {args.minutes:g} min a setting", flush=True)
    settings = {
        "old": ({"crop_px": 0, "full_size_share": 0.0, "workers": 0}, "on" if cpu.amx_bf16 else "off", 1),
        "new": ({}, "auto", None),
    }
    figures: dict = {"budget_minutes": args.minutes, "cpu": cpu.describe(), "settings": {}}
    curves = {}
    for name, (overrides, amp, replicas) in settings.items():
        steps = max(10, int(args.minutes * 60 * speed[name]["steps_per_s"]))
        every = max(1, steps // 10)
        cfg = SegmenterTrainConfig(steps=steps, val_every=every, checkpoint_every=every, **overrides)
        out = Path(args.out) / f"{name}{'-' + variant if variant else ''}"
        shutil.rmtree(out, ignore_errors=True)
        print(f"{name}: {steps} steps", flush=True)
        t0 = time.perf_counter()
        model = train(cfg, out, amp=amp, replicas=replicas, progress=True)
        seconds = time.perf_counter() - t0
        report, _ = evaluate_suites(model, list(SUITES), latency_frames=0,
                                    cfg=VisionEvalConfig(n_images=args.n_images, split="val"))
        suites = {s: {k: report["suites"][s][k] for k in ("precision", "recall", "found_rate", "false_detection_rate")}
                  for s in SUITES}
        with open(out / "curve.csv") as f:
            rows = list(csv.DictReader(f))
        curves[name] = [(float(r["elapsed_s"]), min(float(r["val_precision"] or 0), float(r["val_recall"] or 0)))
                        for r in rows]
        figures["settings"][name] = {"steps": steps, "train_seconds": seconds, "amp": amp, **overrides,
                                     "val_score": score(suites), "suites": suites, "curve": curves[name]}
        print(f"{name}: {seconds / 60:.1f} min, val score {score(suites):.3f} " + ", ".join(
            f"{s} {m['precision']:.3f}/{m['recall']:.3f} fd {m['false_detection_rate']:.3f}" for s, m in suites.items()),
              flush=True)

    fig, ax = plt.subplots(figsize=(6, 3.6))
    for name, pts in curves.items():
        ax.plot([t / 60 for t, _ in pts], [v for _, v in pts], marker="o", label=f"{name} settings")
    ax.set_xlabel("wall time (min)")
    ax.set_ylabel("min(precision, recall)\nvalidation composites")
    ax.set_title(f"segmenter from scratch, {cpu.cores} CPU cores" + (" without AMX" if not cpu.amx_bf16 else ""))
    ax.grid(alpha=0.3)
    ax.legend()
    fig.tight_layout()
    # the docs' figure only when the run is recorded (--save): running the benchmark leaves the checkout as it was
    image = (REPO / "docs" / "images" if args.save else REPO / "runs" / "benchmarks") / (
        f"train_vision_budget{'-' + variant if variant else ''}.png")
    image.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(image, dpi=110)
    print(f"curves: {image}")
    write_results(args.json, "train_vision_budget", figures, args, variant)
    old, new = figures["settings"]["old"]["val_score"], figures["settings"]["new"]["val_score"]
    print(f"val score at {args.minutes:g} min: old {old:.3f}, new {new:.3f} ({'new better' if new > old else 'not better'})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
