"""Every picture the package draws for a person to look at, in one place.

- images: mask tints, TP / FP / FN overlays, tile grids, composite and overlay grid PNGs (OpenCV, no matplotlib);
- rollouts: a PNG strip and an animated GIF of recorded episodes (camera image beside the controller's input
  mask, ground-truth outline, the step's action);
- figures (matplotlib): rows of wrist frames with captions, the segmenter's training curve, DAgger's learning curve.

Images are uint8 (H, W, 3) RGB, masks bool (H, W), unless said otherwise.
"""

from __future__ import annotations

import io
import json
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import cv2
import numpy as np
from PIL import Image

from grasp_s2r.files import atomic_write

if TYPE_CHECKING:
    from matplotlib.figure import Figure

    from grasp_s2r.runtime.records import EpisodeRecord

MASK_RGB = (255, 220, 0)
"""Tint of a label or mask drawn over an image (yellow)."""
TP_RGB = (40, 220, 40)
"""Overlay colour of true-positive pixels (green)."""
FP_RGB = (240, 30, 30)
"""Overlay colour of false-positive pixels (red)."""
FN_RGB = (40, 110, 255)
"""Overlay colour of false-negative pixels (blue)."""
OVERLAY_ALPHA = 0.65
"""Weight of the colour in the TP / FP / FN overlays and the composite grid's label tint."""
STRIP_SCALE = 3
"""In rollout strips and GIFs each camera pixel becomes this many screen pixels."""


# --- images -------------------------------------------------------------------------------------------------------

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


def overlay_tile(rgb: np.ndarray, pred: np.ndarray, target: np.ndarray) -> np.ndarray:
    """uint8 (H, W, 3) with TP green, FP red, FN blue; ``pred`` and ``target`` bool (H, W)."""
    pred, target = np.asarray(pred, bool), np.asarray(target, bool)
    out = tint_mask(rgb, pred & target, TP_RGB, OVERLAY_ALPHA)
    out = tint_mask(out, pred & ~target, FP_RGB, OVERLAY_ALPHA)
    return tint_mask(out, ~pred & target, FN_RGB, OVERLAY_ALPHA)


