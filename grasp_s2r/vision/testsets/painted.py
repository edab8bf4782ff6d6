"""Painted spheres: an independent *test* renderer that draws the sphere analytically onto real photos.

Evaluation data only, never training data. It shares no code with the training renderers (no PyBullet, nothing
from ``composite`` / ``simviews`` / ``dataset`` / ``augment`` / ``sim.env`` / ``sim.randomization``): numpy and
cv2 only, plus the camera and scene geometry dataclasses. A segmenter that does well here has learnt the sphere,
not the look of the training renderer.

Per image: the sphere's camera distance (drawn from the expert episodes' own distribution,
:data:`EPISODE_DISTANCE_QUANTILES_M`) gives its size by the pinhole model, its centre is anywhere
in the image; a soft contact shadow is drawn on the photo, then the sphere with Blinn-Phong shading from its
analytic normal (ambient, diffuse, highlight; tinted light, any albedo), supersampled for anti-aliased edges and
composited in linear light; last, the whole image gets defocus or motion blur, sensor noise and JPEG.
The label is geometric and exact: a pixel is sphere when its centre lies inside the projected disc,
independent of the blur and noise. A share of images has no sphere (all-False mask) to count false detections.

Pixel coordinates are continuous: pixel (x, y) covers [x, x+1) x [y, y+1), its centre is (x + 0.5, y + 0.5).
Camera frame for shading: x right, y down (image axes), z from the sphere towards the camera.
The projection of an off-axis sphere is drawn as a disc (the slight perspective elongation is ignored).
"""

from __future__ import annotations

import itertools
import math
from dataclasses import dataclass, fields
from typing import Any

import cv2
import numpy as np
from tqdm import tqdm

from grasp_s2r.sim.config import CameraConfig, SceneConfig
from grasp_s2r.vision.testsets.painted_sizes import (
    EPISODE_DISTANCE_QUANTILES_M,
    QUANTILE_LEVELS,
    sphere_diameter_px,
)

Range = tuple[float, float]
_PROBS = ("empty_prob", "border_cut_prob", "dull_albedo_prob", "shadow_prob", "defocus_prob", "motion_blur_prob",
          "noise_prob", "jpeg_prob")


