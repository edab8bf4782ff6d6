"""Sim-real composition: paste the simulated sphere and gripper fingers of a wrist frame onto a real photo.

Soft alpha edges (the object's rim pixels are part object, part photo: no hard cut-out, no halo of
sim table) and an optional soft shadow, so that the sphere is not separable by its border alone. The label is the renderer's ground-truth sphere mask, unchanged.
"""

from __future__ import annotations

from dataclasses import dataclass

import cv2
import numpy as np

from grasp_s2r.sim.camera import Frame
from grasp_s2r.vision.images.reshade import sphere_normals


@dataclass(frozen=True)
class CompositeConfig:
    """How sim pixels are blended onto a background."""

    edge_sigma_px: tuple[float, float] = (0.3, 0.8)
    """Range of the Gaussian sigma that softens the alpha edge of pasted pixels."""
    shadow_prob: float = 0.5
    """Probability of a soft shadow under the pasted pixels."""
    shadow_strength: tuple[float, float] = (0.15, 0.5)
    """Range of the fraction by which the shadow darkens the background."""
    shadow_offset_px: float = 3.0
    """Largest shift of the shadow relative to the object, per axis."""
    shadow_sigma_px: tuple[float, float] = (1.0, 3.0)
    """Range of the blur of the shadow."""
    paste_gripper: bool = True
    """Paste the gripper fingers too (they are in view on the real robot)."""
    camouflage_prob: float = 0.0
    """Probability that the sphere takes the colour of the photo around it (keeping its own shading and
    highlight): hard positives that teach shape and shading, not colour contrast. A training option
    (``train-vision --camouflage-prob``); evaluation keeps 0."""
    camouflage_brightness: tuple[float, float] = (0.6, 1.4)
    """Range of the camouflaged sphere's brightness relative to the photo around it."""
    mirror_prob: float = 0.0
    """Probability that the sphere is mirror-like: it shows the world around it, curved (:func:`mirror`). A
    training option (``train-vision --mirror-prob``); 0 draws nothing."""
    mirror_strength: tuple[float, float] = (0.4, 0.95)
    """Range of the reflection's share of the sphere's colour (the rest: its own shading)."""
    mirror_reach_radii: tuple[float, float] = (2.0, 8.0)
    """Range of how far around the sphere its reflection reaches, in sphere radii."""
    relocate_prob: float = 0.0
    """Probability that the sphere is moved, as rendered, to a uniformly random place in the image before it is
    pasted (:func:`relocate_sphere`): the sim views put it mostly near the fingers' axis, where the gripper tracks
    it, while a camera searching for it sees it anywhere. A training option (``train-vision --relocate-prob``);
    0 draws nothing."""
    border_prob: float = 0.0
    """Probability that the sphere is moved, as rendered, onto the image's border, which cuts it
    (:func:`border_sphere`): in the validation episodes that fail on tables never seen, a fifth of the frames that
    show the sphere show it at the border, where the segmenter rarely finds it. A training option (``train-vision
    --border-prob``); 0 draws nothing."""

    def __post_init__(self) -> None:
        if not 0.0 <= self.shadow_prob <= 1.0:
            raise ValueError(f"shadow_prob must be in [0, 1], got {self.shadow_prob}")
        if self.edge_sigma_px[0] < 0 or self.edge_sigma_px[1] < self.edge_sigma_px[0]:
            raise ValueError(f"edge_sigma_px must be an increasing non-negative range, got {self.edge_sigma_px}")
        if not 0.0 <= self.camouflage_prob <= 1.0:
            raise ValueError(f"camouflage_prob must be in [0, 1], got {self.camouflage_prob}")
        if not 0.0 <= self.mirror_prob <= 1.0:
            raise ValueError(f"mirror_prob must be in [0, 1], got {self.mirror_prob}")
        if not 0.0 <= self.relocate_prob <= 1.0:
            raise ValueError(f"relocate_prob must be in [0, 1], got {self.relocate_prob}")
        if not 0.0 <= self.border_prob <= 1.0:
            raise ValueError(f"border_prob must be in [0, 1], got {self.border_prob}")


def _blur(a: np.ndarray, sigma: float) -> np.ndarray:
    if sigma <= 0.05:
        return a
    return cv2.GaussianBlur(a, (0, 0), sigmaX=sigma, sigmaY=sigma, borderType=cv2.BORDER_REPLICATE)


def _fit_background(background_rgb: np.ndarray, hw: tuple[int, int]) -> np.ndarray:
    if background_rgb.shape[:2] == hw:
        return background_rgb
    h, w = hw
    interp = cv2.INTER_AREA if background_rgb.shape[0] > h else cv2.INTER_LINEAR
    return cv2.resize(background_rgb, (w, h), interpolation=interp)


def ring_around(mask: np.ndarray, ring_px: int) -> np.ndarray:
    """The pixels within ``ring_px`` (a square) of ``mask`` bool (H, W) but not in it, bool (H, W)."""
    return cv2.dilate(mask.astype(np.uint8), np.ones((2 * ring_px + 1,) * 2, np.uint8)).astype(bool) & ~mask


