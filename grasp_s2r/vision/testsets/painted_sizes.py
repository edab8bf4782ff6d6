"""The sphere's size in the camera: the pinhole model, and the camera distances of the expert episodes' own frames
(what the ``painted`` test suite draws its sizes from, :mod:`grasp_s2r.vision.testsets.painted`). Test data only,
as the rest of ``testsets``."""

from __future__ import annotations

import math

from grasp_s2r.sim.config import CameraConfig, SceneConfig

QUANTILE_LEVELS = (0.0, 0.01, *(i / 20 for i in range(1, 20)), 0.99, 1.0)
"""Probability levels of :data:`EPISODE_DISTANCE_QUANTILES_M`."""
EPISODE_DISTANCE_QUANTILES_M = (
    0.0663, 0.0683, 0.0713, 0.0734, 0.0752, 0.0777, 0.0822, 0.0876, 0.0942, 0.1038, 0.1154, 0.1272, 0.1403, 0.1505,
    0.1682, 0.1799, 0.1866, 0.2029, 0.2128, 0.2243, 0.2379, 0.2747, 0.3365,
)
"""Camera-to-sphere distances (m, nearest first) at :data:`QUANTILE_LEVELS` over the frames of 200 expert episodes
that show the sphere, from the width of its ground-truth mask (the pinhole distance of a disc of its area; fingers in
front of it count as the camera sees them). Measured by ``python benchmarks/sphere_sizes.py``, which checks it."""


def focal_px(camera: CameraConfig, height_px: int | None = None) -> float:
    """Pinhole focal length in pixels, ``(height / 2) / tan(fov / 2)``; ``height_px`` defaults to the camera's
    (another height: the same lens at another resolution)."""
    h = camera.height_px if height_px is None else height_px
    return (h / 2.0) / math.tan(math.radians(camera.fov_deg) / 2.0)


def sphere_diameter_px(distance_m: float, camera: CameraConfig, scene: SceneConfig,
                       height_px: int | None = None) -> float:
    """Projected sphere diameter in pixels at ``distance_m`` from the camera: ``f_px * diameter_m / distance_m``."""
    return focal_px(camera, height_px) * scene.sphere_diameter_m / distance_m


def distance_for_diameter_px(diameter_px: float, camera: CameraConfig, scene: SceneConfig,
                             height_px: int | None = None) -> float:
    """The inverse of :func:`sphere_diameter_px`: the camera distance (m) at which the sphere spans ``diameter_px``."""
    return focal_px(camera, height_px) * scene.sphere_diameter_m / diameter_px
