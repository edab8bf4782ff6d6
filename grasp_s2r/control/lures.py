"""Lure rejection: table spots the controller's mask keeps showing without a grasp are masked out for the episode.

On a photographed table the segmenter's typical error is a *lure*: a red flower or a spot on an apple, about the
sphere's size, that the mask shows frame after frame. The controller goes to it and stays there for the rest of
the episode (it hovers, or closes on nothing and re-tries), while the sphere lies a few centimetres away. A sphere
that the controller follows is grasped within a few seconds (the shipped system's successes take 14 steps at the
median); a spot the mask has shown for many steps without a grasp is most likely not the sphere.

:class:`LureMemory` keeps, per episode, the *sites* the mask has shown: each connected blob of the controller's
input mask is projected through the wrist camera onto the table plane (:func:`pixel_table_xy`: the gripper points
straight down, so the camera's pose follows from the TCP's position alone) and counted at the site within
``radius_m`` of it. A site shown on ``dwell_steps`` steps is *rejected*: from then on :meth:`LureMemory.suppression`
masks out every pixel whose table point lies within ``radius_m`` of it, wherever the camera is. The controller then
acts as it does when the mask shows nothing there (its episode memory sends it back, then searching) and finds the
sphere, or another lure, which is rejected in turn.

Numpy and OpenCV only (the env worker processes never import torch). The same class runs in the batched rollouts
(``runtime.pool``) and in ``GraspAgent``, so what is evaluated is what is deployed.
"""

from __future__ import annotations

from dataclasses import dataclass

import cv2
import numpy as np

from grasp_s2r.sim.config import CameraConfig

PALM_ABOVE_TCP_M = 0.055
"""The palm link's origin above the TCP (the gripper points straight down): measured in the simulator."""
_R_WORLD_PALM = np.diag([1.0, -1.0, -1.0])
"""Palm frame in the table frame with the gripper pointing down (palm +x = table +x, palm +z = table -z)."""


def pixel_table_xy(tcp_above_table_m: np.ndarray, camera: CameraConfig) -> tuple[np.ndarray, np.ndarray]:
    """Where each camera pixel's ray meets the table plane: float (H, W, 2) table (x, y) in metres, and bool (H, W)
    whether the ray meets it in front of the camera.

    ``tcp_above_table_m`` (3,): the TCP's table-frame x, y (metres) and its height above the table top (metres). The
    camera as ``camera`` mounts it on the palm, without the per-episode jitter the simulator adds (a few mm).
    """
    tcp = np.asarray(tcp_above_table_m, dtype=float)
    palm = tcp + np.array([0.0, 0.0, PALM_ABOVE_TCP_M])
    eye = palm + _R_WORLD_PALM @ np.asarray(camera.mount_offset_palm_m, dtype=float)
    target = palm + _R_WORLD_PALM @ np.asarray(camera.look_at_palm_m, dtype=float)
    forward = (target - eye) / np.linalg.norm(target - eye)
    right = np.cross(forward, _R_WORLD_PALM @ np.array([1.0, 0.0, 0.0]))  # image top = palm +x
    right /= np.linalg.norm(right)
    up = np.cross(right, forward)
    h, w = camera.height_px, camera.width_px
    tan_half = np.tan(np.radians(camera.fov_deg) / 2)
    xs = (2 * (np.arange(w) + 0.5) / w - 1) * tan_half * (w / h)
    ys = (1 - 2 * (np.arange(h) + 0.5) / h) * tan_half
    rays = forward + xs[None, :, None] * right + ys[:, None, None] * up
    with np.errstate(divide="ignore", invalid="ignore"):
        reach = -eye[2] / rays[..., 2]
    ahead = np.isfinite(reach) & (reach > 0)
    points = eye[:2] + np.where(ahead, reach, 0.0)[..., None] * rays[..., :2]
    return points, ahead


