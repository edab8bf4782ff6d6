"""Pixel metrics of predicted masks: precision, recall, IoU, F1 (micro and per image) and per-image detection.

Definitions (``TP``, ``FP``, ``FN`` count pixels):

- micro: counts summed over all images, then precision = TP / (TP + FP), recall = TP / (TP + FN),
  IoU = TP / (TP + FP + FN), F1 = 2 TP / (2 TP + FP + FN); undefined (NaN) when the denominator is 0.
- mean per image: each metric averaged over the images where it is defined (precision needs a
  predicted pixel, recall a target pixel, IoU and F1 either).
- detection: ``found_rate`` = share of target images where at least ``min_detection_px`` predicted
  pixels overlap the target; ``false_detection_rate`` = share of target-free images with at least
  ``min_detection_px`` predicted pixels.
- by sphere width (:func:`metrics_by_width`): a target's width is the diameter of a disc of its area,
  ``2 sqrt(area / pi)`` px; per width bin, the share found and the pixel recall.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True)
class PixelCounts:
    """Per-image confusion counts, each int64 (N,)."""

    tp: np.ndarray
    """Predicted and target."""
    fp: np.ndarray
    """Predicted, not target."""
    fn: np.ndarray
    """Target, not predicted."""
    pred_px: np.ndarray
    """Predicted pixels (TP + FP)."""
    target_px: np.ndarray
    """Target pixels (TP + FN)."""


def confusion_counts(pred: np.ndarray, target: np.ndarray) -> PixelCounts:
    """Counts of bool masks ``pred`` and ``target``, both (N, H, W) or (H, W)."""
    pred = np.asarray(pred, dtype=bool)
    target = np.asarray(target, dtype=bool)
    if pred.shape != target.shape:
        raise ValueError(f"pred and target shapes differ: {pred.shape} vs {target.shape}")
    if pred.ndim == 2:
        pred, target = pred[None], target[None]
    axes = (1, 2)
    tp = (pred & target).sum(axes, dtype=np.int64)
    fp = (pred & ~target).sum(axes, dtype=np.int64)
    fn = (~pred & target).sum(axes, dtype=np.int64)
    return PixelCounts(tp=tp, fp=fp, fn=fn, pred_px=tp + fp, target_px=tp + fn)


def _ratio(num: np.ndarray | float, den: np.ndarray | float) -> np.ndarray:
    num, den = np.asarray(num, dtype=float), np.asarray(den, dtype=float)
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(den > 0, num / np.where(den > 0, den, 1.0), np.nan)


def nanmean(x: np.ndarray) -> float:
    """The mean of the entries that are not NaN; NaN when none is."""
    return float(np.mean(x[~np.isnan(x)])) if np.any(~np.isnan(x)) else float("nan")


def summarize(counts: PixelCounts, min_detection_px: int = 1) -> dict[str, float | int]:
    """All metrics of the module docstring as a flat dict (floats; NaN where undefined)."""
    tp, fp, fn = counts.tp, counts.fp, counts.fn
    TP, FP, FN = int(tp.sum()), int(fp.sum()), int(fn.sum())
    has_target = counts.target_px > 0
    found = tp >= min_detection_px
    false_det = counts.pred_px >= min_detection_px
    return {
        "images": len(tp),
        "target_images": int(has_target.sum()),
        "empty_images": int((~has_target).sum()),
        "precision": float(_ratio(TP, TP + FP)),
        "recall": float(_ratio(TP, TP + FN)),
        "iou": float(_ratio(TP, TP + FP + FN)),
        "f1": float(_ratio(2 * TP, 2 * TP + FP + FN)),
        "mean_precision": nanmean(_ratio(tp, tp + fp)),
        "mean_recall": nanmean(_ratio(tp, tp + fn)),
        "mean_iou": nanmean(_ratio(tp, tp + fp + fn)),
        "mean_f1": nanmean(_ratio(2 * tp, 2 * tp + fp + fn)),
        "found_rate": float(found[has_target].mean()) if has_target.any() else float("nan"),
        "false_detection_rate": float(false_det[~has_target].mean()) if (~has_target).any() else float("nan"),
        "tp_px": TP,
        "fp_px": FP,
        "fn_px": FN,
    }


def pixel_metrics(pred: np.ndarray, target: np.ndarray, min_detection_px: int = 1) -> dict[str, float | int]:
    """:func:`summarize` of :func:`confusion_counts`; masks bool (N, H, W)."""
    return summarize(confusion_counts(pred, target), min_detection_px)


TABLE_ROWS = (
    ("precision", "pixel precision TP/(TP+FP), micro"),
    ("recall", "pixel recall TP/(TP+FN), micro"),
    ("iou", "IoU, micro"),
    ("f1", "F1, micro"),
    ("mean_precision", "precision, mean per image"),
    ("mean_recall", "recall, mean per image"),
    ("mean_iou", "IoU, mean per image"),
    ("mean_f1", "F1, mean per image"),
    ("found_rate", "target images: sphere found"),
    ("false_detection_rate", "target-free images: false detection"),
)


def format_table(metrics: dict[str, float | int], title: str) -> str:
    """A plain-text table of the metrics for the terminal."""
    counts = f"{metrics['images']} ({metrics['target_images']} with a target, {metrics['empty_images']} without)"
    lines = [title, f"  images: {counts}"]
    lines += [f"  {label:<40} {float(metrics[key]):7.4f}" for key, label in TABLE_ROWS]
    return "\n".join(lines)


SUITE_COLUMNS = (("precision", "precision"), ("recall", "recall"), ("iou", "IoU"), ("found_rate", "found"),
                 ("false_detection_rate", "false det"))


def format_suite_table(rows: dict[str, dict[str, float | int]], title: str) -> str:
    """One line per suite: images, micro precision / recall / IoU, sphere found, false detection, latency."""
    head = f"  {'suite':<18} {'images':>7} " + " ".join(f"{label:>9}" for _, label in SUITE_COLUMNS)
    lines = [title, head + f" {'ms/frame':>9}"]
    for name, m in rows.items():
        cells = " ".join(f"{float(m[key]):9.4f}" for key, _ in SUITE_COLUMNS)
        latency = f"{m['predict_median_ms']:9.2f}" if "predict_median_ms" in m else f"{'-':>9}"
        lines.append(f"  {name:<18} {m['images']:>7} {cells} {latency}")
    return "\n".join(lines)


WIDTH_BINS_PX = (0.0, 3.0, 4.0, 6.0, 9.0, 12.0, float("inf"))
"""Edges of the sphere-width bins of :func:`metrics_by_width` (px; a bin holds ``lo <= width < hi``)."""
SMALL_SPHERE_PX = 6.0
"""Spheres narrower than this are *small* (the perception targets differ below and above)."""


def mask_width_px(masks: np.ndarray) -> np.ndarray:
    """Width float (N,) of each mask bool (N, H, W): the diameter of a disc of its area (0 for an empty mask)."""
    area = np.asarray(masks, dtype=bool).reshape(len(masks), -1).sum(1)
    return 2.0 * np.sqrt(area / np.pi)


def metrics_by_width(pred: np.ndarray, target: np.ndarray, min_detection_px: int = 1,
                     bins: tuple[float, ...] = WIDTH_BINS_PX) -> list[dict[str, float | int | str]]:
    """Per sphere-width bin of the target images (masks bool (N, H, W)): ``width_px`` (the bin as text),
    ``images``, ``found_rate`` and pixel ``recall``; then the rows ``< SMALL_SPHERE_PX`` and ``>= SMALL_SPHERE_PX``.
    Empty bins are left out."""
    counts = confusion_counts(pred, target)
    width = mask_width_px(np.asarray(target, dtype=bool).reshape(-1, *np.shape(target)[-2:]))
    has = counts.target_px > 0
    edges = [(lo, hi, f"{lo:g}-{hi:g}" if hi < float("inf") else f">= {lo:g}") for lo, hi in itertools.pairwise(bins)]
    edges += [(0.0, SMALL_SPHERE_PX, f"< {SMALL_SPHERE_PX:g}"), (SMALL_SPHERE_PX, float("inf"),
                                                                 f">= {SMALL_SPHERE_PX:g}")]
    rows: list[dict[str, float | int | str]] = []
    for lo, hi, name in edges:
        sel = has & (width >= lo) & (width < hi)
        if sel.any():
            tp, fn = counts.tp[sel], counts.fn[sel]
            rows.append({"width_px": name, "images": int(sel.sum()),
                         "found_rate": float((tp >= min_detection_px).mean()),
                         "recall": float(_ratio(tp.sum(), tp.sum() + fn.sum()))})
    return rows


def format_width_table(rows: list[dict[str, float | int | str]], title: str) -> str:
    """:func:`metrics_by_width`'s rows for the terminal."""
    lines = [title, f"  {'width px':<10} {'images':>7} {'found':>7} {'recall':>7}"]
    lines += [f"  {r['width_px']:<10} {r['images']:>7} {float(r['found_rate']):7.3f} {float(r['recall']):7.3f}"
              for r in rows]
    return "\n".join(lines)
