"""The sphere's shadows drawn in the scene (``CameraConfig.sphere_shadow``): what a segmenter and the shipped
controller make of them, against the scene without them.

TinyRenderer draws no shadow of the sphere (``grasp_s2r/sim/shadow.py``); a real sphere on a table always has its
cast and contact shadows, the one cue a sphere in the table's own colour keeps. This runs the same photo-table views
and the same validation episodes of a validation photo folder twice, the scene as every shipped figure was measured
in and with the sphere's shadows drawn, for the shipped segmenter and any checkpoints given:

- per frame, ``--views`` photo-table views of each of the far and all view sets (``unseen_tables.py``'s): the
  share of the spheres found (the mask touches the sphere) below and from 6 px wide, and false detections, split
  into those that touch the sphere's shadow (3 or more mask pixels outside the sphere, all within
  ``NEAR_PX`` of it) and those elsewhere;
- end to end, ``--episodes`` validation episodes of ``--condition`` (default ``table-photo-unseen``) with the shipped
  controller and mask filter over each segmenter's masks.

    python benchmarks/sphere_shadow.py --photos VAL-PHOTOS [CKPT ...] [--views 300] [--episodes 300]
        [--picture docs/images/sphere_shadow.png] --json benchmarks/results/sphere_shadow.json
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import cv2
import numpy as np
import torch
from results_io import add_json_argument, require_checkpoints, write_results
from unseen_tables import VIEW_SEED_BASE, VIEWS, photo_table_views
from validation import add_one_condition_arguments, one_condition, validate

from grasp_s2r.agent import default_controller_path
from grasp_s2r.control.policy import Policy
from grasp_s2r.drawing import image_grid, overlay_tile, write_png
from grasp_s2r.files import file_sha256
from grasp_s2r.runtime.conditions import load_photos
from grasp_s2r.runtime.masks import make_mask_source
from grasp_s2r.runtime.pool import RolloutPool
from grasp_s2r.sim.config import EnvConfig, control_env_config
from grasp_s2r.vision.evaluation.metrics import SMALL_SPHERE_PX, mask_width_px
from grasp_s2r.vision.networks.segmenter import Segmenter, default_checkpoint_path

NEAR_PX = 6
"""A false detection within this many pixels of the sphere's mask counts as on its shadow."""
SCENES = ("no shadow", "shadow")
"""The two scenes, in the order they run: ``CameraConfig.sphere_shadow`` False, True."""


def scene(shadow: bool) -> EnvConfig:
    """The controller's scene, with or without the sphere's shadows."""
    return control_env_config().with_sphere_shadow(shadow)


def per_frame(pred: np.ndarray, masks: np.ndarray) -> dict[str, float | int]:
    """Found below / from 6 px wide and false detections near the sphere / elsewhere, of predicted and true masks
    (bool (N, H, W))."""
    area = masks.sum((1, 2))
    width_px = mask_width_px(masks)
    found = (pred & masks).any((1, 2))
    near_zone = np.stack([cv2.dilate(m.astype(np.uint8), np.ones((2 * NEAR_PX + 1,) * 2, np.uint8)) > 0
                          for m in masks])
    outside = pred & ~masks
    false = outside.sum((1, 2)) >= 3
    elsewhere = false & (outside & ~near_zone).any((1, 2))
    small, large = (area > 0) & (width_px < SMALL_SPHERE_PX), (area > 0) & (width_px >= SMALL_SPHERE_PX)
    share = (lambda sel: float(found[sel].mean()) if sel.any() else float("nan"))
    return {"found_small": share(small), "n_small": int(small.sum()), "found_large": share(large),
            "n_large": int(large.sum()), "false_near": float((false & ~elsewhere).mean()),
            "false_elsewhere": float(elsewhere.mean())}


def picture(views: dict[bool, tuple[np.ndarray, np.ndarray]], pred: np.ndarray, path: Path, n: int = 12,
            scale: int = 4) -> None:
    """The first ``n`` views that show a sphere at least 4 px wide: without shadow (top row), with (middle), and the
    shipped segmenter's mask ``pred`` on the shadowed view (bottom, :func:`~grasp_s2r.drawing.overlay_tile`)."""
    rgb0, masks = views[False]
    rgb1 = views[True][0]
    idx = np.flatnonzero(mask_width_px(masks) >= 4)[:n]
    tiles = [*rgb0[idx], *rgb1[idx], *(overlay_tile(rgb1[i], pred[i], masks[i]) for i in idx)]
    write_png(image_grid(tiles, columns=len(idx), scale=scale), path)


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("checkpoints", nargs="*", type=Path, help="segmenter checkpoints beside the shipped one")
    add_one_condition_arguments(p)
    p.add_argument("--views", type=int, default=300, help="photo-table views a view set and scene (default 300)")
    p.add_argument("--workers", type=int, default=2, help="env processes (default 2)")
    p.add_argument("--picture", type=Path, help="write the views without and with shadows, and the masks, here")
    add_json_argument(p, "sphere_shadow")
    args = p.parse_args()
    one_condition(args, "sphere_shadow")  # exits where the options cannot run
    require_checkpoints("sphere_shadow", args.checkpoints)
    if args.views < 1:
        sys.exit("sphere_shadow: --views must be >= 1")
    torch.set_num_threads(1)
    photos = load_photos(str(args.photos))
    views = {(shadow, name): photo_table_views(photos, v, VIEW_SEED_BASE[name], args.views, scene(shadow))
             for shadow in (False, True) for name, v in VIEWS.items()}
    controller = Path(default_controller_path())
    policy = Policy.load(controller, "cpu")[0]
    rows = {}
    for path in [Path(default_checkpoint_path()), *args.checkpoints]:
        label = "shipped" if not rows else str(path)
        seg = Segmenter.load(path)
        row: dict = {"checkpoint": str(path), "sha256": file_sha256(path)}
        for shadow, scene_name in zip((False, True), SCENES):
            cell: dict = {}
            for name in VIEWS:
                rgb, masks = views[(shadow, name)]
                pred = seg.predict(rgb)
                cell[name] = per_frame(pred, masks)
                if args.picture and not rows and shadow and name == "all":
                    shipped_pred = pred
                f = cell[name]
                print(f"{label:20s} {scene_name:9s} {name:4s} found {f['found_small']:.3f} / {f['found_large']:.3f}  "
                      f"false near {f['false_near']:.3f} elsewhere {f['false_elsewhere']:.3f}", flush=True)
            with RolloutPool(scene(shadow), args.workers) as pool:
                cell["episodes"] = validate(pool, policy, make_mask_source("predicted", str(path), "cpu"),
                                            [args.condition], args.episodes, label=f"{label} {scene_name}",
                                            unseen_photos=str(args.photos))[args.condition]
            row[scene_name] = cell
        if args.picture and not rows:
            picture({s: views[(s, "all")] for s in (False, True)}, shipped_pred, args.picture)
            print(f"picture: {args.picture}")
        rows[label] = row
    write_results(args.json, "sphere_shadow", {
        "photos": str(args.photos), "n_photos": len(photos), "views": args.views, "episodes": args.episodes,
        "condition": args.condition, "controller": str(controller), "controller_sha256": file_sha256(controller),
        "near_px": NEAR_PX, "rows": rows}, args)
    return 0


if __name__ == "__main__":
    sys.exit(main())
