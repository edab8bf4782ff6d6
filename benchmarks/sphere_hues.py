"""Which sphere colours a segmenter finds on tables it never saw: spheres found per frame by the sphere's hue.

    python benchmarks/sphere_hues.py [SEGMENTER ...] --photos DIR [--views 600] [--save]

The views are ``unseen_tables.py``'s two sets (``DIR``'s photos as the sim table; the start and search heights, and
all the training views' heights), at seeds of their own (:data:`SEED_OFFSET` past that benchmark's). The episodes'
spheres are saturated colours of any hue (``sim.randomization``); each sphere-holding view is binned by its sphere's
rendered pixels: their mean hue (a circular mean, in six 60-degree sectors centred on red, yellow, green, cyan, blue
and magenta) or ``grey`` where their mean saturation is under :data:`GREY_SATURATION` (a sphere in deep shade). Per
segmenter (the shipped one first; each ``SEGMENTER`` a checkpoint): the share of each bin's spheres the mask
touches, of all spheres, and the false detections on the sphere-free views. What it tells a user: which sphere
colours the shipped segmenter finds most reliably on busy tables (paint yours so); what it tells a recipe: whether
an ingredient changes the network's colour priors. Writes ``runs/benchmarks/sphere_hues.json`` (``--save``:
``benchmarks/results/``).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import cv2
import numpy as np
import torch
from results_io import add_json_argument, require_checkpoints, require_folder, write_results
from unseen_tables import VIEW_SEED_BASE, VIEWS, photo_table_views

from grasp_s2r.files import file_sha256
from grasp_s2r.runtime.conditions import load_photos
from grasp_s2r.sim.config import control_env_config
from grasp_s2r.vision.evaluation.metrics import pixel_metrics
from grasp_s2r.vision.networks.segmenter import Segmenter, default_checkpoint_path

SEED_OFFSET = 50_000
"""The views' seeds: ``unseen_tables.VIEW_SEED_BASE`` plus this (other views than that benchmark's)."""
GREY_SATURATION = 60
"""A sphere whose pixels' mean saturation (OpenCV's 0-255) is under this is binned ``grey``."""
SECTORS = ("red", "yellow", "green", "cyan", "blue", "magenta")
"""Hue sectors of 60 degrees, centred on 0, 60, ... 300 degrees."""


def hue_bins(rgb: np.ndarray, masks: np.ndarray) -> np.ndarray:
    """Each view's bin (object array of names; ``""`` for a view without the sphere): ``grey`` or the sector of the
    circular mean hue of the sphere's pixels. ``rgb`` uint8 (N, H, W, 3), ``masks`` bool (N, H, W)."""
    bins = np.full(len(rgb), "", dtype=object)
    for i in np.flatnonzero(masks.reshape(len(masks), -1).any(1)):
        hsv = cv2.cvtColor(np.ascontiguousarray(rgb[i]), cv2.COLOR_RGB2HSV)[masks[i]].astype(float)
        if hsv[:, 1].mean() < GREY_SATURATION:
            bins[i] = "grey"
            continue
        angle = np.radians(hsv[:, 0] * 2.0)  # OpenCV hue: 0-179, 2 degrees a unit
        mean_deg = np.degrees(np.arctan2(np.sin(angle).mean(), np.cos(angle).mean())) % 360.0
        bins[i] = SECTORS[int(((mean_deg + 30.0) % 360.0) // 60.0)]
    return bins


def figures(pred: np.ndarray, masks: np.ndarray, bins: np.ndarray) -> dict[str, float | None]:
    """Found share per bin (None for an empty bin), over all spheres, and the false detections of sphere-free views:
    :func:`~grasp_s2r.vision.evaluation.metrics.pixel_metrics`' ``found_rate`` and ``false_detection_rate`` over each
    bin's views."""
    def share(views: np.ndarray, key: str) -> float | None:
        return float(pixel_metrics(pred[views], masks[views])[key]) if views.any() else None

    out = {b: share(bins == b, "found_rate") for b in ("grey", *SECTORS)}
    out["all"] = share(bins != "", "found_rate")
    out["false_detection_rate"] = share(bins == "", "false_detection_rate")
    return out


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("segmenters", nargs="*", type=Path, help="checkpoints to compare with the shipped one")
    p.add_argument("--photos", type=Path, required=True, help="a folder of photos no segmenter trained on")
    p.add_argument("--views", type=int, default=600, help="views a set (default 600; two sets)")
    add_json_argument(p, "sphere_hues")
    args = p.parse_args()
    require_folder("sphere_hues", "--photos", args.photos)
    require_checkpoints("sphere_hues", args.segmenters)
    if args.views < 1:
        sys.exit(f"sphere_hues: --views must be >= 1, got {args.views}")
    torch.set_num_threads(1)
    photos = load_photos(str(args.photos))
    sets = [photo_table_views(photos, v, VIEW_SEED_BASE[name] + SEED_OFFSET, args.views, control_env_config())
            for name, v in VIEWS.items()]
    rgb, masks = np.concatenate([s[0] for s in sets]), np.concatenate([s[1] for s in sets])
    bins = hue_bins(rgb, masks)
    counts = {b: int((bins == b).sum()) for b in ("grey", *SECTORS)} | {"sphere-free": int((bins == "").sum())}
    print("views: " + ", ".join(f"{b} {n}" for b, n in counts.items()), flush=True)
    rows = {}
    for path in [Path(default_checkpoint_path()), *args.segmenters]:
        label = "shipped" if not rows else str(path)
        row = figures(Segmenter.load(path, device="cpu").predict(rgb), masks, bins)
        rows[label] = {"checkpoint": str(path), "sha256": file_sha256(path), **row}
        cells = "  ".join(f"{b} {row[b]:.3f}" for b in ("grey", *SECTORS, "all") if row[b] is not None)
        print(f"{label:40s} found: {cells}  false det. {row['false_detection_rate']:.3f}", flush=True)
    write_results(args.json, "sphere_hues", {"photos": str(args.photos), "views": len(rgb), "counts": counts,
                                             "rows": rows}, args)
    return 0


if __name__ == "__main__":
    sys.exit(main())
