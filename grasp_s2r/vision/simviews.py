"""Randomized wrist-camera views of the simulated sphere and gripper, over the whole range the controller sees.

A view is drawn from its own seed: an episode's randomization (light, camera jitter), a wider
sphere appearance than episodes use, and a gripper pose from far approach to a closing grasp.
The PyBullet client is created lazily, inside the process that renders (DataLoader workers included).
"""

from __future__ import annotations

from dataclasses import dataclass

import cv2
import numpy as np
import pybullet as pb

from grasp_s2r.sim.camera import Frame
from grasp_s2r.sim.config import EnvConfig
from grasp_s2r.sim.env import GraspEnv

_FAR_AWAY_WORLD_M = (5.0, 5.0)
"""Where the sphere goes for a view without a target (far outside any camera view)."""


@dataclass(frozen=True)
class ViewConfig:
    """How sim views are sampled (heights above the table, horizontal offsets, sphere appearance)."""

    min_tcp_height_m: float = 0.006
    """Lowest TCP height above the table (closing on the sphere)."""
    max_tcp_height_m: float = 0.21
    """Highest TCP height above the table (far approach)."""
    max_offset_m: float = 0.1
    """Largest horizontal distance between the TCP and the sphere."""
    near_offset_prob: float = 0.6
    """Share of views whose offset is small (sphere near the gripper axis, as while tracking it)."""
    close_fingers_below_m: float = 0.02
    """Below this TCP height the fingers may be partly closed."""
    empty_prob: float = 0.1
    """Share of views without a sphere (label all zero): false positives are learned and measured."""
    dull_color_prob: float = 0.3
    """Share of spheres with any RGB (dull, grey, dark, white) instead of a saturated colour."""
    specular_max: float = 1.0
    """Largest specular coefficient of the sphere's material."""

    def __post_init__(self) -> None:
        if not 0.0 < self.min_tcp_height_m < self.max_tcp_height_m:
            raise ValueError("need 0 < min_tcp_height_m < max_tcp_height_m")
        if not 0.0 <= self.empty_prob <= 1.0:
            raise ValueError(f"empty_prob must be in [0, 1], got {self.empty_prob}")


def _sphere_rgb(rng: np.random.Generator, dull_prob: float) -> np.ndarray:
    if rng.random() < dull_prob:
        return rng.uniform(0.0, 1.0, size=3)
    hsv = np.array([[[rng.uniform(0, 180), rng.uniform(90, 255), rng.uniform(80, 255)]]], dtype=np.uint8)
    return cv2.cvtColor(hsv, cv2.COLOR_HSV2RGB)[0, 0] / 255.0


class SimViewSampler:
    """Renders one randomized view per seed; owns a :class:`GraspEnv` made on first use."""

    def __init__(self, env_config: EnvConfig, view: ViewConfig):
        self.env_config = env_config
        self.view = view
        self._env: GraspEnv | None = None

    @property
    def env(self) -> GraspEnv:
        if self._env is None:
            self._env = GraspEnv(self.env_config)
        return self._env

    @property
    def image_hw(self) -> tuple[int, int]:
        return self.env_config.camera.height_px, self.env_config.camera.width_px

    def render(self, episode_seed: int, rng: np.random.Generator) -> Frame:
        """One view: the episode of ``episode_seed`` (light, camera jitter) and a pose/appearance from ``rng``."""
        env, v = self.env, self.view
        s = env.config.scene
        env.reset(episode_seed)
        rgba = [*_sphere_rgb(rng, v.dull_color_prob), 1.0]
        spec = float(rng.uniform(0.0, v.specular_max))
        pb.changeVisualShape(env.sphere_uid, -1, rgbaColor=rgba, specularColor=[spec] * 3,
                             physicsClientId=env.client)
        anchor = np.array([*env.params.sphere_xy_world_m, s.table_height_m + s.sphere_radius_m])
        sphere = anchor.copy()
        if rng.random() < v.empty_prob:
            sphere[:2] = _FAR_AWAY_WORLD_M
        pb.resetBasePositionAndOrientation(env.sphere_uid, sphere.tolist(), [0, 0, 0, 1], physicsClientId=env.client)
        # heights: log-uniform, so the many close-up views (where the mask matters most) are well covered
        h = float(np.exp(rng.uniform(np.log(v.min_tcp_height_m), np.log(v.max_tcp_height_m))))
        if rng.random() < v.near_offset_prob:
            radius = rng.uniform(0.0, 0.004 + 0.3 * h)
        else:
            radius = rng.uniform(0.0, v.max_offset_m)
        angle = rng.uniform(0.0, 2 * np.pi)
        tcp = anchor + [radius * np.cos(angle), radius * np.sin(angle), h - s.sphere_radius_m]
        finger_q = s.finger_open_m
        if h < v.close_fingers_below_m and rng.random() < 0.5:
            finger_q = float(rng.uniform(0.25, 1.0) * s.finger_open_m)
        env.robot.teleport(tcp, finger_q)
        return env.render()

    def close(self) -> None:
        if self._env is not None:
            self._env.close()
            self._env = None
