"""Does the table plane's parallax show the spheres the segmenter misses?

    python benchmarks/plane_parallax.py --photos VAL-PHOTOS [--episodes 150] [--vision CKPT] [--lags 1,2]
        [--blurs 0] [--picture PNG] [--save]

The camera translates without turning, and the robot knows by kinematics where it was one step ago, so the previous
frame can be warped onto the current one through the table plane (``control.wrist_geometry.table_warp``, from the
proprioception alone, without the simulator's per-episode camera jitter): every table pixel lines up, and what stands
above the table, the sphere, is displaced by the parallax of its 1.37 cm height. A colour the table shares does not
hide that, nor a texture full of blobs like it; a flat lure of the table lies on the plane and gives no residual.

Runs the shipped system (its parallax filter too; or ``--vision``) on ``table-photo-unseen`` (``--photos`` as the
table, the validation seeds), recording every step. For every frame whose sphere covers 3 px or more, and each of
the ``--lags`` (1: the previous frame, 2: the one before), the residual ``max over RGB |now - warped then|``; pixels
the gripper covers now or covered then (the recorded finger masks, dilated 1 px) are left out. ``--blurs``: each
residual also with both images low-passed first (a Gaussian of that sigma in px; the gripper's and the warp's edges
then left out further by 2 sigma): does the table's own residual, its texture aliasing as the camera moves, fall
faster than the sphere's? Per frame: whether the
sphere's highest residual (its pixels and 1 px around them) beats the 99th percentile of the rest of the table (3 px
or more from the sphere) and whether it beats every pixel of it; and where the controller's mask fires 3 px or more
away from the sphere (a lure), whether the lure's highest residual beats that percentile. By TCP height and by
whether the controller's mask found the sphere in that frame. ``--picture``: missed spheres' frames (16, two an episode at most), the warped
previous frame and the residual (x4; dark red: pixels left out), the sphere's outline in blue. Writes ``runs/benchmarks/plane_parallax.json``
(``--save``: ``benchmarks/results/``). ``--compare A,B``: segmenters measured per frame on the recorded frames
(:func:`compare_segmenters`).
"""

from __future__ import annotations

import argparse
import itertools
from pathlib import Path

import cv2
import numpy as np
import torch
from results_io import add_json_argument, write_results
from validation import UNSEEN_TABLE, VALIDATION_BASE, validation_condition

from grasp_s2r.agent import default_controller_path
from grasp_s2r.control.parallax import SHIPPED as SHIPPED_PARALLAX
from grasp_s2r.control.policy import Policy
from grasp_s2r.control.wrist_geometry import TCP_INDEX, PreviousFrame, WristView, table_warp
from grasp_s2r.drawing import image_grid, write_png
from grasp_s2r.runtime.masks import make_mask_source
from grasp_s2r.runtime.pool import RolloutPool
from grasp_s2r.runtime.records import EpisodeRequest
from grasp_s2r.sim.config import control_env_config
from grasp_s2r.vision.networks.segmenter import Segmenter, default_checkpoint_path

HEIGHT_BINS_M = (0.0, 0.05, 0.10, 0.15, 0.20, 0.30)
_RING = np.ones((3, 3), np.uint8)


def _dilate(mask: np.ndarray, px: int) -> np.ndarray:
    return cv2.dilate(mask.astype(np.uint8), np.ones((2 * px + 1, 2 * px + 1), np.uint8)).astype(bool)


def _low_pass(image: np.ndarray, sigma_px: float) -> np.ndarray:
    return cv2.GaussianBlur(image, (0, 0), sigma_px) if sigma_px > 0 else image


def _residual_row(residual: np.ndarray, usable: np.ndarray, sphere: np.ndarray, lure: np.ndarray) -> dict | None:
    """The sphere's and a lure's highest ``residual`` against the table's (``usable`` pixels 3 px or more from the
    ``sphere``); None when too little of either is usable to say."""
    on = _dilate(sphere, 1) & usable
    rest = usable & ~_dilate(sphere, 3)
    if not on.any() or rest.sum() < 200:
        return None
    sphere_max, others = float(residual[on].max()), residual[rest]
    p99 = float(np.quantile(others, 0.99))
    lure_px = lure & usable
    has_lure = bool(lure_px.sum() >= 3)
    return {"above_p99": sphere_max > p99, "top": sphere_max > float(others.max()), "sphere_max": sphere_max,
            "table_median": float(np.median(others)), "table_p99": p99, "lure": has_lure,
            "lure_above_p99": bool(has_lure and residual[lure_px].max() > p99)}


