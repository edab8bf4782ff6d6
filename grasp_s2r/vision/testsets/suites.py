"""Vision test suites: the image sets a segmenter is measured on, one generator each, all seeded.

Each suite asks a different question of transfer:

- ``composites``: held-out photos with a simulated sphere pasted through its mask, and the training
  augmentation (noise, blur, JPEG, colour jitter, affine) on top: the project's own recipe on photos it never saw;
- ``composites-clean``: the same composites as pasted, without augmentation;
- ``sim``: raw renders of the env's own domain randomization (procedural tables, no photo), sphere-free views
  included: what the controller sees in the simulator;
- ``painted``: spheres drawn analytically by a second renderer that owns no PyBullet code
  (:mod:`grasp_s2r.vision.testsets.painted`) on held-out photos, at the sizes the wrist camera really sees.

Every suite exists in two splits: ``heldout`` (held-out photos, held-out episode seeds: for *reporting*) and
``val`` (training photos, validation episode seeds, items no training run draws: for *choosing* recipes,
thresholds and checkpoints). A suite's images depend on (suite, split, seed, index) only, never on the model.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path
from typing import Literal, get_args

import numpy as np
import torch
from tqdm import tqdm

from grasp_s2r.vision.images.augment import NO_AUGMENT
from grasp_s2r.vision.images.backgrounds import BackgroundError, load_backgrounds, split_names
from grasp_s2r.vision.images.dataset import (
    EPISODE_SEED_BASE,
    CompositeDataset,
    DataConfig,
    env_config_for,
    make_composites,
)
from grasp_s2r.vision.images.simviews import SimViewSampler, ViewConfig
from grasp_s2r.vision.networks.segmenter import Segmenter
from grasp_s2r.vision.testsets.painted import make_painted

SUITES = {
    "composites": "held-out photos + pasted sim sphere, with the training augmentation",
    "composites-clean": "held-out photos + pasted sim sphere, as pasted",
    "sim": "raw domain-randomized sim renders (procedural tables, no photo)",
    "painted": "spheres painted analytically (no PyBullet) on held-out photos, 2-13 px as in expert episodes",
}
"""Suite name -> what it holds (``eval-vision --suite``; ``all`` runs every one)."""
SUITE_ALL = "all"
Split = Literal["heldout", "val"]
SPLITS: tuple[str, ...] = get_args(Split)
"""``heldout``: report on it; ``val``: choose on it (training photos, seeds no training run uses)."""
VAL_ITEM_START = 200_000
"""``val`` composites start at this item of the ``val`` stream: after a run's own validation set (items from 0)
and the calibration items (from 100 000)."""
SIM_SEED_OFFSET = 5_000_000
"""``sim`` views use the split's episode seeds from this offset on (composites use them from 0)."""
_SIM_STREAM = 3


class SuiteError(ValueError):
    """An unknown suite or split, or a suite that cannot be made (e.g. a held-out photo the model trained on)."""


def resolve_suites(name: str) -> list[str]:
    """``"all"`` -> every suite; a suite name -> [name]; anything else -> :class:`SuiteError`."""
    if name == SUITE_ALL:
        return list(SUITES)
    if name not in SUITES:
        raise SuiteError(f"unknown suite {name!r}; choose one of {', '.join([*SUITES, SUITE_ALL])}")
    return [name]


def check_suite(name: str, split: str) -> None:
    """:class:`SuiteError` unless ``name`` is one suite of :data:`SUITES` and ``split`` one of :data:`SPLITS`."""
    if name not in SUITES:
        raise SuiteError(f"unknown suite {name!r}; choose one of {', '.join(SUITES)}")
    if split not in SPLITS:
        raise SuiteError(f"unknown split {split!r}; choose one of {', '.join(SPLITS)}")


def _photos(split: str, backgrounds_dir: Path | None, trained_on: list[str] | None) -> list[np.ndarray]:
    photo_split = "heldout" if split == "heldout" else "train"
    leak = sorted(set(split_names(backgrounds_dir)["heldout"]) & set(trained_on or [])) if split == "heldout" else []
    if leak:
        raise BackgroundError(f"held-out photos {', '.join(leak)} were used to train this model")
    return load_backgrounds(photo_split, backgrounds_dir)


def _composites(hw: tuple[int, int], data: DataConfig, photos: list[np.ndarray], split: str, seed: int,
                n: int) -> tuple[np.ndarray, np.ndarray]:
    stream, start = ("heldout", 0) if split == "heldout" else ("val", VAL_ITEM_START)
    dataset = CompositeDataset(env_config=env_config_for(hw[0]), data=data, backgrounds=photos, stream=stream,
                               seed=seed, length=start + n)
    try:
        return make_composites(dataset, n, desc=f"{split} composites", start=start)
    finally:
        dataset.close()