def relative_shading(pixels_rgb: np.ndarray, centre=np.median) -> np.ndarray:
    """Each of ``pixels_rgb`` float (n, 3)'s luminance (channel mean) over the ``centre`` of them all (at least 1): a
    sphere's shaded side and highlight, apart from its colour. (n,), in the pixels' float type."""
    luminance = pixels_rgb.mean(axis=1)
    return luminance / max(float(centre(luminance)), 1.0)


def camouflage(sphere_rgb: np.ndarray, sphere_mask: np.ndarray, background_rgb: np.ndarray, brightness: float,
               ring_px: int = 4) -> np.ndarray:
    """``sphere_rgb`` (H, W, 3) float with the pixels of ``sphere_mask`` recoloured to the mean colour of
    ``background_rgb`` in a ring of ``ring_px`` around the sphere, times ``brightness``, keeping the sphere's
    own relative shading (:func:`relative_shading`: the shaded side and the highlight survive)."""
    ring = ring_around(sphere_mask, ring_px)
    if not ring.any() or not sphere_mask.any():
        return sphere_rgb
    colour = background_rgb[ring].mean(axis=0)
    shading = relative_shading(sphere_rgb[sphere_mask])
    out = sphere_rgb.copy()
    out[sphere_mask] = shading[:, None] * colour[None] * brightness
    return np.clip(out, 0.0, 255.0)


def mirror(sphere_rgb: np.ndarray, sphere_mask: np.ndarray, background_rgb: np.ndarray, strength: float,
           reach_radii: float, flip: bool) -> np.ndarray:
    """``sphere_rgb`` (H, W, 3) float with the pixels of ``sphere_mask`` partly replaced by a reflection of
    ``background_rgb`` (same size, float): a mirror ball of the mask's centroid and area-equivalent radius ``r``.

    Each pixel's normal ``n`` (camera frame, :func:`reshade.sphere_normals`) reflects the view ray to
    ``2 n_z (n_x, n_y)``; the pixel shows the background that far from the centre, times ``reach_radii * r``
    (mirrored through the centre when ``flip``: what lies behind the camera is unknown, the surroundings stand in
    for it). The centre of the ball shows what is next to it, the rim what is farther away, compressed."""
    if not sphere_mask.any():
        return sphere_rgb
    rows, cols = np.nonzero(sphere_mask)
    cx, cy, r = cols.mean() + 0.5, rows.mean() + 0.5, max(float(np.sqrt(len(rows) / np.pi)), 0.5)
    n = sphere_normals(sphere_mask.shape, (cx, cy, r))[sphere_mask]
    sign = -1.0 if flip else 1.0
    reach = reach_radii * r
    map_x = (cx - 0.5 + sign * 2.0 * n[:, 2] * n[:, 0] * reach).astype(np.float32)[None]
    map_y = (cy - 0.5 + sign * 2.0 * n[:, 2] * n[:, 1] * reach).astype(np.float32)[None]
    seen = cv2.remap(background_rgb.astype(np.float32), map_x, map_y, cv2.INTER_LINEAR,
                     borderMode=cv2.BORDER_REFLECT_101)[0]
    out = sphere_rgb.copy()
    out[sphere_mask] = (1.0 - strength) * sphere_rgb[sphere_mask] + strength * seen
    return out


def _touches_fingers(frame: Frame) -> bool:
    """Whether the sphere lies within one pixel of the fingers (its pixels then hide part of them: it stays put)."""
    near = cv2.dilate(frame.sphere_mask.astype(np.uint8), np.ones((3, 3), np.uint8)).astype(bool)
    return bool((near & frame.gripper_mask).any())


def relocate_sphere(frame: Frame, rng: np.random.Generator, tries: int = 8) -> Frame:
    """``frame`` with its sphere's pixels (and mask) moved by a whole-pixel shift that puts the sphere's bounding box
    anywhere inside the image, uniformly; the fingers stay. A sphere that touches the fingers (one pixel apart), is
    cut by the border, or finds no place clear of the fingers in ``tries`` draws stays where it is. The pixels it
    left are not pasted (the mask moves with it), so the background shows there."""
    mask = frame.sphere_mask
    if not mask.any():
        return frame
    h, w = mask.shape
    ys, xs = np.nonzero(mask)
    y0, y1, x0, x1 = int(ys.min()), int(ys.max()) + 1, int(xs.min()), int(xs.max()) + 1
    if _touches_fingers(frame) or y0 == 0 or x0 == 0 or y1 == h or x1 == w:
        return frame
    for _ in range(tries):
        ny, nx = int(rng.integers(0, h - (y1 - y0) + 1)), int(rng.integers(0, w - (x1 - x0) + 1))
        moved = np.zeros_like(mask)
        moved[ny:ny + y1 - y0, nx:nx + x1 - x0] = mask[y0:y1, x0:x1]
        if (moved & frame.gripper_mask).any():
            continue
        rgb = frame.rgb.copy()
        rgb[moved] = frame.rgb[y0:y1, x0:x1][mask[y0:y1, x0:x1]]
        return Frame(rgb=rgb, sphere_mask=moved, gripper_mask=frame.gripper_mask)
    return frame