def frame_rows(arrays: dict[str, np.ndarray], lags: tuple[int, ...], camera,
               blurs_px: tuple[float, ...] = (0.0,)) -> tuple[list[dict], list[np.ndarray]]:
    """One row per (frame with a sphere of 3 px or more, lag, blur) of a recorded episode, and picture tiles of the
    frames whose sphere the controller's mask missed (lag 1, no blur)."""
    rgb = np.asarray(arrays["rgb"], np.float32)
    gt, seen = np.asarray(arrays["sphere_mask"], bool), np.asarray(arrays["input_mask"], bool)
    grip, proprio = np.asarray(arrays["gripper_mask"], bool), np.asarray(arrays["proprio"])
    views = [WristView.at(p[TCP_INDEX], camera) for p in proprio]
    rows, tiles = [], []
    for t in range(max(lags), len(rgb)):
        if gt[t].sum() < 3:
            continue
        found = bool((seen[t] & gt[t]).any())
        lure = seen[t] & ~_dilate(gt[t], 3)
        for lag in lags:
            warped, inside = table_warp(rgb[t - lag], views[t - lag], views[t])
            grip_then, _ = table_warp(grip[t - lag].astype(np.float32), views[t - lag], views[t])
            grip_now_then = grip[t] | (grip_then > 0.01)
            usable = inside & ~_dilate(grip_now_then, 1)
            residual = np.abs(rgb[t] - warped).max(-1)
            sharp = _residual_row(residual, usable, gt[t], lure)
            for blur in blurs_px:
                row = sharp
                if blur > 0:
                    row = _residual_row(
                        np.abs(_low_pass(rgb[t], blur)
                               - _low_pass(np.where(inside[..., None], warped, rgb[t]), blur)).max(-1),
                        ~_dilate(~inside | grip_now_then, 1 + int(np.ceil(2 * blur))), gt[t], lure)
                if row is not None:
                    rows.append({"height_m": float(proprio[t, TCP_INDEX[2]]), "lag": lag, "blur_px": blur,
                                 "found": found, **row,
                                 "camera_move_m": float(np.linalg.norm(views[t].eye - views[t - lag].eye))})
            if lag == 1 and not found and sharp is not None:
                outline = _dilate(gt[t], 1) & ~gt[t]
                now = rgb[t].copy()
                now[outline] = (40, 80, 255)
                res_rgb = np.repeat(np.clip(np.where(usable, residual, 0.0) * 4, 0, 255)[..., None], 3, -1)
                res_rgb[~usable] = (90, 0, 0)
                res_rgb[outline] = (40, 80, 255)
                tiles += [now.astype(np.uint8), np.clip(warped, 0, 255).astype(np.uint8), res_rgb.astype(np.uint8)]
    return rows, tiles


def summarize(rows: list[dict], lags: tuple[int, ...], blurs_px: tuple[float, ...] = (0.0,)) -> list[dict]:
    out = []
    for lag, blur in itertools.product(lags, blurs_px):
        for label, want in (("missed", False), ("found", True)):
            for lo, hi in itertools.pairwise(HEIGHT_BINS_M):
                sel = [r for r in rows if r["lag"] == lag and r["blur_px"] == blur and r["found"] == want
                       and lo <= r["height_m"] < hi]
                if not sel:
                    continue
                lures = [r for r in sel if r["lure"]]
                out.append({"lag": lag, "blur_px": blur, "sphere": label,
                            "height_cm": f"{lo * 100:.0f}-{hi * 100:.0f}",
                            "frames": len(sel), "above_p99": float(np.mean([r["above_p99"] for r in sel])),
                            "top": float(np.mean([r["top"] for r in sel])),
                            "sphere_max": float(np.median([r["sphere_max"] for r in sel])),
                            "table_median": float(np.median([r["table_median"] for r in sel])),
                            "table_p99": float(np.median([r["table_p99"] for r in sel])),
                            "lure_frames": len(lures),
                            "lure_above_p99": float(np.mean([r["lure_above_p99"] for r in lures])) if lures else None,
                            "camera_move_cm": float(np.median([r["camera_move_m"] for r in sel]) * 100)})
    return out


