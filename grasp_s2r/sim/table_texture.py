"""Real photos as the table's texture inside the simulator.

A photo crop, mirrored 2 x 2 into a seamless tile, is loaded as a PyBullet texture and put on the table top, so the
photo's perspective and scale, the fingers' occlusion and the sphere's contact with it change with the camera as
they would over a real table. Used by the segmenter's training views (``vision.simviews``) and by the
``table-photo`` evaluation condition (``runtime.conditions``). Numpy, OpenCV and PyBullet only.

TinyRenderer (PyBullet DIRECT) ignores ``changeTexture``, and a loaded texture is never freed: a client loads a
fixed pool of textures once and an episode picks one of them.
"""

from __future__ import annotations

import os
import tempfile
import weakref
from collections.abc import Sequence
from typing import TYPE_CHECKING

import cv2
import numpy as np
import pybullet as pb

if TYPE_CHECKING:
    from grasp_s2r.sim.env import GraspEnv

PHOTO_TEXTURE_TILE_PX = 128
"""Side of the photo crop of a table texture; the texture is the crop mirrored 2 x 2 (seamless when tiled)."""
N_PHOTO_TEXTURES = 32
"""Textures per client and photo set: crop ``k`` is of photo ``k % len(photos)``, from ``default_rng([seed, k])``."""


def crop_resize(photo_rgb: np.ndarray, out_hw: tuple[int, int], rng: np.random.Generator,
                min_scale: float = 0.08, max_scale: float = 0.9) -> np.ndarray:
    """A random crop of ``photo_rgb`` (H, W, 3) resized to ``out_hw``: random scale, aspect, flips, 90 deg turns.

    ``min_scale`` / ``max_scale``: the crop's side as a fraction of the photo's shorter side. Returns uint8
    (out_h, out_w, 3). The crop of the segmenter's composites too (``vision.backgrounds.random_crop``).
    """
    h, w = photo_rgb.shape[:2]
    side = rng.uniform(min_scale, max_scale) * min(h, w)
    aspect = np.exp(rng.uniform(-0.3, 0.3))
    ch = int(np.clip(round(side * aspect), 4, h))
    cw = int(np.clip(round(side / aspect), 4, w))
    y0 = int(rng.integers(0, h - ch + 1))
    x0 = int(rng.integers(0, w - cw + 1))
    crop = photo_rgb[y0:y0 + ch, x0:x0 + cw]
    if rng.random() < 0.5:
        crop = crop[:, ::-1]
    if rng.random() < 0.5:
        crop = crop[::-1]
    crop = np.rot90(crop, k=int(rng.integers(0, 4)))
    out_h, out_w = out_hw
    interp = cv2.INTER_AREA if crop.shape[0] > out_h else cv2.INTER_LINEAR
    return cv2.resize(np.ascontiguousarray(crop), (out_w, out_h), interpolation=interp)


def photo_texture(photo_rgb: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """A seamless table texture uint8 (2T, 2T, 3) from a random crop of ``photo_rgb`` (T = PHOTO_TEXTURE_TILE_PX)."""
    tile = crop_resize(photo_rgb, (PHOTO_TEXTURE_TILE_PX, PHOTO_TEXTURE_TILE_PX), rng, min_scale=0.15, max_scale=0.9)
    top = np.concatenate([tile, tile[:, ::-1]], axis=1)
    return np.ascontiguousarray(np.concatenate([top, top[::-1]], axis=0))


def photo_textures(photos: Sequence[np.ndarray], n: int = N_PHOTO_TEXTURES, seed: int = 0) -> list[np.ndarray]:
    """The ``n`` textures of a photo set (uint8 RGB): texture ``k`` from photo ``k % len(photos)``, ``[seed, k]``."""
    if not photos:
        raise ValueError("no photos to make table textures from")
    return [photo_texture(photos[k % len(photos)], np.random.default_rng([seed, k])) for k in range(n)]


def load_textures(client: int, textures_rgb: Sequence[np.ndarray]) -> list[int]:
    """Load uint8 RGB images as textures of a PyBullet client; returns their texture ids."""
    ids = []
    with tempfile.TemporaryDirectory(prefix="grasp_s2r_phototex_") as tmp:
        for k, tex in enumerate(textures_rgb):
            path = os.path.join(tmp, f"photo_{k:03d}.png")
            cv2.imwrite(path, cv2.cvtColor(np.ascontiguousarray(tex), cv2.COLOR_RGB2BGR))
            ids.append(pb.loadTexture(path, physicsClientId=client))
    return ids


def set_table_texture(env: GraspEnv, texture_id: int, grey: float = 1.0) -> None:
    """Show ``texture_id`` on the env's table top, its colour multiplied by ``grey``, until the next ``reset``."""
    pb.changeVisualShape(env.table_uid, -1, rgbaColor=[grey, grey, grey, 1.0], textureUniqueId=texture_id,
                         physicsClientId=env.client)


_LOADED: weakref.WeakKeyDictionary[GraspEnv, dict[tuple[str, int, int], list[int]]] = weakref.WeakKeyDictionary()


def env_photo_textures(env: GraspEnv, key: str, photos: Sequence[np.ndarray], n: int = N_PHOTO_TEXTURES,
                       seed: int = 0) -> list[int]:
    """Texture ids of :func:`photo_textures` ``(photos, n, seed)`` in ``env``'s client, loaded on first use.

    ``key`` names the photo set (e.g. ``"heldout"`` or a folder): the env keeps its textures per (key, n, seed).
    """
    loaded = _LOADED.setdefault(env, {})
    k = (key, n, seed)
    if k not in loaded:
        loaded[k] = load_textures(env.client, photo_textures(photos, n, seed))
    return loaded[k]
