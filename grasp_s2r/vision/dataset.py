"""Composites made on the fly: a torch Dataset whose item ``i`` is fully determined by (seed, stream, i).

Item ``i`` renders sim view ``i // renders_per_view`` (one render is reused for a few composites
with different photos and augmentations: rendering is the slow part), pastes it on a random crop
of a photo of the stream's split, and augments image and mask together. Works in DataLoader
workers (the PyBullet client is created inside the worker; use the ``spawn`` start method).

Streams never share photos or episode seeds with each other in a way that leaks held-out data:
``train`` and ``val`` use the training photos (disjoint episode seeds), ``heldout`` the held-out photos.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import torch
from torch.utils.data import Dataset
from tqdm import tqdm

from grasp_s2r.sim.camera import Frame
from grasp_s2r.sim.config import CameraConfig, EnvConfig
from grasp_s2r.vision.augment import AugmentConfig, Augmenter
from grasp_s2r.vision.backgrounds import random_crop, recolor
from grasp_s2r.vision.composite import CompositeConfig, composite_frame
from grasp_s2r.vision.model import to_input_tensor
from grasp_s2r.vision.simviews import SimViewSampler, ViewConfig

STREAMS = {"train": 0, "val": 1, "heldout": 2}
"""Stream name -> stream id (part of every item's seed)."""
EPISODE_SEED_BASE = {"train": 0, "val": 10_000_000, "heldout": 20_000_000}
"""Sim episode seeds of a stream start here: the ranges never overlap."""
PHOTO_SPLIT = {"train": "train", "val": "train", "heldout": "heldout"}
"""Which background split each stream draws its photos from."""


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
    """Share of background crops whose colours are randomized (:func:`backgrounds.recolor`); an option of
    training (``train-vision --recolor-prob``), 0 in evaluation, so held-out photos are shown as they are."""

    def __post_init__(self) -> None:
        if not 0.0 <= self.background_recolor_prob <= 1.0:
            raise ValueError(f"background_recolor_prob must be in [0, 1], got {self.background_recolor_prob}")

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


def env_config_for(image_size_px: int) -> EnvConfig:
    """The default scene with a square wrist camera of ``image_size_px``."""
    return EnvConfig(camera=CameraConfig(width_px=image_size_px, height_px=image_size_px))


class CompositeDataset(Dataset):
    """Item ``i`` -> (image float32 (3, H, W) normalized, mask float32 (1, H, W)); see the module docstring."""

    def __init__(self, *, env_config: EnvConfig, data: DataConfig, backgrounds: list[np.ndarray], stream: str,
                 seed: int, length: int):
        if stream not in STREAMS:
            raise ValueError(f"stream must be one of {sorted(STREAMS)}, got {stream!r}")
        if not backgrounds:
            raise ValueError("at least one background photo is needed")
        self.env_config = env_config
        self.data = data
        self.backgrounds = backgrounds
        self.stream = stream
        self.seed = int(seed)
        self.length = int(length)
        self._sampler = SimViewSampler(env_config, data.view)
        self._augment = Augmenter(data.augment)
        self._cache: tuple[int, Frame] | None = None

    def __getstate__(self) -> dict[str, Any]:
        state = self.__dict__.copy()  # never ship a connected PyBullet client to another process
        state["_sampler"] = SimViewSampler(self.env_config, self.data.view)
        state["_cache"] = None
        return state

    def __len__(self) -> int:
        return self.length

    @property
    def image_hw(self) -> tuple[int, int]:
        return self._sampler.image_hw

    def frame(self, view_index: int) -> Frame:
        """The sim render of view ``view_index`` (cached: consecutive items share it)."""
        if self._cache is None or self._cache[0] != view_index:
            rng = np.random.default_rng([self.seed, STREAMS[self.stream], 0, view_index])
            episode_seed = EPISODE_SEED_BASE[self.stream] + view_index
            self._cache = (view_index, self._sampler.render(episode_seed, rng))
        return self._cache[1]

    def sample(self, index: int) -> tuple[np.ndarray, np.ndarray]:
        """Composite ``index`` as (rgb uint8 (H, W, 3), mask bool (H, W))."""
        frame = self.frame(index // self.data.renders_per_view)
        rng = np.random.default_rng([self.seed, STREAMS[self.stream], 1, index])
        photo = self.backgrounds[int(rng.integers(len(self.backgrounds)))]
        background = random_crop(photo, self.image_hw, rng)
        if self.data.background_recolor_prob > 0:  # its own stream: the paste and augmentation stay the same
            recolor_rng = np.random.default_rng([self.seed, STREAMS[self.stream], 2, index])
            if recolor_rng.random() < self.data.background_recolor_prob:
                background = recolor(background, recolor_rng)
        rgb, mask = composite_frame(frame, background, rng, self.data.composite)
        return self._augment(rgb, mask, seed=int(rng.integers(2**31)))

    def __getitem__(self, index: int) -> tuple[torch.Tensor, torch.Tensor]:
        rgb, mask = self.sample(int(index))
        return to_input_tensor(rgb[None])[0], torch.from_numpy(mask[None].astype(np.float32))

    def close(self) -> None:
        self._sampler.close()


def make_composites(dataset: CompositeDataset, n: int, desc: str = "compositing",
                    start: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """Items start..start+n-1 of ``dataset`` as (rgb uint8 (n, H, W, 3), mask bool (n, H, W)), with a progress bar."""
    h, w = dataset.image_hw
    images = np.empty((n, h, w, 3), np.uint8)
    masks = np.empty((n, h, w), bool)
    for i in tqdm(range(n), desc=desc, unit="img", leave=False, disable=n < 64):
        images[i], masks[i] = dataset.sample(start + i)
    return images, masks
