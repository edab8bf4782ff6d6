"""Randomized wrist-camera views of the simulated sphere and gripper, over the whole range the controller sees.

A view is drawn from its own seed: an episode's randomization (light, camera jitter), a wider
sphere appearance than episodes use, and a gripper pose from far approach to a closing grasp.
The PyBullet client is created lazily, inside the process that renders (DataLoader workers included).
Given photos, a view can also have a real photo as the table's texture *inside* the simulator, so that its
perspective, scale and the fingers' occlusion move with the camera as they would over a real table.
"""

from __future__ import annotations

from dataclasses import dataclass

import cv2
import numpy as np
import pybullet as pb

from grasp_s2r.sim.camera import Frame, camera_pose_world
from grasp_s2r.sim.config import EnvConfig
from grasp_s2r.sim.env import GraspEnv
from grasp_s2r.sim.robot import PALM_LINK
from grasp_s2r.sim.table_texture import (
    PHOTO_TEXTURE_TILE_PX,
    load_textures,
    photo_texture,
    photo_textures,
    set_table_texture,
)
from grasp_s2r.vision.images.backgrounds import recolor
from grasp_s2r.vision.images.reshade import grey_albedo

__all__ = ["PHOTO_TEXTURE_TILE_PX", "SimViewSampler", "ViewConfig", "photo_texture"]

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
    grey_color_prob: float = 0.0
    """Share of spheres grey or nearly so (:func:`reshade.grey_albedo`), drawn before the others; 0 draws nothing."""
    specular_max: float = 1.0
    """Largest specular coefficient of the sphere's material."""
    far_view_prob: float = 0.0
    """Share of views from the heights an episode starts and searches at (``far_view_height_m``, uniform) instead
    of the log-uniform ones: the sphere 2-4 px wide and the most table in view; 0 draws nothing (the recipe's views
    unchanged)."""
    far_view_height_m: tuple[float, float] = (0.15, 0.25)
    """TCP heights above the table of the far views: the start (0.18 m +- its jitter) and the search (0.22 m)."""
    table_colour_prob: float = 0.0
    """Share of photo-table views whose sphere takes the table's colour (the mean of a random patch of the table's
    texture, jittered: :func:`_table_colour`): the camouflaged sphere an episode shows by chance; 0 draws nothing."""
    photo_textures: int = 32
    """Table textures cut from the photos for ``photo_table`` views (texture ``k`` from photo ``k % len(photos)``;
    loaded once per rendering process): with more photos than textures only the first ones are tables."""

    def __post_init__(self) -> None:
        if not 0.0 < self.min_tcp_height_m < self.max_tcp_height_m:
            raise ValueError("need 0 < min_tcp_height_m < max_tcp_height_m")
        if not 0.0 <= self.empty_prob <= 1.0:
            raise ValueError(f"empty_prob must be in [0, 1], got {self.empty_prob}")
        if not 0.0 <= self.far_view_prob <= 1.0:
            raise ValueError(f"far_view_prob must be in [0, 1], got {self.far_view_prob}")
        lo, hi = self.far_view_height_m
        if not 0.0 < lo <= hi:
            raise ValueError(f"far_view_height_m must be 0 < LO <= HI, got {self.far_view_height_m}")
        if not 0.0 <= self.table_colour_prob <= 1.0:
            raise ValueError(f"table_colour_prob must be in [0, 1], got {self.table_colour_prob}")
        if self.photo_textures < 1:
            raise ValueError(f"photo_textures must be >= 1, got {self.photo_textures}")


def _sphere_rgb(rng: np.random.Generator, dull_prob: float, grey_prob: float = 0.0) -> np.ndarray:
    if grey_prob > 0 and rng.random() < grey_prob:
        return grey_albedo(rng)
    if rng.random() < dull_prob:
        return rng.uniform(0.0, 1.0, size=3)
    hsv = np.array([[[rng.uniform(0, 180), rng.uniform(90, 255), rng.uniform(80, 255)]]], dtype=np.uint8)
    return cv2.cvtColor(hsv, cv2.COLOR_HSV2RGB)[0, 0] / 255.0


