"""``grasp-s2r train-vision``: train the segmentation network on sim-real composites."""

from __future__ import annotations

import argparse
import dataclasses
import math
from collections.abc import Callable
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
from grasp_s2r.tblog import TensorBoardUnavailable, add_tensorboard_argument, resolve_logdir
from grasp_s2r.vision.images.backgrounds import BackgroundError, load_backgrounds, photo_weights
from grasp_s2r.vision.images.dataset import TRAINING_DATA, BackgroundMix
from grasp_s2r.vision.images.synthetic import DISTRACTOR_KINDS, PALETTE_REACH_PX, check_distractor_kinds
from grasp_s2r.vision.networks.segmenter import checkpoint_margin_px
from grasp_s2r.vision.training.starting_weights import check_init_checkpoint
from grasp_s2r.vision.training.train import SegmenterTrainConfig, TrainError, train

RESUME_HINT = ("the steps done are kept (OUT/checkpoint-latest.pt, written on interrupt once a step is done): run "
               "the same command with --resume to continue (without it if no step was done)")

def _range(flag: str) -> Callable[[str], tuple[float, float]]:
    """The parser of a ``LO,HI`` range option (its errors name ``flag``)."""
    return lambda text: parse_range(text, flag)


OPTIONS = (
    Option("--steps", "optimizer steps in total", "steps", type=positive_int),
    Option("--minutes", "wall-time budget: the run times its first steps and trains as many of --steps as fit "
           "(whole-image runs: fine-tunes with --init)", "time_budget_s", type=float, metavar="MIN",
           convert=lambda minutes: minutes * 60.0, show=lambda s: f"{s / 60:g}: none" if not s else f"{s / 60:g}"),
    Option("--batch-size", "composites per step", "batch_size", type=positive_int),
    Option("--lr", "peak learning rate", "lr", type=float),
    Option("--arch", "network", "architecture"),
    Option("--width", "U-Net channels at full resolution", "width", type=positive_int),
    Option("--depth", "U-Net poolings (the input side must divide by 2 ** depth)", "depth", type=positive_int),
    Option("--unshuffle", "U-Net reading S x S pixel blocks as channels, its logits put back per pixel: every camera "
           "pixel at about the multiply-adds of an image S times smaller (1: plain)", "unshuffle",
           type=positive_int, metavar="S"),
    Option("--anomaly", "U-Net reading K colour-anomaly maps beside the colours (each pixel's colour against the ring "
           "of colours around it: vision/networks/anomaly.py; 0: the colours only)", "anomaly", type=non_negative_int,
           metavar="K"),
    Option("--attention", "U-Net with a self-attention block after each of the L deepest encoder levels: every place "
           "compared with the whole image (it starts as the identity: --init may be a checkpoint without it; 0: none)",
           "attention", type=non_negative_int, metavar="L"),
    Option("--padding", "what the U-Net's convolutions read past the image's edge: zeros, replicate or reflect "
           "(no weights: --init may change it)", "padding"),
    Option("--image-size", "square input / camera size in px", "image_size_px", type=positive_int),
    Option("--margin-px", "the camera sees M px more beyond each edge of the --image-size view (its field of view "
           "widened to match) and the network trains on the whole wider image, the view its middle; it then reads "
           "only such frames (0: the view itself)", "margin_px", type=non_negative_int, metavar="M"),
    Option("--sphere-shadow", "render the sim views with the sphere's cast and contact shadows (TinyRenderer draws "
           "none for it)", sets={"sphere_shadow": True}),
    Option("--seed", "seed of weights and composites", "seed", type=non_negative_int),
    Option("--val-every", "validate (and checkpoint) every N steps", "val_every", also=("checkpoint_every",),
           type=positive_int),
    Option("--workers", "DataLoader worker processes making composites (0: in-process)", "workers", type=int,
           show=lambda w: "auto: 1 on a CPU of 2+ cores, the step on the others" if w is None else str(w)),
    Option("--crop-px", "train on crops of this many px (0: whole images at every step)", "crop_px",
           type=non_negative_int, metavar="PX",
           show=lambda c: "32 from random weights, 0 with --init" if c is None else str(c)),
    Option("--crops-per-composite", "crops cut from each composite", "crops_per_composite", type=positive_int),
    Option("--crop-sphere-share", "share of the crops placed around the sphere", "crop_sphere_share", type=float),
    Option("--full-size-share", "share of the steps, the last ones, on whole images (with crops)",
           "full_size_share", type=float),
    Option("--init", "start from this segmenter checkpoint's weights (fine-tuning; the same --arch and --width, or a "
           "narrower U-Net, or one reading fewer --anomaly maps or with fewer --attention blocks, grown without "
           "changing its output; "
           "a U-Net at any --image-size; with "
           "--unshuffle, a plain U-Net of the same --width)",
           "init_checkpoint", convert=lambda p: str(Path(p).resolve()),
           show=lambda c: c or "none: random weights"),
    Option("--recolor-prob", "share of background crops, and of photo-table textures, with randomized colours", "data.background_recolor_prob",
           type=float),
    Option("--camouflage-prob", "share of spheres recoloured like the photo around them",
           "data.composite.camouflage_prob", type=float),
    Option("--grey-prob", "share of sphere colours (the sim's and the re-shader's new ones) that are grey or nearly: "
           "black to white", "data.reshade.grey_albedo_prob", also=("data.view.grey_color_prob",), type=float),
    Option("--relocate-prob", "share of pasted spheres moved to a random place in the image (the sim views put "
           "them near the fingers' axis)", "data.composite.relocate_prob", type=float),
    Option("--border-prob", "share of pasted spheres moved onto the image's border, which cuts them (where the "
           "segmenter misses them most)", "data.composite.border_prob", type=float),
    Option("--mirror-prob", "share of pasted spheres that are mirror-like, showing the photo around them curved",
           "data.composite.mirror_prob", type=float),
    Option("--shadow-sigma", "range of the blur of the pasted sphere's shadow in px (small: a hard shadow)",
           "data.composite.shadow_sigma_px", convert=_range("--shadow-sigma"), metavar="LO,HI", show=comma_text),
    Option("--mix", "background mixture weights (kinds not named keep the recipe's weight)", "data.mix",
           convert=lambda text: parse_mix(text, TRAINING_DATA.mix), metavar="KIND=W,...",
           show=lambda m: comma_text(f"{k}={v:g}" for k, v in dataclasses.asdict(m).items())),
    Option("--reshade-prob", "share of spheres re-lit from their geometry", "data.reshade.prob", type=float),
    Option("--reshade-texture-prob", "share of re-lit spheres patterned with a crop of a training photo (the outline "
           "and shading the cues, not a colour)", "data.reshade.texture_prob", type=float),
    Option("--distractor-prob", "share of pasted-on backgrounds with hard-negative distractors (cost painted recall "
           "per frame; 0.3 in the shipped segmenter's last fine-tune)", "data.distractor_prob", type=float),
    Option("--distractor-kinds", "the distractors' shapes, comma-separated, drawn uniformly", "data.distractor_kinds",
           convert=lambda text: parse_distractor_kinds(text), metavar="KIND,...", show=comma_text),
    Option("--distractor-saturated", "share of the distractors in saturated colours (the others any colour, greys "
           "included)", "data.distractor_saturated", type=float),
    Option("--distractor-palette", f"share of the distractors' shapes in a colour of the background within "
           f"{PALETTE_REACH_PX} px of them (negatives in the texture's own colours)", "data.distractor_palette",
           type=float),
    Option("--distractor-min-px", "no distractor narrower than this, px (none of a far sphere's 2-6 px, where a "
           "flat disc and a shaded sphere look alike)", "data.distractor_min_px", type=float, metavar="PX"),
    Option("--near-blob-prob", "share of composites with 1-3 distractors beside the sphere (3-10 px from it)",
           "data.near_blob_prob", type=float),
    Option("--photo-blob-prob", "share of pasted-on backgrounds with sphere-sized textured blobs (flowers, spots)",
           "data.photo_blob_prob", type=float),
    Option("--affine-scale", "range of the affine zoom of training composites (the recipe's: spheres up to the "
           "16 px the camera shows at its closest)", "data.augment.affine_scale", convert=_range("--affine-scale"), metavar="LO,HI",
           show=comma_text),
    Option("--busy-background-prob", "share of photo backgrounds that are the busiest of 4 random crops around the "
           "sphere (the textures that hide small spheres)", "data.busy_background_prob", type=float),
    Option("--mined-crop-prob", "share of photo backgrounds drawn from the crops of the training photos the --init "
           "segmenter fires on (its own lures; mined before the first step)", "data.mined_crop_prob", type=float),
    Option("--mine-crops", "random crops of each training photo run through the --init segmenter for "
           "--mined-crop-prob", "mine_crops_per_photo", type=positive_int),
    Option("--noise-prob", "share of composites with sensor noise", "data.augment.noise_prob", type=float),
    Option("--blur-prob", "share of composites blurred (defocus, motion)", "data.augment.blur_prob", type=float),
    Option("--jpeg-prob", "share of composites JPEG-compressed", "data.augment.jpeg_prob", type=float),
    Option("--randconv-prob", "share of composites through a random convolution (colours and fine texture "
           "remapped together, the sphere's and the table's: vision/images/augment.py)", "data.augment.randconv_prob",
           type=float),
    Option("--hue", "largest hue turn of the colour jitter, a fraction of the colour circle, the sphere and the "
           "table turned together (0.5: any hue)", "data.augment.hue", type=float),
    Option("--greyscale-prob", "share of composites in grey (luminance only: the sphere found without its chroma)",
           "data.augment.greyscale_prob", type=float),
    Option("--embedded-photo-share", "with --backgrounds a corpus: share of photo backgrounds drawn from the "
           "embedded training photos (0: every photo equally often)", "embedded_photo_share", type=float),
    Option("--empty-view-prob", "share of sim views without a sphere", "data.view.empty_prob", type=float),
    Option("--far-view-prob", "share of sim views from an episode's start and search heights (0.15-0.25 m: the "
           "sphere 2-4 px wide, the most table in view)", "data.view.far_view_prob", type=float),
    Option("--table-colour-prob", "share of photo-table views whose sphere takes the table's colour (a random "
           "patch of its texture: camouflaged)", "data.view.table_colour_prob", type=float),
    Option("--table-textures", "table textures cut from the photos for photo-table views (more photos than this: "
           "only the first ones become tables)", "data.view.photo_textures", type=positive_int),
    Option("--size-balanced", "each sphere's pixels weigh the same in the loss, whatever its size (a missed "
           "3 px sphere costs as much as a missed 11 px one)", sets={"size_balanced": True}),
    Option("--rank-weight", "weight of a loss that makes each image's sphere out-rank its every other pixel and "
           "a 'no sphere' logit of 0 (0: off)", "rank_weight", type=float),
    Option("--hard-share", "the BCE over this share of each batch's images, the hardest ones (online hard-example "
           "mining; 1: all)", "hard_share", type=float),
    Option("--dice-per-image", "Dice loss per image, averaged (small spheres weigh as much as large ones)",
           sets={"dice_per_image": True}),
    Option("--calibration-images", "set the final threshold where precision = recall on N validation composites "
           "(0: keep 0.5)", "calibration_images", type=int),
)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--out", type=Path, default=Path("runs/vision"), help="run folder (default: runs/vision)")
    add_options(parser, SegmenterTrainConfig, OPTIONS)
    parser.add_argument("--backgrounds", type=Path, default=None,
                        help="folder of your own background photos (default: the embedded scikit-image photos)")
    parser.add_argument("--device", type=torch_device, default=None,
                        help="torch device (default: cuda when present, else cpu)")
    parser.add_argument("--amp", choices=("auto", "on", "off"), default="auto",
                        help="bf16 mixed precision (auto: on CUDA; on a CPU with AVX-512 BF16 or AMX where a short "
                             "probe of the step finds it faster than fp32)")
    parser.add_argument("--threads", type=positive_int, default=None,
                        help="torch CPU threads of one replica of the step (default: 1, one replica per core)")
    parser.add_argument("--replicas", type=positive_int, default=None,
                        help="replicas of the network sharing each step's batch, one thread each (default: one per "
                             "CPU core; 1 with --threads or on a GPU)")
    parser.add_argument("--resume", action="store_true", help="continue the run in --out")
    add_tensorboard_argument(parser)
    parser.add_argument("--no-progress", action="store_true", help="no progress bar")


