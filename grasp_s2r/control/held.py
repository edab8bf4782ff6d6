"""Held sphere: a sphere the closed gripper holds moves with the camera; a frame that loses it gets its last mask back.

The wrist camera looks down between the fingers, so a sphere held by them sits on the same pixels while the arm
lifts it. There the segmenter sees it closer than anything it was trained on (lifted off the table, squeezed
between the closing fingers, the table receding behind it), and on some tables its mask comes back empty: the
controller, taught that an empty mask is a lost sphere, opens the gripper and drops it a centimetre or two short of
the lift that counts as a grasp (docs/control.md, *Held sphere*). :class:`HeldSphere` gives such a frame the last
non-empty mask back, while the gripper is closed on something (its gap at least ``min_gap_m``: closed on nothing,
the fingers meet) and for at most ``steps`` empty frames in a row: the sphere cannot have moved in the image, since
it moves with the camera. With ``disjoint`` a frame whose mask does not touch the last one while the gripper holds
something counts as losing it too: the segmenter can miss the held sphere and fire on the table beside it, where
an empty-mask rule leaves the controller the lure, and it lets go.

Everything it reads is what a robot has: whether the gripper is closed, the finger gap, and the mask. Numpy only;
composed by :class:`~grasp_s2r.control.parallax.ParallaxFilter` after its own rules (``ParallaxConfig.held_steps``).
"""

from __future__ import annotations

import numpy as np

from grasp_s2r.control.wrist_geometry import FINGER_GAP_INDEX, GRIPPER_CLOSED_INDEX


class HeldSphere:
    """One episode's last mask; ``filter(mask, proprio)`` at every step returns the mask, or the last non-empty one
    where the closed gripper holds something and this step's mask is empty (with ``disjoint``: or does not touch
    it)."""

    def __init__(self, steps: int, min_gap_m: float, disjoint: bool = False):
        if steps < 1 or min_gap_m <= 0:
            raise ValueError(f"a held sphere needs steps >= 1 and min_gap_m > 0, got {steps}, {min_gap_m}")
        self.steps, self.min_gap_m, self.disjoint = steps, min_gap_m, disjoint
        self.reset()

    def reset(self) -> None:
        """A new episode: no mask seen."""
        self._last: np.ndarray | None = None
        """The last non-empty mask (H, W) bool."""
        self._empty = 0
        """Empty frames since it."""

    def filter(self, mask: np.ndarray, proprio: np.ndarray) -> np.ndarray:
        """This step's mask bool (H, W), or a copy of the last non-empty one (see the class)."""
        mask = np.asarray(mask, dtype=bool)
        p = np.asarray(proprio, dtype=float)
        holding = p[GRIPPER_CLOSED_INDEX] >= 0.5 and p[FINGER_GAP_INDEX] >= self.min_gap_m
        seen = bool(mask.any())
        elsewhere = self.disjoint and holding and seen and self._last is not None and not (mask & self._last).any()
        if seen and not elsewhere:
            self._last, self._empty = mask.copy(), 0
            return mask
        self._empty += 1
        if holding and self._last is not None and self._empty <= self.steps:
            return self._last.copy()
        return mask
