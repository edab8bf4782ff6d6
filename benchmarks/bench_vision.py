"""Vision benchmark: every test suite (held-out split) pooled over seeds, CPU latency at batch 1, composites/s.

    python benchmarks/bench_vision.py [--model CKPT] [--n-images 1000] [--seeds 1,2,3] [--suites all] [--threshold T]

Everything runs with ``torch.set_num_threads(1)`` on the CPU:
- quality: for each suite of ``eval-vision --suite`` (``composites``: held-out photos + pasted sim sphere with the
  training augmentation; ``composites-clean``: as pasted; ``sim``: raw domain-randomized renders; ``painted``:
  spheres drawn by the analytic renderer on held-out photos), ``--n-images`` per seed, micro pixel metrics pooled over
  the seeds' images and per seed (1000 images put about +-0.01 of sampling noise on precision and recall);
  checked against issue 11's targets (precision and recall >= 0.95, sphere found >= 0.97, false detection on
  sphere-free images <= 0.03) on composites, sim and painted;
- latency: ``Segmenter.predict`` on one (H, W, 3) frame (conversion + forward + threshold);
- composition: dataset items of the training recipe (render amortized over ``renders_per_view``, background,
  paste, augment) and of the photos-only compositor.
"""

from __future__ import annotations

import argparse
import dataclasses
import time
from pathlib import Path
from typing import Any

import numpy as np
import torch
from results_io import add_json_argument, write_results

from grasp_s2r.vision.evaluation.evaluate import VisionEvalConfig, evaluate_segmenter
from grasp_s2r.vision.evaluation.metrics import (
    SMALL_SPHERE_PX,
    PixelCounts,
    confusion_counts,
    format_width_table,
    metrics_by_width,
    summarize,
)
from grasp_s2r.vision.images.backgrounds import load_backgrounds
from grasp_s2r.vision.images.dataset import TRAINING_DATA, CompositeDataset, DataConfig, env_config_for
from grasp_s2r.vision.networks.segmenter import Segmenter, default_checkpoint_path
from grasp_s2r.vision.testsets.suites import SUITES, latency_ms, resolve_suites

TARGETS = {"precision": (">=", 0.95), "recall": (">=", 0.95), "found_rate": (">=", 0.97),
           "false_detection_rate": ("<=", 0.03)}
"""Issue 11's targets for the shipped checkpoint on each of :data:`TARGET_SUITES`."""
TARGET_SUITES = ("composites", "sim", "painted")
WIDTH_TARGETS = {f">= {SMALL_SPHERE_PX:g}": 0.97, f"< {SMALL_SPHERE_PX:g}": 0.85}
"""Issue 23's targets for the share of spheres found, by width (:func:`metrics_by_width`'s summary rows)."""


def composites_per_s(image_size_px: int, n: int) -> dict[str, float]:
    """Dataset items per second on one core: the training recipe and the photos-only compositor."""
    out = {}
    for name, data in (("recipe", TRAINING_DATA), ("photos_only", DataConfig())):
        ds = CompositeDataset(env_config=env_config_for(image_size_px), data=data,
                              backgrounds=load_backgrounds("train"), stream="train", seed=123, length=n + 1)
        ds.sample(0)  # connect and load the scene outside the timing
        t0 = time.perf_counter()
        for i in range(1, n + 1):
            ds[i]
        out[f"{name}_items_per_s"] = n / (time.perf_counter() - t0)
        ds.close()
    return out


def _pooled(counts: list[PixelCounts]) -> dict[str, float | int]:
    return summarize(PixelCounts(*(np.concatenate([getattr(c, f.name) for c in counts])
                                   for f in dataclasses.fields(PixelCounts))))


def quality(model: Path, suite: str, seeds: list[int], n_images: int, threshold: float | None) -> dict[str, Any]:
    """Metrics of ``suite`` per seed and pooled over the seeds' images."""
    out: dict[str, Any] = {"per_seed": {}}
    counts, preds, targets = [], [], []
    for seed in seeds:
        result = evaluate_segmenter(model, cfg=VisionEvalConfig(n_images=n_images, seed=seed, suite=suite),
                                    device="cpu", threshold=threshold)
        out["per_seed"][seed] = result.report["metrics"]
        counts.append(confusion_counts(result.pred, result.target))
        preds.append(result.pred)
        targets.append(result.target)
    out["pooled"] = _pooled(counts)
    out["by_width"] = metrics_by_width(np.concatenate(preds), np.concatenate(targets))
    return out


