"""Hovered spots: a spot of the table the open gripper has hovered low over for many steps is not the sphere.

On a photographed table the segmenter's costliest false detections are lures *on* the table (a red flower, a spot
on an apple): they move across the image as the table does, so the parallax rule (``control.parallax``) keeps
them, and the controller goes down to them. A sphere is grasped within a few steps of the fingers reaching it; over
a lure the controller bobs a few centimetres above it with the fingers open, or closes on nothing, until the
episode runs out. :class:`HoveredSpots` counts the steps the TCP spends below ``height_m`` with the gripper open
near one table point (within ``radius_m`` of where that stay began) since the gripper last closed; after ``steps``
of them the point is a hovered spot, and every later blob of the mask whose centroid lies on the table within
``radius_m`` of a hovered spot is taken out of the mask (table coordinates: the spot moves across the image as the
camera moves). With the lure gone the controller sees what else the mask shows, or nothing, and searches as it does
for a lost sphere. With ``closes`` set, a point the gripper has closed over that many times (each close begun within
``radius_m`` of it) is a hovered spot too: over a lure the controller closes, opens and closes again, a step or two
each, at the same spot, where a sphere is held after a close or, squeezed out of the fingers, closed on a few times
(at most 5 on validation episodes that grasped it; docs/control.md, *Re-closed spots*).

Everything it reads is what a robot has: the TCP's position above the table (kinematics), whether the gripper is
closed, and the mask. Numpy and OpenCV only. A close ends a stay: a sphere squeezed out of the fingers is closed on
again and again before it is held, and counting across those closes gave it up (``dynamics-shift``). Both counts
ship (``ParallaxConfig.hover_steps`` = 16, ``hover_closes`` = 6), with the low look that follows each spot given up
(``control.look``): alone, the hovered steps lowered a condition by one episode on validation episodes, and gained
little, the controller having nowhere better to go than its high search (docs/control.md, *Hovered spots*,
*Re-closed spots*, *Low look*).
"""

from __future__ import annotations

import cv2
import numpy as np

from grasp_s2r.control.wrist_geometry import GRIPPER_CLOSED_INDEX, TCP_INDEX, WristView
from grasp_s2r.sim.config import CameraConfig


class HoveredSpots:
    """One episode's hovered spots; ``filter(mask, proprio)`` at every step returns the mask without them."""

    def __init__(self, camera: CameraConfig, height_m: float, radius_m: float, steps: int, closes: int = 0):
        if height_m <= 0 or radius_m <= 0 or steps < 0 or closes < 0 or not (steps or closes):
            raise ValueError(f"hovered spots need height_m > 0, radius_m > 0, steps >= 0 and closes >= 0, not both 0; "
                             f"got {height_m}, {radius_m}, {steps}, {closes}")
        self.camera, self.height_m, self.radius_m = camera, height_m, radius_m
        self.steps, self.closes = steps, closes
        """Low open-gripper steps, and closes, at one point that make it a hovered spot (0: that count is off)."""
        self.reset()

    def reset(self) -> None:
        """A new episode: no spot hovered over."""
        self.spots = np.zeros((0, 2))
        """Table (x, y) in metres of each hovered spot."""
        self._anchor: np.ndarray | None = None
        """Table (x, y) where the current low stay began."""
        self._count = 0
        """Low, open-gripper steps within ``radius_m`` of the anchor since the gripper last closed."""
        self._close_xy = np.zeros((0, 2))
        """Table (x, y) of the TCP where each close of the episode began."""
        self._was_closed = False
        """Whether the gripper was closed at the last step (a close begins where it was not)."""

    def _count_close(self, tcp: np.ndarray) -> None:
        self._close_xy = np.vstack([self._close_xy, tcp[:2]])
        if np.count_nonzero(np.hypot(*(self._close_xy - tcp[:2]).T) <= self.radius_m) >= self.closes:
            self.spots = np.vstack([self.spots, tcp[:2]])

    def _count_step(self, tcp: np.ndarray, gripper_closed: bool) -> None:
        began_close, self._was_closed = gripper_closed and not self._was_closed, gripper_closed
        if began_close and self.closes:
            self._count_close(tcp)
        if gripper_closed:  # a close ends the stay: a sphere that slips is closed on again and again
            self._anchor, self._count = None, 0
            return
        if not self.steps:
            return
        if tcp[2] >= self.height_m:
            return
        if self._anchor is None or np.hypot(*(tcp[:2] - self._anchor)) > self.radius_m:
            self._anchor, self._count = tcp[:2].copy(), 0
        self._count += 1
        if self._count >= self.steps:
            self.spots = np.vstack([self.spots, self._anchor])
            self._anchor, self._count = None, 0

    def filter(self, mask: np.ndarray, proprio: np.ndarray) -> np.ndarray:
        """This step's mask bool (H, W) without the blobs on hovered spots; counts this step first."""
        p = np.asarray(proprio, dtype=float)
        tcp = p[TCP_INDEX]
        self._count_step(tcp, p[GRIPPER_CLOSED_INDEX] >= 0.5)
        mask = np.asarray(mask, dtype=bool)
        if not len(self.spots) or not mask.any():
            return mask
        n, labels, _, centroids = cv2.connectedComponentsWithStats(mask.astype(np.uint8), connectivity=8)
        points, on_table = WristView.at(tcp, self.camera).table_xy(np.asarray(centroids[1:n], dtype=float))
        near = np.hypot(*(points[:, None, :] - self.spots[None]).transpose(2, 0, 1)) <= self.radius_m
        drop = 1 + np.flatnonzero(on_table & near.any(axis=1))
        return mask & ~np.isin(labels, drop) if len(drop) else mask
