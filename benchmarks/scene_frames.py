"""Segmenters frame by frame on a scene, on the sim's clean renders and on the same views through a camera's noise
and JPEG: what a fine-tune buys on the views ``adapt``'s scene check shows, and what it keeps of the shipped weights'
robustness to a real camera.

    python benchmarks/scene_frames.py SEGMENTER [SEGMENTER ...] --photos DIR [--views 600] [--save]

Each ``SEGMENTER`` is a checkpoint (``shipped``: the shipped weights). The views are those of ``adapt``'s scene check
(:mod:`grasp_s2r.vision.evaluation.scene_check`: the controller's camera, ``DIR``'s photos as the table, a fifth
without the sphere; ``benchmarks/own_scene.py``'s per-frame rows). The degraded views are the same views with the
training recipe's sensor noise and JPEG on every one (``AugmentConfig`` noise and JPEG probability 1, their ranges;
no colour jitter, blur or geometry; the seed of view ``i`` is ``i``). Per segmenter and set of views: spheres found
below and from 6 px wide, false detections (any mask pixel on a sphere-free view). Writes
``runs/benchmarks/scene_frames.json`` (``--save``: ``benchmarks/results/``).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np
from results_io import add_json_argument, write_results

from grasp_s2r.runtime.conditions import load_photos
from grasp_s2r.vision.evaluation.scene_check import format_scene_table, frame_figures, photo_table_views, predict_views
from grasp_s2r.vision.images.augment import AugmentConfig, Augmenter

CAMERA_DEGRADATIONS = AugmentConfig(color_jitter_prob=0.0, affine_prob=0.0, blur_prob=0.0, noise_prob=1.0,
                                    jpeg_prob=1.0)
"""The recipe's sensor noise and JPEG, each on every view (their default ranges)."""


def degraded(rgb: np.ndarray, masks: np.ndarray) -> np.ndarray:
    """``rgb`` (N, H, W, 3) uint8 through :data:`CAMERA_DEGRADATIONS`, view ``i`` with seed ``i`` (masks unchanged)."""
    augment = Augmenter(CAMERA_DEGRADATIONS)
    return np.stack([augment(rgb[i], masks[i], seed=i)[0] for i in range(len(rgb))])


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("segmenters", nargs="+", help="checkpoints to compare (shipped: the shipped weights)")
    p.add_argument("--photos", type=Path, required=True, help="folder of photos to make the table of")
    p.add_argument("--views", type=int, default=600, help="sim views (default 600)")
    add_json_argument(p, "scene_frames")
    args = p.parse_args()
    if args.views < 1:
        p.error("--views must be >= 1")
    for s in args.segmenters:
        if s != "shipped" and not Path(s).is_file():
            p.error(f"{s}: no such checkpoint")
    segmenters = {s: "" if s == "shipped" else s for s in args.segmenters}
    rgb, gt = photo_table_views(load_photos(str(args.photos)), args.views, progress=True)
    figures = {}
    for name, views in (("clean", rgb), ("noise_and_jpeg", degraded(rgb, gt))):
        figures[name] = {s: frame_figures(pred, gt) for s, pred in predict_views(segmenters, views).items()}
        print(f"{args.views} views with {args.photos} as the table, {name.replace('_', ' ')}:")
        print(format_scene_table(figures[name]))
    write_results(args.json, "scene_frames", {"views": figures}, args)
    return 0


if __name__ == "__main__":
    sys.exit(main())
