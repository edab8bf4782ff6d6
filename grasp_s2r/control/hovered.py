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
for a lost sphere.

Everything it reads is what a robot has: the TCP's position above the table (kinematics), whether the gripper is
closed, and the mask. Numpy and OpenCV only. Off in the shipped filter (``ParallaxConfig.hover_steps`` = 0): on
validation episodes it grasps 2 more of 300 as the table and 1 fewer behind the sphere (docs/control.md, *Hovered
spots*). A close ends a stay: a sphere squeezed out of the fingers is closed on again and again before it is held,
and counting across those closes gave it up (``dynamics-shift``).
"""

from __future__ import annotations

import cv2
import numpy as np

from grasp_s2r.control.wrist_geometry import TCP_INDEX, WristView
from grasp_s2r.sim.config import CameraConfig
from grasp_s2r.sim.env import PROPRIO_NAMES

_CLOSED = PROPRIO_NAMES.index("gripper_closed")


class HoveredSpots:
    """One episode's hovered spots; ``filter(mask, proprio)`` at every step returns the mask without them."""

    def __init__(self, camera: CameraConfig, height_m: float, radius_m: float, steps: int):
        if height_m <= 0 or radius_m <= 0 or steps < 1:
            raise ValueError(f"hovered spots need height_m > 0, radius_m > 0 and steps >= 1, got {height_m}, "
                             f"{radius_m}, {steps}")
        self.camera, self.height_m, self.radius_m, self.steps = camera, height_m, radius_m, steps
        self.reset()

    def reset(self) -> None:
        """A new episode: no spot hovered over."""
        self.spots = np.zeros((0, 2))
        """Table (x, y) in metres of each hovered spot."""
        self._anchor: np.ndarray | None = None
        """Table (x, y) where the current low stay began."""
        self._count = 0
        """Low, open-gripper steps within ``radius_m`` of the anchor since the gripper last closed."""

    def _count_step(self, tcp: np.ndarray, gripper_closed: bool) -> None:
        if gripper_closed:  # a close ends the stay: a sphere that slips is closed on again and again
            self._anchor, self._count = None, 0
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
        self._count_step(tcp, p[_CLOSED] >= 0.5)
        mask = np.asarray(mask, dtype=bool)
        if not len(self.spots) or not mask.any():
            return mask
        n, labels, _, centroids = cv2.connectedComponentsWithStats(mask.astype(np.uint8), connectivity=8)
        points, on_table = WristView.at(tcp, self.camera).table_xy(np.asarray(centroids[1:n], dtype=float))
        near = np.hypot(*(points[:, None, :] - self.spots[None]).transpose(2, 0, 1)) <= self.radius_m
        drop = 1 + np.flatnonzero(on_table & near.any(axis=1))
        return mask & ~np.isin(labels, drop) if len(drop) else mask