def config_from_args(args: argparse.Namespace) -> SegmenterTrainConfig:
    """The run's config; ``--val-every`` (and the checkpoint interval) capped at ``--steps``."""
    if args.workers is not None and args.workers < 0:
        raise UsageError(f"--workers must be >= 0, got {args.workers}")
    if args.lr is not None and not 0 < args.lr < math.inf:
        raise UsageError(f"--lr must be a positive number, got {args.lr}")
    cfg = config_from_options(SegmenterTrainConfig, args, OPTIONS)
    every = min(cfg.val_every, cfg.steps)
    return dataclasses.replace(cfg, val_every=every, checkpoint_every=every)


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


def parse_distractor_kinds(text: str) -> tuple[str, ...]:
    """``"ring,rect"`` -> ("ring", "rect"); an unknown, repeated or missing kind -> ValueError (one line)."""
    kinds = tuple(filter(None, (k.strip() for k in text.split(","))))
    try:
        check_distractor_kinds(kinds)
    except ValueError:
        raise ValueError(f"--distractor-kinds: expected distinct kinds of {', '.join(DISTRACTOR_KINDS)}, "
                         f"got {text!r}") from None
    return kinds


def parse_range(text: str, option: str) -> tuple[float, float]:
    """``"0.75,1.5"`` -> (0.75, 1.5); anything else -> ValueError naming ``option``."""
    try:
        lo, hi = (float(x) for x in text.split(","))
    except ValueError:
        raise ValueError(f"{option}: expected LO,HI, got {text!r}") from None
    if not 0 < lo <= hi < math.inf:
        raise ValueError(f"{option}: expected 0 < LO <= HI < inf, got {text!r}")
    return lo, hi


