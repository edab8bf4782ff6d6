"""Spheres at the image's border: how often the segmenters find them there, against inside the image, frame by frame
and in the validation episodes on tables never seen.

    python benchmarks/border_spheres.py SEGMENTER [SEGMENTER ...] --photos VAL-PHOTOS [--views 1200]
        [--episodes 300] [--remedies 'borders mirrored, 8 px;...'] [--workers 2] [--save]

Each ``SEGMENTER`` is a checkpoint (``shipped``: the shipped weights). A sphere is *at the border* where its mask
reaches the outer :data:`BORDER_PX` pixels of the image (cut by the border or about to be). Per frame: ``--views``
photo-table views of ``--photos`` (``vision.evaluation.scene_check``, one table texture a photo; the training
recipe's view sampling), spheres found (the mask touches them) at the border and inside, below and from 6 px wide,
and false detections. Episodes: the shipped controller and mask filter over each segmenter's masks on ``--episodes``
validation episodes of ``table-photo-unseen`` (``--photos`` as the table); for the failed and the succeeded ones, the
frames that show the sphere, the share of them at the border, and the share found (the mask the controller saw
touches the sphere) at the border and inside. ``--episodes 0``: frames only; ``--remedies``: rows of the shipped
segmenter through test-time remedies (``test_time_remedies.REMEDIES``), frames only. Writes
``runs/benchmarks/border_spheres.json`` (``--save``: ``benchmarks/results/``).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np
import torch
from results_io import add_json_argument, require_checkpoints, write_results
from validation import UNSEEN_TABLE, VALIDATION_BASE, success_counts, validation_condition

from grasp_s2r.control.parallax import SHIPPED as SHIPPED_PARALLAX
from grasp_s2r.control.policy import Policy, trained_scene
from grasp_s2r.runtime.conditions import load_photos
from grasp_s2r.runtime.masks import make_mask_source
from grasp_s2r.runtime.pool import RolloutPool
from grasp_s2r.runtime.records import EpisodeRequest
from grasp_s2r.vision.evaluation.metrics import SMALL_SPHERE_PX, mask_width_px
from grasp_s2r.vision.evaluation.scene_check import photo_table_views, predict_views
from grasp_s2r.vision.networks.segmenter import default_checkpoint_path

BORDER_PX = 2
"""A sphere whose mask reaches this many pixels of the image's edge is at the border."""
CONTROLLER = Path(default_checkpoint_path()).parent / "controller.pt"


def at_border(masks: np.ndarray, border_px: int = BORDER_PX) -> np.ndarray:
    """bool (N,): which of ``masks`` (bool (N, H, W)) reach the outer ``border_px`` pixels of the image."""
    edge = np.zeros(masks.shape[1:], bool)
    edge[:border_px], edge[-border_px:], edge[:, :border_px], edge[:, -border_px:] = True, True, True, True
    return (masks & edge).any(axis=(1, 2))


def share(hits: np.ndarray, sel: np.ndarray) -> dict[str, float | int]:
    """{n, found}: how many of ``sel`` there are and the share of them ``hits`` (NaN where none)."""
    n = int(sel.sum())
    return {"n": n, "found": float(hits[sel].mean()) if n else float("nan")}


def frame_split(pred: np.ndarray, gt: np.ndarray) -> dict[str, dict]:
    """Spheres found at the border and inside, below and from 6 px wide, and false detections (sphere-free views)."""
    has, border, wide = gt.any(axis=(1, 2)), at_border(gt), mask_width_px(gt) >= SMALL_SPHERE_PX
    found = (pred & gt).any(axis=(1, 2))
    out = {f"{where} {size}": share(found, has & b & s)
           for where, b in (("border", border), ("inside", ~border))
           for size, s in ((f"< {SMALL_SPHERE_PX:g} px", ~wide), (f">= {SMALL_SPHERE_PX:g} px", wide))}
    out["false detections"] = share(pred.any(axis=(1, 2)), ~has)
    return out


