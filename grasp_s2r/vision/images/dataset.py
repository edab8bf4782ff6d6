"""Composites made on the fly: a torch Dataset whose item ``i`` is fully determined by (seed, stream, i).

Item ``i`` renders sim view ``i // renders_per_view`` (one render is reused for a few composites
with different backgrounds and augmentations: rendering is the slow part), puts it on a background, and
augments image and mask together. The background is drawn from a mixture (:class:`BackgroundMix`): a random crop
of a photo of the stream's split (the sphere and fingers pasted through their masks), a procedural texture, a flat
colour, the sim's own table as rendered, or a photo as the table's texture inside the simulator (then the whole
view is rendered so). Optionally the sphere is re-lit from its geometry (:mod:`reshade`) and hard-negative
distractors are drawn on the background (:mod:`synthetic`). Works in DataLoader
workers (the PyBullet client is created inside the worker; use the ``spawn`` start method).

Streams never share photos or episode seeds with each other in a way that leaks held-out data:
``train`` and ``val`` use the training photos (disjoint episode seeds), ``heldout`` the held-out photos.
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import torch
from torch.utils.data import Dataset
from tqdm import tqdm

from grasp_s2r.configs import to_dict
from grasp_s2r.sim.camera import Frame
from grasp_s2r.sim.config import CameraConfig, EnvConfig
from grasp_s2r.vision.images.augment import AugmentConfig, Augmenter
from grasp_s2r.vision.images.backgrounds import busiest_crop, draw_photo, random_crop, recolor
from grasp_s2r.vision.images.composite import CompositeConfig, composite_frame
from grasp_s2r.vision.images.mined import MinedCrops
from grasp_s2r.vision.images.reshade import ReshadeConfig, reshade
from grasp_s2r.vision.images.simviews import SimViewSampler, ViewConfig
from grasp_s2r.vision.images.synthetic import (
    DISTRACTOR_KINDS,
    add_distractors,
    add_photo_blobs,
    busy_texture,
    check_distractor_kinds,
    flat_colour,
    procedural_texture,
)
from grasp_s2r.vision.networks.model import to_input_tensor

STREAMS = {"train": 0, "val": 1, "heldout": 2}
"""Stream name -> stream id (part of every item's seed)."""
EPISODE_SEED_BASE = {"train": 0, "val": 10_000_000, "heldout": 20_000_000}
"""Sim episode seeds of a stream start here: the ranges never overlap."""
PHOTO_SPLIT = {"train": "train", "val": "train", "heldout": "heldout"}
"""Which background split each stream draws its photos from."""


@dataclass(frozen=True)
class BackgroundMix:
    """Relative weights of the background kinds (normalized; only their ratios matter)."""

    photo: float = 1.0
    """A random crop of a real photo, the sim sphere and fingers pasted on it through their masks."""
    texture: float = 0.0
    """A procedural texture (:func:`synthetic.procedural_texture`), pasted on likewise."""
    flat: float = 0.0
    """A flat colour with a gentle gradient (:func:`synthetic.flat_colour`): the plain table."""
    sim_table: float = 0.0
    """The sim render as it is: the env's own procedural table, nothing pasted."""
    photo_table: float = 0.0
    """A real photo as the table's texture inside the simulator (decided per view: the view is rendered so)."""
    busy: float = 0.0
    """A busy surface (:func:`synthetic.busy_texture`: 1-4 px detail in a few colours), pasted on likewise; last, so
    that a mix without it draws the kinds as before."""

    def __post_init__(self) -> None:
        weights = dataclasses.astuple(self)
        if not all(0 <= w < math.inf for w in weights) or sum(weights) <= 0:
            raise ValueError(f"background mix weights must be finite, >= 0 with a positive sum, got {self}")

    @property
    def per_item(self) -> dict[str, float]:
        """The kinds chosen per item (all but ``photo_table``) with their weights."""
        return {k: v for k, v in dataclasses.asdict(self).items() if k != "photo_table"}

    @property
    def photo_table_prob(self) -> float:
        return self.photo_table / sum(dataclasses.astuple(self))


@dataclass(frozen=True)
class DataConfig:
    """Everything that defines how composites are made."""

    view: ViewConfig = field(default_factory=ViewConfig)
    """Sim view sampling (distances, offsets, empty views, sphere appearance)."""
    composite: CompositeConfig = field(default_factory=CompositeConfig)
    """Blending onto the photo (soft edges, shadow)."""
    augment: AugmentConfig = field(default_factory=AugmentConfig)
    """Photometric and geometric augmentation."""
    renders_per_view: int = 4
    """Composites made from one sim render (different photo crops and augmentations)."""
    background_recolor_prob: float = 0.0
    """Share of background crops, and of the photo tables' textures, whose colours are randomized
    (:func:`backgrounds.recolor`); an option of training (``train-vision --recolor-prob``), 0 in evaluation, so
    held-out photos are shown as they are."""
    mix: BackgroundMix = field(default_factory=BackgroundMix)
    """Background kinds and their weights (default: photos only, the evaluation composites)."""
    reshade: ReshadeConfig = field(default_factory=ReshadeConfig)
    """Re-lighting of the sphere from its geometry (default: off)."""
    distractor_prob: float = 0.0
    """Share of pasted-on backgrounds (photo, texture, flat) that get 1-3 hard-negative distractors."""
    distractor_kinds: tuple[str, ...] = DISTRACTOR_KINDS
    """The distractors' shapes, drawn uniformly (:data:`synthetic.DISTRACTOR_KINDS`: all of them)."""
    distractor_saturated: float = 0.7
    """Share of the distractors drawn in saturated colours; the others take any colour, greys, dull and dark ones
    included (1.0 with the kinds ``hole`` and ``specular`` left out: no grey negative, beside grey spheres)."""
    distractor_palette: float = 0.0
    """Share of the distractors' shapes in a colour of the background near them (within
    :data:`synthetic.PALETTE_REACH_PX`; :func:`synthetic.add_distractors`' ``palette_share``): negatives in the
    texture's own colours. Not the near blobs (``near_blob_prob``), whose surroundings hold the sphere. 0: the draws
    unchanged."""
    distractor_min_px: float = 0.0
    """No distractor narrower than this, px (:func:`synthetic.add_distractors`' ``min_width_px``): flat negatives
    only where a flat disc and a shaded sphere differ, none of a far sphere's 2-6 px. 0: every size."""
    photo_blob_prob: float = 0.0
    """Share of pasted-on backgrounds that get 1-3 sphere-sized textured blobs (:func:`synthetic.add_photo_blobs`):
    the lures of real tables, flowers and spots, in the background's own grain."""
    near_blob_prob: float = 0.0
    """Share of composites (every background kind, the rendered tables too) that get 1-3 hard-negative distractors
    beside the sphere, their centres 3-10 px from its centroid, the sphere's and fingers' pixels kept on top: a
    sphere among lures, where the network must tell it by its own look, not by being alone."""
    busy_background_prob: float = 0.0
    """Share of photo backgrounds that are the busiest of 4 random crops around the sphere
    (:func:`backgrounds.busiest_crop`): small spheres on the textures that hide them, more often."""
    mined_crop_prob: float = 0.0
    """Share of photo backgrounds drawn from the crops the starting segmenter fired on (:mod:`mined`: its own lures
    on these photos; a fine-tune's option, ``train-vision --mined-crop-prob``)."""

    def __post_init__(self) -> None:
        if not 0.0 <= self.background_recolor_prob <= 1.0:
            raise ValueError(f"background_recolor_prob must be in [0, 1], got {self.background_recolor_prob}")
        if not 0.0 <= self.distractor_prob <= 1.0:
            raise ValueError(f"distractor_prob must be in [0, 1], got {self.distractor_prob}")
        check_distractor_kinds(self.distractor_kinds)
        if not 0.0 <= self.distractor_saturated <= 1.0:
            raise ValueError(f"distractor_saturated must be in [0, 1], got {self.distractor_saturated}")
        if not 0.0 <= self.distractor_palette <= 1.0:
            raise ValueError(f"distractor_palette must be in [0, 1], got {self.distractor_palette}")
        if not 0.0 <= self.distractor_min_px <= 32.0:
            raise ValueError(f"distractor_min_px must be in [0, 32], got {self.distractor_min_px}")
        if not 0.0 <= self.photo_blob_prob <= 1.0:
            raise ValueError(f"photo_blob_prob must be in [0, 1], got {self.photo_blob_prob}")
        if not 0.0 <= self.near_blob_prob <= 1.0:
            raise ValueError(f"near_blob_prob must be in [0, 1], got {self.near_blob_prob}")
        if not 0.0 <= self.busy_background_prob <= 1.0:
            raise ValueError(f"busy_background_prob must be in [0, 1], got {self.busy_background_prob}")
        if not 0.0 <= self.mined_crop_prob <= 1.0:
            raise ValueError(f"mined_crop_prob must be in [0, 1], got {self.mined_crop_prob}")

    def to_dict(self) -> dict[str, Any]:
        return to_dict(self)


TRAINING_DATA = DataConfig(
    view=ViewConfig(empty_prob=0.2),
    augment=AugmentConfig(affine_scale=(0.75, 1.5)),
    mix=BackgroundMix(photo=0.4, texture=0.15, flat=0.1, sim_table=0.15, photo_table=0.2),
    reshade=ReshadeConfig(prob=0.5),
    distractor_prob=0.0,
)
"""The training recipe of ``train-vision`` (the shipped segmenter's): every ingredient of :class:`DataConfig` on.
Evaluation composites keep ``DataConfig()`` (photos only, TinyRenderer's shading)."""


def env_config_for(image_size_px: int, margin_px: int = 0, sphere_shadow: bool = False) -> EnvConfig:
    """The default scene with a square wrist camera of ``image_size_px``, seen ``margin_px`` beyond each edge
    (``CameraConfig.widened``: an image of ``image_size_px + 2 margin_px``), the sphere's shadows drawn with
    ``sphere_shadow``."""
    camera = CameraConfig(width_px=image_size_px, height_px=image_size_px, sphere_shadow=sphere_shadow)
    return EnvConfig(camera=camera.widened(margin_px))


class CompositeDataset(Dataset):
    """Item ``i`` -> (image float32 (3, H, W) normalized, mask float32 (1, H, W)); see the module docstring."""

    def __init__(self, *, env_config: EnvConfig, data: DataConfig, backgrounds: list[np.ndarray], stream: str,
                 seed: int, length: int, photo_weights: np.ndarray | None = None, mined: MinedCrops | None = None):
        if stream not in STREAMS:
            raise ValueError(f"stream must be one of {sorted(STREAMS)}, got {stream!r}")
        if not backgrounds:
            raise ValueError("at least one background photo is needed")
        self.env_config = env_config
        self.data = data
        self.backgrounds = backgrounds
        self.photo_weights = photo_weights
        """How often each background photo is drawn (:func:`backgrounds.photo_weights`); None: equally often."""
        if photo_weights is not None and len(photo_weights) != len(backgrounds):
            raise ValueError(f"{len(photo_weights)} photo weights for {len(backgrounds)} photos")
        if mined is not None and mined.photos != len(backgrounds):
            raise ValueError(f"crops mined on {mined.photos} photos, given {len(backgrounds)}")
        self.mined = mined
        """The crops the starting segmenter fired on (:class:`MinedCrops`), drawn for ``data.mined_crop_prob`` of the
        photo backgrounds; None: none (``mined_crop_prob`` then draws nothing: a calibration's or gripper head's
        composites by a recipe that had them)."""
        self.stream = stream
        self.seed = int(seed)
        self.length = int(length)
        self._sampler = self._new_sampler()
        if mined is not None and (mined.image_px, mined.image_px) != self.image_hw:
            raise ValueError(f"crops mined at {mined.image_px} px, composites {self.image_hw}")
        self._augment = Augmenter(data.augment)
        self._cache: tuple[int, Frame, bool, tuple[float, float, float]] | None = None

    def _new_sampler(self) -> SimViewSampler:
        photos = self.backgrounds if self.data.mix.photo_table > 0 else None
        return SimViewSampler(self.env_config, self.data.view, table_photos=photos,
                              texture_seed=self.seed * len(STREAMS) + STREAMS[self.stream],
                              recolor_prob=self.data.background_recolor_prob)

    def __getstate__(self) -> dict[str, Any]:
        state = self.__dict__.copy()  # never ship a connected PyBullet client to another process
        state["_sampler"] = self._new_sampler()
        state["_cache"] = None
        return state

    def __len__(self) -> int:
        return self.length

    @property
    def image_hw(self) -> tuple[int, int]:
        return self._sampler.image_hw

    def _view(self, view_index: int) -> tuple[Frame, bool, tuple[float, float, float]]:
        """(render, whether its table is a photo, the sphere's circle in px) of view ``view_index``; cached."""
        if self._cache is None or self._cache[0] != view_index:
            rng = np.random.default_rng([self.seed, STREAMS[self.stream], 0, view_index])
            episode_seed = EPISODE_SEED_BASE[self.stream] + view_index
            photo_table = None
            if self.data.mix.photo_table > 0:  # its own stream: the view's pose and appearance stay the same
                table_rng = np.random.default_rng([self.seed, STREAMS[self.stream], 3, view_index])
                if table_rng.random() < self.data.mix.photo_table_prob:
                    photo_table = table_rng
            frame = self._sampler.render(episode_seed, rng, photo_table=photo_table)
            circle = self._sampler.sphere_circle_px() if self.data.reshade.prob > 0 else (0.0, 0.0, 0.0)
            self._cache = (view_index, frame, photo_table is not None, circle)
        return self._cache[1], self._cache[2], self._cache[3]

    def frame(self, view_index: int) -> Frame:
        """The sim render of view ``view_index`` (cached: consecutive items share it)."""
        return self._view(view_index)[0]

    def _background(self, kind: str, rng: np.random.Generator, index: int, sphere_mask: np.ndarray) -> np.ndarray:
        if kind == "texture":
            return procedural_texture(self.image_hw, rng)
        if kind == "busy":
            return busy_texture(self.image_hw, rng)
        if kind == "flat":
            return flat_colour(self.image_hw, rng)
        background = random_crop(draw_photo(self.backgrounds, rng, self.photo_weights), self.image_hw, rng)
        if self.mined is not None and self.mined.hits and self.data.mined_crop_prob > 0:  # its own stream (the crop
            # above is drawn anyway, so the paste and augmentation stay those of the recipe without mined crops)
            mined_rng = np.random.default_rng([self.seed, STREAMS[self.stream], 7, index])
            if mined_rng.random() < self.data.mined_crop_prob:
                background = self.mined.crop(self.backgrounds, int(mined_rng.integers(len(self.mined.hits))))
        if self.data.busy_background_prob > 0:  # its own stream, as recolouring's
            busy_rng = np.random.default_rng([self.seed, STREAMS[self.stream], 5, index])
            if busy_rng.random() < self.data.busy_background_prob:
                ys, xs = np.nonzero(sphere_mask)
                centre = (int(ys.mean()), int(xs.mean())) if len(ys) else (self.image_hw[0] // 2, self.image_hw[1] // 2)
                background = busiest_crop(self.backgrounds, self.image_hw, busy_rng, centre,
                                          weights=self.photo_weights)
        if self.data.background_recolor_prob > 0:  # its own stream: the paste and augmentation stay the same
            recolor_rng = np.random.default_rng([self.seed, STREAMS[self.stream], 2, index])
            if recolor_rng.random() < self.data.background_recolor_prob:
                background = recolor(background, recolor_rng)
        return background

    def _pasted(self, index: int) -> tuple[np.ndarray, np.ndarray, np.ndarray, int]:
        """Composite ``index`` before augmentation: (rgb, sphere mask, gripper fingers' mask, augmentation seed)."""
        frame, photo_table, circle = self._view(index // self.data.renders_per_view)
        rng = np.random.default_rng([self.seed, STREAMS[self.stream], 1, index])
        d = self.data
        # the ingredients draw from their own streams, so the photos-only recipe (evaluation) is unchanged
        extra = np.random.default_rng([self.seed, STREAMS[self.stream], 4, index])
        if d.reshade.prob > 0 and extra.random() < d.reshade.prob:
            texture = None
            if d.reshade.texture_prob > 0:  # its own stream: the rest of the composite stays the recipe's
                texture_rng = np.random.default_rng([self.seed, STREAMS[self.stream], 8, index])
                if texture_rng.random() < d.reshade.texture_prob:
                    side = int(texture_rng.integers(4, 33))  # a patch of 4-32 px of the photo onto the disc
                    texture = random_crop(draw_photo(self.backgrounds, texture_rng, self.photo_weights),
                                          (side, side), texture_rng)
            frame = Frame(rgb=reshade(frame.rgb, frame.sphere_mask, circle, extra, d.reshade, texture),
                          sphere_mask=frame.sphere_mask, gripper_mask=frame.gripper_mask)
        kinds = d.mix.per_item
        kind = "photo"
        if kinds["photo"] < sum(kinds.values()):
            weights = np.array(list(kinds.values()))
            kind = list(kinds)[int(extra.choice(len(kinds), p=weights / weights.sum()))]
        # the fingers' pixels as seen: the render's segmentation gives each pixel one object, so where the sphere
        # is in front of a finger the pixel is the sphere's; on a pasted-on background they are there if pasted
        gripper = frame.gripper_mask & ~frame.sphere_mask
        if photo_table or kind == "sim_table":
            rgb, mask = frame.rgb.copy(), frame.sphere_mask.copy()
        else:
            background = self._background(kind, rng if kind == "photo" else extra, index, frame.sphere_mask)
            if d.distractor_prob > 0 and extra.random() < d.distractor_prob:
                background = add_distractors(background, extra, kinds=d.distractor_kinds,
                                             saturated_share=d.distractor_saturated,
                                             min_width_px=d.distractor_min_px, palette_share=d.distractor_palette)
            if d.photo_blob_prob > 0:  # its own stream: the recipe without blobs is unchanged
                blob_rng = np.random.default_rng([self.seed, STREAMS[self.stream], 6, index])
                if blob_rng.random() < d.photo_blob_prob:
                    background = add_photo_blobs(background, blob_rng)
            rgb, mask = composite_frame(frame, background, rng, d.composite)
            if not d.composite.paste_gripper:
                gripper = np.zeros_like(gripper)
        if d.near_blob_prob > 0 and mask.any():  # its own stream: the recipe without them is unchanged
            near_rng = np.random.default_rng([self.seed, STREAMS[self.stream], 7, index])
            if near_rng.random() < d.near_blob_prob:
                rows, cols = np.nonzero(mask)
                near = add_distractors(rgb, near_rng, kinds=d.distractor_kinds, around_px=(cols.mean(), rows.mean()),
                                       saturated_share=d.distractor_saturated, min_width_px=d.distractor_min_px)
                rgb = np.where((mask | gripper)[..., None], rgb, near)  # lures lie on the table: behind both
        return rgb, mask, gripper, int(rng.integers(2**31))

    def sample(self, index: int) -> tuple[np.ndarray, np.ndarray]:
        """Composite ``index`` as (rgb uint8 (H, W, 3), mask bool (H, W))."""
        rgb, mask, _, seed = self._pasted(index)
        return self._augment(rgb, mask, seed=seed)

    def sample_with_gripper(self, index: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Composite ``index`` as (rgb uint8 (H, W, 3), sphere mask bool (H, W), gripper fingers' mask bool (H, W)):
        the image and sphere mask of :meth:`sample`, and the visible finger (and palm) pixels of the render, through
        the same augmentation (a gripper head's training target, ``vision/gripper.py``)."""
        rgb, mask, gripper, seed = self._pasted(index)
        rgb, (mask, gripper) = self._augment.with_masks(rgb, [mask, gripper], seed=seed)
        return rgb, mask, gripper

    def __getitem__(self, index: int) -> tuple[torch.Tensor, torch.Tensor]:
        rgb, mask = self.sample(int(index))
        return to_input_tensor(rgb[None])[0], torch.from_numpy(mask[None].astype(np.float32))

    def close(self) -> None:
        self._sampler.close()


def make_composites(dataset: CompositeDataset, n: int, desc: str = "compositing",
                    start: int = 0, progress: bool = True) -> tuple[np.ndarray, np.ndarray]:
    """Items start..start+n-1 of ``dataset`` as (rgb uint8 (n, H, W, 3), mask bool (n, H, W)), with a progress bar
    (from 64 items, unless ``progress`` is off)."""
    h, w = dataset.image_hw
    images = np.empty((n, h, w, 3), np.uint8)
    masks = np.empty((n, h, w), bool)
    for i in tqdm(range(n), desc=desc, unit="img", leave=False, disable=n < 64 or not progress):
        images[i], masks[i] = dataset.sample(start + i)
    return images, masks
