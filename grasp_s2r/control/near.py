"""Near sphere: a sphere seen large just below the open gripper does not vanish; a frame that loses it gets it back.

Close to the table, a sphere a few centimetres under the open fingers covers tens of pixels, and on some frames
the segmenter still returns an empty mask (the fingers' shadow on it, the photo behind it; docs/control.md, *Near
sphere*). The controller, taught that an empty mask is a lost sphere, rises to look again, sees it, goes down and
loses it again: it bobs over the sphere until the episode runs out. :class:`NearSphere` gives such a frame the last
non-empty mask back, moved across the image as the table point under its centroid moved (the camera translates
without turning: ``control.wrist_geometry``), while the gripper is open and the TCP below ``height_m``, for at most
``steps`` empty frames in a row, and only where that last mask covered at least ``min_px`` pixels (a sphere seen
close, not a far speck that may really have left the view).

One frame ships (``ParallaxConfig.near_steps`` = 1): on validation episodes 3 frames cost 2 episodes of
``perturbation``, where the sphere really is knocked out of view as the gripper comes down and a stale mask holds
the controller over the empty spot (docs/control.md, *Near sphere*). Everything it reads is what a robot has: the
TCP's position (kinematics), whether the gripper is closed, and the mask. Numpy only; composed by
:class:`~grasp_s2r.control.parallax.ParallaxFilter` after its other rules.
"""

from __future__ import annotations

import numpy as np

from grasp_s2r.control.wrist_geometry import GRIPPER_CLOSED_INDEX, TCP_INDEX, WristView
from grasp_s2r.sim.config import CameraConfig


def shifted(mask: np.ndarray, d_col: int, d_row: int) -> np.ndarray:
    """``mask`` (H, W) moved by whole pixels, what leaves the image dropped, what enters it empty."""
    out = np.zeros_like(mask)
    h, w = mask.shape
    src = mask[max(0, -d_row):h - max(0, d_row), max(0, -d_col):w - max(0, d_col)]
    out[max(0, d_row):max(0, d_row) + src.shape[0], max(0, d_col):max(0, d_col) + src.shape[1]] = src
    return out


class NearSphere:
    """One episode's last close mask; ``filter(mask, proprio)`` at every step returns the mask, or the last non-empty
    one moved with the table where the open gripper is low, the mask empty and the last one large (see the module)."""

    def __init__(self, camera: CameraConfig, steps: int, height_m: float, min_px: int):
        if steps < 1 or height_m <= 0 or min_px < 1:
            raise ValueError(f"a near sphere needs steps >= 1, height_m > 0 and min_px >= 1, got {steps}, "
                             f"{height_m}, {min_px}")
        self.camera, self.steps, self.height_m, self.min_px = camera, steps, height_m, min_px
        self.reset()

    def reset(self) -> None:
        """A new episode: no mask seen."""
        self._last: np.ndarray | None = None
        """The last non-empty mask (H, W) bool."""
        self._last_tcp = np.zeros(3)
        """The TCP's position (m, table frame) when it was seen."""
        self._empty = 0
        """Empty frames since it."""

    def filter(self, mask: np.ndarray, proprio: np.ndarray) -> np.ndarray:
        """This step's mask bool (H, W), or the last non-empty one moved with the table (see the class)."""
        mask = np.asarray(mask, dtype=bool)
        p = np.asarray(proprio, dtype=float)
        tcp = p[TCP_INDEX]
        if mask.any():
            self._last, self._last_tcp, self._empty = mask.copy(), tcp.copy(), 0
            return mask
        self._empty += 1
        near = p[GRIPPER_CLOSED_INDEX] < 0.5 and tcp[2] < self.height_m
        if not near or self._last is None or self._empty > self.steps or self._last.sum() < self.min_px:
            return mask
        rows, cols = np.nonzero(self._last)
        centre = np.array([[cols.mean(), rows.mean()]])
        table_xy, on_table = WristView.at(self._last_tcp, self.camera).table_xy(centre)
        if not on_table[0]:
            return mask
        now = WristView.at(tcp, self.camera).table_pixel(table_xy[0])
        if not np.isfinite(now).all():
            return mask
        d_col, d_row = np.round(now - centre[0]).astype(int)
        return shifted(self._last, int(d_col), int(d_row))