@dataclass(frozen=True)
class PaintedConfig:
    """How painted test images are drawn. Ranges are (low, high), sampled uniformly unless said otherwise."""

    distance_quantiles_m: tuple[float, ...] = EPISODE_DISTANCE_QUANTILES_M
    """Camera-to-sphere distance at each of :data:`QUANTILE_LEVELS` (nearest first): a distance is drawn by inverse
    CDF (linear between levels), so the sizes follow the expert episodes' (3-11 px at 64 px, median 6 px)."""
    distance_jitter: float = 0.1
    """Each drawn distance times a log-uniform factor in [1 / (1 + jitter), 1 + jitter]: a small margin beyond the
    episodes' extremes (2.1-12.6 px at 64 px)."""
    empty_prob: float = 0.1
    """Share of images without a sphere (mask all False), to measure false detections."""
    edge_margin_px: float = 1.0
    """The whole disc is kept at least this far inside the image border ..."""
    border_cut_prob: float = 0.05
    """... except in this share of images, where the centre is anywhere in the image (the disc may be cut)."""
    light_elevation_deg: Range = (15.0, 90.0)
    """Light direction over the hemisphere facing the camera: elevation above the image plane (90: from the
    camera), azimuth uniform."""
    ambient: Range = (0.1, 0.6)
    """Ambient term of the shading."""
    diffuse: Range = (0.4, 1.0)
    """Lambertian term."""
    specular: Range = (0.0, 1.0)
    """Strength of the highlight (Blinn-Phong)."""
    specular_exponent: Range = (5.0, 200.0)
    """Shininess (log-uniform): 5 broad and dull, 200 a sharp glint."""
    light_tint: float = 0.12
    """Light colour: each channel times a factor in [1 - tint, 1 + tint]."""
    dull_albedo_prob: float = 0.3
    """Share of dull albedos (grey, dark, white); the others are saturated colours of any hue."""
    albedo_saturation: Range = (0.4, 1.0)
    """HSV saturation of coloured albedos (sRGB)."""
    albedo_value: Range = (0.35, 1.0)
    """HSV value of coloured albedos."""
    dull_saturation: Range = (0.0, 0.15)
    """HSV saturation of dull albedos."""
    dull_value: Range = (0.05, 1.0)
    """HSV value of dull albedos (near black to white)."""
    exposure: Range = (0.7, 1.3)
    """Brightness of the sphere relative to the photo (a factor on its radiance)."""
    shadow_prob: float = 0.7
    """Probability of a contact shadow: a soft darkened ellipse on the photo, offset away from the light."""
    shadow_strength: Range = (0.1, 0.6)
    """Fraction by which the shadow's core darkens the photo."""
    shadow_offset_radii: Range = (0.1, 0.8)
    """Shift of the shadow's centre away from the light, in sphere radii (times the light's in-plane share)."""
    shadow_size_radii: Range = (0.9, 1.3)
    """Shadow's short semi-axis, in sphere radii."""
    shadow_elongation: Range = (1.0, 1.6)
    """Ratio of the shadow's long semi-axis (along the offset) to its short one."""
    shadow_softness_radii: Range = (0.15, 0.6)
    """Width of the shadow's soft edge, in sphere radii (plus 0.3 px)."""
    defocus_prob: float = 0.3
    """Probability of defocus blur of the whole image ..."""
    defocus_sigma_px: Range = (0.0, 1.2)
    """... a Gaussian of this sigma."""
    motion_blur_prob: float = 0.15
    """Probability of motion blur instead (never both) ..."""
    motion_blur_px: Range = (1.5, 4.0)
    """... a line kernel of this length, any direction."""
    noise_prob: float = 0.5
    """Probability of Gaussian sensor noise ..."""
    noise_std: Range = (0.0, 0.05)
    """... of this standard deviation, as a fraction of the 0..255 range."""
    jpeg_prob: float = 0.5
    """Probability of JPEG compression ..."""
    jpeg_quality: Range = (30, 95)
    """... at this quality."""
    supersample: int = 4
    """Subpixels per pixel side for the sphere's colour and coverage (anti-aliased edge)."""
    crop_scale: Range = (0.08, 0.9)
    """:class:`PaintedSuite` backgrounds: crop side as a fraction of the photo's shorter side."""

    def __post_init__(self) -> None:
        q = self.distance_quantiles_m
        if len(q) != len(QUANTILE_LEVELS) or not 0.0 < q[0] or any(b < a for a, b in itertools.pairwise(q)):
            raise ValueError(f"distance_quantiles_m must be {len(QUANTILE_LEVELS)} positive non-decreasing distances "
                             f"(one per QUANTILE_LEVELS), got {q}")
        if not 0.0 <= self.distance_jitter < 1.0:
            raise ValueError(f"distance_jitter must be in [0, 1), got {self.distance_jitter}")
        for name in _PROBS:
            if not 0.0 <= getattr(self, name) <= 1.0:
                raise ValueError(f"{name} must be in [0, 1], got {getattr(self, name)}")
        if self.defocus_prob + self.motion_blur_prob > 1.0:
            raise ValueError(f"defocus_prob + motion_blur_prob must be at most 1, got "
                             f"{self.defocus_prob} + {self.motion_blur_prob}")
        bounds = {"light_elevation_deg": (0.0, 90.0), "ambient": (0.0, None), "diffuse": (0.0, None),
                  "specular": (0.0, None), "specular_exponent": (1.0, None), "albedo_saturation": (0.0, 1.0),
                  "albedo_value": (0.0, 1.0), "dull_saturation": (0.0, 1.0), "dull_value": (0.0, 1.0),
                  "exposure": (0.0, None), "shadow_strength": (0.0, 1.0), "shadow_offset_radii": (0.0, None),
                  "shadow_size_radii": (0.01, None), "shadow_elongation": (1.0, None),
                  "shadow_softness_radii": (0.0, None), "defocus_sigma_px": (0.0, None),
                  "motion_blur_px": (1.0, 32.0), "noise_std": (0.0, 1.0), "jpeg_quality": (1, 100),
                  "crop_scale": (0.001, 1.0)}
        for f in fields(self):
            if f.name in bounds:
                _check_range(f.name, getattr(self, f.name), *bounds[f.name])
        if self.edge_margin_px < 0:
            raise ValueError(f"edge_margin_px must be non-negative, got {self.edge_margin_px}")
        if not 0.0 <= self.light_tint < 1.0:
            raise ValueError(f"light_tint must be in [0, 1), got {self.light_tint}")
        if not 1 <= self.supersample <= 16:
            raise ValueError(f"supersample must be in [1, 16], got {self.supersample}")