def verdict(m: dict[str, Any], by_width: list[dict[str, Any]]) -> str:
    missed = [k for k, (op, t) in TARGETS.items() if not (m[k] >= t if op == ">=" else m[k] <= t)]
    rows = {r["width_px"]: r for r in by_width}
    missed += [f"found {w} px" for w, t in WIDTH_TARGETS.items() if w in rows and rows[w]["found_rate"] < t]
    return "all targets met" if not missed else "NOT met: " + ", ".join(missed)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--model", type=Path, default=None, help="checkpoint (default: the shipped one)")
    p.add_argument("--n-images", type=int, default=1000, help="images per suite and seed (default: 1000)")
    p.add_argument("--seeds", default="1,2,3", help="seeds, comma-separated; figures pooled over them (default: 1,2,3)")
    p.add_argument("--suites", default="all", help="a suite name or all (default: all)")
    p.add_argument("--threshold", type=float, default=None,
                   help="sphere-probability threshold (default: the checkpoint's calibrated one, else 0.5)")
    p.add_argument("--repeats", type=int, default=500, help="timed frames for the latency (default: 500)")
    add_json_argument(p, "bench_vision")
    args = p.parse_args()
    seeds = [int(x) for x in args.seeds.split(",")]
    torch.set_num_threads(1)
    model = args.model or default_checkpoint_path()
    segmenter = Segmenter.load(model, device="cpu")
    if args.threshold is not None:
        segmenter.threshold = args.threshold

    metrics = {}
    print(f"model {model} (threshold {segmenter.threshold:.3f}); held-out split, {args.n_images} images per suite "
          f"and seed, seeds {args.seeds} pooled")
    print(f"  {'suite':<18} {'images':>7} {'precision':>9} {'recall':>9} {'IoU':>9} {'found':>9} {'false det':>9}")
    for suite in resolve_suites(args.suites):
        metrics[suite] = quality(model, suite, seeds, args.n_images, args.threshold)
        m = metrics[suite]["pooled"]
        mark = f"   {verdict(m, metrics[suite]['by_width'])}" if suite in TARGET_SUITES else "   (no target)"
        print(f"  {suite:<18} {m['images']:>7} {m['precision']:9.4f} {m['recall']:9.4f} {m['iou']:9.4f} "
              f"{m['found_rate']:9.4f} {m['false_detection_rate']:9.4f}{mark}")
        for seed, ms in metrics[suite]["per_seed"].items():
            print(f"    seed {seed:<13} {ms['images']:>7} {ms['precision']:9.4f} {ms['recall']:9.4f} {ms['iou']:9.4f} "
                  f"{ms['found_rate']:9.4f} {ms['false_detection_rate']:9.4f}")
    for suite in metrics:
        print(format_width_table(metrics[suite]["by_width"], f"{suite}, by sphere width (pooled)"))
    h, w = segmenter.input_hw
    frames = np.random.default_rng(0).integers(0, 256, size=(16, h, w, 3), dtype=np.uint8)
    lat = latency_ms(segmenter, frames, repeats=args.repeats)
    print(f"CPU latency, batch 1, 1 thread: predict {lat['predict_median_ms']:.2f} ms median "
          f"({lat['predict_p90_ms']:.2f} ms p90; target <= 5 ms)")
    comp = composites_per_s(h, n=400)
    print(f"composition on one core: {comp['recipe_items_per_s']:.0f} training items/s with the training recipe, "
          f"{comp['photos_only_items_per_s']:.0f}/s photos only")
    write_results(args.json, "bench_vision", {
        "metrics": metrics, "latency": lat, "composition": comp, "model": str(model), "threshold": segmenter.threshold,
        "n_images_per_seed": args.n_images, "seeds": seeds, "suites": {k: SUITES[k] for k in metrics}}, args)


if __name__ == "__main__":
    main()