def border_sphere(frame: Frame, rng: np.random.Generator, tries: int = 8) -> Frame:
    """``frame`` with its sphere's pixels (and mask) moved by a whole-pixel shift that puts the sphere's centre on
    one of the image's four borders (uniformly along it, up to half the sphere's width inside or outside: the sphere
    cut by the border, or touching it within a pixel), the pixels that leave the image dropped; the fingers stay. A
    sphere that touches the fingers, or finds no place clear of them in ``tries`` draws, stays where it is (as
    :func:`relocate_sphere`)."""
    mask = frame.sphere_mask
    if not mask.any() or _touches_fingers(frame):
        return frame
    h, w = mask.shape
    ys, xs = np.nonzero(mask)
    cy, cx = (ys.min() + ys.max()) / 2.0, (xs.min() + xs.max()) / 2.0
    half = max(1.0, (max(ys.max() - ys.min(), xs.max() - xs.min()) + 1) / 2.0)
    for _ in range(tries):
        side, along, across = int(rng.integers(4)), rng.uniform(0.0, 1.0), rng.uniform(-half, half)
        ty, tx = {0: (across, along * (w - 1)), 1: (h - 1 - across, along * (w - 1)),
                  2: (along * (h - 1), across), 3: (along * (h - 1), w - 1 - across)}[side]
        dy, dx = round(ty - cy), round(tx - cx)
        ny, nx = ys + dy, xs + dx
        keep = (ny >= 0) & (ny < h) & (nx >= 0) & (nx < w)
        moved = np.zeros_like(mask)
        moved[ny[keep], nx[keep]] = True
        if not moved.any() or (moved & frame.gripper_mask).any():
            continue
        rgb = frame.rgb.copy()
        rgb[ny[keep], nx[keep]] = frame.rgb[ys[keep], xs[keep]]
        return Frame(rgb=rgb, sphere_mask=moved, gripper_mask=frame.gripper_mask)
    return frame


def composite_frame(
    frame: Frame, background_rgb: np.ndarray, rng: np.random.Generator, config: CompositeConfig | None = None,
) -> tuple[np.ndarray, np.ndarray]:
    """Paste the sphere (and gripper) pixels of ``frame`` onto ``background_rgb``.

    ``background_rgb``: uint8 (h, w, 3), resized to the frame size if it differs.
    Returns (rgb uint8 (H, W, 3), sphere mask bool (H, W)); the mask is ``frame.sphere_mask`` (moved with the
    sphere where ``config.relocate_prob`` moved it).
    """
    cfg = config or CompositeConfig()
    if cfg.relocate_prob > 0 and rng.random() < cfg.relocate_prob:  # no draw at 0: evaluation is unchanged
        frame = relocate_sphere(frame, rng)
    if cfg.border_prob > 0 and rng.random() < cfg.border_prob:  # no draw at 0: evaluation is unchanged
        frame = border_sphere(frame, rng)
    hw = frame.rgb.shape[:2]
    bg = _fit_background(np.asarray(background_rgb), hw).astype(np.float32)
    paste = frame.sphere_mask | frame.gripper_mask if cfg.paste_gripper else frame.sphere_mask
    hard = paste.astype(np.float32)
    if rng.random() < cfg.shadow_prob and paste.any():
        dx, dy = rng.uniform(-cfg.shadow_offset_px, cfg.shadow_offset_px, size=2)
        shift = np.float32([[1, 0, dx], [0, 1, dy]])
        shadow = cv2.warpAffine(hard, shift, (hw[1], hw[0]), flags=cv2.INTER_LINEAR, borderValue=0.0)
        shadow = _blur(shadow, float(rng.uniform(*cfg.shadow_sigma_px)))
        bg *= (1.0 - float(rng.uniform(*cfg.shadow_strength)) * shadow)[:, :, None]
    obj = frame.rgb.astype(np.float32)
    if cfg.camouflage_prob > 0 and rng.random() < cfg.camouflage_prob:  # no draw at 0: evaluation is unchanged
        obj = camouflage(obj, frame.sphere_mask, bg, float(rng.uniform(*cfg.camouflage_brightness)))
    if cfg.mirror_prob > 0 and rng.random() < cfg.mirror_prob:
        obj = mirror(obj, frame.sphere_mask, bg, float(rng.uniform(*cfg.mirror_strength)),
                     float(rng.uniform(*cfg.mirror_reach_radii)), bool(rng.random() < 0.5))
    alpha = _blur(hard, float(rng.uniform(*cfg.edge_sigma_px)))
    # blend only the object's own rim pixels: pixels outside it hold the sim table, which must not leak
    alpha = (alpha * hard)[:, :, None]
    out = alpha * obj + (1.0 - alpha) * bg
    return np.clip(out + 0.5, 0, 255).astype(np.uint8), frame.sphere_mask.copy()