def _check_range(name: str, value: Range, lo: float, hi: float | None) -> None:
    if len(value) != 2 or not lo <= value[0] <= value[1] or (hi is not None and value[1] > hi):
        limit = f"[{lo}, {hi}]" if hi is not None else f"[{lo}, inf)"
        raise ValueError(f"{name} must be an increasing (low, high) range within {limit}, got {value}")


def distance_range_m(cfg: PaintedConfig) -> tuple[float, float]:
    """(nearest, farthest) camera distance the config draws: the quantiles' ends widened by the jitter."""
    return cfg.distance_quantiles_m[0] / (1 + cfg.distance_jitter), cfg.distance_quantiles_m[-1] * (1 + cfg.distance_jitter)


def draw_distance_m(rng: np.random.Generator, cfg: PaintedConfig) -> float:
    """One camera-to-sphere distance: inverse CDF of :attr:`PaintedConfig.distance_quantiles_m`, then the jitter."""
    distance = float(np.interp(rng.random(), QUANTILE_LEVELS, cfg.distance_quantiles_m))
    return distance * math.exp(rng.uniform(-1.0, 1.0) * math.log1p(cfg.distance_jitter))


def diameter_range_px(camera: CameraConfig | None = None, scene: SceneConfig | None = None,
                      cfg: PaintedConfig | None = None) -> tuple[float, float]:
    """(smallest, largest) sphere diameter in px the config draws (about 2.1..12.6 px for the defaults)."""
    camera, scene, cfg = camera or CameraConfig(), scene or SceneConfig(), cfg or PaintedConfig()
    near, far = distance_range_m(cfg)
    return sphere_diameter_px(far, camera, scene), sphere_diameter_px(near, camera, scene)


def disc_mask(hw: tuple[int, int], cx: float, cy: float, r: float) -> np.ndarray:
    """bool (H, W): pixel centre (x + 0.5, y + 0.5) strictly inside the disc of centre (cx, cy), radius r."""
    ys, xs = np.mgrid[0:hw[0], 0:hw[1]].astype(np.float64) + 0.5
    return (xs - cx) ** 2 + (ys - cy) ** 2 < r * r


def _to_linear(srgb: np.ndarray) -> np.ndarray:
    return np.power(srgb, 2.2)


def _to_srgb(lin: np.ndarray) -> np.ndarray:
    return np.power(np.clip(lin, 0.0, 1.0), 1.0 / 2.2)


def _draw_centre(rng: np.random.Generator, cfg: PaintedConfig, hw: tuple[int, int], r: float) -> tuple[float, float]:
    h, w = hw
    m = r + cfg.edge_margin_px
    if rng.random() < cfg.border_cut_prob or 2 * m >= min(h, w):
        return float(rng.uniform(0, w)), float(rng.uniform(0, h))
    return float(rng.uniform(m, w - m)), float(rng.uniform(m, h - m))


def _draw_light(rng: np.random.Generator, cfg: PaintedConfig) -> tuple[np.ndarray, np.ndarray]:
    """(unit direction towards the light in the camera frame, linear RGB light colour)."""
    elev = math.radians(rng.uniform(*cfg.light_elevation_deg))
    az = rng.uniform(0.0, 2 * math.pi)
    direction = np.array([math.cos(elev) * math.cos(az), math.cos(elev) * math.sin(az), math.sin(elev)])
    colour = rng.uniform(1.0 - cfg.light_tint, 1.0 + cfg.light_tint, size=3)
    return direction, colour / colour.mean()


def _draw_albedo(rng: np.random.Generator, cfg: PaintedConfig) -> np.ndarray:
    """Linear RGB albedo from an sRGB HSV draw: coloured (any hue) or dull (grey, dark, white)."""
    dull = rng.random() < cfg.dull_albedo_prob
    sat = rng.uniform(*(cfg.dull_saturation if dull else cfg.albedo_saturation))
    val = rng.uniform(*(cfg.dull_value if dull else cfg.albedo_value))
    hsv = np.array([[[rng.uniform(0.0, 360.0), sat, val]]], np.float32)
    return _to_linear(cv2.cvtColor(hsv, cv2.COLOR_HSV2RGB)[0, 0].astype(np.float64))