@dataclass(frozen=True)
class LureConfig:
    """When a site of the mask is rejected; ``dwell_steps`` 0 turns rejection off."""

    dwell_steps: int = 25
    """Steps a site is shown by the mask before it is rejected."""
    radius_m: float = 0.02
    """Blobs within this distance on the table are one site; rejected sites mask out this radius."""

    def __post_init__(self) -> None:
        if self.dwell_steps < 0:
            raise ValueError(f"dwell_steps must be >= 0 (0: no rejection), got {self.dwell_steps}")
        if self.radius_m <= 0:
            raise ValueError(f"radius_m must be positive, got {self.radius_m}")


class LureMemory:
    """One episode's sites; :meth:`suppression` before the controller acts, :meth:`update` after."""

    def __init__(self, config: LureConfig | None = None, camera: CameraConfig | None = None):
        self.config = config or LureConfig()
        self.camera = camera or CameraConfig()
        self.reset()

    def reset(self) -> None:
        """A new episode: no site seen."""
        self.sites = np.zeros((0, 2))
        """Table (x, y) of each site, metres."""
        self.counts = np.zeros(0, dtype=int)
        """Steps each site was shown."""

    @property
    def rejected(self) -> np.ndarray:
        """Table (x, y) of the rejected sites, metres (K, 2)."""
        if not self.config.dwell_steps:
            return np.zeros((0, 2))
        return self.sites[self.counts >= self.config.dwell_steps]

    def suppression(self, proprio: np.ndarray) -> np.ndarray:
        """bool (H, W): the pixels to take out of this step's mask (those on a rejected site)."""
        rejected = self.rejected
        shape = (self.camera.height_px, self.camera.width_px)
        if not len(rejected):
            return np.zeros(shape, dtype=bool)
        points, ahead = pixel_table_xy(np.asarray(proprio, dtype=float)[:3], self.camera)
        d2 = ((points[:, :, None, :] - rejected[None, None]) ** 2).sum(-1).min(-1)
        return ahead & (d2 < self.config.radius_m ** 2)

    def update(self, input_mask: np.ndarray, proprio: np.ndarray) -> None:
        """After a step: the controller's input mask (H, W) and the proprio (5,) it was seen with."""
        if not self.config.dwell_steps:
            return
        mask = np.asarray(input_mask, dtype=np.uint8)
        if not mask.any():
            return
        points, ahead = pixel_table_xy(np.asarray(proprio, dtype=float)[:3], self.camera)
        n, labels = cv2.connectedComponents(mask, connectivity=8)
        shown = np.zeros(len(self.sites), dtype=bool)
        for k in range(1, n):
            blob = (labels == k) & ahead
            if not blob.any():
                continue
            centre = points[blob].mean(0)
            if len(self.sites):
                dist = np.hypot(*(self.sites - centre).T)
                near = int(np.argmin(dist))
                if dist[near] < self.config.radius_m:
                    shown[near] = True
                    continue
            self.sites = np.vstack([self.sites, centre])
            self.counts = np.append(self.counts, 0)
            shown = np.append(shown, True)
        self.counts[shown] += 1


def size_gate(mask: np.ndarray, proprio: np.ndarray, camera: CameraConfig, min_m: float, max_m: float) -> np.ndarray:
    """PROTOTYPE: drop blobs whose table-plane equivalent diameter is outside [min_m, max_m]."""
    m = np.asarray(mask, dtype=np.uint8)
    if not m.any():
        return np.asarray(mask, bool)
    xy, ok = pixel_table_xy(np.asarray(proprio, float)[:3], camera)
    gx, gy = np.gradient(xy, axis=1), np.gradient(xy, axis=0)
    area = np.abs(gx[..., 0] * gy[..., 1] - gx[..., 1] * gy[..., 0])
    n, lab = cv2.connectedComponents(m, connectivity=8)
    out = np.zeros(m.shape, bool)
    for k in range(1, n):
        b = lab == k
        if not (b & ok).any():
            continue
        diam = 2 * np.sqrt(area[b & ok].sum() / np.pi)
        if min_m <= diam <= max_m:
            out |= b
    return out