def _check_inputs(cfg: SegmenterTrainConfig, args: argparse.Namespace) -> None:
    """What ``train`` would refuse only after making its validation composites: checked first (one line, nothing
    written). Raises TrainError / BackgroundError."""
    latest = args.out / "checkpoint-latest.pt"
    if args.resume and not latest.is_file():
        raise TrainError(f"--resume: {latest} does not exist")
    if cfg.init_checkpoint and not args.resume:
        init = check_init_checkpoint(cfg)
        init_padding = init["arch_kwargs"].get("padding", "zeros")
        if init_padding != cfg.padding:
            print(f"train-vision: --init {cfg.init_checkpoint} pads its convolutions with {init_padding}, this run "
                  f"with {cfg.padding} (--padding): the weights carry over, what they read past the edge changes",
                  flush=True)
        init_margin = checkpoint_margin_px(init)
        if init_margin != cfg.margin_px:
            print(f"train-vision: --init {cfg.init_checkpoint} read the view seen {init_margin} px beyond each edge, "
                  f"this run {cfg.margin_px} px (--margin-px): the weights carry over, the camera they see through "
                  "changes", flush=True)
    if args.backgrounds is not None:
        load_backgrounds("train", args.backgrounds)  # the folder, its photo count and every training photo
    photo_weights("train", args.backgrounds, cfg.embedded_photo_share)  # a share needs a corpus beside the photos


def run(args: argparse.Namespace) -> int:
    import torch

    cfg = config_from_args(args)
    device = torch.device(args.device) if args.device else None  # checked by the parser (options.torch_device)
    try:
        _check_inputs(cfg, args)
        final = train(cfg, args.out, resume=args.resume, backgrounds_dir=args.backgrounds, device=device, amp=args.amp,
                      threads=args.threads, replicas=args.replicas, progress=not args.no_progress,
                      tensorboard=resolve_logdir(args.tensorboard, args.out))
    except (TrainError, BackgroundError, TensorBoardUnavailable) as e:
        raise UsageError(str(e)) from None
    print(f"train-vision: wrote {final} (curve: {args.out / 'curve.png'}, composites: {args.out / 'composites.png'})")
    return 0
