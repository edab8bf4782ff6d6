"""Re-shading of a rendered sphere from its known geometry: appearance beyond what TinyRenderer draws.

TinyRenderer lights every sphere with one white light and a fixed Phong model. A real sphere meets
coloured light, strong or no highlights, under- and over-exposure, white balance and gamma. Given the sphere's
circle in the image (projected from the simulator's own geometry, :meth:`SimViewSampler.sphere_circle_px`), each
sphere pixel gets its surface normal, and the pixel is lit again: albedo x (ambient + diffuse n.l) + specular
(n.h)^k, in a random light colour, then exposure and gamma. The mask is untouched (the geometry is the same).
Training-time domain randomization only; the ``painted`` test suite has its own renderer.
"""

from __future__ import annotations

from dataclasses import dataclass

import cv2
import numpy as np


@dataclass(frozen=True)
class ReshadeConfig:
    """How often and how widely a sphere is re-lit; each range is sampled uniformly per image."""

    prob: float = 0.0
    """Share of spheres re-shaded (0: TinyRenderer's shading as rendered)."""
    new_albedo_prob: float = 0.5
    """Share of re-shaded spheres that also get a new colour (any hue, dull and grey ones included)."""
    grey_albedo_prob: float = 0.0
    """Share of new colours that are grey or nearly so (HSV saturation below 0.15, value 0.03-1: black, dark grey,
    pale grey, white); a uniform RGB rarely is. 0 draws nothing (the colours are as without the option)."""
    texture_prob: float = 0.0
    """Share of re-shaded spheres whose albedo is a crop of a training photo, shrunk onto the sphere's disc: a
    patterned ball, where the outline and the shading are the cues rather than one colour (the dataset draws the
    crop, :func:`reshade`'s ``texture``). 0 draws nothing."""
    ambient: tuple[float, float] = (0.05, 0.7)
    """Ambient light, relative to the albedo."""
    diffuse: tuple[float, float] = (0.2, 1.0)
    """Diffuse (Lambert) light."""
    specular: tuple[float, float] = (0.0, 1.0)
    """Strength of the highlight."""
    shininess: tuple[float, float] = (4.0, 150.0)
    """Phong exponent of the highlight (small: broad sheen; large: a pin-point glint)."""
    light_tint: float = 0.3
    """Largest relative deviation of each channel of the light's colour from white."""
    exposure: tuple[float, float] = (0.6, 1.5)
    """Gain applied after shading."""
    gamma: tuple[float, float] = (0.7, 1.4)
    """Gamma applied after the gain."""

    def __post_init__(self) -> None:
        probs = (self.prob, self.new_albedo_prob, self.grey_albedo_prob, self.texture_prob)
        if not all(0.0 <= p <= 1.0 for p in probs):
            raise ValueError(f"reshade probabilities must be in [0, 1], got {probs}")
        for name in ("ambient", "diffuse", "specular", "shininess", "exposure", "gamma"):
            lo, hi = getattr(self, name)
            if not 0.0 <= lo <= hi:
                raise ValueError(f"reshade {name} must be an increasing non-negative range, got {(lo, hi)}")


def grey_albedo(rng: np.random.Generator) -> np.ndarray:
    """A grey or nearly grey RGB albedo in [0, 1]: HSV saturation 0-0.15, value 0.03-1, any hue."""
    hsv = np.array([[[rng.uniform(0, 180), rng.uniform(0, 38), rng.uniform(8, 255)]]], dtype=np.uint8)
    return cv2.cvtColor(hsv, cv2.COLOR_HSV2RGB)[0, 0] / 255.0


def _random_albedo(rng: np.random.Generator, grey_prob: float = 0.0) -> np.ndarray:
    if grey_prob > 0 and rng.random() < grey_prob:
        return grey_albedo(rng)
    if rng.random() < 0.3:
        return rng.uniform(0.05, 1.0, size=3)
    hsv = np.array([[[rng.uniform(0, 180), rng.uniform(60, 255), rng.uniform(60, 255)]]], dtype=np.uint8)
    return cv2.cvtColor(hsv, cv2.COLOR_HSV2RGB)[0, 0] / 255.0


