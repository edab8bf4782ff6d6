"""Crop training: several small crops of each composite instead of the whole image.

The segmentation networks are fully convolutional, so a network trained on 32 px crops runs on 64 px images; a crop
costs a quarter of the image's step and one composite yields several crops, so the step and the making of data both
go further (``benchmarks/bench_train_vision.py``). A share of the crops is placed around the sphere (anywhere it
stays whole inside the crop), the rest anywhere that does not cut it: every batch holds whole spheres and plenty of
sphere-free background, the hard negatives of false detections. Image and mask are cut by the same window.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch
from torch.utils.data import Dataset

from grasp_s2r.vision.images.dataset import STREAMS, CompositeDataset
from grasp_s2r.vision.networks.model import to_input_tensor

CROP_RNG_TAG = 5
"""Part of each composite's crop seed (``[seed, stream, CROP_RNG_TAG, index]``): its own stream, so the composite
itself is the same with or without crops."""


@dataclass(frozen=True)
class CropConfig:
    """How the crops of one composite are placed."""

    size_px: int = 32
    """Side of a square crop (a multiple of 8: the U-Net pools three times)."""
    per_composite: int = 8
    """Crops cut from each composite."""
    sphere_share: float = 0.5
    """Share of a composite's crops placed to contain a sphere pixel (when the composite shows the sphere)."""

    def __post_init__(self) -> None:
        if self.size_px < 8 or self.size_px % 8:
            raise ValueError(f"crop size must be a multiple of 8 and at least 8, got {self.size_px}")
        if not 1 <= self.per_composite <= 64:
            raise ValueError(f"crops per composite must be in [1, 64], got {self.per_composite}")
        if not 0.0 <= self.sphere_share <= 1.0:
            raise ValueError(f"crop sphere share must be in [0, 1], got {self.sphere_share}")


def crop_windows(mask: np.ndarray, cfg: CropConfig, rng: np.random.Generator) -> np.ndarray:
    """Top-left corners int (per_composite, 2) as (row, col) of ``cfg.size_px`` windows inside ``mask`` (H, W).

    No window cuts the sphere: each holds all of its pixels or none (a sphere cut by a crop's edge would teach the
    network that a piece of a round edge is a sphere). The first ``round(sphere_share * per_composite)`` windows hold
    the sphere (when the mask has one), uniform among the windows that do; the others are uniform among all windows
    that hold it whole or miss it.
    """
    h, w = mask.shape
    s = cfg.size_px
    if s > h or s > w:
        raise ValueError(f"crop of {s} px does not fit a {h}x{w} image")
    rows, cols = np.nonzero(mask)
    corners = np.empty((cfg.per_composite, 2), np.int64)
    # no sphere, or one wider than a crop (never at the camera's sizes): windows anywhere
    if not len(rows) or np.ptp(rows) >= s or np.ptp(cols) >= s:
        corners[:, 0] = rng.integers(h - s + 1, size=cfg.per_composite)
        corners[:, 1] = rng.integers(w - s + 1, size=cfg.per_composite)
        return corners
    r0, r1, c0, c1 = rows.min(), rows.max(), cols.min(), cols.max()
    tops, lefts = np.arange(h - s + 1), np.arange(w - s + 1)
    holds_r, holds_c = (tops <= r0) & (r1 < tops + s), (lefts <= c0) & (c1 < lefts + s)
    apart_r, apart_c = (r1 < tops) | (tops + s <= r0), (c1 < lefts) | (lefts + s <= c0)
    holds = holds_r[:, None] & holds_c[None, :]
    whole_or_none = np.argwhere(holds | apart_r[:, None] | apart_c[None, :])  # every window that does not cut it
    holding = np.argwhere(holds)
    n_sphere = round(cfg.sphere_share * cfg.per_composite)
    for i in range(cfg.per_composite):
        pool = holding if i < n_sphere else whole_or_none
        corners[i] = pool[rng.integers(len(pool))]
    return corners


def cut(array: np.ndarray, corners: np.ndarray, size_px: int) -> np.ndarray:
    """The windows of ``corners`` (from :func:`crop_windows`) of ``array`` (H, W, ...), stacked (n, s, s, ...)."""
    return np.stack([array[r:r + size_px, c:c + size_px] for r, c in corners])


class CropDataset(Dataset):
    """Item ``i < crop_items`` -> the crops of composite ``i`` of ``base``: (images float32 (k, 3, s, s) normalized,
    masks float32 (k, 1, s, s)); fully determined by (seed, stream, i) like the composites. Items from
    ``crop_items`` on are ``base``'s whole composites (a run's last phase: one DataLoader, one set of workers)."""

    def __init__(self, base: CompositeDataset, cfg: CropConfig, crop_items: int | None = None):
        self.base = base
        self.cfg = cfg
        self.crop_items = len(base) if crop_items is None else int(crop_items)

    def __len__(self) -> int:
        return len(self.base)

    def sample(self, index: int) -> tuple[np.ndarray, np.ndarray]:
        """The crops of composite ``index`` as (rgb uint8 (k, s, s, 3), mask bool (k, s, s))."""
        rgb, mask = self.base.sample(index)
        rng = np.random.default_rng([self.base.seed, STREAMS[self.base.stream], CROP_RNG_TAG, int(index)])
        corners = crop_windows(mask, self.cfg, rng)
        return cut(rgb, corners, self.cfg.size_px), cut(mask, corners, self.cfg.size_px)

    def __getitem__(self, index: int) -> tuple[torch.Tensor, torch.Tensor]:
        if index >= self.crop_items:
            return self.base[index]
        rgb, mask = self.sample(int(index))
        return to_input_tensor(rgb), torch.from_numpy(mask[:, None].astype(np.float32))

    def close(self) -> None:
        self.base.close()


def flatten_crops(x: torch.Tensor, y: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """A DataLoader batch of crops (B, k, C, s, s) as one batch (B * k, C, s, s); full images pass unchanged."""
    if x.dim() == 5:
        return x.flatten(0, 1), y.flatten(0, 1)
    return x, y
