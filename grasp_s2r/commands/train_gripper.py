"""``grasp-s2r train-gripper``: train a gripper head (the fingers' mask) on a frozen segmenter."""

from __future__ import annotations

import argparse
from pathlib import Path

from grasp_s2r.options import (
    Option,
    UsageError,
    add_options,
    comma_text,
    config_from_options,
    non_negative_int,
    positive_int,
    torch_device,
)
from grasp_s2r.vision.training.gripper_train import (
    GripperTrainConfig,
    GripperTrainError,
    format_metrics,
    train_gripper_head,
)

RESUME_HINT = "nothing is kept (the head is written at the end): run the same command again to start over"


def _dilations(text: str) -> tuple[int, ...]:
    """``"1,2,4"`` -> (1, 2, 4); anything but positive integers -> ValueError (one line)."""
    parts = [c.strip() for c in text.split(",") if c.strip()]
    if not parts or not all(c.isdigit() for c in parts):
        raise ValueError(f"--dilations: expected positive integers D1,D2,..., got {text!r}")
    return tuple(int(c) for c in parts)


def _mm(m: float) -> str:
    return f"{m * 1000:g}"


OPTIONS = (
    Option("--out", "run folder (gripper_head.pt, metrics.json, overlays.png)", "out"),
    Option("--vision", "segmenter checkpoint the head is trained on (frozen)", "vision", metavar="CKPT",
           show=lambda c: c or "the packaged one"),
    Option("--steps", "optimizer steps", "steps", type=positive_int),
    Option("--batch-size", "composites per step", "batch_size", type=positive_int),
    Option("--lr", "peak learning rate", "lr", type=float),
    Option("--dice-weight", "weight of the soft Dice loss added to the BCE (0: BCE only)", "dice_weight", type=float),
    Option("--seed", "seed of the head's weights and the composites", "seed", type=non_negative_int),
    Option("--camera-jitter-mm", "max camera mount jitter of the training views, per axis", "camera_jitter_m",
           type=float, convert=lambda mm: mm / 1000.0, show=_mm),
    Option("--camera-jitter-deg", "max camera look-at jitter of the training views, per axis", "camera_jitter_deg",
           type=float, show=lambda d: f"{d:g}"),
    Option("--dilations", "the head's 3x3 blocks, one per dilation (1: a single block)", "dilations",
           convert=lambda text: _dilations(text), show=comma_text, metavar="D1,D2,..."),
    Option("--threshold", "probability above which a pixel is a finger's", "threshold", type=float),
    Option("--val-images", "validation composites (training photos, other episodes)", "val_images",
           type=positive_int),
    Option("--heldout-images", "held-out composites (held-out photos)", "heldout_images", type=positive_int),
    Option("--workers", "DataLoader worker processes making composites (0: in-process)", "workers",
           type=non_negative_int, show=lambda w: "auto: 1 on a CPU of 2+ cores" if w is None else str(w)),
)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    add_options(parser, GripperTrainConfig, OPTIONS)
    parser.add_argument("--device", type=torch_device, default=None,
                        help="torch device (default: cuda when present, else cpu)")
    parser.add_argument("--threads", type=positive_int, default=None,
                        help="torch CPU threads of the step (default: the cores the --workers leave)")
    parser.add_argument("--no-progress", action="store_true", help="no progress bar")


def run(args: argparse.Namespace) -> int:
    cfg = config_from_options(GripperTrainConfig, args, OPTIONS)
    try:
        metrics = train_gripper_head(cfg, device=args.device or None, threads=args.threads,
                                     progress=not args.no_progress)
    except GripperTrainError as e:
        raise UsageError(str(e)) from None
    out = Path(cfg.out)
    print(f"train-gripper: the fingers' mask on {cfg.val_images} validation and {cfg.heldout_images} held-out "
          f"composites (camera jitter up to {cfg.camera_jitter_m * 1000:g} mm / {cfg.camera_jitter_deg:g} deg)")
    print(format_metrics(metrics))
    print(f"train-gripper: wrote {out / 'gripper_head.pt'} (metrics: {out / 'metrics.json'}, overlays: "
          f"{out / 'overlays.png'})")
    return 0
