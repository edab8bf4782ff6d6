"""Pictures for a person to look at: composite grids, prediction overlays (TP / FP / FN), training curves."""

from __future__ import annotations

import io
from collections.abc import Sequence
from pathlib import Path

import cv2
import numpy as np

from grasp_s2r.files import atomic_write

TP_RGB = (40, 220, 40)
"""Overlay colour of true-positive pixels (green)."""
FP_RGB = (240, 30, 30)
"""Overlay colour of false-positive pixels (red)."""
FN_RGB = (40, 110, 255)
"""Overlay colour of false-negative pixels (blue)."""
_TARGET_RGB = (255, 220, 0)


def _tint(rgb: np.ndarray, mask: np.ndarray, color: tuple[int, int, int], alpha: float = 0.65) -> None:
    rgb[mask] = ((1 - alpha) * rgb[mask] + alpha * np.asarray(color)).astype(np.uint8)


def _grid(tiles: Sequence[np.ndarray], columns: int, scale: int) -> np.ndarray:
    """Tiles uint8 (h, w, 3), all the same size -> one uint8 image, upscaled ``scale`` x (nearest)."""
    h, w = tiles[0].shape[:2]
    rows = -(-len(tiles) // columns)
    grid = np.full((rows * (h + 2), columns * (w + 2), 3), 255, np.uint8)
    for k, tile in enumerate(tiles):
        r, c = divmod(k, columns)
        grid[r * (h + 2):r * (h + 2) + h, c * (w + 2):c * (w + 2) + w] = tile
    return cv2.resize(grid, None, fx=scale, fy=scale, interpolation=cv2.INTER_NEAREST)


def _write_png(rgb: np.ndarray, path: Path) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    if not cv2.imwrite(str(path), cv2.cvtColor(rgb, cv2.COLOR_RGB2BGR)):
        raise OSError(f"could not write {path}")


def save_composite_grid(samples: Sequence[tuple[np.ndarray, np.ndarray]], path: Path, columns: int = 8,
                        scale: int = 3) -> None:
    """Pairs of tiles: the composite, and the composite with its label mask tinted yellow.

    ``samples``: (rgb uint8 (H, W, 3), mask bool (H, W)) each.
    """
    tiles = []
    for rgb, mask in samples:
        labelled = rgb.copy()
        _tint(labelled, mask, _TARGET_RGB)
        tiles += [rgb, labelled]
    _write_png(_grid(tiles, 2 * columns, scale), Path(path))


def overlay_tile(rgb: np.ndarray, pred: np.ndarray, target: np.ndarray) -> np.ndarray:
    """uint8 (H, W, 3) with TP green, FP red, FN blue; ``pred`` and ``target`` bool (H, W)."""
    out = rgb.copy()
    _tint(out, pred & target, TP_RGB)
    _tint(out, pred & ~target, FP_RGB)
    _tint(out, ~pred & target, FN_RGB)
    return out


def save_overlay_grid(images: np.ndarray, pred: np.ndarray, target: np.ndarray, path: Path,
                      max_images: int = 48, columns: int = 8, scale: int = 3) -> None:
    """Image beside its overlay (TP green, FP red, FN blue) for the first ``max_images`` images.

    ``images`` uint8 (N, H, W, 3); ``pred``, ``target`` bool (N, H, W).
    """
    n = min(len(images), max_images)
    if n == 0:
        raise ValueError("no images to draw")
    tiles = []
    for i in range(n):
        tiles += [images[i], overlay_tile(images[i], pred[i], target[i])]
    _write_png(_grid(tiles, 2 * columns, scale), Path(path))


def save_training_curve(history: Sequence[dict[str, float]], path: Path) -> None:
    """Training loss and validation precision / recall / IoU against the step, as a PNG."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    steps = [h["step"] for h in history]
    fig, (ax_loss, ax_val) = plt.subplots(1, 2, figsize=(9, 3.5))
    ax_loss.plot(steps, [h["train_loss"] for h in history], marker=".")
    ax_loss.set(xlabel="step", ylabel="train loss (BCE + Dice)", yscale="log")
    for key in ("val_precision", "val_recall", "val_iou"):
        ax_val.plot(steps, [h[key] for h in history], marker=".", label=key.removeprefix("val_"))
    ax_val.set(xlabel="step", ylabel="validation (pixels, micro)", ylim=(0, 1))
    ax_val.legend(loc="lower right")
    ax_val.grid(alpha=0.3)
    fig.tight_layout()
    buf = io.BytesIO()
    fig.savefig(buf, dpi=100, format="png")
    plt.close(fig)
    atomic_write(Path(path), buf.getvalue())
