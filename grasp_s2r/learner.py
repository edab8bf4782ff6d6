"""The learner's step, the one of the project: camera images -> the sphere's masks (a mask source) -> mask filters and
blanking -> the controller's actions, for N observations at once.

:class:`~grasp_s2r.agent.GraspAgent` (one camera) and the batched rollouts of ``grasp-s2r eval`` / ``grasp-s2r
dagger`` (``runtime.pool``) both call :func:`learner_step`, so what is tested is what is deployed. Numpy only: torch
is imported by whoever loads the networks.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from grasp_s2r.sim.camera import crop_margin
from grasp_s2r.sim.env import ACTION_DIM


class AgentError(ValueError):
    """The agent cannot be built (no controller, unusable checkpoint) or an input is malformed; one line."""


class SegmenterMasks:
    """A mask source (``runtime.masks.MaskSource``): the segmenter's masks, one batched forward pass for N images."""

    kind = "predicted"

    def __init__(self, segmenter: Any):
        self.segmenter = segmenter
        self.margin_px = int(getattr(segmenter, "margin_px", 0))
        """Pixels beyond each edge of the controller's view that the segmenter reads (``train-vision --margin-px``):
        its images are the view widened by this much (``CameraConfig.widened``), its masks are the view's."""

    def __call__(self, rgb: np.ndarray, gt_mask: np.ndarray | None = None,
                 previous: np.ndarray | None = None) -> np.ndarray:
        """``rgb`` uint8 (N, H, W, 3): the view and its ``margin_px`` margins -> bool (N, H - 2 margin, W - 2 margin):
        the view's masks. ``previous`` uint8 (N, H, W, 3): the previous frames warped onto these, for a segmenter
        that reads them (``reads_previous``; ``control.wrist_geometry.PreviousFrame``)."""
        kw = {} if previous is None else {"previous": previous}
        out = self.segmenter.predict(np.asarray(rgb, dtype=np.uint8), **kw)
        return np.asarray(crop_margin(out, self.margin_px, batched=True), dtype=bool)

    @property
    def reads_previous(self) -> bool:
        return bool(getattr(self.segmenter, "reads_previous", False))

    def gripper(self, rgb: np.ndarray, gt_gripper: np.ndarray | None = None,
                previous: np.ndarray | None = None) -> np.ndarray:
        """The gripper fingers' masks bool (N, H, W), for a controller that reads them (``PolicyConfig.gripper``):
        the segmenter's ``predict_gripper``, when its ``has_gripper_head`` is true (``vision/gripper.py``)."""
        if not getattr(self.segmenter, "has_gripper_head", False):
            raise AgentError("this controller reads the gripper fingers' mask, which this segmenter does not predict "
                             "(no gripper head trained on it: grasp-s2r train-gripper)")
        kw = {} if previous is None else {"previous": previous}
        out = self.segmenter.predict_gripper(np.asarray(rgb, dtype=np.uint8), **kw)
        return np.asarray(crop_margin(out, self.margin_px, batched=True), dtype=bool)


@dataclass
class LearnerStep:
    """What :func:`learner_step` did for N observations."""

    masks: np.ndarray
    """bool (N, H, W): the controller's input masks (blanked rows included), a fresh writable array."""
    actions: np.ndarray
    """float64 (N, 4): the controller's actions; NaN in rows that were not queried."""
    mask_ms: float
    """Wall time of the mask source (segmenter forward pass), milliseconds."""
    filter_ms: float
    """Wall time of the mask filters (``mask_filters``), milliseconds (0 without)."""
    control_ms: float
    """Wall time of the controller forward pass, milliseconds (0 when no row was queried)."""


def reads_memory(policy: Any) -> bool:
    """Whether ``policy`` reads the episode memory (``Policy`` with ``cfg.memory``; a memoryless ``act`` takes none)."""
    return bool(getattr(getattr(policy, "cfg", None), "memory", False))


