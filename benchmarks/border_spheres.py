"""Spheres at the image's border: how often the segmenters find them there, against inside the image, frame by frame
and in the validation episodes on tables never seen.

    python benchmarks/border_spheres.py SEGMENTER [SEGMENTER ...] --photos VAL-PHOTOS [--views 1200]
        [--episodes 300] [--remedies 'borders mirrored, 8 px;...'] [--margins 8,16] [--picture PNG] [--workers 2]
        [--save]

Each ``SEGMENTER`` is a checkpoint (``shipped``: the shipped weights); one trained on the view seen beyond its edge
(``train-vision --margin-px``) reads the same views seen that far, its mask kept on the view, in the episodes too
(they render the margins it reads, ``GraspEnv.set_view_margin``). A sphere is *at the border* where its mask
reaches the outer :data:`BORDER_PX` pixels of the image (cut by the border or about to be). Per frame: ``--views``
photo-table views of ``--photos`` (``vision.evaluation.scene_check``, one table texture a photo; the training
recipe's view sampling), spheres found (the mask touches them) at the border and inside, below and from 6 px wide,
and false detections. Episodes: the shipped controller and mask filter over each segmenter's masks on ``--episodes``
validation episodes of ``table-photo-unseen`` (``--photos`` as the table); for the failed and the succeeded ones, the
frames that show the sphere, the share of them at the border, and the share found (the mask the controller saw
touches the sphere) at the border and inside. ``--episodes 0``: frames only; ``--remedies``: rows of the shipped
segmenter through test-time remedies (``test_time_remedies.REMEDIES``), frames only; ``--margins M,...``: rows of
the shipped segmenter run on the same views seen M px beyond each edge (``CameraConfig.widened``: the real scene
where the frame's edge cuts it, not padding), its mask on the frame's own pixels, frames only. Writes
``runs/benchmarks/border_spheres.json`` (``--save``: ``benchmarks/results/``).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import cv2
import numpy as np
import torch
from results_io import add_json_argument, require_checkpoints, require_folder, write_results
from validation import UNSEEN_TABLE, VALIDATION_BASE, success_counts, validation_condition

from grasp_s2r.control.parallax import SHIPPED as SHIPPED_PARALLAX
from grasp_s2r.control.policy import Policy, trained_scene
from grasp_s2r.drawing import evenly_spaced, image_rows, overlay_tile, save_figure
from grasp_s2r.learner import SegmenterMasks
from grasp_s2r.runtime.conditions import load_photos
from grasp_s2r.runtime.masks import make_mask_source
from grasp_s2r.runtime.pool import RolloutPool
from grasp_s2r.runtime.records import EpisodeRequest
from grasp_s2r.vision.evaluation.metrics import SMALL_SPHERE_PX, mask_width_px
from grasp_s2r.vision.evaluation.scene_check import photo_table_views
from grasp_s2r.vision.networks.segmenter import Segmenter, default_checkpoint_path

BORDER_PX = 2
"""A sphere whose mask reaches this many pixels of the image's edge is at the border."""
CONTROLLER = Path(default_checkpoint_path()).parent / "controller.pt"


def at_border(masks: np.ndarray, border_px: int = BORDER_PX) -> np.ndarray:
    """bool (N,): which of ``masks`` (bool (N, H, W)) reach the outer ``border_px`` pixels of the image."""
    edge = np.zeros(masks.shape[1:], bool)
    edge[:border_px], edge[-border_px:], edge[:, :border_px], edge[:, -border_px:] = True, True, True, True
    return (masks & edge).any(axis=(1, 2))


def beyond_border(seg, rgb_wide: np.ndarray, margin_px: int) -> np.ndarray:
    """The mask bool (N, H, W) of a segmenter run on frames seen ``margin_px`` beyond each edge (uint8 (N, H + 2m,
    W + 2m, 3)), kept on the frame's own central pixels (whole images at their own size, no tiling): the shipped
    network on wider frames than it was trained on, which ``Segmenter.predict`` would resize (a segmenter trained
    with the margin reads them through ``SegmenterMasks``, as the episodes do)."""
    from grasp_s2r.vision.networks.model import to_input_tensor

    m = margin_px
    with torch.inference_mode():
        return np.concatenate([(torch.sigmoid(seg.model(to_input_tensor(rgb_wide[i:i + 64])))[:, 0, m:-m, m:-m]
                                > seg.threshold).numpy() for i in range(0, len(rgb_wide), 64)])


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


