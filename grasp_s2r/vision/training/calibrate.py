"""The segmenter's operating point: the probability threshold at which pixel precision equals recall.

A network trained with BCE + Dice is not calibrated at 0.5: on a target this small it trades
recall for precision. :func:`calibrate_checkpoint` picks the **break-even** threshold on fresh
validation composites — the *training* photos, ``val`` stream items from :data:`CALIBRATION_START`
on (disjoint from the training run's validation set), never a held-out photo — and writes it into
the checkpoint (keys ``threshold`` and ``threshold_calibration``), where :class:`Segmenter` reads it.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from grasp_s2r.bounds import require_images
from grasp_s2r.sim.config import EnvConfig
from grasp_s2r.vision.images.backgrounds import load_backgrounds
from grasp_s2r.vision.images.dataset import CompositeDataset, DataConfig, env_config_for, make_composites
from grasp_s2r.vision.networks.segmenter import (
    Segmenter,
    Tiling,
    check_threshold,
    read_checkpoint,
    write_checkpoint,
)


@dataclass(frozen=True)
class CalibrationConfig:
    """What ``grasp-s2r calibrate-vision`` does."""

    model: str = ""
    """The segmenter checkpoint to calibrate."""
    out: str = ""
    """Where the calibrated checkpoint is written ("" = in place, over ``model``)."""
    n_images: int = 1000
    """Validation composites on the training photos."""
    seed: int = 0
    """Seed of those composites."""
    backgrounds: str = ""
    """A folder of your own photos (its training split; "" = the embedded photos)."""
    device: str = ""
    """Torch device ("" = CUDA when present, else CPU)."""
    threshold: float = 0.0
    """A threshold to set as it is, without calibrating (0 = the break-even one, calibrated)."""
    tiles: str = ""
    """How the segmenter predicts from now on, calibrated so: ``"SIZE/STRIDE"`` tile by tile (:class:`Tiling`),
    ``"none"`` the whole image, ``""`` as the checkpoint does now."""


def parse_tiles(text: str) -> Tiling | None | str:
    """``--tiles`` text -> a :class:`Tiling`, None (``"none"``: the whole image) or ``"keep"`` (``""``); ValueError
    with the problem otherwise."""
    text = text.strip().lower()
    if text == "":
        return "keep"
    if text == "none":
        return None
    size, sep, stride = text.partition("/")
    try:
        return Tiling(int(size), int(stride) if sep else int(size) // 2)
    except ValueError as e:
        raise ValueError(f"--tiles takes SIZE/STRIDE in px (e.g. 32/16), SIZE (stride SIZE/2) or none, got {text!r}"
                         f"{'' if 'invalid literal' in str(e) else f': {e}'}") from None


CALIBRATION_START = 100_000
"""First ``val``-stream item used for calibration (the training run validates on items 0..val_images-1)."""
_BINS = 1000
"""Probability histogram resolution: thresholds are multiples of 1 / _BINS."""


def precision_recall_curve(proba: np.ndarray, target: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Micro pixel precision and recall of ``proba > t`` for t = 0, 1/_BINS, ..., 1 - 1/_BINS.

    ``proba`` float (N, H, W) in [0, 1], ``target`` bool of the same shape. Returns (thresholds, precision,
    recall); precision is NaN where nothing is predicted.
    """
    proba, target = np.asarray(proba, dtype=np.float64), np.asarray(target, dtype=bool)
    if proba.shape != target.shape:
        raise ValueError(f"proba and target shapes differ: {proba.shape} vs {target.shape}")
    if not target.any():
        raise ValueError("calibration needs target pixels: every mask is empty")
    # bin b holds probabilities in (b / _BINS, (b + 1) / _BINS]; proba > b / _BINS <=> bin >= b
    bins = np.clip(np.ceil(proba * _BINS).astype(np.int64) - 1, 0, _BINS - 1)
    pos = np.bincount(bins[target], minlength=_BINS)
    neg = np.bincount(bins[~target], minlength=_BINS)
    tp = np.cumsum(pos[::-1])[::-1].astype(np.float64)
    fp = np.cumsum(neg[::-1])[::-1].astype(np.float64)
    with np.errstate(invalid="ignore", divide="ignore"):
        precision = np.where(tp + fp > 0, tp / np.maximum(tp + fp, 1.0), np.nan)
    recall = tp / pos.sum()
    return np.arange(_BINS) / _BINS, precision, recall


