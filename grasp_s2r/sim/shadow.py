"""The sphere's shadow on the table, which TinyRenderer does not draw.

PyBullet's TinyRenderer has a shadow map (``getCameraImage(shadow=1)``), but at the wrist camera's sizes it draws
no shadow of a 1.37 cm sphere at any light elevation (measured: the same pixels with and without it; only the
gripper's shadow shows). A real sphere on a table always has two: the shadow it casts away from the light, and the
contact shadow where it meets the table (the ambient light it hides). :func:`shade_sphere_shadow` draws both on the
rendered image, per pixel from the depth buffer and the light of the episode, so that a sphere in the table's own
colour keeps the cue it has in a photograph.

Shading model (TinyRenderer's own: albedo x (ambient + diffuse x max(0, n . l)) + specular): a table point ``X`` with
normal ``n = +z`` keeps ``(ambient x (1 - occlusion) + diffuse x (n . l) x (1 - cast)) / (ambient + diffuse x
(n . l))`` of its colour, where ``cast`` is 1 where the ray from ``X`` towards the light meets the sphere (softened
over a penumbra of ``PENUMBRA`` of the radius either side of its edge) and ``occlusion`` is the share of ``X``'s
sky the sphere covers (``(r / d)^2 cos(theta)``, ``d`` the distance to the sphere's centre, ``theta`` its angle from
the normal: 1 at the point of contact).
"""

from __future__ import annotations

import numpy as np

PENUMBRA = 0.15
"""Half-width of the cast shadow's soft edge, as a share of the sphere's radius (an area light, not a point)."""


def world_points_m(depth: np.ndarray, view_matrix: list[float], projection_matrix: list[float]) -> np.ndarray:
    """The world point (m) each pixel shows, float (H, W, 3), from PyBullet's depth buffer (values in [0, 1], the
    OpenGL convention) and the view and projection matrices it was rendered with (16 floats each, column-major)."""
    h, w = depth.shape
    view = np.asarray(view_matrix, dtype=np.float64).reshape(4, 4).T  # column-major -> row-major
    proj = np.asarray(projection_matrix, dtype=np.float64).reshape(4, 4).T
    x_ndc = (2.0 * (np.arange(w) + 0.5) / w - 1.0)[None, :].repeat(h, 0)
    y_ndc = (1.0 - 2.0 * (np.arange(h) + 0.5) / h)[:, None].repeat(w, 1)  # image row 0 is the top
    ndc = np.stack([x_ndc, y_ndc, 2.0 * np.asarray(depth, dtype=np.float64) - 1.0, np.ones((h, w))], -1)
    world = ndc @ np.linalg.inv(proj @ view).T
    return world[..., :3] / world[..., 3:4]


def sphere_shadow_gain(points_m: np.ndarray, centre_m: np.ndarray, radius_m: float,
                       light_direction: np.ndarray, ambient: float, diffuse: float) -> np.ndarray:
    """The share of its colour each table point keeps in the sphere's cast and contact shadows, float (H, W) in
    (0, 1]; ``light_direction`` points from the scene towards the light (PyBullet's ``lightDirection``)."""
    light = np.asarray(light_direction, dtype=np.float64)
    light = light / np.linalg.norm(light)
    to_centre = np.asarray(centre_m, dtype=np.float64) - points_m  # (H, W, 3)
    along = to_centre @ light
    off_ray = np.sqrt(np.maximum((to_centre**2).sum(-1) - along**2, 0.0))
    edge = np.clip((radius_m * (1 + PENUMBRA) - off_ray) / (2 * PENUMBRA * radius_m), 0.0, 1.0)
    cast = np.where(along > 0, edge, 0.0)
    dist = np.maximum(np.linalg.norm(to_centre, axis=-1), radius_m)
    occlusion = np.clip((radius_m / dist) ** 2 * np.maximum(to_centre[..., 2] / dist, 0.0), 0.0, 1.0)
    n_dot_l = max(float(light[2]), 0.0)
    lit = ambient + diffuse * n_dot_l
    if lit <= 0:
        return np.ones(points_m.shape[:2])
    return (ambient * (1.0 - occlusion) + diffuse * n_dot_l * (1.0 - cast)) / lit


def shade_sphere_shadow(rgb: np.ndarray, depth: np.ndarray, receiver: np.ndarray, view_matrix: list[float],
                        projection_matrix: list[float], centre_m: np.ndarray, radius_m: float,
                        light_direction: np.ndarray, ambient: float, diffuse: float) -> np.ndarray:
    """``rgb`` (uint8 (H, W, 3)) with the sphere's shadows drawn on the ``receiver`` pixels (bool (H, W): the
    table's), a new array; every other pixel as it was."""
    points = world_points_m(depth, view_matrix, projection_matrix)
    gain = sphere_shadow_gain(points, centre_m, radius_m, light_direction, ambient, diffuse)
    gain = np.where(receiver, gain, 1.0)
    return np.clip(np.rint(rgb.astype(np.float64) * gain[..., None]), 0, 255).astype(np.uint8)