def crop_around(image: np.ndarray, mask: np.ndarray, side: int = 16) -> np.ndarray:
    """The ``side`` x ``side`` window of ``image`` (H, W[, C]) centred on the pixels of ``mask`` bool (H, W) (the image
    centre when it has none); edges are repeated where the window leaves the image."""
    ys, xs = np.nonzero(np.asarray(mask, bool))
    cy, cx = (int(ys.mean()), int(xs.mean())) if len(ys) else (image.shape[0] // 2, image.shape[1] // 2)
    half = side // 2
    pad = ((half, half), (half, half)) + ((0, 0),) * (image.ndim - 2)
    return np.pad(image, pad, mode="edge")[cy:cy + side, cx:cx + side]


def image_grid(tiles: Sequence[np.ndarray], columns: int = 8, scale: int = 3) -> np.ndarray:
    """Tiles uint8 (h, w, 3) of one size -> one uint8 image on a white background, upscaled ``scale`` x (nearest)."""
    h, w = tiles[0].shape[:2]
    rows = -(-len(tiles) // columns)
    grid = np.full((rows * (h + 2), min(columns, len(tiles)) * (w + 2), 3), 255, np.uint8)
    for k, tile in enumerate(tiles):
        r, c = divmod(k, columns)
        grid[r * (h + 2):r * (h + 2) + h, c * (w + 2):c * (w + 2) + w] = tile
    return cv2.resize(grid, None, fx=scale, fy=scale, interpolation=cv2.INTER_NEAREST)


def overlay_grid(images: np.ndarray, pred: np.ndarray, target: np.ndarray, n: int = 16, columns: int = 8,
                 scale: int = 3) -> np.ndarray:
    """The first ``n`` images (N, H, W, 3), each beside its overlay (TP green, FP red, FN blue), as one picture;
    ``pred``, ``target`` bool (N, H, W)."""
    tiles: list[np.ndarray] = []
    for i in range(min(n, len(images))):
        tiles += [np.asarray(images[i]), overlay_tile(np.asarray(images[i]), pred[i], target[i])]
    if not tiles:
        raise ValueError("no images to draw")
    return image_grid(tiles, columns, scale)


def write_png(rgb: np.ndarray, path: Path | str) -> Path:
    """Write uint8 (H, W, 3) RGB as a PNG, atomically (folders created); returns the path."""
    ok, encoded = cv2.imencode(".png", cv2.cvtColor(np.ascontiguousarray(rgb), cv2.COLOR_RGB2BGR))
    if not ok:
        raise OSError(f"could not encode {path} as PNG")
    atomic_write(Path(path), encoded.tobytes())
    return Path(path)


def save_composite_grid(samples: Sequence[tuple[np.ndarray, np.ndarray]], path: Path, columns: int = 8,
                        scale: int = 3) -> None:
    """Pairs of tiles: the composite, and the composite with its label mask tinted yellow.

    ``samples``: (rgb uint8 (H, W, 3), mask bool (H, W)) each.
    """
    tiles = []
    for rgb, mask in samples:
        tiles += [rgb, tint_mask(rgb, mask, MASK_RGB, OVERLAY_ALPHA)]
    write_png(image_grid(tiles, 2 * columns, scale), path)


def save_overlay_grid(images: np.ndarray, pred: np.ndarray, target: np.ndarray, path: Path,
                      max_images: int = 48, columns: int = 8, scale: int = 3) -> None:
    """Image beside its overlay (TP green, FP red, FN blue) for the first ``max_images`` images, as a PNG.

    ``images`` uint8 (N, H, W, 3); ``pred``, ``target`` bool (N, H, W).
    """
    write_png(overlay_grid(images, pred, target, max_images, 2 * columns, scale), path)


# --- rollouts -----------------------------------------------------------------------------------------------------

def _rollout_tile(rgb: np.ndarray, input_mask: np.ndarray, gt_mask: np.ndarray, caption: str) -> np.ndarray:
    """One annotated frame, uint8 (3H + 14, 6W, 3), from rgb (H, W, 3) and masks bool (H, W)."""
    h, w = input_mask.shape
    size = (w * STRIP_SCALE, h * STRIP_SCALE)
    big = cv2.resize(rgb, size, interpolation=cv2.INTER_NEAREST)
    mask = cv2.resize(np.repeat(input_mask.astype(np.uint8)[:, :, None] * 255, 3, axis=2), size,
                      interpolation=cv2.INTER_NEAREST)
    gt = cv2.resize(gt_mask.astype(np.uint8), size, interpolation=cv2.INTER_NEAREST)
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
        frames.append(_rollout_tile(a["rgb"][t], a["input_mask"][t], a["sphere_mask"][t], caption))
    return frames


def write_strip(records: Sequence[EpisodeRecord], path: Path, columns: int = 8) -> Path:
    """PNG: one row per episode, ``columns`` frames evenly spread over it (the last frame included)."""
    rows = []
    for rec in records:
        frames = episode_frames(rec)
        picks = evenly_spaced(len(frames), columns)
        row = [frames[i] for i in picks] + [np.full_like(frames[0], 255)] * (columns - len(picks))
        label = np.full((row[0].shape[0], 70, 3), 255, np.uint8)
        cv2.putText(label, f"seed {rec.request.seed}", (2, 20), cv2.FONT_HERSHEY_SIMPLEX, 0.3, (0, 0, 0), 1)
        verdict, color = ("success", (0, 140, 0)) if rec.success else ("failure", (200, 0, 0))
        cv2.putText(label, verdict, (2, 36), cv2.FONT_HERSHEY_SIMPLEX, 0.35, color, 1)
        rows.append(np.concatenate([label, *row], axis=1))
    return write_png(np.concatenate(rows, axis=0), path)


def write_gif(records: Sequence[EpisodeRecord], path: Path, fps: float = 5.0) -> Path:
    """Animated GIF of the episodes one after the other."""
    frames = [Image.fromarray(f) for rec in records for f in episode_frames(rec)]
    buf = io.BytesIO()
    frames[0].save(buf, format="GIF", save_all=True, append_images=frames[1:], duration=int(1000 / fps), loop=0)
    atomic_write(Path(path), buf.getvalue())
    return Path(path)


# --- figures (matplotlib) -----------------------------------------------------------------------------------------

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


def save_figure(fig: Figure, path: Path | str, dpi: int = 110, metadata: dict[str, str] | None = None) -> Path:
    """Write ``fig`` as a PNG, atomically (folders created); returns the path. The figure stays open."""
    buf = io.BytesIO()
    fig.savefig(buf, dpi=dpi, format="png", metadata=metadata)
    atomic_write(Path(path), buf.getvalue())
    return Path(path)


def _pyplot() -> Any:
    """matplotlib.pyplot on the file-only Agg backend (commands draw without a display)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def save_training_curve(history: Sequence[dict[str, float]], path: Path, config: dict[str, Any] | None = None) -> None:
    """The segmenter's training loss and validation precision / recall / IoU against the step, as a PNG; ``config``
    (the run's ``run.json``) stored in its metadata (``Description``), as :func:`plot_curve` does."""
    plt = _pyplot()
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
    save_figure(fig, path, dpi=100, metadata=None if config is None else {"Description": json.dumps(config)})
    plt.close(fig)


def plot_curve(rows: Sequence[dict[str, Any]], path: Path, title: str = "", config: dict[str, Any] | None = None,
               software: str = "") -> Path:
    """DAgger's learning curve: success (with 95 % Wilson CI) and training loss against expert labels, DAgger vs BC.

    ``rows``: ``curve.csv``'s rows. ``config`` is stored in the PNG's metadata (``Description``), ``software``
    (the curve format and version) in ``Software``.
    """
    plt = _pyplot()
    fig, (ax_s, ax_l) = plt.subplots(1, 2, figsize=(10, 4))
    for key, name, color in (("dagger", "DAgger", "tab:blue"), ("bc", "behavior cloning", "tab:orange")):
        pts = [(r["labels"], r[f"{key}_success_rate"], r[f"{key}_ci_low"], r[f"{key}_ci_high"], r[f"{key}_loss"])
               for r in rows if r.get(f"{key}_success_rate") not in (None, "")]
        if not pts:
            continue
        x, y, lo, hi, loss = (list(v) for v in zip(*pts))
        ax_s.plot(x, [100 * v for v in y], "o-", color=color, label=name)
        ax_s.fill_between(x, [100 * v for v in lo], [100 * v for v in hi], color=color, alpha=0.15)
        ax_l.plot(x, loss, "o-", color=color, label=name)
    ax_s.set(xlabel="expert labels (aggregated)", ylabel="success rate (%)", ylim=(-2, 112),
             title="success over evaluation episodes (95 % CI)")
    ax_l.set(xlabel="expert labels (aggregated)", ylabel="training loss", yscale="log", title="training loss")
    for ax in (ax_s, ax_l):
        ax.grid(alpha=0.3)
        ax.legend(loc="best")
    for r in rows:
        ax_s.annotate(f"β={r['beta']:.2f}", (r["labels"], 100 * r["dagger_success_rate"]), fontsize=7,
                      textcoords="offset points", xytext=(0, 6), ha="center")
    if title:
        fig.suptitle(title, fontsize=9)
    fig.tight_layout()
    meta = {"Software": software} if software else {}
    if config is not None:
        meta["Description"] = json.dumps(config)
    save_figure(fig, path, metadata=meta)
    plt.close(fig)
    return Path(path)