def sphere_normals(hw: tuple[int, int], circle_px: tuple[float, float, float]) -> np.ndarray:
    """Unit surface normals float32 (H, W, 3) of a sphere whose image is the circle (cx, cy, r) in pixels.

    Camera frame: x right, y down, z towards the camera (an orthographic approximation: the sphere spans a few
    pixels). Outside the circle the normal is clamped to the rim.
    """
    cx, cy, r = circle_px
    yy, xx = np.mgrid[0:hw[0], 0:hw[1]].astype(np.float32)
    nx, ny = (xx + 0.5 - cx) / max(r, 1e-3), (yy + 0.5 - cy) / max(r, 1e-3)
    rho2 = nx * nx + ny * ny
    scale = np.where(rho2 > 1.0, 1.0 / np.sqrt(np.maximum(rho2, 1e-9)), 1.0)
    nx, ny = nx * scale, ny * scale
    nz = np.sqrt(np.clip(1.0 - nx * nx - ny * ny, 0.0, 1.0))
    return np.stack([nx, ny, nz], axis=-1)


def texture_albedo(texture_uint8: np.ndarray, sphere_mask: np.ndarray,
                   circle_px: tuple[float, float, float]) -> np.ndarray:
    """Per-pixel albedo float (N, 3) in [0, 1] of ``sphere_mask``'s pixels: ``texture_uint8`` (h, w, 3) resized onto
    the square around the circle (cx, cy, r), brightened as a sphere's own colour is (its brightest channel to at
    most 1)."""
    cx, cy, r = circle_px
    side = max(2, int(np.ceil(2 * r)) + 2)
    tex = cv2.resize(texture_uint8, (side, side), interpolation=cv2.INTER_AREA).astype(np.float32) / 255.0
    ys, xs = np.nonzero(sphere_mask)
    u = np.clip((xs + 0.5 - (cx - side / 2)).astype(int), 0, side - 1)
    v = np.clip((ys + 0.5 - (cy - side / 2)).astype(int), 0, side - 1)
    albedo = tex[v, u]
    top = float(albedo.max())
    return albedo / max(top, 0.05) * min(1.0, top * 1.6)


def reshade(rgb_uint8: np.ndarray, sphere_mask: np.ndarray, circle_px: tuple[float, float, float],
            rng: np.random.Generator, cfg: ReshadeConfig, texture: np.ndarray | None = None) -> np.ndarray:
    """``rgb_uint8`` (H, W, 3) with the pixels of ``sphere_mask`` lit again (see the module docstring).

    The sphere's own colour (median of its pixels, brightened to an albedo) is kept unless a new one is drawn, or
    ``texture`` (uint8 (h, w, 3), a photo crop) is given: then it is the sphere's albedo (:func:`texture_albedo`).
    Returns a new uint8 image; the pixels outside the mask are unchanged.
    """
    if not sphere_mask.any():
        return rgb_uint8.copy()
    pixels = rgb_uint8[sphere_mask].astype(np.float32) / 255.0
    if rng.random() < cfg.new_albedo_prob:
        albedo = _random_albedo(rng, cfg.grey_albedo_prob)[None]
    else:
        albedo = np.median(pixels, axis=0)
        albedo = (albedo / max(float(albedo.max()), 0.05) * min(1.0, float(albedo.max()) * 1.6))[None]
    if texture is not None:  # after the colour's draw: the rest of the stream is as without a texture
        albedo = texture_albedo(texture, sphere_mask, circle_px)
    az, el = rng.uniform(0, 2 * np.pi), rng.uniform(np.deg2rad(10), np.deg2rad(90))
    light = np.array([np.cos(az) * np.cos(el), np.sin(az) * np.cos(el), np.sin(el)], np.float32)
    half = light + np.array([0.0, 0.0, 1.0], np.float32)
    half /= np.linalg.norm(half)
    tint = 1.0 + rng.uniform(-cfg.light_tint, cfg.light_tint, size=3)
    ambient, diffuse = rng.uniform(*cfg.ambient), rng.uniform(*cfg.diffuse)
    specular, shininess = rng.uniform(*cfg.specular), rng.uniform(*cfg.shininess)
    exposure, gamma = rng.uniform(*cfg.exposure), rng.uniform(*cfg.gamma)

    n = sphere_normals(sphere_mask.shape, circle_px)[sphere_mask]
    lambert = np.clip(n @ light, 0.0, None)[:, None]
    glint = (np.clip(n @ half, 0.0, None) ** shininess)[:, None]
    colour = (albedo * (ambient + diffuse * lambert) + specular * glint) * tint[None] * exposure
    colour = np.clip(colour, 0.0, 1.0) ** gamma
    out = rgb_uint8.copy()
    out[sphere_mask] = np.clip(colour * 255.0 + 0.5, 0, 255).astype(np.uint8)
    return out