def episode_split(records) -> dict[str, dict]:
    """For the failed and the succeeded episodes: frames showing the sphere, the share at the border, and the share
    found at the border and inside (``input_mask``: what the controller saw)."""
    out = {}
    for outcome, wanted in (("failed", False), ("succeeded", True)):
        recs = [r for r in records if r.success == wanted]
        gt = np.concatenate([r.arrays["sphere_mask"] for r in recs]) if recs else np.zeros((0, 1, 1), bool)
        seen = np.concatenate([r.arrays["input_mask"] for r in recs]) if recs else np.zeros((0, 1, 1), bool)
        in_view, border, found = gt.any(axis=(1, 2)), at_border(gt), (gt & seen).any(axis=(1, 2))
        n = int(in_view.sum())
        out[outcome] = {"episodes": len(recs), "frames_in_view": n,
                        "border_share": float((in_view & border).sum() / n) if n else float("nan"),
                        "border": share(found, in_view & border), "inside": share(found, in_view & ~border)}
    return out


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("segmenters", nargs="+", help="checkpoints (shipped: the shipped weights)")
    p.add_argument("--photos", type=Path, required=True, help="a folder of validation photos (never the held-out ones)")
    p.add_argument("--views", type=int, default=1200, help="photo-table views per frame (default 1200)")
    p.add_argument("--episodes", type=int, default=300, help="validation episodes (default 300; 0: none)")
    p.add_argument("--workers", type=int, default=2, help="env processes (default 2)")
    p.add_argument("--remedies", default="",
                   help="semicolon-separated test-time remedies of test_time_remedies.py (e.g. 'borders mirrored, 8 "
                        "px'), a frames-only row each, the shipped segmenter through them")
    add_json_argument(p, "border_spheres")
    args = p.parse_args()
    if not args.photos.is_dir():
        sys.exit(f"border_spheres: --photos {args.photos} is not a folder")
    require_checkpoints("border_spheres", [s for s in args.segmenters if s != "shipped"])
    if args.views < 1 or args.episodes < 0:
        sys.exit("border_spheres: --views must be >= 1 and --episodes >= 0")
    from test_time_remedies import REMEDIES

    remedies = [r.strip() for r in args.remedies.split(";") if r.strip()]
    if unknown := [r for r in remedies if r not in REMEDIES]:
        sys.exit(f"border_spheres: --remedies: unknown {unknown}; of: {', '.join(REMEDIES)}")
    torch.set_num_threads(1)
    segmenters = {s: "" if s == "shipped" else s for s in args.segmenters}
    rgb, gt = photo_table_views(load_photos(str(args.photos)), args.views, progress=True)
    rows = {name: {"frames": frame_split(pred, gt)} for name, pred in predict_views(segmenters, rgb).items()}
    if remedies:
        from grasp_s2r.vision.networks.segmenter import Segmenter

        shipped = Segmenter.load(default_checkpoint_path(), "cpu")
        for r in remedies:
            pred = np.concatenate([REMEDIES[r](shipped, rgb[i:i + 64]) for i in range(0, len(rgb), 64)])
            rows[f"shipped, {r}"] = {"frames": frame_split(pred, gt)}
    print(f"{args.views} photo-table views of {args.photos}, {int(at_border(gt).sum())} with the sphere at the border:")
    for name, row in rows.items():
        print(f"  {name}: " + ", ".join(f"{k} {v['found']:.2f} (n={v['n']})" for k, v in row["frames"].items()))
    if args.episodes:
        policy, blob = Policy.load(CONTROLLER, "cpu")
        cond = validation_condition(UNSEEN_TABLE, str(args.photos))
        requests = [EpisodeRequest(seed=VALIDATION_BASE + i, condition=cond) for i in range(args.episodes)]
        with RolloutPool(trained_scene(blob), args.workers) as pool:
            for name, path in segmenters.items():
                masks = make_mask_source("predicted", path or str(default_checkpoint_path()), "cpu")
                records = pool.run(requests, policy, masks, record=lambda i: True, progress=True,
                                   parallax=SHIPPED_PARALLAX)
                rows[name]["episodes"] = {UNSEEN_TABLE: success_counts(records), **episode_split(records)}
                e = rows[name]["episodes"]
                print(f"  {name}: {e[UNSEEN_TABLE]['successes']} of {args.episodes} as the table; " + "; ".join(
                    f"{k}: {e[k]['frames_in_view']} frames in view, {e[k]['border_share']:.2f} at the border, found "
                    f"{e[k]['border']['found']:.2f} there, {e[k]['inside']['found']:.2f} inside"
                    for k in ("failed", "succeeded")), flush=True)
    write_results(args.json, "border_spheres", {"photos": str(args.photos), "views": args.views,
                                                "episodes": args.episodes, "border_px": BORDER_PX, "rows": rows}, args)
    return 0


if __name__ == "__main__":
    sys.exit(main())
