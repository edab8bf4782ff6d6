"""What a ``train-vision`` run is (:class:`SegmenterTrainConfig`, saved in ``run.json`` and every checkpoint) and
what it minimizes (:func:`segmentation_loss` under the :func:`lr_factor` schedule)."""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch
from torch.nn import functional as F

from grasp_s2r.configs import OMITTED_AT_DEFAULT, from_dict, to_dict
from grasp_s2r.sim.config import EnvConfig
from grasp_s2r.vision.images.crops import CropConfig
from grasp_s2r.vision.images.dataset import TRAINING_DATA, DataConfig, env_config_for
from grasp_s2r.vision.networks.anomaly import ANOMALY_WINDOWS_PX
from grasp_s2r.vision.networks.model import ARCHITECTURES, PADDINGS, Architecture, Padding, input_multiple_px
from grasp_s2r.vision.networks.segmenter import CheckpointError, checkpoint_margin_px, read_checkpoint

DEFAULT_CROP_PX = 32
"""Crop side of a run from random weights (a quarter of the 64 px image's pixels; the sphere is at most 16 px)."""


class TrainError(ValueError):
    """A training run that cannot start (existing run without --resume, changed config, bad options)."""


@dataclass(frozen=True)
class SegmenterTrainConfig:
    """One ``train-vision`` run; saved in ``run.json`` and in every checkpoint."""

    architecture: Architecture = "unet"
    """Network name (see ``model.ARCHITECTURES``)."""
    width: int = 12
    """U-Net channels at full resolution (ignored by other architectures)."""
    depth: int = 3
    """U-Net poolings (ignored by other architectures)."""
    unshuffle: int = 1
    """U-Net reading s x s pixel blocks as channels (``UNet(unshuffle=s)``); 1 = plain."""
    anomaly: int = 0
    """U-Net reading this many colour-anomaly maps beside the colours (``UNet(anomaly=k)``,
    ``vision/networks/anomaly.py``); 0 = the colours only."""
    attention: int = 0
    """U-Net with a self-attention block after each of this many deepest encoder levels (``UNet(attention=L)``,
    ``model.GlobalContext``); 0 = convolutions only."""
    padding: Padding = "zeros"
    """What the U-Net's convolutions read past the image's edge (``UNet(padding=...)``, ``model.PADDINGS``)."""
    image_size_px: int = 64
    """Square input resolution = wrist camera resolution of the rendered views."""
    margin_px: int = 0
    """The camera sees this many pixels more beyond each edge of its ``image_size_px`` view
    (``CameraConfig.widened``), and the network reads and trains on the whole wider image (:attr:`input_px`), the
    view its middle: a sphere the view's edge cuts is whole in it. 0: the view itself."""
    sphere_shadow: bool = field(default=False, metadata=OMITTED_AT_DEFAULT)
    """Render the sim views with the sphere's cast and contact shadows (``CameraConfig.sphere_shadow``); the
    composites paste the sphere's pixels only, so it reaches the photo-table and sim-table views."""
    steps: int = 3000
    """Optimizer steps in total (a resumed run continues up to this)."""
    batch_size: int = 32
    """Composites per step."""
    lr: float = 3e-3
    """Peak learning rate (AdamW; linear warm-up, then cosine decay to 5 %)."""
    warmup_steps: int = 100
    """Linear warm-up of the learning rate (at most a fifth of ``steps``)."""
    weight_decay: float = 1e-4
    """AdamW weight decay."""
    dice_weight: float = 1.0
    """Weight of the soft Dice loss (the target covers 0-20 % of the image) added to the BCE."""
    dice_per_image: bool = False
    """Dice computed per image and averaged (every sphere, small or large, and every empty image weighs the same)
    instead of over the whole batch (large spheres dominate)."""
    size_balanced: bool = False
    """Each image's sphere pixels weigh, in the BCE and the Dice, as much in total as
    :data:`BALANCE_REFERENCE_PX` pixels: a missed 3 px sphere costs as much as a missed 11 px one
    (unweighted, the 11 px one costs 13 times more)."""
    rank_weight: float = 0.0
    """Weight of :func:`ranking_loss` added to the BCE and the Dice: each image's sphere pixels must out-rank the
    image's every other pixel and a fixed "no sphere" logit of 0 (a sphere-free image: that logit must out-rank
    every pixel); 0 = off, the recipe."""
    hard_share: float = 1.0
    """The BCE averaged over this share of each batch's images, the hardest (highest BCE) ones (online hard-example
    mining); 1 = every image, the recipe."""
    seed: int = 0
    """Seed of the initial weights and of every composite (train and validation streams)."""
    val_every: int = 250
    """Validate and write the curve every this many steps."""
    val_images: int = 256
    """Validation composites (training photos, episode seeds disjoint from training)."""
    checkpoint_every: int = 250
    """Write ``checkpoint-latest.pt`` every this many steps."""
    crop_px: int | None = None
    """Side of the square crops the network trains on (several per composite, :mod:`crops`); 0, or a size not
    smaller than ``image_size_px``, = whole images at every step. None (the default) = :data:`DEFAULT_CROP_PX` from
    random weights, whole images when fine-tuning (``init_checkpoint``): crops raise the false detections of a
    network trained on whole images (``benchmarks/crop_recipe.py``). Resolved when the config is made, so a run's
    record holds the size it used."""
    crops_per_composite: int = 8
    """Crops cut from each composite (a step sees ``batch_size`` x this many crops)."""
    crop_sphere_share: float = 0.5
    """Share of a composite's crops placed around its sphere (the others anywhere)."""
    full_size_share: float = 0.1
    """Share of the steps, the last ones, on whole images (with crops; 0 without): the network meets the image
    borders and the context it runs on."""
    workers: int | None = None
    """DataLoader worker processes (spawned; each renders with its own PyBullet client); 0 = in-process; None =
    automatic: one on a CPU of two or more cores, the step on the others (:func:`grasp_s2r.cpu.split_cores`). A
    runtime choice: not part of the run's identity."""
    data: DataConfig = TRAINING_DATA
    """How composites are made: the background mixture, re-shading and distractors of ``TRAINING_DATA``
    (camouflage and recolouring: options, off by default, see docs/vision.md)."""
    embedded_photo_share: float = 0.0
    """With ``--backgrounds`` a corpus: the share of photo backgrounds drawn from the embedded training photos (the
    scenes of every condition but the unseen photos), the corpus's photos the rest; 0: every training photo equally
    often (:func:`vision.images.backgrounds.photo_weights`)."""
    hold_out_photos: bool = True
    """A folder of your own photos (``--backgrounds``) keeps about one in five of them out of training, by a hash of
    its file name, for ``eval-vision --split heldout``; False: every one trains (``grasp-s2r adapt``: the photos are
    the scene adapted to, tested on other photos of it). The embedded held-out photos never train either way."""
    init_checkpoint: str = ""
    """Segmenter checkpoint whose weights start the run (fine-tuning); "" = random initial weights."""
    mine_crops_per_photo: int = 256
    """With ``data.mined_crop_prob`` > 0: random crops cut from each training photo and run through the starting
    segmenter (``init_checkpoint``), the ones it fires on kept as backgrounds (``vision/images/mined.py``)."""
    calibration_images: int = 0
    """Validation composites (training photos) on which the final model's break-even threshold is chosen
    (``vision/calibrate.py``); 0 = keep the threshold at 0.5 (the default: see docs/vision.md, *Operating point*)."""
    time_budget_s: float = 0.0
    """Wall-time budget of the run in seconds; 0 = none (``steps`` steps). With one, the run times its first steps
    and cuts ``steps`` to what fits (:mod:`grasp_s2r.vision.training.budget`; recorded, kept on resume). Runs on
    whole images only (fine-tunes): a run on crops turns to whole images at a step its ``steps`` decide."""

    def __post_init__(self) -> None:
        if self.architecture not in ARCHITECTURES:
            raise TrainError(f"architecture must be one of {', '.join(ARCHITECTURES)}, got {self.architecture!r}")
        if self.image_size_px % 8 or self.image_size_px < 16:
            raise TrainError(f"image size must be a multiple of 8 and at least 16, got {self.image_size_px}")
        if self.unshuffle < 1 or (self.unshuffle > 1 and self.architecture != "unet"):
            raise TrainError(f"unshuffle must be >= 1 (> 1: a U-Net only), got {self.unshuffle}")
        if not 0 <= self.anomaly <= len(ANOMALY_WINDOWS_PX) or (self.anomaly and self.architecture != "unet"):
            raise TrainError(f"anomaly must be in [0, {len(ANOMALY_WINDOWS_PX)}] (> 0: a U-Net only), got {self.anomaly}")
        if not 0 <= self.attention <= self.depth + 1 or (self.attention and self.architecture != "unet"):
            raise TrainError(f"attention must be in [0, {self.depth + 1}] (the U-Net's encoder levels; > 0: a U-Net "
                             f"only), got {self.attention}")
        if self.padding not in PADDINGS or (self.padding != "zeros" and self.architecture != "unet"):
            raise TrainError(f"padding must be one of {', '.join(PADDINGS)} (not zeros: a U-Net only), "
                             f"got {self.padding!r}")
        if self.margin_px < 0 or (self.margin_px and self.architecture != "unet"):
            raise TrainError(f"margin_px must be >= 0 (> 0: a U-Net only), got {self.margin_px}")
        if self.depth < 1:
            raise TrainError(f"depth must be >= 1, got {self.depth}")
        if self.input_px % self.input_multiple_px:
            raise TrainError(f"a U-Net of depth {self.depth} with unshuffle {self.unshuffle} needs an input (image "
                             f"size + 2 margins) a multiple of {self.input_multiple_px}, got {self.input_px}")
        if not 0.0 <= self.rank_weight < math.inf:
            raise TrainError(f"rank_weight must be >= 0, got {self.rank_weight}")
        if not 0.0 < self.hard_share <= 1.0:
            raise TrainError(f"hard_share must be in (0, 1], got {self.hard_share}")
        if not 0.0 <= self.embedded_photo_share < 1.0:
            raise TrainError(f"embedded_photo_share must be in [0, 1), got {self.embedded_photo_share}")
        if self.data.mined_crop_prob > 0 and not self.init_checkpoint:
            raise TrainError("--mined-crop-prob needs --init: the crops are those the starting segmenter fires on")
        if self.mine_crops_per_photo < 1:
            raise TrainError(f"mine_crops_per_photo must be >= 1, got {self.mine_crops_per_photo}")
        if self.calibration_images < 0:
            raise TrainError(f"calibration_images must be >= 0, got {self.calibration_images}")
        if self.crop_px is None:
            object.__setattr__(self, "crop_px", 0 if self.init_checkpoint else DEFAULT_CROP_PX)
        if self.crop_px < 0:
            raise TrainError(f"crop size must be >= 0 px, got {self.crop_px}")
        if self.crop_px and self.crop_px < self.input_px and self.crop_px % self.input_multiple_px:
            raise TrainError(f"a U-Net of depth {self.depth} with unshuffle {self.unshuffle} needs crops a multiple "
                             f"of {self.input_multiple_px} px, got {self.crop_px}")
        if not self.crop_px or self.crop_px >= self.input_px:  # whole images: no whole-image phase to have
            object.__setattr__(self, "full_size_share", 0.0)
        if self.crop_px:
            try:
                CropConfig(size_px=self.crop_px, per_composite=self.crops_per_composite,
                           sphere_share=self.crop_sphere_share)
            except ValueError as e:
                raise TrainError(str(e)) from None
        if not 0.0 <= self.full_size_share <= 1.0:
            raise TrainError(f"full_size_share must be in [0, 1], got {self.full_size_share}")
        if self.time_budget_s < 0:
            raise TrainError(f"time_budget_s must be >= 0, got {self.time_budget_s}")
        if self.time_budget_s and self.crop_steps:
            raise TrainError("a time budget fits runs on whole images (fine-tunes, crop_px 0): a run on crops turns "
                             "to whole images at a step set by its steps")

    @property
    def crop_config(self) -> CropConfig:
        return CropConfig(size_px=self.crop_px, per_composite=self.crops_per_composite,
                          sphere_share=self.crop_sphere_share)

    @property
    def crop_steps(self) -> int:
        """Steps on crops (the first ones); the rest are on whole images."""
        if not self.crop_px or self.crop_px >= self.input_px:  # crops as large as the image: whole images
            return 0
        return self.steps - round(self.full_size_share * self.steps)

    @property
    def input_px(self) -> int:
        """The side of the network's input: the view and its margins."""
        return self.image_size_px + 2 * self.margin_px

    @property
    def input_multiple_px(self) -> int:
        """What the input's and the crops' side must be a multiple of: the U-Net halves it ``depth`` times after its
        pixel unshuffle (LR-ASPP: 8)."""
        return input_multiple_px(self.architecture, self.arch_kwargs)

    def env_config(self) -> EnvConfig:
        """The scene the run's sim views are rendered in: the camera of ``image_size_px`` widened by ``margin_px``,
        the sphere's shadows drawn with ``sphere_shadow``."""
        return env_config_for(self.image_size_px, self.margin_px, self.sphere_shadow)

    @property
    def arch_kwargs(self) -> dict[str, Any]:
        if self.architecture != "unet":
            return {}
        return {"width": self.width, "depth": self.depth, **({"unshuffle": self.unshuffle} if self.unshuffle > 1 else {}),
                **({"anomaly": self.anomaly} if self.anomaly else {}),
                **({"attention": self.attention} if self.attention else {}),
                **({"padding": self.padding} if self.padding != "zeros" else {})}

    def to_dict(self) -> dict[str, Any]:
        return to_dict(self)

    def loss(self, logits: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
        """This run's :func:`segmentation_loss`."""
        loss = segmentation_loss(logits, target, self.dice_weight, self.dice_per_image, self.size_balanced,
                                 self.hard_share)
        return loss + self.rank_weight * ranking_loss(logits, target) if self.rank_weight else loss


BALANCE_REFERENCE_PX = 28.0
"""The total weight of one image's sphere pixels with ``size_balanced``: the area of a 6 px wide sphere (the expert
episodes' median width, ``benchmarks/sphere_sizes.py``), so a sphere of median size weighs as without balancing."""


def sphere_pixel_weights(target: torch.Tensor) -> torch.Tensor:
    """Weights float (N, 1, H, W): ``BALANCE_REFERENCE_PX / sphere area`` on each image's sphere pixels, 1 elsewhere."""
    area = target.sum((1, 2, 3), keepdim=True)
    return torch.where(target > 0, BALANCE_REFERENCE_PX / area.clamp(min=1.0), torch.ones_like(target))


def recipe_of(checkpoint: Path | str) -> DataConfig:
    """The composites' recipe ``checkpoint`` was trained with (its recorded ``data`` config; a field added since
    takes its default, the value that reproduces the run): what a fine-tune from those weights keeps, so that it
    does not undo their last training (the shipped segmenter's far views and distractors). :class:`TrainError`
    (one line) for a checkpoint that is unreadable or records no recipe."""
    try:
        data = read_checkpoint(Path(checkpoint))["config"]["train"]["data"]
        return from_dict(DataConfig, data)
    except CheckpointError as e:
        raise TrainError(str(e)) from None
    except (KeyError, TypeError, ValueError) as e:
        raise TrainError(f"{checkpoint} records no training recipe ({e!r})") from None


def margin_of(checkpoint: Path | str) -> int:
    """The pixels beyond each edge of the view ``checkpoint`` was trained to read (``train-vision --margin-px``; 0
    for a checkpoint that records none): what a fine-tune from those weights keeps, as :func:`recipe_of` the
    composites. :class:`TrainError` (one line) for an unreadable checkpoint."""
    try:
        return checkpoint_margin_px(read_checkpoint(Path(checkpoint)))
    except CheckpointError as e:
        raise TrainError(str(e)) from None


def segmentation_loss(logits: torch.Tensor, target: torch.Tensor, dice_weight: float,
                      per_image: bool = False, size_balanced: bool = False, hard_share: float = 1.0) -> torch.Tensor:
    """BCE + ``dice_weight`` x soft Dice; logits and target float (N, 1, H, W).

    The Dice is over the whole batch, or with ``per_image`` over each image (smoothed by 1 pixel, so an empty
    target image costs ``1 - 1 / (1 + predicted area)``) and then averaged. ``size_balanced``: every pixel of both
    terms weighted by :func:`sphere_pixel_weights` (each sphere counts the same, whatever its size). ``hard_share``
    < 1: the BCE is the mean of the ``ceil(hard_share * N)`` highest per-image BCEs (online hard-example mining).
    """
    w = sphere_pixel_weights(target) if size_balanced else None
    if hard_share < 1.0:
        per_image_bce = F.binary_cross_entropy_with_logits(logits, target, weight=w, reduction="none").mean((1, 2, 3))
        k = max(1, math.ceil(hard_share * len(per_image_bce)))
        bce = per_image_bce.topk(k).values.mean()
    else:
        bce = F.binary_cross_entropy_with_logits(logits, target, weight=w)
    p = torch.sigmoid(logits)
    wp = p if w is None else w * p
    dims = (1, 2, 3) if per_image else (0, 1, 2, 3)
    wt = target if w is None else w * target
    dice = 1.0 - (2.0 * (wp * target).sum(dims) + 1.0) / (wp.sum(dims) + wt.sum(dims) + 1.0)
    return bce + dice_weight * dice.mean()


def ranking_loss(logits: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
    """The sphere found by rank, not by a threshold: per image, a softmax over its pixels' logits and one more, a
    fixed "no sphere" logit of 0 (the threshold's); the loss is minus the log of the probability on the sphere's
    pixels (on the "no sphere" logit for an image without one), averaged over the images. Logits and target float
    (N, 1, H, W). Unlike the BCE, whose per-pixel mean lets a few missed sphere pixels among thousands cost little,
    it charges a sphere the image's busiest spot out-ranks about the gap between their logits, less the log of the
    sphere's pixel count (a small sphere nearly as much as a large one), and charges that spot with it."""
    z = logits.flatten(1)
    sphere = target.flatten(1) > 0
    null = z.new_zeros(len(z), 1)
    every = torch.logsumexp(torch.cat([z, null], 1), 1)
    on_sphere = torch.logsumexp(z.masked_fill(~sphere, -1e4), 1)  # finite: no NaN gradient where none is
    has_sphere = sphere.any(1)
    return (every - torch.where(has_sphere, on_sphere, null[:, 0])).mean()


def lr_factor(step: int, cfg: SegmenterTrainConfig) -> float:
    warmup = max(1, min(cfg.warmup_steps, cfg.steps // 5))  # short runs warm up for a fifth of their steps
    if step < warmup:
        return (step + 1) / warmup
    t = (step - warmup) / max(1, cfg.steps - warmup)
    return 0.05 + 0.95 * 0.5 * (1.0 + math.cos(math.pi * min(t, 1.0)))
