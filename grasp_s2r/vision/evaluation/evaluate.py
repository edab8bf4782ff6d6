"""Evaluation of a segmenter: on one of the seeded test suites (:mod:`grasp_s2r.vision.testsets.suites`) or a ``--data`` folder.

The suites are made with a fixed :class:`VisionEvalConfig` (not the checkpoint's training config), so that different
checkpoints are compared on the same images.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
from tqdm import tqdm

from grasp_s2r import __version__
from grasp_s2r.bounds import require_images
from grasp_s2r.configs import to_dict
from grasp_s2r.files import file_sha256
from grasp_s2r.vision.evaluation.metrics import confusion_counts, metrics_by_width, summarize
from grasp_s2r.vision.images.backgrounds import split_names
from grasp_s2r.vision.images.folder import load_folder
from grasp_s2r.vision.networks.segmenter import Segmenter, check_threshold, read_checkpoint
from grasp_s2r.vision.testsets.suites import Split, SuiteError, check_suite, latency_ms, suite_images

EVAL_FORMAT_NAME = "grasp_s2r.vision_eval"
EVAL_FORMAT_VERSION = 3


@dataclass(frozen=True)
class VisionEvalConfig:
    """One ``eval-vision`` run; saved in its JSON report."""

    n_images: int = 1000
    """Images of the suite to make (ignored with a data folder)."""
    seed: int = 1
    """Seed of the suite's images."""
    suite: str = "composites"
    """Which test suite (:data:`grasp_s2r.vision.testsets.suites.SUITES`)."""
    split: Split = "heldout"
    """``heldout`` (held-out photos and seeds: report on it) or ``val`` (training photos: choose on it)."""
    batch_size: int = 128
    """Images per forward pass."""
    min_detection_px: int = 1
    """Predicted pixels needed to count as a detection."""

    def __post_init__(self) -> None:
        check_suite(self.suite, self.split)

    def to_dict(self) -> dict[str, Any]:
        return to_dict(self)


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


def heldout_composites(input_hw: tuple[int, int], cfg: VisionEvalConfig, backgrounds_dir: Path | None = None,
                       trained_on: list[str] | None = None) -> tuple[np.ndarray, np.ndarray]:
    """The images of ``cfg.suite`` (default: held-out composites): (uint8 (N, H, W, 3), bool (N, H, W)).

    ``trained_on``: photo names the model was trained on; an error if any held-out photo is among them.
    """
    return suite_images(cfg.suite, input_hw, n_images=cfg.n_images, seed=cfg.seed, split=cfg.split,
                        backgrounds_dir=backgrounds_dir, trained_on=trained_on)


def predict_all(segmenter: Segmenter, images: np.ndarray, batch_size: int) -> np.ndarray:
    """uint8 (N, H, W, 3) -> bool (N, H, W), in batches, with a progress bar."""
    batches = range(0, len(images), batch_size)
    out = [segmenter.predict(images[i:i + batch_size]) for i in tqdm(batches, desc="predicting", leave=False,
                                                                       disable=len(batches) < 4)]
    return np.concatenate(out)


def evaluate_segmenter(model_path: Path, *, cfg: VisionEvalConfig, data_dir: Path | None = None,
                       backgrounds_dir: Path | None = None, device: Any = None,
                       threshold: float | None = None) -> EvalResult:
    """Metrics of the checkpoint at ``model_path`` on a data folder, or on held-out composites without one.

    ``threshold``: sphere-probability threshold instead of the checkpoint's own (its calibrated one, else 0.5).
    """
    segmenter = Segmenter.load(model_path, device=device)
    if threshold is not None:
        segmenter.threshold = check_threshold(threshold)
    return _evaluate_loaded(segmenter, model_path, cfg=cfg, data_dir=data_dir, backgrounds_dir=backgrounds_dir)


