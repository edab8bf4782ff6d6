"""Matplotlib pictures shared by the notebooks and the CLI: rows of wrist frames with captions, mask tints.

PNG grids made without matplotlib (composites, TP / FP / FN overlays, training curves) live in
:mod:`grasp_s2r.vision.overlays`; the DAgger learning curve in :mod:`grasp_s2r.control.curves`.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

if TYPE_CHECKING:
    from matplotlib.figure import Figure

MASK_RGB = (255, 220, 0)
"""Tint of a mask drawn over an image (yellow, as in ``vision.overlays.save_composite_grid``)."""


def tint_mask(rgb_uint8: np.ndarray, mask: np.ndarray, color: tuple[int, int, int] = MASK_RGB,
              alpha: float = 0.6) -> np.ndarray:
    """``rgb_uint8`` (H, W, 3) with the pixels of ``mask`` bool (H, W) blended towards ``color``; a copy."""
    out = np.array(rgb_uint8, dtype=np.uint8, copy=True)
    m = np.asarray(mask, dtype=bool)
    if m.shape != out.shape[:2]:
        raise ValueError(f"mask {m.shape} does not match image {out.shape[:2]}")
    out[m] = ((1.0 - alpha) * out[m] + alpha * np.asarray(color, dtype=float)).astype(np.uint8)
    return out


def evenly_spaced(n_items: int, n_pick: int) -> np.ndarray:
    """``min(n_items, n_pick)`` indices spread over 0 .. n_items-1, first and last included; int (k,)."""
    if n_items <= 0:
        return np.zeros(0, dtype=int)
    return np.unique(np.linspace(0, n_items - 1, min(n_items, n_pick)).round().astype(int))


def image_rows(rows: Mapping[str, Sequence[np.ndarray]], titles: Sequence[str] | None = None,
               suptitle: str = "", tile_in: float = 1.35, title_fontsize: float = 8.0,
               captions: Mapping[str, Sequence[str]] | None = None) -> Figure:
    """A grid of images: one row per entry of ``rows`` (its key is the row label), one column per frame.

    Each image is uint8 (H, W, 3) or a mask bool (H, W) (drawn white on black); rows may differ in
    length. ``titles``: one caption per column, written above the top row (e.g. the step and the
    expert's phase). ``captions``: per row, one caption per image, written above each image.
    """
    import matplotlib.pyplot as plt

    names = list(rows)
    if not names:
        raise ValueError("no rows to draw")
    n_cols = max(len(rows[k]) for k in names)
    if n_cols == 0:
        raise ValueError("no images to draw")
    if titles is not None and len(titles) != n_cols:
        raise ValueError(f"{len(titles)} titles for {n_cols} columns")
    extra_in = 0.25 * len(captions or {})
    fig, axes = plt.subplots(len(names), n_cols, figsize=(tile_in * n_cols, tile_in * len(names) + 0.4 + extra_in),
                             squeeze=False)
    for r, name in enumerate(names):
        for c in range(n_cols):
            ax = axes[r, c]
            ax.set_xticks([])
            ax.set_yticks([])
            if c < len(rows[name]):
                img = np.asarray(rows[name][c])
                if img.ndim == 2:
                    ax.imshow(img.astype(float), cmap="gray", vmin=0.0, vmax=1.0, interpolation="nearest")
                else:
                    ax.imshow(img, interpolation="nearest")
            else:
                ax.axis("off")
            if c == 0:
                ax.set_ylabel(name, fontsize=title_fontsize + 1)
            if r == 0 and titles is not None:
                ax.set_title(titles[c], fontsize=title_fontsize)
            if captions and c < len(captions.get(name, ())):
                ax.set_title(captions[name][c], fontsize=title_fontsize)
    if suptitle:
        fig.suptitle(suptitle, fontsize=title_fontsize + 2)
    fig.tight_layout()
    return fig


def save_figure(fig: Figure, path: Path | str, dpi: int = 110) -> Path:
    """Write ``fig`` as a PNG (folders created); returns the path."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=dpi, format="png")
    return path