def _add_shadow(lin: np.ndarray, rng: np.random.Generator, cfg: PaintedConfig, cx: float, cy: float, r: float,
                light: np.ndarray) -> None:
    """Darken ``lin`` (H, W, 3) in place with a soft ellipse offset away from the light."""
    planar = float(np.hypot(light[0], light[1]))
    direction = -light[:2] / planar if planar > 1e-6 else np.array([1.0, 0.0])
    offset = rng.uniform(*cfg.shadow_offset_radii) * r * planar
    b = rng.uniform(*cfg.shadow_size_radii) * r
    a = b * rng.uniform(*cfg.shadow_elongation)
    soft = rng.uniform(*cfg.shadow_softness_radii) * r + 0.3
    strength = rng.uniform(*cfg.shadow_strength)
    ys, xs = np.mgrid[0:lin.shape[0], 0:lin.shape[1]].astype(np.float64) + 0.5
    px, py = xs - (cx + offset * direction[0]), ys - (cy + offset * direction[1])
    u = px * direction[0] + py * direction[1]
    v = -px * direction[1] + py * direction[0]
    q = np.sqrt((u / a) ** 2 + (v / b) ** 2)
    shade = 0.5 * (1.0 - np.tanh((q - 1.0) * b / soft))
    lin *= (1.0 - strength * shade)[:, :, None]


def _paint_disc(lin: np.ndarray, cfg: PaintedConfig, cx: float, cy: float, r: float, light: np.ndarray,
                light_rgb: np.ndarray, albedo: np.ndarray, terms: dict[str, float]) -> None:
    """Composite the Blinn-Phong shaded sphere onto ``lin`` (linear RGB, H x W x 3) in place, supersampled."""
    h, w = lin.shape[:2]
    x0, x1 = max(math.floor(cx - r), 0), min(math.ceil(cx + r), w)
    y0, y1 = max(math.floor(cy - r), 0), min(math.ceil(cy + r), h)
    if x1 <= x0 or y1 <= y0:
        return
    s = cfg.supersample
    sub = (np.arange(s) + 0.5) / s
    xs = (np.arange(x0, x1)[:, None] + sub[None]).reshape(-1)  # subpixel x positions, (x1 - x0) * s
    ys = (np.arange(y0, y1)[:, None] + sub[None]).reshape(-1)
    nx = ((xs - cx) / r)[None, :]
    ny = ((ys - cy) / r)[:, None]
    rr = nx ** 2 + ny ** 2
    inside = rr < 1.0
    nz = np.sqrt(np.clip(1.0 - rr, 0.0, 1.0))
    n_dot_l = nx * light[0] + ny * light[1] + nz * light[2]
    half = light + np.array([0.0, 0.0, 1.0])
    half /= np.linalg.norm(half)
    n_dot_h = np.clip(nx * half[0] + ny * half[1] + nz * half[2], 0.0, 1.0)
    diffuse = terms["ambient"] + terms["diffuse"] * np.clip(n_dot_l, 0.0, None)
    glint = terms["specular"] * n_dot_h ** terms["exponent"] * (n_dot_l > 0)
    radiance = terms["exposure"] * (diffuse[..., None] * albedo + glint[..., None]) * light_rgb
    patch = lin[y0:y1, x0:x1]
    bg = np.repeat(np.repeat(patch, s, axis=0), s, axis=1)
    mixed = np.where(inside[..., None], radiance, bg)
    lin[y0:y1, x0:x1] = mixed.reshape(y1 - y0, s, x1 - x0, s, 3).mean(axis=(1, 3))


def _motion_kernel(rng: np.random.Generator, length: float) -> np.ndarray:
    size = math.ceil(length) // 2 * 2 + 3
    up = 8
    canvas = np.zeros((size * up, size * up), np.uint8)
    angle = rng.uniform(0.0, math.pi)
    c = size * up / 2.0
    dx, dy = math.cos(angle) * length * up / 2.0, math.sin(angle) * length * up / 2.0
    cv2.line(canvas, (round(c - dx), round(c - dy)), (round(c + dx), round(c + dy)), 255, thickness=up)
    k = cv2.resize(canvas.astype(np.float32), (size, size), interpolation=cv2.INTER_AREA)
    return k / k.sum()


