"""``grasp-s2r train-vision``: train the segmentation network on sim-real composites."""

from __future__ import annotations

import argparse
import dataclasses
from pathlib import Path

from grasp_s2r.cli import UsageError, positive_int
from grasp_s2r.vision.backgrounds import BackgroundError
from grasp_s2r.vision.model import ARCHITECTURES


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
    parser.add_argument("--seed", type=int, default=0, help="seed of weights and composites (default: 0)")
    parser.add_argument("--val-every", type=positive_int, default=250, help="validate every N steps")
    parser.add_argument("--workers", type=int, default=0, help="DataLoader worker processes (default: 0)")
    parser.add_argument("--device", default=None, help="torch device (default: cuda when present, else cpu)")
    parser.add_argument("--amp", choices=("auto", "on", "off"), default="auto",
                        help="bf16 mixed precision (auto: on CUDA and on CPUs with AMX)")
    parser.add_argument("--threads", type=positive_int, default=None, help="torch CPU threads (default: torch's)")
    parser.add_argument("--init", type=Path, default=None,
                        help="start from this segmenter checkpoint's weights (fine-tuning; same --arch/--width/--image-size)")
    parser.add_argument("--recolor-prob", type=float, default=None,
                        help="share of background crops with randomized colours (default: 0)")
    parser.add_argument("--camouflage-prob", type=float, default=None,
                        help="share of spheres recoloured like the photo around them (default: 0)")
    parser.add_argument("--dice-per-image", action="store_true",
                        help="Dice loss per image, averaged (small spheres weigh as much as large ones)")
    parser.add_argument("--calibration-images", type=int, default=0,
                        help="set the final threshold where precision = recall on N validation composites "
                             "(default 0: keep 0.5)")
    parser.add_argument("--resume", action="store_true", help="continue the run in --out")
    parser.add_argument("--no-progress", action="store_true", help="no progress bar")


def run(args: argparse.Namespace) -> int:
    import torch

    from grasp_s2r.vision.dataset import DataConfig
    from grasp_s2r.vision.train import TrainConfig, TrainError, train

    if args.threads:
        torch.set_num_threads(args.threads)
    if args.workers < 0:
        raise UsageError(f"--workers must be >= 0, got {args.workers}")
    if args.lr <= 0:
        raise UsageError(f"--lr must be positive, got {args.lr}")
    try:
        device = torch.device(args.device) if args.device else None
    except RuntimeError as e:
        raise UsageError(f"bad --device {args.device!r}: {e}") from None
    data = DataConfig()
    try:  # the configs check their own ranges
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
        final = train(cfg, args.out, resume=args.resume, backgrounds_dir=args.backgrounds, device=device, amp=args.amp,
                      progress=not args.no_progress)
    except (TrainError, BackgroundError) as e:
        raise UsageError(str(e)) from None
    print(f"train-vision: wrote {final} (curve: {args.out / 'curve.png'}, composites: {args.out / 'composites.png'})")
    return 0
