"""Synthetic (non-photo) training backgrounds and hard-negative distractors for the sphere segmenter.

Training-time domain randomization: the segmenter is trained on composites (a sim sphere pasted onto a
background). With photo crops only, it never sees a plain or procedurally patterned surface and misses, e.g., a
small red sphere on a plain green table. :func:`procedural_texture` (noise, stripes, checkers, grain, gradients,
cells, wood, in random palettes and lighting) and :func:`flat_colour` (one colour, gently lit) provide such
backgrounds; :func:`add_distractors` draws things that are round-ish or small and colourful but are *not* the
target (rings, flat discs, ellipses, squares, thick lines, specular dots, dark holes) onto a background *before*
the sphere is pasted, so the label stays exact and these are hard negatives.

numpy + cv2 only; every function is deterministic given its ``rng`` and returns a new uint8 (H, W, 3) array.
"""

from __future__ import annotations

import colorsys
from functools import lru_cache

import cv2
import numpy as np

TEXTURE_KINDS = ("noise", "stripes", "checker", "grain", "gradient", "cells", "wood")
"""Pattern kinds of :func:`procedural_texture`, drawn uniformly."""
DISTRACTOR_KINDS = ("ring", "disc", "ellipse", "rect", "line", "specular", "hole")
"""Shapes drawn by :func:`add_distractors`, drawn uniformly."""
_SHIFT = 3
"""Fixed-point fractional bits for cv2 drawing (sub-pixel positions)."""


def _random_colour(rng: np.random.Generator, saturated: bool = False) -> np.ndarray:
    """An RGB colour in 0-255 (float32): any hue; greys, dull, dark, near-white and saturated all likely."""
    mode = rng.random()
    if saturated:
        s, v = rng.uniform(0.6, 1.0), rng.uniform(0.4, 1.0)
    elif mode < 0.2:  # grey, incl. near-black / near-white
        s, v = rng.uniform(0.0, 0.08), rng.uniform(0.02, 1.0)
    elif mode < 0.45:  # dull
        s, v = rng.uniform(0.08, 0.4), rng.uniform(0.1, 0.95)
    elif mode < 0.55:  # dark
        s, v = rng.uniform(0.0, 1.0), rng.uniform(0.02, 0.25)
    else:
        s, v = rng.uniform(0.3, 1.0), rng.uniform(0.3, 1.0)
    return np.array(colorsys.hsv_to_rgb(rng.random(), s, v), dtype=np.float32) * 255


@lru_cache(maxsize=16)
def _grid(h: int, w: int) -> tuple[np.ndarray, np.ndarray]:
    """Pixel row / column coordinates, float32 (H, W), cached and read-only."""
    yy, xx = np.mgrid[0:h, 0:w].astype(np.float32)
    yy.flags.writeable = xx.flags.writeable = False
    return yy, xx


def _coords(hw: tuple[int, int], rng: np.random.Generator, angle: float | None = None) -> tuple[np.ndarray, ...]:
    """Pixel coordinates (u, v) rotated by ``angle`` (random if None) about a random origin; float32 (H, W)."""
    h, w = hw
    yy, xx = _grid(h, w)
    a = rng.uniform(0, np.pi) if angle is None else angle
    oy, ox = rng.uniform(0, h), rng.uniform(0, w)
    c, s = np.float32(np.cos(a)), np.float32(np.sin(a))
    cx, cy = np.float32(ox * c + oy * s), np.float32(-ox * s + oy * c)
    return xx * c + yy * s - cx, yy * c - xx * s - cy


