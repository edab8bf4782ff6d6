"""Segmenters on your scene, frame by frame: sim views with your photos as the table's texture, as ``table-photo``
episodes show them, each segmenter's masks on the same views, and a picture of the views where they differ.

``grasp-s2r adapt`` runs it on the shipped and the fine-tuned segmenter after its fine-tune (``OUT/scene_check.png``,
``adapt.json``), and ``benchmarks/own_scene.py`` on the test parts of each photo set. The views are the controller's
camera (64 px) at the heights and offsets of the training recipe's sim views, a fifth of them without the sphere (for
false detections); view ``i`` is drawn from seeds ``seed + i``, so two calls with the same photos, count and seed show
the same views.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from pathlib import Path

import numpy as np

SCENE_VIEW_SEED = 7_000_000
"""Default seed of the views (no training or evaluation run uses it)."""


def photo_table_views(photos: list[np.ndarray], n_views: int, seed: int = SCENE_VIEW_SEED,
                      progress: bool = False, margin_px: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """``n_views`` sim views of the controller's camera with one of ``photos`` (uint8 (H, W, 3)) as the table's
    texture: rgb uint8 (n, 64, 64, 3) and the sphere's masks bool (n, 64, 64) (all False in a fifth of them). The
    tables are one texture from each photo, as the ``table-photo`` condition makes them (and as many as the training
    recipe's 32, ``ViewConfig.photo_textures``, where there are fewer photos). ``margin_px``: the same views seen
    that many pixels beyond each edge (``CameraConfig.widened``: their central 64 x 64 pixels are the views)."""
    from tqdm import tqdm

    from grasp_s2r.sim.config import control_env_config
    from grasp_s2r.vision.images.simviews import SimViewSampler, ViewConfig

    if n_views < 1:
        raise ValueError(f"n_views must be >= 1, got {n_views}")
    if not photos:
        raise ValueError("no photos to make the table of")
    env = control_env_config()
    env = dataclasses.replace(env, camera=env.camera.widened(margin_px))  # margin 0: the camera itself
    sampler = SimViewSampler(env, ViewConfig(empty_prob=0.2), table_photos=photos, texture_seed=seed,
                             n_photo_textures=max(ViewConfig.photo_textures, len(photos)))
    try:
        frames = [sampler.render(seed + i, np.random.default_rng([seed, i]),
                                 photo_table=np.random.default_rng([seed, i, 1]))
                  for i in tqdm(range(n_views), desc="scene views", unit="view", disable=not progress, leave=False)]
    finally:
        sampler.close()
    return np.stack([f.rgb for f in frames]), np.stack([f.sphere_mask for f in frames]).astype(bool)


def frame_figures(pred: np.ndarray, gt: np.ndarray) -> dict[str, float | int]:
    """Precision, recall, false detections (any mask pixel on a sphere-free view) and the share of spheres found
    (the mask touches them) below and from 6 px wide (``metrics.SMALL_SPHERE_PX``; NaN where no view has one);
    ``pred``, ``gt`` bool (N, H, W)."""
    from grasp_s2r.vision.evaluation.metrics import SMALL_SPHERE_PX, metrics_by_width, pixel_metrics

    m = pixel_metrics(pred, gt)
    widths = {row["width_px"]: row["found_rate"] for row in metrics_by_width(pred, gt)}
    return {"precision": float(m["precision"]), "recall": float(m["recall"]),
            "false_detection_rate": float(m["false_detection_rate"]),
            "found_below_6px": float(widths.get(f"< {SMALL_SPHERE_PX:g}", np.nan)),
            "found_6px_and_over": float(widths.get(f">= {SMALL_SPHERE_PX:g}", np.nan)),
            "views": len(gt)}


def predict_views(segmenters: Mapping[str, str], rgb: np.ndarray) -> dict[str, np.ndarray]:
    """Each segmenter's masks (bool (N, H, W)) on ``rgb``; a name maps to its checkpoint ("" = the shipped one)."""
    from grasp_s2r.vision.networks.segmenter import Segmenter, default_checkpoint_path

    return {name: Segmenter.load(path or default_checkpoint_path(), device="cpu").predict(rgb)
            for name, path in segmenters.items()}


def _outcomes(preds: Mapping[str, np.ndarray], gt: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Per segmenter and view (bool (S, N)): its mask touches the sphere (found), its mask has pixels off it (fired)."""
    found = np.stack([(p & gt).any(axis=(1, 2)) for p in preds.values()])
    fired = np.stack([(p & ~gt).any(axis=(1, 2)) for p in preds.values()])
    return found, fired


def differing_views(preds: Mapping[str, np.ndarray], gt: np.ndarray, n: int = 12) -> np.ndarray:
    """Indices of up to ``n`` views, those where the segmenters' outcomes differ first (one finds the sphere and
    another not, or one fires off it and another not), then the views any of them gets wrong, in view order."""
    found, fired = _outcomes(preds, gt)
    differ = (found.any(0) & ~found.all(0)) | (fired.any(0) & ~fired.all(0))
    has_sphere = gt.any(axis=(1, 2))
    wrong = (has_sphere & ~found.all(0)) | fired.any(0)
    order = list(np.flatnonzero(differ)) + list(np.flatnonzero(wrong & ~differ))
    return np.array(order[:n], dtype=int)


def save_scene_picture(rgb: np.ndarray, gt: np.ndarray, preds: Mapping[str, np.ndarray], path: Path | str,
                       title: str, n: int = 12) -> Path | None:
    """Rows: the views (each captioned with the sphere's width, who misses it and who fires off it), then each
    segmenter's overlay on them (green on the sphere, red off it, blue missed), over the views of
    :func:`differing_views`; None when every segmenter gets every view right (nothing to show)."""
    from grasp_s2r.drawing import image_rows, overlay_tile, save_figure
    from grasp_s2r.vision.evaluation.metrics import mask_width_px

    idx = differing_views(preds, gt, n)
    if not len(idx):
        return None
    found, fired = _outcomes(preds, gt)
    names = list(preds)
    captions = {"view": [_caption(float(w), [n for n, f in zip(names, found[:, i], strict=True) if not f],
                                  [n for n, f in zip(names, fired[:, i], strict=True) if f], len(names))
                         for i, w in zip(idx, mask_width_px(gt[idx]), strict=True)]}
    rows = {"view": [rgb[i] for i in idx]}
    for name, pred in preds.items():
        rows[name] = [overlay_tile(rgb[i], pred[i], gt[i]) for i in idx]
    legend = "green: mask on the sphere, red: mask off it, blue: sphere missed"
    return save_figure(image_rows(rows, suptitle=f"{title}\n{legend}", captions=captions, tile_in=1.6), path)


def _caption(width_px: float, missed: list[str], off: list[str], n_segmenters: int) -> str:
    """A view's caption: the sphere's width, then who misses it (only where it is there) and who fires off it."""
    lines = [f"{width_px:.0f} px" if width_px > 0 else "no sphere"]
    for what, names in (("missed", missed if width_px > 0 else []), ("off it", off)):
        if names:
            lines.append(f"{what}: {'all' if len(names) == n_segmenters > 1 else ', '.join(names)}")
    return "\n".join(lines)


def format_scene_table(figures: Mapping[str, Mapping[str, float]]) -> str:
    """One line per segmenter: found below / from 6 px, false detections."""
    w = max(10, *(len(name) for name in figures))
    lines = [f"  {'segmenter':{w}s} {'found < 6 px':>13s} {'found >= 6 px':>14s} {'false det.':>11s}"]
    for name, f in figures.items():
        lines.append(f"  {name:{w}s} {f['found_below_6px']:13.2f} {f['found_6px_and_over']:14.2f} "
                     f"{f['false_detection_rate']:11.2f}")
    return "\n".join(lines)