def degrade(srgb: np.ndarray, rng: np.random.Generator, cfg: PaintedConfig) -> np.ndarray:
    """Camera effects on a whole float sRGB image in [0, 1] (H, W, 3): defocus or motion blur (in linear light),
    sensor noise, JPEG. Returns uint8 (H, W, 3)."""
    u = rng.random()
    if u < cfg.defocus_prob + cfg.motion_blur_prob:
        lin = _to_linear(srgb).astype(np.float32)
        if u < cfg.defocus_prob:
            sigma = rng.uniform(*cfg.defocus_sigma_px)
            if sigma > 0.05:
                lin = cv2.GaussianBlur(lin, (0, 0), sigmaX=sigma, sigmaY=sigma, borderType=cv2.BORDER_REFLECT)
        else:
            kernel = _motion_kernel(rng, rng.uniform(*cfg.motion_blur_px))
            lin = cv2.filter2D(lin, -1, kernel, borderType=cv2.BORDER_REFLECT)
        srgb = _to_srgb(lin.astype(np.float64))
    if rng.random() < cfg.noise_prob:
        srgb = srgb + rng.normal(0.0, rng.uniform(*cfg.noise_std), size=srgb.shape)
    out = np.clip(srgb * 255.0 + 0.5, 0, 255).astype(np.uint8)
    if rng.random() < cfg.jpeg_prob:
        quality = round(float(rng.uniform(*cfg.jpeg_quality)))
        ok, buf = cv2.imencode(".jpg", cv2.cvtColor(out, cv2.COLOR_RGB2BGR), [cv2.IMWRITE_JPEG_QUALITY, quality])
        if ok:
            out = cv2.cvtColor(cv2.imdecode(buf, cv2.IMREAD_COLOR), cv2.COLOR_BGR2RGB)
    return out


def paint_sphere(background_rgb: np.ndarray, rng: np.random.Generator, cfg: PaintedConfig | None = None,
                 camera: CameraConfig | None = None, scene: SceneConfig | None = None,
                 return_info: bool = False) -> Any:
    """Paint a sphere (or, with probability ``cfg.empty_prob``, none) onto ``background_rgb`` uint8 (H, W, 3).

    The sphere's size follows the pinhole model for the image's own height and ``camera.fov_deg``.
    Returns (rgb uint8 (H, W, 3), mask bool (H, W)); with ``return_info``, also a dict: ``empty``,
    ``centre_px`` (cx, cy), ``radius_px``, ``diameter_px``, ``distance_m`` (None / 0 for empty images) and the
    drawn appearance (``light_dir``, ``albedo_linear``, ``shadow``).
    """
    cfg, camera, scene = cfg or PaintedConfig(), camera or CameraConfig(), scene or SceneConfig()
    bg = np.asarray(background_rgb)
    if bg.dtype != np.uint8 or bg.ndim != 3 or bg.shape[2] != 3:
        raise ValueError(f"background_rgb must be uint8 (H, W, 3), got {bg.dtype} {bg.shape}")
    hw = (bg.shape[0], bg.shape[1])
    lin = _to_linear(bg.astype(np.float64) / 255.0)
    mask = np.zeros(hw, bool)
    info: dict[str, Any] = {"empty": True, "centre_px": None, "radius_px": 0.0, "diameter_px": 0.0,
                            "distance_m": None, "light_dir": None, "albedo_linear": None, "shadow": False}
    if rng.random() >= cfg.empty_prob:
        distance = draw_distance_m(rng, cfg)
        diameter = sphere_diameter_px(distance, camera, scene, height_px=hw[0])
        r = diameter / 2.0
        cx, cy = _draw_centre(rng, cfg, hw, r)
        light, light_rgb = _draw_light(rng, cfg)
        albedo = _draw_albedo(rng, cfg)
        terms = {"ambient": rng.uniform(*cfg.ambient), "diffuse": rng.uniform(*cfg.diffuse),
                 "specular": rng.uniform(*cfg.specular), "exposure": rng.uniform(*cfg.exposure),
                 "exponent": math.exp(rng.uniform(*np.log(cfg.specular_exponent)))}
        shadow = bool(rng.random() < cfg.shadow_prob)
        if shadow:
            _add_shadow(lin, rng, cfg, cx, cy, r, light)
        _paint_disc(lin, cfg, cx, cy, r, light, light_rgb, albedo, terms)
        mask = disc_mask(hw, cx, cy, r)
        info.update(empty=False, centre_px=(cx, cy), radius_px=r, diameter_px=diameter, distance_m=distance,
                    light_dir=light, albedo_linear=albedo, shadow=shadow)
    rgb = degrade(_to_srgb(lin), rng, cfg)
    return (rgb, mask, info) if return_info else (rgb, mask)