def sim_views(hw: tuple[int, int], split: str, seed: int, n: int,
              view: ViewConfig | None = None) -> tuple[np.ndarray, np.ndarray]:
    """``n`` raw wrist renders of the env's own randomization: (uint8 (n, H, W, 3), bool (n, H, W)).

    View ``i``: episode seed ``EPISODE_SEED_BASE[stream] + SIM_SEED_OFFSET + i`` (table colour and texture, light,
    camera jitter) and a pose / sphere appearance from ``(seed, i)``; about a tenth of the views hold no sphere.
    """
    stream = "heldout" if split == "heldout" else "val"
    sampler = SimViewSampler(env_config_for(hw[0]), view or ViewConfig())
    images, masks = np.empty((n, *hw, 3), np.uint8), np.empty((n, *hw), bool)
    try:
        for i in tqdm(range(n), desc=f"{split} sim views", unit="img", leave=False, disable=n < 64):
            frame = sampler.render(EPISODE_SEED_BASE[stream] + SIM_SEED_OFFSET + i,
                                   np.random.default_rng([seed, _SIM_STREAM, i]))
            images[i], masks[i] = frame.rgb, frame.sphere_mask
    finally:
        sampler.close()
    return images, masks


def suite_images(name: str, hw: tuple[int, int], *, n_images: int, seed: int, split: str = "heldout",
                 backgrounds_dir: Path | None = None,
                 trained_on: list[str] | None = None) -> tuple[np.ndarray, np.ndarray]:
    """The images and true masks of suite ``name``: (uint8 (N, H, W, 3), bool (N, H, W)).

    ``trained_on``: the photos the model was trained on; a held-out photo among them is an error.
    """
    check_suite(name, split)
    if hw[0] != hw[1]:
        raise SuiteError(f"the suites need a square input, got {hw}")
    if name == "sim":
        return sim_views(hw, split, seed, n_images)
    photos = _photos(split, backgrounds_dir, trained_on)
    if name == "painted":
        return make_painted(photos, n_images, image_hw=hw, seed=seed + (0 if split == "heldout" else 10_000))
    data = DataConfig(augment=NO_AUGMENT) if name == "composites-clean" else DataConfig()
    return _composites(hw, data, photos, split, seed, n_images)


def timed_ms(fn: Callable[[int], object], repeats: int, warmup: int = 20) -> np.ndarray:
    """Milliseconds of each of ``repeats`` calls ``fn(i)``, after ``warmup`` untimed ones: float (repeats,)."""
    for i in range(warmup):
        fn(i)
    t = []
    for i in range(repeats):
        t0 = time.perf_counter()
        fn(i)
        t.append(time.perf_counter() - t0)
    return np.array(t) * 1e3


def _timed_on_one_thread(fn: Callable[[int], object], repeats: int) -> np.ndarray:
    """:func:`timed_ms` with torch on one CPU thread (a control step's budget); the thread count is restored."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        return timed_ms(fn, repeats)
    finally:
        torch.set_num_threads(threads)


def paired_latency_ms(a: Segmenter, frames_a: np.ndarray, b: Segmenter, frames_b: np.ndarray,
                      repeats: int = 200) -> tuple[float, float]:
    """Median milliseconds per frame of ``a.predict`` and ``b.predict`` (batch 1, one CPU thread), their calls
    alternating so that a shared machine's load falls on both alike: a ratio fit to compare."""
    pairs = ((a, frames_a), (b, frames_b))

    def call(i: int) -> None:  # even calls a, odd calls b, each cycling through its own frames
        segmenter, frames = pairs[i % 2]
        segmenter.predict(frames[(i // 2) % len(frames)])

    ms = _timed_on_one_thread(call, 2 * repeats)
    return float(np.median(ms[0::2])), float(np.median(ms[1::2]))


def latency_ms(segmenter: Segmenter, frames: np.ndarray, repeats: int = 200) -> dict[str, float]:
    """Milliseconds per frame of ``segmenter.predict`` at batch 1 on one CPU thread (median, p90).

    ``frames``: uint8 (N, H, W, 3), cycled. Runs on the segmenter's device; the torch thread count is restored.
    """
    ms = _timed_on_one_thread(lambda i: segmenter.predict(frames[i % len(frames)]), repeats)
    return {"predict_median_ms": float(np.median(ms)), "predict_p90_ms": float(np.percentile(ms, 90))}