def picture(rgb: np.ndarray, gt: np.ndarray, preds: dict[str, np.ndarray], wide: dict[str, np.ndarray], path: Path,
            n: int = 10) -> Path | None:
    """``n`` views whose small sphere (< 6 px) the border cuts, in columns: the view, then a row a segmenter of its
    mask over the view (TP green, FP red, FN blue), and for one that reads beyond the view (``wide``: its frames) a
    row of what it saw, the view's edge drawn in white. None (nothing written) where no view has such a sphere."""
    cut = np.flatnonzero(at_border(gt) & gt.any(axis=(1, 2)) & (mask_width_px(gt) < SMALL_SPHERE_PX))
    if not len(cut):
        return None
    pick = cut[evenly_spaced(len(cut), n)]
    rows: dict[str, list[np.ndarray]] = {"view": [rgb[i] for i in pick]}
    for name, pred in preds.items():
        label = Path(name).parent.name or name  # a run folder's name, or "shipped"
        if name in wide:
            m = (wide[name].shape[1] - rgb.shape[1]) // 2
            rows[f"{label}: its frame"] = [cv2.rectangle(wide[name][i].copy(), (m - 1, m - 1),
                                                         (wide[name].shape[2] - m, wide[name].shape[1] - m),
                                                         (255, 255, 255), 1) for i in pick]
        rows[label] = [overlay_tile(rgb[i], pred[i], gt[i]) for i in pick]
    fig = image_rows(rows, suptitle=f"small spheres (< {SMALL_SPHERE_PX:g} px) at the border: found (green) or missed "
                                    f"(blue); red: false detection ({len(pick)} of the {len(cut)} such views)")
    return save_figure(fig, path)


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
    p.add_argument("--margins", default="",
                   help="comma-separated pixel margins: frames-only rows of the shipped segmenter on the same views "
                        "seen that far beyond each edge, its mask on the frame's own pixels")
    p.add_argument("--picture", type=Path, default=None,
                   help="write a PNG of views whose small sphere the border cuts: each segmenter's mask over them")
    add_json_argument(p, "border_spheres")
    args = p.parse_args()
    require_folder("border_spheres", "--photos", args.photos)
    require_checkpoints("border_spheres", [s for s in args.segmenters if s != "shipped"])
    if args.views < 1 or args.episodes < 0:
        sys.exit("border_spheres: --views must be >= 1 and --episodes >= 0")
    from test_time_remedies import REMEDIES

    remedies = [r.strip() for r in args.remedies.split(";") if r.strip()]
    if unknown := [r for r in remedies if r not in REMEDIES]:
        sys.exit(f"border_spheres: --remedies: unknown {unknown}; of: {', '.join(REMEDIES)}")
    try:
        margins = [int(m) for m in args.margins.split(",") if m.strip()]
    except ValueError:
        sys.exit(f"border_spheres: --margins must be comma-separated whole pixels, got {args.margins!r}")
    if any(m < 1 for m in margins):
        sys.exit(f"border_spheres: --margins must be >= 1 px, got {args.margins!r}")
    torch.set_num_threads(1)
    segmenters = {s: "" if s == "shipped" else s for s in args.segmenters}
    photos = load_photos(str(args.photos))
    rgb, gt = photo_table_views(photos, args.views, progress=True)
    beyond: dict[int, np.ndarray] = {}

    def views_beyond(m: int) -> np.ndarray:
        """The same views seen ``m`` px beyond each edge (rendered once a margin)."""
        if m not in beyond:
            beyond[m] = photo_table_views(photos, args.views, progress=True, margin_px=m)[0]
        return beyond[m]

    loaded = {name: Segmenter.load(path or default_checkpoint_path(), "cpu") for name, path in segmenters.items()}
    # a segmenter trained on the view and its margins (train-vision --margin-px) reads the views seen that far
    preds = {name: SegmenterMasks(seg)(views_beyond(seg.margin_px)) if seg.margin_px else seg.predict(rgb)
             for name, seg in loaded.items()}  # SegmenterMasks: the wide frames in, the view's masks out (as episodes)
    rows = {name: {"frames": frame_split(pred, gt)} for name, pred in preds.items()}
    if args.picture is not None:
        wide = {name: views_beyond(seg.margin_px) for name, seg in loaded.items() if seg.margin_px}
        drawn = picture(rgb, gt, preds, wide, args.picture)
        print(f"picture: {drawn}" if drawn else "picture: no view has a small sphere at the border: none drawn")
    shipped = (loaded.get("shipped") or Segmenter.load(default_checkpoint_path(), "cpu")) if remedies or margins else None
    for r in remedies:
        pred = np.concatenate([REMEDIES[r](shipped, rgb[i:i + 64]) for i in range(0, len(rgb), 64)])
        rows[f"shipped, {r}"] = {"frames": frame_split(pred, gt)}
    for m in margins:
        rows[f"shipped, the view {m} px beyond the border"] = {
            "frames": frame_split(beyond_border(shipped, views_beyond(m), m), gt)}
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
