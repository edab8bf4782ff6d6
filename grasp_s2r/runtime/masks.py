"""Mask sources: what turns a batch of camera images into the controller's input masks (ground truth or the
segmenter's prediction). The runtime's one door to ``grasp_s2r.vision``, imported only when predicted masks are
asked for."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Literal, Protocol

import numpy as np

from grasp_s2r.files import file_sha256
from grasp_s2r.learner import SegmenterMasks

MaskInput = Literal["predicted", "gt"]
"""The controller's input mask: the segmenter's prediction or the ground truth."""

class MaskSource(Protocol):
    """Maps a batch of camera images to the controller's input masks."""

    kind: str
    """"gt" or "predicted"."""
    margin_px: int
    """Pixels beyond each edge of the view its images show (a segmenter trained with ``train-vision --margin-px``);
    its masks are the view's. 0: images of the view itself."""

    def __call__(self, rgb: np.ndarray, gt_mask: np.ndarray) -> np.ndarray:
        """rgb uint8 (N, H, W, 3), gt_mask bool (N, H, W) -> bool (N, H, W)."""
        ...


class GroundTruthMasks:
    """The simulator's (or the composite's) ground-truth sphere mask."""

    kind = "gt"
    margin_px = 0

    def __call__(self, rgb: np.ndarray, gt_mask: np.ndarray) -> np.ndarray:
        return np.asarray(gt_mask, dtype=bool)

    def gripper(self, rgb: np.ndarray, gt_gripper: np.ndarray) -> np.ndarray:
        """The simulator's ground-truth mask of the gripper fingers."""
        return np.asarray(gt_gripper, dtype=bool)


class PredictedMasks(SegmenterMasks):
    """The segmenter's masks (``learner.SegmenterMasks``): one batched forward pass over all workers' images."""

    def __init__(self, segmenter: Any, checkpoint: Path | None = None):
        super().__init__(segmenter)
        self.checkpoint = checkpoint
        """The file the segmenter was read from (what a remote backend ships to its actors)."""



class VisionUnavailable(RuntimeError):
    """Predicted masks were asked for but no segmenter can be loaded."""


def mask_source_identity(kind: str, vision_checkpoint: str = "") -> dict[str, str]:
    """What makes two mask sources the same: the kind, and for predicted masks the segmenter checkpoint's content
    (sha256 of its bytes, so that a moved or copied file is the same source)."""
    if kind != "predicted":
        return {"kind": kind}
    path = checkpoint_path(vision_checkpoint)
    digest = file_sha256(path) if path.is_file() else "missing"
    return {"kind": kind, "segmenter_sha256": digest}


def checkpoint_path(vision_checkpoint: str = "") -> Path:
    """The segmenter checkpoint of predicted masks: ``vision_checkpoint``, or the one packaged with grasp_s2r."""
    from grasp_s2r.vision.networks.segmenter import default_checkpoint_path

    return Path(vision_checkpoint) if vision_checkpoint else default_checkpoint_path()


def make_mask_source(kind: str, vision_checkpoint: str = "", device: Any = None) -> MaskSource:
    """``"gt"`` -> ground truth; ``"predicted"`` -> the segmenter of ``vision_checkpoint`` (or the packaged one),
    with the packaged gripper head attached when it was trained on that segmenter's file (``vision/gripper.py``:
    then the source's ``gripper`` gives the fingers' mask)."""
    if kind == "gt":
        return GroundTruthMasks()
    if kind != "predicted":
        raise ValueError(f"masks must be 'predicted' or 'gt', got {kind!r}")
    try:
        from grasp_s2r.vision.networks.gripper import load_segmenter_with_head

        path = checkpoint_path(vision_checkpoint)
    except ImportError as e:
        raise VisionUnavailable(f"the vision module cannot be imported ({e}); use --masks gt") from None
    if not path.is_file() and not path.is_dir():
        raise VisionUnavailable(
            f"no segmenter checkpoint at {path}: train one with 'grasp-s2r train-vision' and pass --vision, "
            "or use --masks gt")
    try:
        return PredictedMasks(load_segmenter_with_head(path, device=device), path)
    except ValueError as e:  # the segmenter's (or its gripper head's) CheckpointError
        raise VisionUnavailable(str(e)) from None