def _table_colour(texture_rgb: np.ndarray, grey: float, rng: np.random.Generator) -> np.ndarray:
    """A sphere colour like the table's (float RGB in [0, 1]): the mean of a random eighth of the texture (the
    texture spans the table, the camera sees a few cm of it), times the table's grey, 0.8-1.4 brighter (the lit
    sphere's shaded half darkens it) and 0.9-1.1 a channel."""
    h, w = texture_rgb.shape[:2]
    y, x = int(rng.integers(0, h - h // 8 + 1)), int(rng.integers(0, w - w // 8 + 1))
    patch = texture_rgb[y:y + h // 8, x:x + w // 8].reshape(-1, 3).mean(axis=0) / 255.0
    return np.clip(patch * grey * rng.uniform(0.8, 1.4) * rng.uniform(0.9, 1.1, size=3), 0.0, 1.0)


_RASTER_OFFSET_PX = (0.5, -0.5)


class SimViewSampler:
    """Renders one randomized view per seed; owns a :class:`GraspEnv` made on first use.

    ``table_photos``: photos for :meth:`render` ``photo_table=True``; ``n_photo_textures`` crops of them are loaded
    as textures once per client (crop ``k`` from ``texture_seed`` and ``k``), a ``recolor_prob`` share of them with
    randomized colours (:func:`~grasp_s2r.vision.images.backgrounds.recolor`, training only: ``--recolor-prob``).
    """

    def __init__(self, env_config: EnvConfig, view: ViewConfig, table_photos: list[np.ndarray] | None = None,
                 n_photo_textures: int | None = None, texture_seed: int = 0, recolor_prob: float = 0.0):
        self.env_config = env_config
        self.view = view
        self.table_photos = table_photos or []
        self.n_photo_textures = view.photo_textures if n_photo_textures is None else n_photo_textures
        self.texture_seed = texture_seed
        self.recolor_prob = float(recolor_prob)
        self._env: GraspEnv | None = None
        self._photo_textures: list[int] = []
        self._photo_texture_rgb: list[np.ndarray] = []

    @property
    def env(self) -> GraspEnv:
        if self._env is None:
            self._env = GraspEnv(self.env_config)
        return self._env

    def _photo_texture_ids(self) -> list[int]:
        if not self._photo_textures:
            if not self.table_photos:
                raise ValueError("photo_table views need table_photos")
            textures = photo_textures(self.table_photos, self.n_photo_textures, self.texture_seed)
            if self.recolor_prob > 0:  # texture k's own stream: the crops stay those of recolor_prob 0
                rngs = [np.random.default_rng([self.texture_seed, k, 1]) for k in range(len(textures))]
                textures = [recolor(t, r) if r.random() < self.recolor_prob else t for t, r in zip(textures, rngs)]
            self._photo_textures = load_textures(self.env.client, textures)
            self._photo_texture_rgb = textures
        return self._photo_textures

    def sphere_circle_px(self) -> tuple[float, float, float]:
        """The sphere's image in the current view as a circle (centre x, centre y, radius) in pixels.

        Pinhole projection of the sphere's centre through the wrist camera's pose (the env's own); the radius is
        the sphere's angular radius times the focal length. Pixel (0, 0)'s top-left corner is (0, 0).
        """
        env = self.env
        cam, p = env.config.camera, env.params
        palm_pos, palm_quat = env.robot.link_pose_world(PALM_LINK)
        eye, target, up = camera_pose_world(palm_pos, palm_quat, cam, np.asarray(p.camera_mount_jitter_m),
                                            np.asarray(p.camera_look_jitter_m))
        forward = (target - eye) / np.linalg.norm(target - eye)
        right = np.cross(forward, up)
        right /= np.linalg.norm(right)
        image_up = np.cross(right, forward)
        d = env.sphere_pos_world_m() - eye
        depth = max(float(d @ forward), 1e-6)
        f_px = 0.5 * cam.height_px / np.tan(np.deg2rad(cam.fov_deg) / 2)
        radius_m = env.config.scene.sphere_radius_m
        # TinyRenderer's raster is offset from the ideal pinhole by half a pixel in x and y (measured: the GT mask's
        # centroid sits +0.50 / -0.45 px from the ideal projection, median over 257 unoccluded spheres)
        cx = 0.5 * cam.width_px + f_px * float(d @ right) / depth + _RASTER_OFFSET_PX[0]
        cy = 0.5 * cam.height_px - f_px * float(d @ image_up) / depth + _RASTER_OFFSET_PX[1]
        return cx, cy, f_px * radius_m / np.sqrt(max(float(d @ d) - radius_m**2, 1e-12))

    @property
    def image_hw(self) -> tuple[int, int]:
        return self.env_config.camera.height_px, self.env_config.camera.width_px

    def render(self, episode_seed: int, rng: np.random.Generator,
               photo_table: np.random.Generator | None = None) -> Frame:
        """One view: the episode of ``episode_seed`` (light, camera jitter) and a pose/appearance from ``rng``.

        ``photo_table``: a generator that picks one of the photo textures (and its brightness) for the table
        instead of the episode's procedural one; ``rng``'s draws are the same either way.
        """
        env, v = self.env, self.view
        s = env.config.scene
        env.reset(episode_seed)
        if photo_table is not None:
            ids = self._photo_texture_ids()
            grey = float(photo_table.uniform(0.7, 1.0))
            k = int(photo_table.integers(len(ids)))
            set_table_texture(env, ids[k], grey)
        rgba = [*_sphere_rgb(rng, v.dull_color_prob, v.grey_color_prob), 1.0]
        if photo_table is not None and v.table_colour_prob > 0 and photo_table.random() < v.table_colour_prob:
            rgba[:3] = _table_colour(self._photo_texture_rgb[k], grey, photo_table)
        spec = float(rng.uniform(0.0, v.specular_max))
        pb.changeVisualShape(env.sphere_uid, -1, rgbaColor=rgba, specularColor=[spec] * 3,
                             physicsClientId=env.client)
        anchor = np.array([*env.params.sphere_xy_world_m, s.table_height_m + s.sphere_radius_m])
        sphere = anchor.copy()
        if rng.random() < v.empty_prob:
            sphere[:2] = _FAR_AWAY_WORLD_M
        pb.resetBasePositionAndOrientation(env.sphere_uid, sphere.tolist(), [0, 0, 0, 1], physicsClientId=env.client)
        # heights: log-uniform, so the many close-up views (where the mask matters most) are well covered; a far
        # view (drawn only when asked for, so the recipe's stream is unchanged) is at an episode's start or search
        if v.far_view_prob > 0 and rng.random() < v.far_view_prob:
            h = float(rng.uniform(*v.far_view_height_m))
        else:
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
            self._photo_textures = []
            self._photo_texture_rgb = []