def _smooth_noise(hw: tuple[int, int], rng: np.random.Generator, octaves: int | None = None) -> np.ndarray:
    """Multi-octave value noise in [0, 1] (float32 (H, W)); cells may be anisotropic (fabric / wood fibres).

    Built coarse to fine on small grids (each octave doubles the grid), with one final upscale.
    """
    h, w = hw
    octaves = int(rng.integers(1, 5)) if octaves is None else octaves
    base, stretch, persistence = rng.uniform(1.5, 5), np.exp(rng.uniform(-1.2, 1.2)), rng.uniform(0.35, 0.7)
    gh, gw = max(2, int(base * stretch) + 1), max(2, int(base / stretch) + 1)
    g, amp = rng.random((gh, gw), dtype=np.float32), 1.0
    for _ in range(octaves - 1):
        if 2 * gh > h or 2 * gw > w:
            break
        gh, gw, amp = 2 * gh, 2 * gw, amp * persistence
        g = cv2.resize(g, (gw, gh), interpolation=cv2.INTER_CUBIC) + amp * rng.random((gh, gw), dtype=np.float32)
    return _normalize(cv2.resize(g, (w, h), interpolation=cv2.INTER_CUBIC))


def _normalize(g: np.ndarray) -> np.ndarray:
    lo, hi = float(g.min()), float(g.max())
    return (g - np.float32(lo)) * np.float32(1 / max(hi - lo, 1e-6))


def _square_wave(u: np.ndarray, period: float, duty: float = 0.5) -> np.ndarray:
    """Anti-aliased square wave of ``u`` (pixels): 1 on a ``duty`` fraction of each period, ~1 px ramps."""
    p = u * np.float32(1 / period)
    p -= np.floor(p)
    d = np.where(p < duty, np.minimum(p, duty - p), -np.minimum(p - duty, 1.0 - p)) * np.float32(period)
    return np.clip(d + 0.5, 0.0, 1.0)


def _cells(hw: tuple[int, int], rng: np.random.Generator) -> np.ndarray:
    """Voronoi-like cells, computed at half resolution: flat cells (mosaic), blobs (distance to the nearest
    point) or cell walls (second-nearest minus nearest distance)."""
    h, w = hw
    sh, sw = (h + 1) // 2, (w + 1) // 2
    yy, xx = _grid(sh, sw)
    n = int(rng.integers(3, 17))
    py, px = (rng.uniform(-0.1, 1.1, (2, n, 1)) * np.array([[[sh]], [[sw]]])).astype(np.float32)
    d = np.square(yy.reshape(1, -1) - py) + np.square(xx.reshape(1, -1) - px)  # (n, pixels)
    mode = rng.integers(3)
    if mode == 0:
        g = rng.random(n, dtype=np.float32)[np.argmin(d, axis=0)]
    else:
        d1 = d.min(axis=0)
        g = np.sqrt(d1) if mode == 1 else np.minimum(  # blobs, or walls: second-nearest minus nearest distance
            np.sqrt(np.where(d == d1, np.float32(1e9), d).min(axis=0)) - np.sqrt(d1), np.float32(rng.uniform(0.7, 3)))
    return _normalize(cv2.resize(g.reshape(sh, sw), (w, h), interpolation=cv2.INTER_LINEAR))


def _pattern(kind: str, hw: tuple[int, int], rng: np.random.Generator) -> np.ndarray:
    """The grey pattern of one texture kind, float32 (H, W) in [0, 1]."""
    h, w = hw
    if kind == "noise":
        return _smooth_noise(hw, rng)
    if kind == "stripes":
        u, _ = _coords(hw, rng)
        period = rng.uniform(3, 24)
        if rng.random() < 0.5:
            return _square_wave(u, period, rng.uniform(0.15, 0.85))
        return 0.5 + 0.5 * np.sin(u * np.float32(2 * np.pi / period))
    if kind == "checker":
        u, v = _coords(hw, rng, angle=None if rng.random() < 0.4 else 0.0)
        cell = rng.uniform(3, 20)
        return 0.5 + 0.5 * (2 * _square_wave(u, 2 * cell) - 1) * (2 * _square_wave(v, 2 * cell) - 1)
    if kind == "grain":
        g = rng.random((h, w), dtype=np.float32)
        if rng.random() < 0.5:
            g = cv2.GaussianBlur(g, (0, 0), rng.uniform(0.4, 1.2))
        return _normalize(g + np.float32(rng.uniform(0, 1.5)) * _smooth_noise(hw, rng, 2))
    if kind == "gradient":
        u, v = _coords(hw, rng)
        return _normalize(np.sqrt(u * u + v * v) if rng.random() < 0.5 else u)
    if kind == "cells":
        return _cells(hw, rng)
    # wood: rings / grain lines of a noise-distorted coordinate
    u, v = _coords(hw, rng)
    r = np.sqrt(u * u + np.square(v * np.float32(rng.uniform(0.02, 0.3)))) if rng.random() < 0.5 else u
    r = r + np.float32(rng.uniform(2, 15)) * _smooth_noise(hw, rng, 2)
    g = 0.5 + 0.5 * np.sin(r * np.float32(2 * np.pi / rng.uniform(4, 16)))
    return g ** np.float32(rng.uniform(0.5, 3))


