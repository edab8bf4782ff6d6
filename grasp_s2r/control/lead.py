"""Rolling lead: where the sphere rolls along the table, the controller's step gets the sphere's own step added.

A sphere that slips from the closing fingers rolls on (PyBullet gives it next to no rolling resistance: 1-9 cm/s for
the rest of an episode). The controller, like the expert it imitates, steers towards where it sees the sphere now,
a proportional step, so it trails a rolling sphere by its speed over its gain: about 6 mm at 2 cm/s, beyond the
fingers' reach when they arrive at the bottom, and it rises and comes down again, behind it each time
(docs/control.md, *Known limits*). :class:`RollingLead` estimates the sphere's step on the table from the mask's
last frames (the largest blob's centroid cast onto the plane of the sphere's centre, by kinematics: the camera's
pose from the TCP's position, ``control.wrist_geometry``) and adds ``lead_steps`` of it to the controller's x, y
action: the classic feed-forward that takes a proportional tracker's lag on a ramp away. It acts only while the
fingers are open and the TCP is low, on ``frames`` consecutive frames with the sphere in the mask, whose centroids
move on a straight line (every one within ``max_residual_m`` of the fitted one) by at least ``min_step_m`` a step:
a sphere at rest, or a lure and the sphere in turn, leave the controller's action as it is. Numpy and OpenCV only;
run by :class:`~grasp_s2r.control.parallax.ParallaxFilter`.
"""

from __future__ import annotations

import cv2
import numpy as np

from grasp_s2r.control.wrist_geometry import TCP_INDEX, WristView, fingers_open
from grasp_s2r.sim.config import CameraConfig, SceneConfig


class RollingLead:
    """One episode's sphere track; :meth:`update` with each step's mask, :meth:`adjust` the controller's action."""

    def __init__(self, scene: SceneConfig, camera: CameraConfig, frames: int, lead_steps: float = 1.0,
                 min_step_m: float = 0.001, max_step_m: float = 0.015, max_residual_m: float = 0.0015,
                 max_height_m: float = 0.08):
        if frames < 2 or lead_steps <= 0 or not 0 <= min_step_m < max_step_m or max_residual_m <= 0 \
                or max_height_m <= 0:
            raise ValueError(f"a rolling lead needs frames >= 2, lead_steps > 0, 0 <= min_step_m < max_step_m, "
                             f"max_residual_m > 0 and max_height_m > 0; got {frames}, {lead_steps}, {min_step_m}, "
                             f"{max_step_m}, {max_residual_m}, {max_height_m}")
        self.scene, self.camera, self.frames, self.lead_steps = scene, camera, frames, lead_steps
        self.min_step_m, self.max_step_m, self.max_residual_m = min_step_m, max_step_m, max_residual_m
        self.max_height_m = max_height_m
        self.reset()

    def reset(self) -> None:
        """A new episode: no track."""
        self._points: list[np.ndarray] = []
        """Table (x, y) of the sphere's centre, m, on the last consecutive frames that qualify."""
        self.leads = 0
        """Steps whose action got a lead this episode."""

    def update(self, mask: np.ndarray, proprio: np.ndarray) -> None:
        """This step's (filtered) mask bool (H, W) and proprio: extends the track or cuts it."""
        p = np.asarray(proprio, dtype=float)
        tcp = p[TCP_INDEX]
        mask = np.asarray(mask, dtype=bool)
        open_low = fingers_open(p, self.scene) and tcp[2] <= self.max_height_m
        if not open_low or not mask.any():
            self._points.clear()
            return
        n, _, stats, centroids = cv2.connectedComponentsWithStats(mask.astype(np.uint8), connectivity=8)
        largest = 1 + int(np.argmax(stats[1:n, cv2.CC_STAT_AREA]))
        xy, ahead = WristView.at(tcp, self.camera).table_xy(centroids[largest], self.scene.sphere_radius_m)
        if not ahead:
            self._points.clear()
            return
        self._points = [*self._points[-(self.frames - 1):], np.asarray(xy, dtype=float)]

    def step_m(self) -> np.ndarray | None:
        """The sphere's step on the table, m (2,), fitted over the last ``frames`` frames; None where there is no
        straight track at a step between ``min_step_m`` and ``max_step_m``."""
        if len(self._points) < self.frames:
            return None
        pts = np.stack(self._points)
        t = np.arange(len(pts), dtype=float) - (len(pts) - 1) / 2
        slope = (t[:, None] * (pts - pts.mean(0))).sum(0) / (t * t).sum()
        fitted = pts.mean(0) + t[:, None] * slope
        speed = float(np.hypot(*slope))
        if not self.min_step_m <= speed <= self.max_step_m \
                or np.hypot(*(pts - fitted).T).max() > self.max_residual_m:
            return None
        return slope

    def adjust(self, action: np.ndarray) -> np.ndarray | None:
        """The controller's ``action`` (ACTION_DIM,) with the lead added to its x, y (clipped to [-1, 1]), or None
        where there is no lead this step."""
        step = self.step_m()
        if step is None:
            return None
        out = np.array(action, dtype=float)
        out[:2] = np.clip(out[:2] + self.lead_steps * step / self.scene.max_action_step_m, -1.0, 1.0)
        self.leads += 1
        return out
