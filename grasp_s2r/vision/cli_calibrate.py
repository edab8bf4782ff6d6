"""``grasp-s2r calibrate-vision``: set a segmenter checkpoint's threshold where pixel precision = recall."""

from __future__ import annotations

import argparse
from pathlib import Path

from grasp_s2r.options import UsageError, non_negative_int, positive_int, torch_device


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--model", type=Path, required=True, help="segmenter checkpoint to calibrate")
    parser.add_argument("--out", type=Path, default=None,
                        help="write the calibrated checkpoint here (default: rewrite --model in place)")
    parser.add_argument("--n-images", type=positive_int, default=1000,
                        help="validation composites on the training photos (default: 1000)")
    parser.add_argument("--seed", type=non_negative_int, default=0, help="seed of the composites (default: 0)")
    parser.add_argument("--backgrounds", type=Path, default=None,
                        help="your own photos folder (its training split; default: embedded photos)")
    parser.add_argument("--device", type=torch_device, default=None,
                        help="torch device (default: cuda when present, else cpu)")


def check_out(out: Path) -> None:
    """``--out`` must name a file, and not one inside an artifact folder of another kind (a dataset, a DAgger run...):
    a calibrated segmenter goes beside its training run's files or anywhere outside artifact folders."""
    from grasp_s2r.files import ARTIFACT_KINDS, folder_kind

    if out.is_dir():
        raise UsageError(f"--out {out} is a folder; give the calibrated checkpoint's file name, e.g. {out / 'model.pt'}")
    parent = next((a for a in out.absolute().parents if a.exists()), None)
    if parent is None or not parent.is_dir():
        raise UsageError(f"--out {out}: {parent} is not a folder")
    kind = folder_kind(parent)
    if kind not in (None, "vision-run"):
        raise UsageError(f"--out {out}: {parent} holds {ARTIFACT_KINDS.get(kind, kind)}; write the checkpoint "
                         "elsewhere")


def run(args: argparse.Namespace) -> int:
    from grasp_s2r.vision.backgrounds import BackgroundError
    from grasp_s2r.vision.calibrate import calibrate_checkpoint
    from grasp_s2r.vision.segmenter import CheckpointError, read_checkpoint

    if args.model.is_dir():
        raise UsageError(f"--model {args.model} is a folder, not a checkpoint file (a training run's is RUN/model.pt)")
    if args.out is not None:
        check_out(args.out)
    try:
        before = float(read_checkpoint(args.model).get("threshold", 0.5))
        cal = calibrate_checkpoint(args.model, n_images=args.n_images, seed=args.seed,
                                   backgrounds_dir=args.backgrounds, out=args.out, device=args.device)
    except (CheckpointError, BackgroundError, ValueError) as e:
        raise UsageError(str(e)) from None
    print(f"calibrate-vision: threshold {before:.3f} -> {cal['threshold']:.3f} (break-even on {cal['n_images']} "
          f"validation composites of the training photos: precision {cal['precision']:.3f}, recall "
          f"{cal['recall']:.3f}); wrote {args.out or args.model}")
    return 0
