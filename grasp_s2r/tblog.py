"""TensorBoard logging of ``train-vision`` and ``dagger`` runs (``--tensorboard [DIR]``; off by default).

``--tensorboard`` alone writes into ``OUT/tensorboard/`` of the run, ``--tensorboard DIR`` into DIR; watch with
``tensorboard --logdir DIR``. Tags:

- train-vision (step = optimizer step): ``train/loss``, ``train/lr`` every step; ``val/precision``, ``val/recall``,
  ``val/iou`` and the image ``val/overlays`` (validation composites beside their predicted masks: true positives
  green, false positives red, false negatives blue) at every validation; the image ``train/composites`` (the first
  training composites, their label tinted yellow) once.
- dagger (step = round): ``dagger/success_rate``, ``dagger/loss``, ``dagger/ci_low``, ``dagger/ci_high``,
  ``bc/success_rate``, ``bc/loss``, ``data/labels``, ``data/new_labels``, ``data/beta``, ``time/*_s``,
  ``speed/rollout_env_steps_per_s``, and the image ``rollouts/overlays`` (frames of the round's first episodes:
  the camera image beside the controller's input mask against the ground truth, same colours).

A resumed run appends to the same folder (a new event file); rounds finished before the resume are not re-logged.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any, Self

import cv2
import numpy as np

from grasp_s2r.artifacts import ARTIFACT_KINDS, ArtifactError, folder_kind
from grasp_s2r.drawing import evenly_spaced, overlay_grid

INSTALL_HINT = 'pip install -e ".[tensorboard]"'
DEFAULT_SUBDIR = "tensorboard"
"""``--tensorboard`` without a folder logs into ``OUT/tensorboard``."""


class TensorBoardUnavailable(RuntimeError):
    """``--tensorboard`` was asked for but the tensorboard package is missing; one line."""


def _summary_writer_class() -> Any:
    try:
        from torch.utils.tensorboard import SummaryWriter
    except ImportError:
        raise TensorBoardUnavailable(f"--tensorboard needs the tensorboard package: {INSTALL_HINT}") from None
    return SummaryWriter


def resolve_logdir(option: str | Path | None, run_dir: str | Path) -> Path | None:
    """The ``--tensorboard`` option (None: off; "": the run folder's ``tensorboard/``; else a folder) -> a path.

    Raises :class:`TensorBoardUnavailable` (before anything is written) when logging is asked for without tensorboard,
    :class:`~grasp_s2r.artifacts.ArtifactError` for a DIR that is a file or holds an artifact (event files are never
    written among another command's files).
    """
    if option is None:
        return None
    _summary_writer_class()
    if str(option) == "":
        return Path(run_dir) / DEFAULT_SUBDIR
    logdir = Path(option)
    if logdir.exists() and not logdir.is_dir():
        raise ArtifactError(f"--tensorboard {logdir} is a file, not a folder")
    kind = folder_kind(logdir) if logdir.is_dir() else None
    if kind is not None:
        raise ArtifactError(f"--tensorboard {logdir} holds {ARTIFACT_KINDS.get(kind, kind)}; choose another folder "
                            "(or leave DIR out: OUT/tensorboard)")
    return logdir


def add_tensorboard_argument(parser: Any) -> None:
    """``--tensorboard [DIR]`` (shared by train-vision and dagger)."""
    parser.add_argument("--tensorboard", nargs="?", const="", default=None, metavar="DIR",
                        help="log losses, metrics and sample images for TensorBoard into DIR (without DIR: "
                             f"OUT/{DEFAULT_SUBDIR}); off by default")


class TBLogger:
    """A ``torch.utils.tensorboard.SummaryWriter``, or nothing at all when ``logdir`` is None."""

    def __init__(self, logdir: Path | str | None):
        self.logdir = Path(logdir) if logdir is not None else None
        self.writer = None
        self._writer_class = _summary_writer_class() if self.logdir is not None else None

    @property
    def enabled(self) -> bool:
        return self.logdir is not None

    def _open(self) -> Any:
        """The writer, created on first use (a run refused before its first step leaves no event file)."""
        if self.writer is None and self.logdir is not None:
            self.logdir.mkdir(parents=True, exist_ok=True)
            self.writer = self._writer_class(str(self.logdir))
        return self.writer

    def scalars(self, step: int, values: Mapping[str, float | None]) -> None:
        if not self.enabled:
            return
        for tag, value in values.items():
            if value is not None:  # NaN is logged as such (e.g. precision before the first positive prediction)
                self._open().add_scalar(tag, float(value), step)

    def image(self, tag: str, rgb: np.ndarray, step: int) -> None:
        """uint8 (H, W, 3)."""
        if self.enabled:
            self._open().add_image(tag, np.asarray(rgb, np.uint8), step, dataformats="HWC")

    def validation(self, step: int, metrics: Mapping[str, float], images: np.ndarray, pred: np.ndarray,
                   target: np.ndarray) -> None:
        """train-vision's validation: pixel precision / recall / IoU and the overlays of the first images."""
        if not self.enabled:
            return
        self.scalars(step, {f"val/{k}": metrics[k] for k in ("precision", "recall", "iou")})
        self.image("val/overlays", overlay_grid(images, pred, target), step)
        self._open().flush()

    def image_file(self, tag: str, path: Path, step: int) -> None:
        """A PNG already written by the run (e.g. ``composites.png``)."""
        if self.enabled and Path(path).is_file():
            bgr = cv2.imread(str(path), cv2.IMREAD_COLOR)
            if bgr is not None:
                self.image(tag, cv2.cvtColor(bgr, cv2.COLOR_BGR2RGB), step)

    def dagger_round(self, row: Mapping[str, Any], round_dir: Path) -> None:
        """One DAgger learning-curve row (``curves.CURVE_COLUMNS``) and frames of the round's episodes."""
        if not self.enabled:
            return
        r = int(row["round"])
        self.scalars(r, {f"dagger/{k}": row.get(f"dagger_{k}") for k in ("success_rate", "loss", "ci_low", "ci_high")})
        self.scalars(r, {f"bc/{k}": row.get(f"bc_{k}") for k in ("success_rate", "loss")})
        self.scalars(r, {"data/labels": row.get("labels"), "data/new_labels": row.get("new_labels"),
                         "data/beta": row.get("beta"),
                         "speed/rollout_env_steps_per_s": row.get("rollout_env_steps_per_s")})
        self.scalars(r, {f"time/{k}": row.get(k) for k in ("rollout_s", "train_s", "eval_s", "bc_s", "round_s")})
        from grasp_s2r.data.episodes import EpisodeDataset

        try:
            episodes = list(EpisodeDataset(round_dir))[:2]
        except Exception:  # noqa: BLE001 - pictures are a nicety: never fail a run over them
            return
        rgb, pred, gt = [], [], []
        for ep in episodes:
            for t in evenly_spaced(len(ep), 4):
                rgb.append(ep["rgb"][t])
                pred.append(ep["input_mask"][t] if "input_mask" in ep.features() else ep["sphere_mask"][t])
                gt.append(ep["sphere_mask"][t])
        if rgb:
            self.image("rollouts/overlays", overlay_grid(np.stack(rgb), np.stack(pred), np.stack(gt)), r)
        self._open().flush()

    def close(self) -> None:
        if self.writer is not None:
            self.writer.close()
            self.writer = None

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