def random_photo_crop(photo_rgb: np.ndarray, out_hw: tuple[int, int], rng: np.random.Generator,
                      scale: Range = (0.08, 0.9)) -> np.ndarray:
    """A square-ish random crop (side ``scale`` x the shorter side), maybe flipped, resized to ``out_hw``."""
    h, w = photo_rgb.shape[:2]
    side = rng.uniform(*scale) * min(h, w)
    aspect = math.exp(rng.uniform(-0.15, 0.15))
    ch = int(np.clip(round(side * aspect), 2, h))
    cw = int(np.clip(round(side / aspect), 2, w))
    y0, x0 = int(rng.integers(0, h - ch + 1)), int(rng.integers(0, w - cw + 1))
    crop = photo_rgb[y0:y0 + ch, x0:x0 + cw]
    if rng.random() < 0.5:
        crop = crop[:, ::-1]
    if rng.random() < 0.5:
        crop = crop[::-1]
    interp = cv2.INTER_AREA if ch > out_hw[0] else cv2.INTER_LINEAR
    return cv2.resize(np.ascontiguousarray(crop), (out_hw[1], out_hw[0]), interpolation=interp)


class PaintedSuite:
    """Painted test images on crops of ``photos`` (uint8 (H, W, 3) each); item ``i`` is fully determined by
    (``seed``, ``i``)."""

    def __init__(self, photos: list[np.ndarray], image_hw: tuple[int, int] = (64, 64), seed: int = 1,
                 cfg: PaintedConfig | None = None, camera: CameraConfig | None = None,
                 scene: SceneConfig | None = None) -> None:
        if not photos:
            raise ValueError("PaintedSuite needs at least one photo")
        for k, p in enumerate(photos):
            if p.dtype != np.uint8 or p.ndim != 3 or p.shape[2] != 3:
                raise ValueError(f"photo {k} must be uint8 (H, W, 3), got {p.dtype} {p.shape}")
        self.photos = list(photos)
        self.image_hw = (int(image_hw[0]), int(image_hw[1]))
        self.seed = int(seed)
        self.cfg, self.camera, self.scene = cfg or PaintedConfig(), camera or CameraConfig(), scene or SceneConfig()

    def sample(self, i: int, return_info: bool = False) -> Any:
        """Item ``i``: (rgb uint8 (H, W, 3), mask bool (H, W)), plus :func:`paint_sphere`'s info dict when asked."""
        rng = np.random.default_rng([self.seed, 7, int(i)])
        photo = self.photos[int(rng.integers(0, len(self.photos)))]
        bg = random_photo_crop(photo, self.image_hw, rng, self.cfg.crop_scale)
        return paint_sphere(bg, rng, self.cfg, self.camera, self.scene, return_info=return_info)


def make_painted(photos: list[np.ndarray], n: int, image_hw: tuple[int, int] = (64, 64), seed: int = 1,
                 cfg: PaintedConfig | None = None, camera: CameraConfig | None = None,
                 scene: SceneConfig | None = None) -> tuple[np.ndarray, np.ndarray]:
    """Items 0..n-1 of a :class:`PaintedSuite` as (rgb uint8 (n, H, W, 3), mask bool (n, H, W)), with a progress
    bar when ``n >= 64``."""
    suite = PaintedSuite(photos, image_hw, seed, cfg, camera, scene)
    h, w = suite.image_hw
    images = np.zeros((n, h, w, 3), np.uint8)
    masks = np.zeros((n, h, w), bool)
    for i in tqdm(range(n), desc="painting", unit="img", leave=False, disable=n < 64):
        images[i], masks[i] = suite.sample(i)
    return images, masks
