"""Evaluation of a segmenter: on freshly composited held-out-photo images (seeded) or on a ``--data`` folder.

The held-out composites are made with a fixed :class:`EvalConfig` (not the checkpoint's training
config), so that different checkpoints are compared on the same images.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
from tqdm import tqdm

from grasp_s2r.vision.backgrounds import BackgroundError, load_backgrounds, split_names
from grasp_s2r.vision.dataset import CompositeDataset, DataConfig, env_config_for, make_composites
from grasp_s2r.vision.folder import load_folder
from grasp_s2r.vision.metrics import confusion_counts, summarize
from grasp_s2r.vision.segmenter import Segmenter, check_threshold

EVAL_FORMAT_NAME = "grasp_s2r.vision_eval"
EVAL_FORMAT_VERSION = 1


@dataclass(frozen=True)
class EvalConfig:
    """One ``eval-vision`` run; saved in its JSON report."""

    n_images: int = 1000
    """Held-out composites to make (ignored with a data folder)."""
    seed: int = 1
    """Seed of the held-out composites (stream ``heldout``: held-out photos, held-out episode seeds)."""
    batch_size: int = 128
    """Images per forward pass."""
    min_detection_px: int = 1
    """Predicted pixels needed to count as a detection."""
    data: DataConfig = field(default_factory=DataConfig)
    """How held-out composites are made."""

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


@dataclass(frozen=True)
class EvalResult:
    """The report (JSON-ready) and the arrays it was computed from."""

    report: dict[str, Any]
    """Format, model, source, config, metrics."""
    images: np.ndarray
    """uint8 (N, H, W, 3) at the model's input resolution."""
    pred: np.ndarray
    """Predicted masks, bool (N, H, W)."""
    target: np.ndarray
    """True masks, bool (N, H, W)."""
    names: list[str]
    """One name per image (file stem, or ``heldout-000042``)."""


def heldout_composites(input_hw: tuple[int, int], cfg: EvalConfig, backgrounds_dir: Path | None = None,
                       trained_on: list[str] | None = None) -> tuple[np.ndarray, np.ndarray]:
    """``cfg.n_images`` composites on held-out photos: (uint8 (N, H, W, 3), bool (N, H, W)).

    ``trained_on``: photo names the model was trained on; an error if any held-out photo is among them.
    """
    if input_hw[0] != input_hw[1]:
        raise ValueError(f"held-out composites need a square input, got {input_hw}")
    heldout_names = split_names(backgrounds_dir)["heldout"]
    if trained_on and (leak := sorted(set(heldout_names) & set(trained_on))):
        raise BackgroundError(f"held-out photos {', '.join(leak)} were used to train this model")
    photos = load_backgrounds("heldout", backgrounds_dir)
    dataset = CompositeDataset(env_config=env_config_for(input_hw[0]), data=cfg.data, backgrounds=photos,
                               stream="heldout", seed=cfg.seed, length=cfg.n_images)
    try:
        return make_composites(dataset, cfg.n_images, desc="held-out composites")
    finally:
        dataset.close()


def predict_all(segmenter: Segmenter, images: np.ndarray, batch_size: int) -> np.ndarray:
    """uint8 (N, H, W, 3) -> bool (N, H, W), in batches, with a progress bar."""
    batches = range(0, len(images), batch_size)
    out = [segmenter.predict(images[i:i + batch_size]) for i in tqdm(batches, desc="predicting", leave=False,
                                                                       disable=len(batches) < 4)]
    return np.concatenate(out)


def evaluate(model_path: Path, *, cfg: EvalConfig, data_dir: Path | None = None, backgrounds_dir: Path | None = None,
             device: Any = None, threshold: float | None = None) -> EvalResult:
    """Metrics of the checkpoint at ``model_path`` on a data folder, or on held-out composites without one.

    ``threshold``: sphere-probability threshold instead of the checkpoint's own (its calibrated one, else 0.5).
    """
    segmenter = Segmenter.load(model_path, device=device)
    if threshold is not None:
        segmenter.threshold = check_threshold(threshold)
    hw = segmenter.input_hw
    if data_dir is not None:
        names, images, target = load_folder(data_dir, hw)
        source: dict[str, Any] = {"kind": "folder", "data_dir": str(Path(data_dir).resolve())}
    else:
        trained_on = segmenter.config["background_split"]["train"]
        images, target = heldout_composites(hw, cfg, backgrounds_dir, trained_on)
        names = [f"heldout-{i:06d}" for i in range(len(images))]
        source = {"kind": "heldout_composites", "background_split": split_names(backgrounds_dir)}
    pred = predict_all(segmenter, images, cfg.batch_size)
    counts = confusion_counts(pred, target)
    report = {
        "format": EVAL_FORMAT_NAME, "format_version": EVAL_FORMAT_VERSION,
        "model": {"path": str(Path(model_path).resolve()), "architecture": segmenter.config["architecture"],
                  "input_hw": list(hw), "step": segmenter.config.get("step"), "threshold": segmenter.threshold},
        "source": source, "config": cfg.to_dict(), "device": str(segmenter.device),
        "metrics": summarize(counts, cfg.min_detection_px),
        "per_image": [{"name": n, "tp": int(a), "fp": int(b), "fn": int(c)}
                      for n, a, b, c in zip(names, counts.tp, counts.fp, counts.fn)],
    }
    return EvalResult(report=report, images=images, pred=pred, target=target, names=names)
