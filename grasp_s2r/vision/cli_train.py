"""``grasp-s2r train-vision``: train the segmentation network on sim-real composites."""

from __future__ import annotations

import argparse
import dataclasses
import math
from pathlib import Path
from typing import TYPE_CHECKING

from grasp_s2r.cli import UsageError, non_negative_int, positive_int, torch_device
from grasp_s2r.tblog import TensorBoardUnavailable, add_tensorboard_argument, resolve_logdir
from grasp_s2r.vision.backgrounds import BackgroundError
from grasp_s2r.vision.model import ARCHITECTURES

if TYPE_CHECKING:
    from grasp_s2r.vision.dataset import BackgroundMix


RESUME_HINT = ("the steps done are kept (OUT/checkpoint-latest.pt, written on interrupt): run the same command "
               "with --resume to continue")

def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--out", type=Path, default=Path("runs/vision"), help="run folder (default: runs/vision)")
    parser.add_argument("--steps", type=positive_int, default=3000, help="optimizer steps in total (default: 3000)")
    parser.add_argument("--batch-size", type=positive_int, default=32, help="composites per step (default: 32)")
    parser.add_argument("--lr", type=float, default=3e-3, help="peak learning rate (default: 3e-3)")
    parser.add_argument("--arch", choices=ARCHITECTURES, default="unet", help="network (default: unet)")
    parser.add_argument("--width", type=positive_int, default=12, help="U-Net channels at full resolution")
    parser.add_argument("--image-size", type=positive_int, default=64, help="square input / camera size in px")
    parser.add_argument("--backgrounds", type=Path, default=None,
                        help="folder of your own background photos (default: the embedded scikit-image photos)")
    parser.add_argument("--seed", type=non_negative_int, default=0, help="seed of weights and composites (default: 0)")
    parser.add_argument("--val-every", type=positive_int, default=250, help="validate every N steps")
    parser.add_argument("--workers", type=int, default=0, help="DataLoader worker processes (default: 0)")
    parser.add_argument("--device", type=torch_device, default=None,
                        help="torch device (default: cuda when present, else cpu)")
    parser.add_argument("--amp", choices=("auto", "on", "off"), default="auto",
                        help="bf16 mixed precision (auto: on CUDA and on CPUs with AMX)")
    parser.add_argument("--threads", type=positive_int, default=None, help="torch CPU threads (default: torch's)")
    parser.add_argument("--init", type=Path, default=None,
                        help="start from this segmenter checkpoint's weights (fine-tuning; same --arch/--width/--image-size)")
    parser.add_argument("--recolor-prob", type=float, default=None,
                        help="share of background crops with randomized colours (default: 0)")
    parser.add_argument("--camouflage-prob", type=float, default=None,
                        help="share of spheres recoloured like the photo around them (default: 0)")
    parser.add_argument("--mix", default=None, metavar="KIND=W,...",
                        help="background mixture weights, e.g. photo=0.4,texture=0.15,flat=0.1,sim_table=0.15,"
                             "photo_table=0.2 (kinds not named keep the recipe's weight; default: the recipe's)")
    parser.add_argument("--reshade-prob", type=float, default=None,
                        help="share of spheres re-lit from their geometry (default: the recipe's 0.5)")
    parser.add_argument("--distractor-prob", type=float, default=None,
                        help="share of pasted-on backgrounds with hard-negative distractors (default: the recipe's "
                             "0, measured harmful)")
    parser.add_argument("--affine-scale", default=None, metavar="LO,HI",
                        help="range of the affine zoom of training composites (default: the recipe's 0.75,1.5: "
                             "spheres up to the 16 px the camera shows at its closest)")
    parser.add_argument("--empty-view-prob", type=float, default=None,
                        help="share of sim views without a sphere (default: the recipe's 0.2)")
    parser.add_argument("--dice-per-image", action="store_true",
                        help="Dice loss per image, averaged (small spheres weigh as much as large ones)")
    parser.add_argument("--calibration-images", type=int, default=0,
                        help="set the final threshold where precision = recall on N validation composites "
                             "(default 0: keep 0.5)")
    parser.add_argument("--resume", action="store_true", help="continue the run in --out")
    add_tensorboard_argument(parser)
    parser.add_argument("--no-progress", action="store_true", help="no progress bar")