def _evaluate_loaded(segmenter: Segmenter, model_path: Path, *, cfg: VisionEvalConfig, data_dir: Path | None = None,
                     backgrounds_dir: Path | None = None) -> EvalResult:
    hw = segmenter.input_hw
    if data_dir is not None:
        names, images, target = load_folder(data_dir, hw)
        source: dict[str, Any] = {"kind": "folder", "data_dir": str(Path(data_dir).resolve())}
    else:
        if segmenter.margin_px:  # the suites are images of the view: its margins would be made up, not seen
            raise SuiteError(f"{model_path} reads the view seen {segmenter.margin_px} px beyond each edge (train-vision "
                             "--margin-px); the suites hold the view alone: measure it per frame with "
                             "benchmarks/border_spheres.py, end to end with grasp-s2r eval --vision")
        trained_on = segmenter.config["background_split"]["train"]
        require_images(cfg.n_images, hw[0] * hw[1], cfg.batch_size)  # at the model's own size, before making them
        images, target = heldout_composites(hw, cfg, backgrounds_dir, trained_on)
        names = [f"{cfg.suite}-{cfg.split}-{i:06d}" for i in range(len(images))]
        source = {"kind": "suite", "suite": cfg.suite, "split": cfg.split,
                  "background_split": split_names(backgrounds_dir)}
    pred = predict_all(segmenter, images, cfg.batch_size)
    counts = confusion_counts(pred, target)
    report = {
        "format": EVAL_FORMAT_NAME, "format_version": EVAL_FORMAT_VERSION, "package_version": __version__,
        "model": {"path": str(Path(model_path).resolve()), "sha256": file_sha256(model_path),
                  "architecture": segmenter.config["architecture"],
                  "input_hw": list(hw), "step": segmenter.config.get("step"), "threshold": segmenter.threshold,
                  "tiling": segmenter.tiling.as_dict() if segmenter.tiling else None},
        "source": source, "config": cfg.to_dict(), "device": str(segmenter.device),
        "metrics": summarize(counts, cfg.min_detection_px),
        "by_width": metrics_by_width(pred, target, cfg.min_detection_px),
        "per_image": [{"name": n, "tp": int(a), "fp": int(b), "fn": int(c)}
                      for n, a, b, c in zip(names, counts.tp, counts.fp, counts.fn)],
    }
    return EvalResult(report=report, images=images, pred=pred, target=target, names=names)


def evaluate_suites(model_path: Path, suites: list[str], *, cfg: VisionEvalConfig, backgrounds_dir: Path | None = None,
                    device: Any = None, threshold: float | None = None,
                    latency_frames: int = 200) -> tuple[dict[str, Any], dict[str, EvalResult]]:
    """:func:`evaluate_segmenter` on each suite of ``suites`` (same seed, size and split), plus the batch-1 CPU latency.

    Returns (one JSON-ready report: ``{"suites": {name: metrics + latency}, ...}``, the results by suite).
    ``latency_frames``: frames of each suite timed one by one on one CPU thread (0: not measured).
    """
    results: dict[str, EvalResult] = {}
    rows: dict[str, Any] = {}
    ckpt = read_checkpoint(model_path)
    segmenter = Segmenter.from_checkpoint(ckpt, device=device, path=model_path)
    if threshold is not None:
        segmenter.threshold = check_threshold(threshold)
    cpu = None
    if latency_frames:
        cpu = (segmenter if segmenter.device.type == "cpu" else
               Segmenter.from_checkpoint(ckpt, device="cpu", path=model_path))
        cpu.threshold = segmenter.threshold
    for k, name in enumerate(suites, 1):
        timed = f", then {latency_frames} frames timed one by one" if cpu is not None else ""
        print(f"suite {k}/{len(suites)} {name}: {cfg.n_images} images{timed}", flush=True)
        result = _evaluate_loaded(segmenter, model_path, cfg=dataclasses.replace(cfg, suite=name),
                                  backgrounds_dir=backgrounds_dir)
        results[name] = result
        rows[name] = dict(result.report["metrics"])
        if cpu is not None:
            rows[name].update(latency_ms(cpu, result.images[:64], repeats=latency_frames))
    first = next(iter(results.values())).report
    report = {"format": EVAL_FORMAT_NAME, "format_version": EVAL_FORMAT_VERSION, "package_version": __version__,
              "model": first["model"],
              "config": {**cfg.to_dict(), "suite": list(suites)}, "device": first["device"], "suites": rows,
              "by_width": {name: r.report["by_width"] for name, r in results.items()}}
    return report, results