def break_even_threshold(proba: np.ndarray, target: np.ndarray) -> tuple[float, float, float]:
    """(threshold, precision, recall) where precision and recall are closest; ties go to the higher threshold.

    Thresholds that find no target pixel (precision = recall = 0) do not count.
    """
    thresholds, precision, recall = precision_recall_curve(proba, target)
    gap = np.where(np.isnan(precision) | (recall == 0), np.inf, np.abs(precision - recall))
    if not np.isfinite(gap).any():
        raise ValueError("no threshold finds a target pixel")
    best = len(gap) - 1 - int(np.argmin(gap[::-1]))
    return float(thresholds[best]), float(precision[best]), float(recall[best])


def calibrate_checkpoint(path: Path | str, *, n_images: int = CalibrationConfig.n_images,
                         seed: int = CalibrationConfig.seed, data: DataConfig | None = None,
                         backgrounds_dir: Path | None = None, out: Path | str | None = None,
                         device: Any = None, progress: bool = True,
                         tiling: Tiling | None | str = "keep", threshold: float | None = None) -> dict[str, Any]:
    """Set the break-even threshold of the checkpoint at ``path`` (written to ``out``, default in place), for its
    predictions as they will be made: tile by tile with ``tiling`` (None: the whole image; ``"keep"``: the
    checkpoint's own way, which is written back with it). ``threshold``: set this one as it is instead (nothing
    is calibrated; the record says so).

    Composites: ``n_images`` ``val``-stream items (training photos, augmented as ``data``, default the standard
    training :class:`DataConfig`). Returns the ``threshold_calibration`` record it wrote.
    """
    if n_images < 1:
        raise ValueError(f"n_images must be positive, got {n_images}")
    data = data or DataConfig()
    ckpt = read_checkpoint(path)
    if tiling != "keep":
        ckpt.pop("tiling", None)
        if tiling is not None:
            ckpt["tiling"] = tiling.as_dict()
    segmenter = Segmenter.from_checkpoint(ckpt, device=device, path=path)
    if threshold is not None:
        record = {"rule": "given", "tiling": ckpt.get("tiling"), "threshold": check_threshold(threshold)}
        ckpt["threshold"], ckpt["threshold_calibration"] = record["threshold"], record
        write_checkpoint(ckpt, out or path)
        return record
    h, w = segmenter.input_hw
    if h != w:
        raise ValueError(f"calibration composites need a square input, got {segmenter.input_hw}")
    require_images(n_images, h * w, 256)
    margin = segmenter.margin_px
    recorded = ckpt.get("config", {}).get("env")  # the scene its views were rendered in (shadows and all)
    scene = EnvConfig.from_dict(recorded) if recorded else env_config_for(h - 2 * margin, margin)
    dataset = CompositeDataset(env_config=scene, data=data,
                               backgrounds=load_backgrounds("train", backgrounds_dir), stream="val", seed=seed,
                               length=CALIBRATION_START + n_images)
    try:
        images, masks = make_composites(dataset, n_images, desc="calibration composites", start=CALIBRATION_START,
                                        progress=progress)
    finally:
        dataset.close()
    proba = np.concatenate([segmenter.predict_proba(images[i:i + 256]) for i in range(0, n_images, 256)])
    threshold, precision, recall = break_even_threshold(proba, masks)
    record = {"rule": "break-even: pixel precision = recall", "stream": "val", "photos": "train",
              "first_item": CALIBRATION_START, "n_images": int(n_images), "seed": int(seed), "data": data.to_dict(),
              "tiling": ckpt.get("tiling"), "threshold": threshold, "precision": precision, "recall": recall}
    ckpt["threshold"] = threshold
    ckpt["threshold_calibration"] = record
    write_checkpoint(ckpt, out or path)
    return record
