"""Vision benchmark: held-out-photo precision / recall, CPU latency at batch 1, composites/s on one core.

    python benchmarks/bench_vision.py [--model CKPT] [--n-images 1000] [--seeds 1,2,3] [--threshold T]

Everything runs with ``torch.set_num_threads(1)`` on the CPU:
- quality: ``eval-vision``'s held-out composites (held-out photos, held-out episode seeds), micro pixel metrics,
  as composited (``--no-augment``) and with the training augmentation applied to them too (the default);
  one set of ``--n-images`` per seed (1000 images put about +-0.01 of sampling noise on precision and recall),
  figures pooled over all of them, per seed beside them (seeds change views, sphere colours, crops and photos;
  the scene's episode seeds, hence light direction and camera-mount jitter, are shared between them);
- latency: ``Segmenter.predict`` on one (H, W, 3) frame (conversion + forward + threshold), and the bare forward;
- composition: full dataset items (render amortized over ``renders_per_view``, photo crop, paste, augment),
  and paste + augment alone on pre-rendered frames.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import torch

from grasp_s2r.vision.augment import NO_AUGMENT
from grasp_s2r.vision.backgrounds import load_backgrounds, random_crop
from grasp_s2r.vision.composite import composite_frame
from grasp_s2r.vision.dataset import CompositeDataset, DataConfig, env_config_for
from grasp_s2r.vision.evaluate import EvalConfig, evaluate
from grasp_s2r.vision.metrics import PixelCounts, confusion_counts, summarize
from grasp_s2r.vision.model import to_input_tensor
from grasp_s2r.vision.segmenter import THRESHOLD, Segmenter, default_checkpoint_path

TARGET = 0.95
"""Issue 3: pixel precision and recall on held-out-photo composites."""
AUGMENT_WORDS = {"clean": "as composited, no augmentation",
                 "augmented": "plus the training augmentation: noise, blur, JPEG 30-95, colour jitter, affine"}


def latency_ms(segmenter: Segmenter, repeats: int) -> dict[str, float]:
    """Median / p90 milliseconds per frame at batch 1."""
    h, w = segmenter.input_hw
    frame = np.random.default_rng(0).integers(0, 256, size=(h, w, 3), dtype=np.uint8)
    x = to_input_tensor(frame[None])

    def timed(fn: Callable[[], object]) -> np.ndarray:
        for _ in range(20):
            fn()
        t = []
        for _ in range(repeats):
            t0 = time.perf_counter()
            fn()
            t.append(time.perf_counter() - t0)
        return np.array(t) * 1e3

    predict = timed(lambda: segmenter.predict(frame))
    with torch.inference_mode():
        forward = timed(lambda: segmenter.model(x))
    return {"predict_median_ms": float(np.median(predict)), "predict_p90_ms": float(np.percentile(predict, 90)),
            "forward_median_ms": float(np.median(forward))}


def composites_per_s(image_size_px: int, n: int) -> dict[str, float]:
    data = DataConfig()
    photos = load_backgrounds("train")
    ds = CompositeDataset(env_config=env_config_for(image_size_px), data=data, backgrounds=photos, stream="train",
                          seed=123, length=n)
    ds.sample(0)  # connect and load the scene outside the timing
    t0 = time.perf_counter()
    for i in range(1, n + 1):
        ds[i]
    full = n / (time.perf_counter() - t0)
    frames = [ds.frame(k) for k in range(16)]
    rng = np.random.default_rng(0)
    t0 = time.perf_counter()
    for i in range(n):
        background = random_crop(photos[i % len(photos)], ds.image_hw, rng)
        rgb, mask = composite_frame(frames[i % 16], background, rng, data.composite)
        ds._augment(rgb, mask, seed=i)
    paste = n / (time.perf_counter() - t0)
    ds.close()
    return {"dataset_items_per_s": full, "paste_augment_per_s": paste, "renders_per_view": data.renders_per_view}


def _pooled(counts: list[PixelCounts]) -> dict[str, float | int]:
    return summarize(PixelCounts(*(np.concatenate([getattr(c, f.name) for c in counts])
                                   for f in dataclasses.fields(PixelCounts))))


def quality(model: Path, data: DataConfig, seeds: list[int], n_images: int,
            threshold: float | None) -> tuple[dict[str, Any], dict[str, Any]]:
    """Metrics per seed and pooled over the seeds' images, at the checkpoint's threshold (or ``threshold``) and
    at 0.5; plus the model info of the report."""
    out: dict[str, Any] = {"per_seed": {}}
    counts, counts_05 = [], []
    segmenter = Segmenter.load(model, device="cpu")
    for seed in seeds:
        result = evaluate(model, cfg=EvalConfig(n_images=n_images, seed=seed, data=data), device="cpu",
                          threshold=threshold)
        out["per_seed"][seed] = result.report["metrics"]
        counts.append(confusion_counts(result.pred, result.target))
        at_05 = result.report["model"]["threshold"] == THRESHOLD  # then the masks at 0.5 are result.pred
        counts_05.append(counts[-1] if at_05 else
                         confusion_counts(segmenter.predict_proba(result.images) > THRESHOLD, result.target))
    out["pooled"], out["pooled_threshold_0.5"] = _pooled(counts), _pooled(counts_05)
    return out, result.report["model"]


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--model", type=Path, default=None, help="checkpoint (default: the shipped one)")
    p.add_argument("--n-images", type=int, default=1000, help="held-out composites per seed (default: 1000)")
    p.add_argument("--seeds", default="1,2,3",
                   help="seeds of the held-out composites, comma-separated; figures pooled over them (default: 1,2,3)")
    p.add_argument("--threshold", type=float, default=None,
                   help="sphere-probability threshold (default: the checkpoint's calibrated one, else 0.5)")
    p.add_argument("--repeats", type=int, default=500, help="timed frames for the latency (default: 500)")
    p.add_argument("--json", type=Path, default=None, help="also write the figures to this JSON file")
    args = p.parse_args()
    seeds = [int(x) for x in args.seeds.split(",")]
    torch.set_num_threads(1)
    model = args.model or default_checkpoint_path()

    metrics = {}
    for name, data in (("clean", DataConfig(augment=NO_AUGMENT)), ("augmented", DataConfig())):
        metrics[name], info = quality(model, data, seeds, args.n_images, args.threshold)
        m, m05 = metrics[name]["pooled"], metrics[name]["pooled_threshold_0.5"]
        met = "met" if min(m["precision"], m["recall"]) >= TARGET else "NOT met"
        print(f"held-out-photo composites, {name} ({AUGMENT_WORDS[name]}): {m['images']} images "
              f"({m['target_images']} with the sphere), seeds {args.seeds} pooled")
        print(f"  pixel precision {m['precision']:.4f}   recall {m['recall']:.4f}   IoU {m['iou']:.4f}   "
              f"F1 {m['f1']:.4f}   (target >= {TARGET} / {TARGET}: {met})")
        print(f"  sphere found {m['found_rate']:.4f}   false detection on empty images {m['false_detection_rate']:.4f}")
        for seed, ms in metrics[name]["per_seed"].items():
            print(f"    seed {seed}: precision {ms['precision']:.4f}   recall {ms['recall']:.4f}   IoU {ms['iou']:.4f}")
        if info["threshold"] != THRESHOLD:  # what the operating point bought
            print(f"  (at threshold {THRESHOLD}: precision {m05['precision']:.4f}   recall {m05['recall']:.4f}   "
                  f"IoU {m05['iou']:.4f})")
    print(f"model {model} ({info['architecture']}, input {info['input_hw']}, threshold {info['threshold']:.3f})")

    lat = latency_ms(Segmenter.load(model, device="cpu"), args.repeats)
    print(f"CPU latency, batch 1, 1 thread: predict {lat['predict_median_ms']:.2f} ms median "
          f"({lat['predict_p90_ms']:.2f} ms p90), bare forward {lat['forward_median_ms']:.2f} ms")

    comp = composites_per_s(info["input_hw"][0], n=400)
    print(f"composition on one core: {comp['dataset_items_per_s']:.0f} training items/s (render + crop + paste + "
          f"augment, one render per {comp['renders_per_view']} items), {comp['paste_augment_per_s']:.0f}/s paste + "
          f"augment alone")
    if args.json:
        args.json.write_text(json.dumps({"metrics": metrics, "latency": lat, "composition": comp, "model": str(model),
                                         "threshold": info["threshold"], "n_images_per_seed": args.n_images, "seeds": seeds},
                                        indent=2))


if __name__ == "__main__":
    main()