def _lighting(hw: tuple[int, int], rng: np.random.Generator, strength: float) -> np.ndarray:
    """Multiplicative brightness field (H, W, 1): a linear gradient or a vignette, up to ``strength``."""
    h, w = hw
    u, v = _coords(hw, rng)
    if rng.random() < 0.5:
        gain = 1 + rng.uniform(-strength, strength) * u / max(h, w)
    else:
        gain = 1 - rng.uniform(0, strength) * (u * u + v * v) / np.float32(max(h, w) ** 2)
    return np.clip(gain, 0.2, 2.0)[:, :, None]


def _finish(img: np.ndarray, rng: np.random.Generator, noise_std: float) -> np.ndarray:
    if noise_std > 0:  # uniform sensor noise of standard deviation noise_std
        img = img + (rng.random(img.shape, dtype=np.float32) - np.float32(0.5)) * np.float32(noise_std * 12 ** 0.5)
    return np.clip(img + 0.5, 0, 255).astype(np.uint8)


def procedural_texture(hw: tuple[int, int], rng: np.random.Generator, kind: str | None = None) -> np.ndarray:
    """A random patterned surface, uint8 (H, W, 3): a grey pattern of a random kind (:data:`TEXTURE_KINDS`)
    mapped through a 2-3 colour palette of random contrast (some very low), maybe with lighting falloff.

    ``kind`` forces the pattern kind; the random kind is still drawn, so the rest of the draw is unchanged.
    """
    hw = (int(hw[0]), int(hw[1]))
    drawn = TEXTURE_KINDS[int(rng.integers(len(TEXTURE_KINDS)))]
    kind = drawn if kind is None else kind
    if kind not in TEXTURE_KINDS:
        raise ValueError(f"kind must be one of {TEXTURE_KINDS}, got {kind!r}")
    g = _pattern(kind, hw, rng).astype(np.float32)
    base = _random_colour(rng)
    lo, hi = (0.25, 1.0) if rng.random() < 0.65 else (0.04, 0.25)  # palette contrast; about 1 in 3 very low
    contrast = np.exp(rng.uniform(np.log(lo), np.log(hi)))
    n_col = int(rng.integers(2, 4))
    palette = [base] + [base + np.float32(contrast) * (_random_colour(rng) - base) for _ in range(n_col - 1)]
    t = (np.clip(g, 0, 1) * np.float32(n_col - 1))[:, :, None]
    img = palette[0] + np.minimum(t, 1) * (palette[1] - palette[0])  # piecewise-linear through the palette
    if n_col == 3:
        img += np.maximum(t - 1, 0) * (palette[2] - palette[1])
    if rng.random() < 0.6:
        img = img * _lighting(hw, rng, 0.5)
    return _finish(img, rng, rng.uniform(0, 3) if rng.random() < 0.5 else 0.0)


