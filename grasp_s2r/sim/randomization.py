"""Per-episode domain randomization: sampled from the episode seed, recorded, re-appliable."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import cv2
import numpy as np

from grasp_s2r.configs import from_dict, to_dict
from grasp_s2r.sim.camera import Lighting
from grasp_s2r.sim.config import EnvConfig

NOMINAL_SPHERE_RGB = (0.85, 0.1, 0.1)
NOMINAL_TABLE_RGB = (0.55, 0.45, 0.35)
N_TABLE_TEXTURES = 16
"""Procedural table textures made per client; an episode picks one by index (-1: plain)."""
LOOK_JITTER_LEVER_M = 0.16
"""An angle jitter of the camera's look-at direction is an offset of the look-at point times this lever."""


@dataclass(frozen=True)
class EpisodeParams:
    """Everything random about one episode; with the seed it reproduces the episode's start."""

    sphere_xy_world_m: tuple[float, float]
    start_tcp_offset_m: tuple[float, float, float]
    sphere_rgb: tuple[float, float, float]
    table_rgb: tuple[float, float, float]
    table_texture: int
    lighting: Lighting
    camera_mount_jitter_m: tuple[float, float, float]
    camera_look_jitter_m: tuple[float, float, float]

    def to_dict(self) -> dict[str, Any]:
        return to_dict(self)

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> EpisodeParams:
        return from_dict(cls, d)


def _tuple(a: np.ndarray) -> tuple[float, ...]:
    return tuple(float(x) for x in a)


def _random_saturated_rgb(rng: np.random.Generator) -> np.ndarray:
    hsv = np.array([[[rng.uniform(0, 180), rng.uniform(120, 255), rng.uniform(120, 255)]]], dtype=np.uint8)
    return cv2.cvtColor(hsv, cv2.COLOR_HSV2RGB)[0, 0] / 255.0


def sample_episode_params(cfg: EnvConfig, rng: np.random.Generator) -> EpisodeParams:
    """Draw one episode's randomization. The draw order is fixed: do not reorder (seeds would change)."""
    s, r = cfg.scene, cfg.randomization
    cx, cy = s.spawn_center_world_m
    sphere_xy = rng.uniform(-s.spawn_half_extent_m, s.spawn_half_extent_m, size=2) + (cx, cy)
    start = rng.uniform(-1, 1, size=3) * r.arm_start_jitter_m
    sphere_rgb = _random_saturated_rgb(rng) if r.sphere_color else np.array(NOMINAL_SPHERE_RGB)
    if r.table_texture:
        table_rgb = rng.uniform(0.25, 1.0, size=3)
        texture = int(rng.integers(-1, N_TABLE_TEXTURES))
    else:
        table_rgb, texture = np.array(NOMINAL_TABLE_RGB), -1
    if r.light_direction:
        az, el = rng.uniform(0, 2 * np.pi), rng.uniform(np.deg2rad(25), np.deg2rad(90))
        light = Lighting(
            direction=_tuple(np.array([np.cos(az) * np.cos(el), np.sin(az) * np.cos(el), np.sin(el)])),
            ambient=float(rng.uniform(0.4, 0.8)), diffuse=float(rng.uniform(0.3, 0.7)),
            specular=float(rng.uniform(0.0, 0.3)),
        )
    else:
        light = Lighting()
    mount, look = sample_camera_jitter(rng, r.camera_jitter_m, r.camera_jitter_deg)
    return EpisodeParams(
        sphere_xy_world_m=_tuple(sphere_xy), start_tcp_offset_m=_tuple(start),
        sphere_rgb=_tuple(sphere_rgb), table_rgb=_tuple(table_rgb), table_texture=texture,
        lighting=light, camera_mount_jitter_m=_tuple(mount), camera_look_jitter_m=_tuple(look),
    )


def sample_camera_jitter(rng: np.random.Generator, jitter_m: float, jitter_deg: float) -> tuple[np.ndarray, np.ndarray]:
    """(mount jitter (3,) m, look-at jitter (3,) m) of the wrist camera, each axis uniform in +-``jitter_m`` and
    +-``jitter_deg`` (an angle of the look-at direction, expressed as an offset of the look-at point)."""
    mount = rng.uniform(-1, 1, size=3) * jitter_m
    look = rng.uniform(-1, 1, size=3) * np.tan(np.deg2rad(jitter_deg)) * LOOK_JITTER_LEVER_M
    return mount, look


def make_table_texture(index: int, size_px: int = 64) -> np.ndarray:
    """Procedural grey-level texture, uint8 (size, size, 3); deterministic in ``index``."""
    rng = np.random.default_rng(10_000 + index)
    kind = index % 4
    yy, xx = np.mgrid[0:size_px, 0:size_px] / size_px
    if kind == 0:  # smooth noise (wood / paper)
        g = cv2.resize(rng.uniform(0, 1, (8, 8)), (size_px, size_px), interpolation=cv2.INTER_CUBIC)
    elif kind == 1:  # stripes
        f = rng.uniform(3, 12)
        g = 0.5 + 0.5 * np.sin(2 * np.pi * f * (xx * np.cos(index) + yy * np.sin(index)))
    elif kind == 2:  # checker
        n = int(rng.integers(2, 8))
        g = ((np.floor(xx * n) + np.floor(yy * n)) % 2).astype(float)
    else:  # fine grain
        g = rng.uniform(0, 1, (size_px, size_px))
    g = 0.55 + 0.45 * (g - g.min()) / max(float(np.ptp(g)), 1e-6)
    return np.repeat((g * 255).astype(np.uint8)[:, :, None], 3, axis=2)
