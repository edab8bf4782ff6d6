"""Pictures of rollouts for a person to look at: a PNG strip and an animated GIF per episode set.

Each frame shows the camera image (what the segmenter saw) next to the controller's input mask
(white), with the ground-truth mask outline in green and the step's action written below.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import cv2
import numpy as np
from PIL import Image

from grasp_s2r.runtime.records import EpisodeRecord

_SCALE = 3
"""Each camera pixel becomes this many screen pixels."""


def _tile(rgb: np.ndarray, input_mask: np.ndarray, gt_mask: np.ndarray, caption: str) -> np.ndarray:
    """One annotated frame, uint8 (3H + 14, 6W, 3), from rgb (H, W, 3) and masks bool (H, W)."""
    h, w = input_mask.shape
    big = cv2.resize(rgb, (w * _SCALE, h * _SCALE), interpolation=cv2.INTER_NEAREST)
    mask = np.repeat(input_mask.astype(np.uint8)[:, :, None] * 255, 3, axis=2)
    mask = cv2.resize(mask, (w * _SCALE, h * _SCALE), interpolation=cv2.INTER_NEAREST)
    gt = cv2.resize(gt_mask.astype(np.uint8), (w * _SCALE, h * _SCALE), interpolation=cv2.INTER_NEAREST)
    contours, _ = cv2.findContours(gt, cv2.RETR_EXTERNAL, cv2.CHAIN_APPROX_NONE)
    cv2.drawContours(mask, contours, -1, (0, 200, 0), 1)
    tile = np.concatenate([big, mask], axis=1)
    band = np.full((14, tile.shape[1], 3), 255, np.uint8)
    cv2.putText(band, caption, (2, 10), cv2.FONT_HERSHEY_SIMPLEX, 0.33, (0, 0, 0), 1, cv2.LINE_AA)
    return np.concatenate([tile, band], axis=0)


def episode_frames(rec: EpisodeRecord) -> list[np.ndarray]:
    """Annotated frames of a recorded episode (one per step)."""
    a = rec.arrays
    frames = []
    for t in range(rec.length):
        act = a["executed_action"][t]
        caption = f"t={t} a=({act[0]:+.2f},{act[1]:+.2f},{act[2]:+.2f}) {'close' if act[3] > 0 else 'open'}"
        frames.append(_tile(a["rgb"][t], a["input_mask"][t], a["sphere_mask"][t], caption))
    return frames


def write_strip(records: Sequence[EpisodeRecord], path: Path, columns: int = 8) -> Path:
    """PNG: one row per episode, ``columns`` frames evenly spread over it (the last frame included)."""
    rows = []
    for rec in records:
        frames = episode_frames(rec)
        picks = np.unique(np.linspace(0, len(frames) - 1, min(columns, len(frames))).round().astype(int))
        row = [frames[i] for i in picks] + [np.full_like(frames[0], 255)] * (columns - len(picks))
        label = np.full((row[0].shape[0], 70, 3), 255, np.uint8)
        cv2.putText(label, f"seed {rec.request.seed}", (2, 20), cv2.FONT_HERSHEY_SIMPLEX, 0.3, (0, 0, 0), 1)
        verdict, color = ("success", (0, 140, 0)) if rec.success else ("failure", (200, 0, 0))
        cv2.putText(label, verdict, (2, 36), cv2.FONT_HERSHEY_SIMPLEX, 0.35, color, 1)
        rows.append(np.concatenate([label, *row], axis=1))
    Image.fromarray(np.concatenate(rows, axis=0)).save(path)
    return Path(path)


def write_gif(records: Sequence[EpisodeRecord], path: Path, fps: float = 5.0) -> Path:
    """Animated GIF of the episodes one after the other."""
    frames = [Image.fromarray(f) for rec in records for f in episode_frames(rec)]
    frames[0].save(path, save_all=True, append_images=frames[1:], duration=int(1000 / fps), loop=0)
    return Path(path)
