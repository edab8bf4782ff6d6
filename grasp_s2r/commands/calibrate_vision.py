"""``grasp-s2r calibrate-vision``: set a segmenter checkpoint's threshold where pixel precision = recall (and, with
``--tiles``, whether it predicts tile by tile)."""

from __future__ import annotations

import argparse
from pathlib import Path

from grasp_s2r.options import (
    Option,
    UsageError,
    add_options,
    config_from_options,
    non_negative_int,
    positive_int,
    threshold,
    torch_device,
)
from grasp_s2r.vision.training.calibrate import CalibrationConfig, parse_tiles

RESUME_HINT = "nothing was written (the checkpoint is written at the end): run the same command again"
"""What an interrupted ``grasp-s2r`` run of this command says (``cli.main``)."""


OPTIONS = (
    Option("--model", "segmenter checkpoint to calibrate", "model", required=True),
    Option("--out", "write the calibrated checkpoint here", "out", show=lambda o: o or "rewrite --model in place"),
    Option("--n-images", "validation composites on the training photos", "n_images", type=positive_int),
    Option("--seed", "seed of the composites", "seed", type=non_negative_int),
    Option("--backgrounds", "your own photos folder (its training split)", "backgrounds", metavar="DIR",
           show=lambda b: b or "the embedded photos"),
    Option("--threshold", "set this threshold as it is, in (0, 1), instead of calibrating one", "threshold",
           type=threshold, show=lambda t: t or "the break-even one, calibrated"),
    Option("--tiles", "predict tile by tile, SIZE/STRIDE in px (e.g. 32/16; a network trained on SIZE px crops), "
           "or 'none': the whole image", "tiles", metavar="SIZE/STRIDE|none",
           show=lambda t: t or "as the checkpoint does now"),
    Option("--device", "torch device", "device", type=torch_device, show=lambda d: d or "cuda when present, else cpu"),
)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    add_options(parser, CalibrationConfig, OPTIONS)


def check_out(out: Path) -> None:
    """``--out`` must name a file, and not one inside an artifact folder of another kind (a dataset, a DAgger run...):
    a calibrated segmenter goes beside its training run's files or anywhere outside artifact folders. An existing
    file is replaced only when it is a segmenter checkpoint (a controller checkpoint, a text file are refused)."""
    from grasp_s2r.artifacts import ARTIFACT_KINDS, enclosing_artifact
    from grasp_s2r.vision.networks.segmenter import CheckpointError, read_checkpoint

    if out.exists() and not out.is_dir():
        try:
            read_checkpoint(out)
        except CheckpointError as e:
            raise UsageError(f"--out {out} exists and is not a segmenter checkpoint, so it is not replaced; choose "
                             f"another file ({e})") from None
    if out.is_dir():
        raise UsageError(f"--out {out} is a folder; give the calibrated checkpoint's file name, e.g. {out / 'model.pt'}")
    parent = next((a for a in out.absolute().parents if a.exists()), None)
    if parent is None or not parent.is_dir():
        raise UsageError(f"--out {out}: {parent} is not a folder")
    inside = enclosing_artifact(out)
    if inside is not None and not (inside[1] == "vision-run" and inside[0] == parent.absolute()):
        raise UsageError(f"--out {out}: {inside[0]} holds {ARTIFACT_KINDS.get(inside[1], inside[1])}; write the "
                         "checkpoint elsewhere")


def run(args: argparse.Namespace) -> int:
    from grasp_s2r.files import check_writable
    from grasp_s2r.vision.images.backgrounds import BackgroundError
    from grasp_s2r.vision.networks.segmenter import CheckpointError, read_checkpoint
    from grasp_s2r.vision.training.calibrate import calibrate_checkpoint

    cfg = config_from_options(CalibrationConfig, args, OPTIONS)
    try:
        tiling = parse_tiles(cfg.tiles)
    except ValueError as e:
        raise UsageError(str(e)) from None
    model, out = Path(cfg.model), Path(cfg.out) if cfg.out else None
    if model.is_dir():
        raise UsageError(f"--model {model} is a folder, not a checkpoint file (a training run's is RUN/model.pt)")
    if out is not None:
        check_out(out)
    check_writable(out or model)  # an unwritable place fails now, not after the calibration
    try:
        before = float(read_checkpoint(model).get("threshold", 0.5))
        cal = calibrate_checkpoint(model, n_images=cfg.n_images, seed=cfg.seed, out=out, device=cfg.device or None,
                                   backgrounds_dir=Path(cfg.backgrounds) if cfg.backgrounds else None, tiling=tiling,
                                   threshold=cfg.threshold or None)
    except (CheckpointError, BackgroundError, ValueError) as e:
        raise UsageError(str(e)) from None
    tiles = cal["tiling"]
    how = f"{tiles['size_px']} px tiles {tiles['stride_px']} apart" if tiles else "the whole image"
    why = ("as given" if cal["rule"] == "given" else
           f"break-even on {cal['n_images']} validation composites of the training photos: precision "
           f"{cal['precision']:.3f}, recall {cal['recall']:.3f}")
    print(f"calibrate-vision: threshold {before:.3f} -> {cal['threshold']:.3f} for {how} ({why}); wrote {out or model}")
    return 0