def parse_mix(text: str, base: BackgroundMix) -> BackgroundMix:
    """``"photo=0.4,flat=0.1"`` -> ``base`` with those weights; a bad kind or number -> ValueError (one line)."""
    kinds = {f.name for f in dataclasses.fields(base)}
    weights = {}
    for part in filter(None, (p.strip() for p in text.split(","))):
        kind, _, value = part.partition("=")
        if kind not in kinds:
            raise ValueError(f"--mix: unknown background kind {kind!r}; kinds: {', '.join(sorted(kinds))}")
        try:
            weights[kind] = float(value)
        except ValueError:
            raise ValueError(f"--mix: {kind} needs a number, got {value!r}") from None
    return dataclasses.replace(base, **weights)


def parse_range(text: str, option: str) -> tuple[float, float]:
    """``"0.75,1.5"`` -> (0.75, 1.5); anything else -> ValueError naming ``option``."""
    try:
        lo, hi = (float(x) for x in text.split(","))
    except ValueError:
        raise ValueError(f"{option}: expected LO,HI, got {text!r}") from None
    if not 0 < lo <= hi < math.inf:
        raise ValueError(f"{option}: expected 0 < LO <= HI < inf, got {text!r}")
    return lo, hi


def _check_inputs(cfg, args: argparse.Namespace) -> None:
    """What ``train`` would refuse only after making its validation composites: checked first (one line, nothing
    written). Raises TrainError / BackgroundError."""
    from grasp_s2r.vision.backgrounds import load_backgrounds
    from grasp_s2r.vision.train import TrainError, check_init_checkpoint

    latest = args.out / "checkpoint-latest.pt"
    if args.resume and not latest.is_file():
        raise TrainError(f"--resume: {latest} does not exist")
    if cfg.init_checkpoint and not args.resume:
        check_init_checkpoint(cfg)
    if args.backgrounds is not None:
        load_backgrounds("train", args.backgrounds)  # the folder, its photo count and every training photo


def run(args: argparse.Namespace) -> int:
    import torch

    from grasp_s2r.vision.dataset import TRAINING_DATA
    from grasp_s2r.vision.train import TrainConfig, TrainError, train

    if args.threads:
        torch.set_num_threads(args.threads)
    if args.workers < 0:
        raise UsageError(f"--workers must be >= 0, got {args.workers}")
    if not 0 < args.lr < math.inf:
        raise UsageError(f"--lr must be a positive number, got {args.lr}")
    device = torch.device(args.device) if args.device else None  # checked by the parser (cli.torch_device)
    data = TRAINING_DATA
    try:  # the configs check their own ranges
        if args.mix is not None:
            data = dataclasses.replace(data, mix=parse_mix(args.mix, data.mix))
        if args.reshade_prob is not None:
            data = dataclasses.replace(data, reshade=dataclasses.replace(data.reshade, prob=args.reshade_prob))
        if args.distractor_prob is not None:
            data = dataclasses.replace(data, distractor_prob=args.distractor_prob)
        if args.affine_scale is not None:
            data = dataclasses.replace(data, augment=dataclasses.replace(
                data.augment, affine_scale=parse_range(args.affine_scale, "--affine-scale")))
        if args.empty_view_prob is not None:
            data = dataclasses.replace(data, view=dataclasses.replace(data.view, empty_prob=args.empty_view_prob))
        if args.recolor_prob is not None:
            data = dataclasses.replace(data, background_recolor_prob=args.recolor_prob)
        if args.camouflage_prob is not None:
            data = dataclasses.replace(data, composite=dataclasses.replace(data.composite,
                                                                            camouflage_prob=args.camouflage_prob))
    except ValueError as e:
        raise UsageError(str(e)) from None
    try:
        cfg = TrainConfig(
            architecture=args.arch, width=args.width, image_size_px=args.image_size, steps=args.steps,
            batch_size=args.batch_size, lr=args.lr, seed=args.seed, val_every=min(args.val_every, args.steps),
            checkpoint_every=min(args.val_every, args.steps), workers=args.workers,
            init_checkpoint=str(args.init.resolve()) if args.init else "", data=data,
            dice_per_image=args.dice_per_image, calibration_images=args.calibration_images,
        )
        _check_inputs(cfg, args)
        final = train(cfg, args.out, resume=args.resume, backgrounds_dir=args.backgrounds, device=device, amp=args.amp,
                      progress=not args.no_progress, tensorboard=resolve_logdir(args.tensorboard, args.out))
    except (TrainError, BackgroundError, TensorBoardUnavailable) as e:
        raise UsageError(str(e)) from None
    print(f"train-vision: wrote {final} (curve: {args.out / 'curve.png'}, composites: {args.out / 'composites.png'})")
    return 0
