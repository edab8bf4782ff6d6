"""``grasp-s2r eval-vision``: pixel precision / recall / IoU / F1 and per-image detection of a checkpoint."""

from __future__ import annotations

import argparse
import json
import math
from pathlib import Path
from typing import TYPE_CHECKING

from grasp_s2r.cli import UsageError, positive_int

if TYPE_CHECKING:
    from grasp_s2r.vision.evaluate import EvalResult


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--model", type=Path, default=None,
                        help="segmenter checkpoint (default: the shipped grasp_s2r/weights/segmenter_64px.pt)")
    parser.add_argument("--data", type=Path, default=None,
                        help="folder DIR/images/<name>.{png,jpg,jpeg} + DIR/masks/<name>.png (default: fresh "
                             "held-out-photo composites)")
    parser.add_argument("--n-images", type=positive_int, default=1000, help="held-out composites (default: 1000)")
    parser.add_argument("--seed", type=int, default=1, help="seed of the held-out composites (default: 1)")
    parser.add_argument("--no-augment", action="store_true",
                        help="held-out composites without the training augmentation (no noise, blur, JPEG, jitter)")
    parser.add_argument("--backgrounds", type=Path, default=None,
                        help="your own photos folder, for held-out composites (default: embedded photos)")
    parser.add_argument("--out", type=Path, default=Path("runs/eval-vision"),
                        help="folder for metrics.json and overlays.png (default: runs/eval-vision)")
    parser.add_argument("--save-overlays", action="store_true", help="write overlays.png (TP green, FP red, FN blue)")
    parser.add_argument("--threshold", type=float, default=None,
                        help="probability threshold of a sphere pixel (default: the checkpoint's, else 0.5)")
    parser.add_argument("--batch-size", type=positive_int, default=128, help="images per forward pass")
    parser.add_argument("--device", default=None, help="torch device (default: cuda when present, else cpu)")
    parser.add_argument("--threads", type=positive_int, default=None, help="torch CPU threads (default: torch's)")


def _overlay_order(result: EvalResult) -> list[int]:
    """Images with errors first, then the others: what a person should look at."""
    errors = [i for i, r in enumerate(result.report["per_image"]) if r["fp"] or r["fn"]]
    error_set = set(errors)
    rest = [i for i in range(len(result.names)) if i not in error_set]
    return errors[:24] + rest[: 48 - min(24, len(errors))]


def run(args: argparse.Namespace) -> int:
    import torch

    from grasp_s2r.vision.augment import NO_AUGMENT
    from grasp_s2r.vision.backgrounds import BackgroundError
    from grasp_s2r.vision.dataset import DataConfig
    from grasp_s2r.vision.evaluate import EvalConfig, evaluate
    from grasp_s2r.vision.folder import DataFolderError
    from grasp_s2r.vision.metrics import format_table
    from grasp_s2r.vision.overlays import save_overlay_grid
    from grasp_s2r.vision.segmenter import CheckpointError, check_threshold, default_checkpoint_path

    if args.threads:
        torch.set_num_threads(args.threads)
    if args.threshold is not None:
        try:
            check_threshold(args.threshold)
        except ValueError as e:
            raise UsageError(f"--{e}") from None
    model = args.model or default_checkpoint_path()
    data = DataConfig(augment=NO_AUGMENT) if args.no_augment else DataConfig()
    cfg = EvalConfig(n_images=args.n_images, seed=args.seed, batch_size=args.batch_size, data=data)
    try:
        result = evaluate(model, cfg=cfg, data_dir=args.data, backgrounds_dir=args.backgrounds, device=args.device,
                          threshold=args.threshold)
    except (CheckpointError, DataFolderError, BackgroundError) as e:
        raise UsageError(str(e)) from None
    except RuntimeError as e:
        if args.device and "device" in str(e).lower():
            raise UsageError(f"bad --device {args.device!r}: {str(e).splitlines()[0]}") from None
        raise
    m = result.report["metrics"]
    clean = ", no augmentation" if args.no_augment else ""
    source = f"folder {args.data}" if args.data else f"{args.n_images} held-out-photo composites (seed {args.seed}{clean})"
    threshold = result.report["model"]["threshold"]
    print(format_table(m, f"eval-vision: {model} (threshold {threshold:.3f}) on {source}"))
    args.out.mkdir(parents=True, exist_ok=True)
    report_path = args.out / "metrics.json"
    report = json.loads(json.dumps(result.report, allow_nan=True))
    for k, v in report["metrics"].items():  # NaN is not JSON: undefined metrics are written as null
        if isinstance(v, float) and math.isnan(v):
            report["metrics"][k] = None
    report_path.write_text(json.dumps(report, indent=2))
    print(f"eval-vision: wrote {report_path}")
    if args.save_overlays:
        idx = _overlay_order(result)
        path = args.out / "overlays.png"
        save_overlay_grid(result.images[idx], result.pred[idx], result.target[idx], path)
        print(f"eval-vision: wrote {path} (TP green, FP red, FN blue; images with errors first)")
    return 0