def compare_segmenters(recs, checkpoints: list[str], camera) -> list[dict]:
    """Per frame, on the recorded episodes' frames whose sphere covers 3 px or more: each segmenter's masks (a
    segmenter that reads the previous frame given it, warped by ``PreviousFrame`` as the runtime does): the share of
    frames whose sphere it finds and of all frames with a false blob (3 px or more, 3 px or more from the sphere),
    by TCP height; and of the frames the controller's mask missed, the share it finds."""
    frames = []
    for r in recs:
        a = r.arrays
        warper = PreviousFrame(camera)
        prev = np.stack([warper.warped(f, p) for f, p in zip(a["rgb"], a["proprio"])])
        frames.append((np.asarray(a["rgb"]), prev, np.asarray(a["sphere_mask"], bool),
                       np.asarray(a["input_mask"], bool), np.asarray(a["proprio"])[:, TCP_INDEX[2]]))
    rgb, prev, gt, seen, height = (np.concatenate([f[k] for f in frames]) for k in range(5))
    sphere = gt.sum((1, 2)) >= 3
    missed = sphere & ~(seen & gt).any((1, 2))
    far = np.stack([~_dilate(m, 3) for m in gt])
    out = []
    for ckpt in checkpoints:
        seg = Segmenter.load(ckpt, "cpu") if ckpt != "shipped" else Segmenter.load(default_checkpoint_path(), "cpu")
        pred = np.concatenate([seg.predict(rgb[i:i + 256], prev[i:i + 256] if seg.reads_previous else None)
                               for i in range(0, len(rgb), 256)])
        found = (pred & gt).any((1, 2))
        blob = (pred & far).sum((1, 2)) >= 3
        for lo, hi in itertools.pairwise(HEIGHT_BINS_M):
            at = (height >= lo) & (height < hi)
            if not (at & sphere).any():
                continue
            out.append({"segmenter": ckpt, "reads_previous": seg.reads_previous,
                        "height_cm": f"{lo * 100:.0f}-{hi * 100:.0f}", "frames": int((at & sphere).sum()),
                        "found": float(found[at & sphere].mean()), "false_blob": float(blob[at].mean()),
                        "missed_frames": int((at & missed).sum()),
                        "found_of_missed": float(found[at & missed].mean()) if (at & missed).any() else None})
    return out


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--photos", required=True, help="a folder of validation photos, the table")
    p.add_argument("--episodes", type=int, default=150)
    p.add_argument("--vision", default="", help="segmenter checkpoint (default: the shipped one)")
    p.add_argument("--lags", default="1,2", help="comma-separated: how many steps back the warped frame is")
    p.add_argument("--blurs", default="0", help="comma-separated Gaussian sigmas (px) both images are low-passed "
                                                "by before the residual (0: none)")
    p.add_argument("--workers", type=int, default=2)
    p.add_argument("--picture", default="", help="write a PNG of up to 16 missed spheres' frames")
    p.add_argument("--compare", default="", help="comma-separated segmenter checkpoints ('shipped' for the shipped "
                                                 "one) measured per frame on the recorded frames")
    add_json_argument(p, "plane_parallax")
    args = p.parse_args()
    lags = tuple(int(x) for x in args.lags.split(","))
    if not lags or min(lags) < 1:
        p.error("--lags must be positive integers")
    try:
        blurs = tuple(float(x) for x in args.blurs.split(","))
    except ValueError:
        p.error(f"--blurs must be comma-separated numbers, got {args.blurs!r}")
    if min(blurs) < 0:
        p.error("--blurs must be 0 or more")
    torch.set_num_threads(1)
    policy = Policy.load(Path(default_controller_path()), "cpu")[0]
    masks = make_mask_source("predicted", args.vision, "cpu")
    cond = validation_condition(UNSEEN_TABLE, args.photos)
    requests = [EpisodeRequest(seed=VALIDATION_BASE + i, condition=cond) for i in range(args.episodes)]
    env_cfg = control_env_config()
    with RolloutPool(env_cfg, args.workers) as pool:
        recs = pool.run(requests, policy, masks, record=lambda i: True, progress=True, desc=UNSEEN_TABLE,
                        parallax=SHIPPED_PARALLAX)
    rows, tiles = [], []
    for r in recs:
        got, pics = frame_rows(r.arrays, lags, env_cfg.camera, blurs)
        rows += got
        tiles += pics[: 3 * min(2, max(0, 16 - len(tiles) // 3))]  # two frames an episode at most
    table = summarize(rows, lags, blurs)
    print("lag blur px sphere  TCP cm  frames  sphere above the table's p99 / top  residual: sphere max, "
          "table median / p99  lure frames: lure above p99  camera move cm")
    for t in table:
        lure = f"{t['lure_frames']:4d}: {t['lure_above_p99']:.2f}" if t["lure_frames"] else "   0:  -  "
        print(f"{t['lag']:3d} {t['blur_px']:7.1f} {t['sphere']:7s} {t['height_cm']:>6s} {t['frames']:6d}  "
              f"{t['above_p99']:.2f} / {t['top']:.2f}  {t['sphere_max']:6.1f}, {t['table_median']:5.1f} / "
              f"{t['table_p99']:5.1f}  {lure}  "
              f"{t['camera_move_cm']:.1f}")
    if args.picture and tiles:
        print(f"picture: {write_png(image_grid(tiles, columns=6, scale=3), args.picture)}")
    compared = compare_segmenters(recs, args.compare.split(","), env_cfg.camera) if args.compare else []
    if compared:
        print("segmenter  TCP cm  frames  found  false blob  (of the frames the controller's mask missed: found)")
        for c in compared:
            of_missed = "-" if c["found_of_missed"] is None else f"{c['found_of_missed']:.2f}"
            print(f"{c['segmenter']}  {c['height_cm']:>6s}  {c['frames']:5d}  {c['found']:.3f}  {c['false_blob']:.3f}"
                  f"  ({c['missed_frames']}: {of_missed})")
    success = sum(r.success for r in recs)
    write_results(args.json, "plane_parallax", {"episodes": len(recs), "successes": success, "photos": args.photos,
                                                "condition": UNSEEN_TABLE, "blurs_px": blurs, "rows": table,
                                                "compared": compared},
                  args, save=args.save)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