def reads_gripper(policy: Any) -> bool:
    """Whether ``policy`` reads the gripper fingers' mask (``Policy`` with ``cfg.gripper``)."""
    return bool(getattr(getattr(policy, "cfg", None), "gripper", False))


def learner_step(masks: Callable[[np.ndarray, np.ndarray | None], np.ndarray], policy: Any, rgb: np.ndarray,
                 proprio: np.ndarray, *, gt_mask: np.ndarray | None = None, blank: np.ndarray | None = None,
                 query: Sequence[int] | None = None, memory: np.ndarray | None = None,
                 gt_gripper: np.ndarray | None = None,
                 mask_filters: Sequence[Callable[[np.ndarray, np.ndarray], np.ndarray] | None] | None = None,
                 previous: np.ndarray | None = None) -> LearnerStep:
    """The learner's step for N observations: images -> masks -> (filters, blanking) -> controller.

    ``masks``: a mask source, ``(rgb (N, H, W, 3) uint8, gt_mask (N, H, W) bool | None) -> bool (N, H, W)``
    (:class:`SegmenterMasks`, or ``rollout.GroundTruthMasks``, which needs ``gt_mask``). ``policy``: anything with
    ``act(masks (M, H, W) bool, proprio (M, 5)) -> (M, 4)`` (``control.policy.Policy``); it may be None when no
    row is queried. ``blank`` bool (N,): rows whose controller input is replaced by an empty mask (a simulated
    missed detection). ``query``: the rows the controller acts on (default: all); the others get NaN actions.
    ``memory`` float32 (N, N_MEMORY): each row's episode memory (``control.memory.EpisodeMemory.features``), for a
    controller with memory. For a controller that reads the gripper fingers' mask, the mask source's ``gripper(rgb,
    gt_gripper)`` gives it (``gt_gripper`` bool (N, H, W): the ground truth, for a ground-truth source); blanking
    leaves it alone (a missed detection of the sphere). ``mask_filters``: one per row, None or ``(mask (H, W),
    proprio (5,)) -> mask`` (e.g. ``control.parallax.ParallaxFilter.filter``), applied to the mask source's masks
    before blanking. ``previous`` uint8 (N, H, W, 3): each row's previous frame warped onto its image, for a mask source
    whose segmenter reads it (``SegmenterMasks.reads_previous``; ``control.wrist_geometry.PreviousFrame``).
    """
    t0 = time.perf_counter()
    before = {} if previous is None else {"previous": np.asarray(previous)}
    input_masks = np.array(masks(rgb, gt_mask, **before), dtype=bool)  # a copy: blanking never touches the source
    t_masks = time.perf_counter()
    proprio = np.asarray(proprio)
    for i, keep in enumerate(mask_filters or ()):
        if keep is not None:
            input_masks[i] = keep(input_masks[i], proprio[i])
    t1 = time.perf_counter()
    if blank is not None:
        input_masks[np.asarray(blank, dtype=bool)] = False
    n = len(input_masks)
    rows = list(range(n)) if query is None else list(query)
    actions = np.full((n, ACTION_DIM), np.nan)
    if rows:
        if policy is None:
            raise ValueError("a policy is needed to act on queried rows")
        extra = {"memory": np.asarray(memory)[rows]} if memory is not None and reads_memory(policy) else {}
        if reads_gripper(policy):
            extra["gripper_masks"] = np.asarray(masks.gripper(
                rgb[rows], None if gt_gripper is None else np.asarray(gt_gripper)[rows],
                **({} if previous is None else {"previous": np.asarray(previous)[rows]})), dtype=bool)
        actions[rows] = policy.act(input_masks[rows], proprio[rows], **extra)
    t2 = time.perf_counter()
    return LearnerStep(masks=input_masks, actions=actions, mask_ms=1e3 * (t_masks - t0),
                       filter_ms=1e3 * (t1 - t_masks), control_ms=1e3 * (t2 - t1) if rows else 0.0)