def busy_texture(hw: tuple[int, int], rng: np.random.Generator) -> np.ndarray:
    """A busy surface, uint8 (H, W, 3): detail at the scale of a far sphere (1-4 px) in a palette of 2-5 colours,
    often saturated, the way a flower bed or foliage looks from an episode's start height. A sphere of another
    colour stands out of it; one of a palette colour hides in it, as on a real table.
    """
    h, w = int(hw[0]), int(hw[1])
    saturated = rng.random() < 0.6
    palette = np.stack([_random_colour(rng, saturated) for _ in range(int(rng.integers(2, 6)))])
    cell = int(rng.integers(1, 4))  # the detail's size, px
    fine = cv2.resize(rng.random((max(2, h // cell), max(2, w // cell)), dtype=np.float32), (w, h),
                      interpolation=cv2.INTER_NEAREST)
    field = _normalize(rng.uniform(0.3, 0.8) * fine + _smooth_noise((h, w), rng))
    index = np.minimum((field * len(palette)).astype(int), len(palette) - 1)
    img = palette[index]
    sigma = rng.uniform(0.0, 0.6)
    if sigma > 0.2:
        img = cv2.GaussianBlur(img, (0, 0), sigma)
    return np.clip(img, 0, 255).astype(np.uint8)


def flat_colour(hw: tuple[int, int], rng: np.random.Generator) -> np.ndarray:
    """A plain surface, uint8 (H, W, 3): one colour (any hue, greys, near-black, near-white), a gentle brightness
    gradient or vignette, and tiny noise (std 0-2 levels)."""
    hw = (int(hw[0]), int(hw[1]))
    if rng.random() < 0.15:  # near-black or near-white
        colour = np.full(3, rng.uniform(0, 25) if rng.random() < 0.5 else rng.uniform(230, 255), np.float32)
        colour += rng.uniform(-4, 4, 3).astype(np.float32)
    else:
        colour = _random_colour(rng, saturated=rng.random() < 0.3)
    img = np.broadcast_to(colour, (*hw, 3)) * _lighting(hw, rng, 0.1)
    return _finish(img, rng, rng.uniform(0, 2))


def check_distractor_kinds(kinds: tuple[str, ...]) -> None:
    """ValueError unless ``kinds`` is a non-empty selection of :data:`DISTRACTOR_KINDS` without repeats."""
    unknown = [k for k in kinds if k not in DISTRACTOR_KINDS]
    if not kinds or unknown or len(set(kinds)) != len(kinds):
        raise ValueError(f"distractor kinds must be distinct names of {DISTRACTOR_KINDS}, got {tuple(kinds)}")


PALETTE_REACH_PX = 8
"""How far from a palette distractor's centre its colour is taken from the background, px (:func:`local_colour`)."""


def local_colour(background_rgb: np.ndarray, centre_xy: tuple[float, float],
                 rng: np.random.Generator) -> tuple[float, float, float]:
    """The RGB of a random pixel of ``background_rgb`` (uint8 (H, W, 3)) within :data:`PALETTE_REACH_PX` of
    ``centre_xy`` (column, row; clipped into the image, the centre may lie outside it)."""
    h, w = background_rgb.shape[:2]
    x = int(np.clip(round(centre_xy[0]) + rng.integers(-PALETTE_REACH_PX, PALETTE_REACH_PX + 1), 0, w - 1))
    y = int(np.clip(round(centre_xy[1]) + rng.integers(-PALETTE_REACH_PX, PALETTE_REACH_PX + 1), 0, h - 1))
    return tuple(float(v) for v in background_rgb[y, x])


def add_distractors(background_rgb: np.ndarray, rng: np.random.Generator, max_count: int = 3,
                    kinds: tuple[str, ...] = DISTRACTOR_KINDS, around_px: tuple[float, float] | None = None,
                    reach_px: tuple[float, float] = (3.0, 10.0), saturated_share: float = 0.7,
                    min_width_px: float = 0.0, palette_share: float = 0.0) -> np.ndarray:
    """A copy of ``background_rgb`` (uint8 (H, W, 3)) with 1 to ``max_count`` hard negatives drawn on it
    (``kinds``, drawn uniformly from :data:`DISTRACTOR_KINDS` by default; a share ``saturated_share`` of them in
    saturated colours, the others in any colour, greys, dull and dark ones included; anywhere incl. partly outside;
    anti-aliased). ``around_px`` (column, row): each one's centre ``reach_px`` away from that point
    instead, in a random direction (lures beside the sphere; specular dots stay scattered anywhere).
    ``min_width_px``: no distractor narrower across its longest extent (its size drawn from the same range cut below
    there; the 1-2 px specular dots, which cannot be that wide, become discs): no flat negative of a far sphere's
    size, where a flat disc and a shaded sphere look alike. 0: every size, the draws unchanged.
    ``palette_share``: a share of the shapes (not the specular dots and holes, which keep their own colours) in the
    colour of a pixel of ``background_rgb`` within :data:`PALETTE_REACH_PX` of their centre: negatives in the local
    texture's own colours, so that a blob of a colour the texture around it lacks is not taught as a negative.
    0: the draws unchanged.

    Draw them before pasting the sphere, so the sphere's label stays exact (or restore the sphere's pixels after).
    ``max_count=0``: an unchanged copy.
    """
    check_distractor_kinds(kinds)
    out = np.array(background_rgb, dtype=np.uint8, order="C", copy=True)
    if max_count <= 0:
        return out
    h, w = out.shape[:2]
    one = 1 << _SHIFT

    def fx(x: float) -> int:  # sub-pixel fixed point
        return round(float(x) * one)

    def radius(low: float, high: float) -> float:  # a round shape's radius, at least half of min_width_px
        return rng.uniform(max(low, min(min_width_px / 2, high)), high)

    for _ in range(int(rng.integers(1, max_count + 1))):
        kind = kinds[int(rng.integers(len(kinds)))]
        if kind == "specular" and min_width_px > 2.0:
            kind = "disc"
        if around_px is None:
            c = (fx(rng.uniform(-0.1, 1.1) * w), fx(rng.uniform(-0.1, 1.1) * h))
        else:
            angle, reach = rng.uniform(0, 2 * np.pi), rng.uniform(*reach_px)
            c = (fx(around_px[0] + reach * np.cos(angle)), fx(around_px[1] + reach * np.sin(angle)))
        colour = tuple(float(x) for x in _random_colour(rng, saturated=rng.random() < saturated_share))
        if palette_share > 0 and kind not in ("specular", "hole") and rng.random() < palette_share:
            colour = local_colour(background_rgb, (c[0] / one, c[1] / one), rng)
        if kind == "ring":
            cv2.circle(out, c, fx(radius(2.5, 15)), colour, int(rng.integers(1, 4)), cv2.LINE_AA, _SHIFT)
        elif kind == "disc":
            cv2.circle(out, c, fx(radius(1.5, 15)), colour, -1, cv2.LINE_AA, _SHIFT)
        elif kind == "ellipse":
            a = radius(3, 16)
            axes = (fx(a), fx(a / rng.uniform(1.6, 4)))
            thick = -1 if rng.random() < 0.7 else int(rng.integers(1, 3))
            cv2.ellipse(out, c, axes, rng.uniform(0, 180), 0, 360, colour, thick, cv2.LINE_AA, _SHIFT)
        elif kind == "rect":
            sides = rng.uniform(2, 12, 2)
            sides *= max(1.0, min_width_px / sides.max())
            box = cv2.boxPoints(((c[0] / one, c[1] / one), tuple(sides), rng.uniform(0, 90)))
            cv2.fillPoly(out, [np.round(box * one).astype(np.int32)], colour, cv2.LINE_AA, _SHIFT)
        elif kind == "line":
            a, half = rng.uniform(0, np.pi), radius(2, 8)
            dx, dy = fx(half * np.cos(a)), fx(half * np.sin(a))
            cv2.line(out, (c[0] - dx, c[1] - dy), (c[0] + dx, c[1] + dy), colour, int(rng.integers(2, 6)),
                     cv2.LINE_AA, _SHIFT)
        elif kind == "specular":
            for _ in range(int(rng.integers(1, 4))):
                p = (fx(rng.uniform(0, w)), fx(rng.uniform(0, h)))
                grey = float(rng.uniform(220, 255))
                cv2.circle(out, p, fx(rng.uniform(0.5, 1.0)), (grey, grey, grey), -1, cv2.LINE_AA, _SHIFT)
        else:  # hole
            dark = float(rng.uniform(0, 30))
            cv2.circle(out, c, fx(radius(1.5, 10)), (dark, dark, dark), -1, cv2.LINE_AA, _SHIFT)
    return out


BLOB_WIDTH_PX = (2.5, 11.0)
"""Widths of :func:`add_photo_blobs`' blobs, px: the sphere's over an episode (3-11 px) with a margin below."""


def add_photo_blobs(background_rgb: np.ndarray, rng: np.random.Generator, max_count: int = 3) -> np.ndarray:
    """A copy of ``background_rgb`` (uint8 (H, W, 3)) with 1 to ``max_count`` sphere-sized *textured* blobs: the
    lures real tables show (a flower, a spot on a fruit, a printed dot), which flat distractors do not teach.

    Each blob is 2.5-11 px wide (:data:`BLOB_WIDTH_PX`), round to lobed (0-5 petals) and stretched up to 1.6x; its
    fill is one colour (often saturated) modulated by the luminance of another patch of the same background, so the
    blob carries the photo's own grain and no sphere's shading; soft (anti-aliased) edge, now and then a darker or
    lighter core. Draw them before pasting the sphere, so its label stays exact. ``max_count=0``: an unchanged copy.
    """
    out = np.array(background_rgb, dtype=np.float32, copy=True)
    if max_count <= 0:
        return out.astype(np.uint8)
    h, w = out.shape[:2]
    lum = out.mean(axis=2)
    for _ in range(int(rng.integers(1, max_count + 1))):
        radius = rng.uniform(*BLOB_WIDTH_PX) / 2
        pad = int(np.ceil(radius * 1.7)) + 1
        cy, cx = rng.uniform(0, h), rng.uniform(0, w)
        y0, x0 = int(np.floor(cy)) - pad, int(np.floor(cx)) - pad
        side = 2 * pad + 2
        yy, xx = np.mgrid[y0:y0 + side, x0:x0 + side].astype(np.float32) + 0.5
        dy, dx = yy - np.float32(cy), xx - np.float32(cx)
        turn, stretch = rng.uniform(0, np.pi), rng.uniform(1.0, 1.6)
        u = (dx * np.cos(turn) + dy * np.sin(turn)) / stretch
        v = -dx * np.sin(turn) + dy * np.cos(turn)
        lobes = int(rng.integers(0, 6))
        wobble = rng.uniform(0.1, 0.35) if lobes else 0.0
        outline = radius * (1 + wobble * np.cos(lobes * np.arctan2(v, u) + rng.uniform(0, 2 * np.pi)))
        dist = np.hypot(u, v)
        alpha = np.clip(outline - dist + 0.5, 0.0, 1.0)
        # the grain: luminance of another patch of the background, centred and scaled
        py, px = int(rng.integers(0, max(1, h - side))), int(rng.integers(0, max(1, w - side)))
        grain = lum[py:py + side, px:px + side]
        grain = np.pad(grain, ((0, side - grain.shape[0]), (0, side - grain.shape[1])), mode="edge")
        grain = (grain - grain.mean()) / (grain.std() + 1.0) * rng.uniform(0.05, 0.35)
        fill = _random_colour(rng, saturated=rng.random() < 0.7)[None, None, :] * (1 + grain[:, :, None])
        if rng.random() < 0.3:  # a core of another brightness (a flower's heart, a spot's centre)
            core = np.clip(0.45 * outline - dist + 0.5, 0.0, 1.0)[:, :, None]
            fill = fill * (1 + core * rng.uniform(-0.6, 0.6))
        # paste the window's part inside the image
        ys, xs = slice(max(y0, 0), min(y0 + side, h)), slice(max(x0, 0), min(x0 + side, w))
        wy, wx = slice(ys.start - y0, ys.stop - y0), slice(xs.start - x0, xs.stop - x0)
        a = alpha[wy, wx, None]
        out[ys, xs] = out[ys, xs] * (1 - a) + fill[wy, wx] * a
    return np.clip(out, 0, 255).astype(np.uint8)
