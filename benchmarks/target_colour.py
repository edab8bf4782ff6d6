"""The target's colour told to the agent: what dropping the mask's blobs of another hue than the sphere's buys the
shipped system, on validation episodes.

    python benchmarks/target_colour.py --photos DIR [--rows off,30,45] [--condition table-photo-unseen]
        [--episodes 300] [--picture PNG] [--save]

A user knows the object the robot is to grasp, its colour as well as its size. Each episode's sphere colour (its
albedo, ``EpisodeParams.sphere_rgb``, drawn from the episode's seed) is the target's colour a user would name. Each
``--rows`` row ``T`` runs the episodes with a colour check before the shipped filter (:class:`HueChecked`): while the
gripper is open, every blob of the segmenter's mask whose saturation-weighted circular mean hue (over its pixels in
the frame the segmenter saw) is more than ``T`` degrees from the albedo's hue, or whose mean saturation is below
``--min-saturation`` (of 255; the albedos are at least 120), leaves the mask; ``off`` is the shipped filter alone.
The sim renders under white light, so the rendered sphere keeps its albedo's hue up to its specular highlight; a
real camera's white balance moves it by some degrees, which the tolerance is for. Every row runs with one env process
(an episode's steps then depend on it alone, as in ``blob_size.py``) and prints the episodes it grasps that the first
row does not (won) and the other way (lost). Also counts, over the first row's episodes, the hue distance of every
blob on the sphere and of every lure. ``--picture PNG``: up to 3 episodes the second row loses, each run again
recorded under the first row's filter and the second's: two strips of 10 frames an episode, the controller's mask
over them (green on the sphere, red elsewhere, blue the sphere missed). ``DIR``: validation photos, never the held-out ones. Writes
``runs/benchmarks/target_colour.json`` (``--save``: ``benchmarks/results/``).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import cv2
import numpy as np
import torch
from blob_size import filter_class, looks
from results_io import add_json_argument, write_results
from sphere_context import mean_hue_deg
from table_photo_failures import episode_strip
from validation import (
    VALIDATION_BASE,
    add_one_condition_arguments,
    one_condition,
    success_counts,
    won_lost,
)

from grasp_s2r.agent import default_controller_path
from grasp_s2r.control.parallax import SHIPPED, ParallaxFilter
from grasp_s2r.control.policy import Policy
from grasp_s2r.control.wrist_geometry import GRIPPER_CLOSED_INDEX
from grasp_s2r.drawing import write_png
from grasp_s2r.runtime.masks import make_mask_source
from grasp_s2r.runtime.pool import RolloutPool
from grasp_s2r.runtime.records import EpisodeRequest
from grasp_s2r.sim.config import control_env_config
from grasp_s2r.sim.randomization import sample_episode_params
from grasp_s2r.stats import format_rate

HUE_BINS_DEG = (0, 10, 20, 30, 45, 60, 90, 181)


def albedo_hue_deg(rgb01) -> float:
    """Hue in degrees [0, 360) of an RGB colour in [0, 1] (OpenCV's HSV, 2 degrees a unit, as the frames')."""
    px = np.clip(np.asarray(rgb01, dtype=np.float64) * 255 + 0.5, 0, 255).astype(np.uint8).reshape(1, 1, 3)
    return float(cv2.cvtColor(px, cv2.COLOR_RGB2HSV)[0, 0, 0]) * 2.0


def blob_hues(mask: np.ndarray, rgb: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(labels (H, W), hue_deg (B,) in [0, 360), saturation (B,) of 255) of the mask's blobs (8-connected): each
    blob's saturation-weighted circular mean hue (``sphere_context.mean_hue_deg``) and mean saturation in ``rgb``."""
    n, labels = cv2.connectedComponents(mask.astype(np.uint8), connectivity=8)
    hsv = cv2.cvtColor(np.ascontiguousarray(rgb, dtype=np.uint8), cv2.COLOR_RGB2HSV).astype(np.float32)
    blobs = [labels == b for b in range(1, n)]
    hue = np.array([mean_hue_deg(hsv, on) % 360.0 for on in blobs])
    return labels, hue, np.array([hsv[on, 1].mean() for on in blobs])


def hue_distance_deg(a, b) -> np.ndarray:
    """Circular distance in degrees, in [0, 180]."""
    d = np.abs(np.asarray(a) - np.asarray(b)) % 360.0
    return np.minimum(d, 360.0 - d)


class FrameTap:
    """The mask source, remembering the frames it was last given (with one env process: the one episode's frame)."""

    def __init__(self, masks):
        self.masks, self.rgb = masks, None

    def __call__(self, rgb, gt_mask, **kwargs):
        self.rgb = np.asarray(rgb)
        return self.masks(rgb, gt_mask, **kwargs)

    def __getattr__(self, name):
        return getattr(self.masks, name)


class HueChecked(ParallaxFilter):
    """The shipped filter after a colour check: blobs whose hue is more than ``tolerance_deg`` from the target's, or
    whose saturation is below ``min_saturation``, leave the mask while the gripper is open. ``target_hue_deg`` and
    ``tap`` are set per episode and per run by the benchmark."""

    tolerance_deg, min_saturation = 180.0, 0.0
    tap: FrameTap | None = None
    target_hue_deg = 0.0

    def filter(self, mask: np.ndarray, proprio: np.ndarray) -> np.ndarray:
        mask = np.asarray(mask, dtype=bool)
        if mask.any() and np.asarray(proprio)[GRIPPER_CLOSED_INDEX] < 0.5:
            labels, hue, sat = blob_hues(mask, self.tap.rgb[0])
            drop = (hue_distance_deg(hue, self.target_hue_deg) > self.tolerance_deg) | (sat < self.min_saturation)
            if drop.any():
                mask = mask & ~np.isin(labels, np.flatnonzero(drop) + 1)
        return super().filter(mask, proprio)


def hue_checked(row: str, min_saturation: float) -> type[ParallaxFilter]:
    """The filter class of a ``--rows`` entry: ``off`` or a tolerance in degrees."""
    if row == "off":
        return ParallaxFilter
    try:
        tol = float(row)
    except ValueError:
        raise ValueError(f"--rows takes off or a hue tolerance in degrees, e.g. off,30,45; got {row!r}") from None
    if not 0 < tol <= 180:
        raise ValueError(f"a hue tolerance is in (0, 180] degrees, got {tol}")
    return type(f"HueChecked_{row}", (HueChecked,), {"tolerance_deg": tol, "min_saturation": min_saturation})


def targeted(base: type[ParallaxFilter], hues: list[float], tap: FrameTap) -> type[ParallaxFilter]:
    """``base``, its instances given their episode's target hue when built (request order, one env process)."""
    count = [0]

    class Built(base):
        def __init__(self, *args, **kwargs):
            super().__init__(*args, **kwargs)
            self.target_hue_deg, self.tap = hues[count[0]], tap
            count[0] += 1

    return Built


def hue_table(recs, hues: list[float]) -> dict:
    """Counts of the sphere's blobs and the lures (open gripper) by their hue distance from the target's; the lures
    of the failed episodes also apart."""
    counts = {k: np.zeros(len(HUE_BINS_DEG) - 1, int) for k in ("sphere", "lure", "lure_failed_episodes")}
    for r, target in zip(recs, hues):
        s = r.arrays
        for rgb, mask, gt, pro in zip(s["rgb"], s["input_mask"], s["sphere_mask"], s["proprio"]):
            if not mask.any() or pro[GRIPPER_CLOSED_INDEX] >= 0.5:
                continue
            labels, hue, _ = blob_hues(mask, rgb)
            d = hue_distance_deg(hue, target)
            for b in range(len(hue)):
                k = np.searchsorted(HUE_BINS_DEG, d[b], side="right") - 1
                on = bool((gt & (labels == b + 1)).any())
                counts["sphere" if on else "lure"][k] += 1
                if not on and not r.success:
                    counts["lure_failed_episodes"][k] += 1
    return {"bins_deg": list(HUE_BINS_DEG), **{k: v.tolist() for k, v in counts.items()}}


def lost_picture(pool, requests, policy, tap, hues, classes, lost_seeds, path: Path) -> Path:
    """The strips of up to 3 episodes lost by the second row: under the first row's filter, then the second's (each
    frame 2x)."""
    picked = [r for r in requests if r.seed in set(lost_seeds[:3])]
    picked_hues = [hues[requests.index(r)] for r in picked]
    strips = {}
    for cls in classes[:2]:
        with filter_class(targeted(cls, picked_hues, tap)):
            recs = pool.run(picked, policy, tap, record=lambda i: True, parallax=SHIPPED)
        for r in recs:
            strip = episode_strip(r, frames=10)  # 3x: brought to 2x
            strips.setdefault(r.request.seed, []).append(
                cv2.resize(strip, (strip.shape[1] * 2 // 3, strip.shape[0] * 2 // 3), interpolation=cv2.INTER_AREA))
    rows = []
    for seed in sorted(strips):
        for strip in strips[seed]:
            rows += [strip, np.full((3, strip.shape[1], 3), 255, np.uint8)]
        rows.append(np.full((12, rows[-1].shape[1], 3), 255, np.uint8))
    width = max(r.shape[1] for r in rows)
    rows = [np.pad(r, ((0, 0), (0, width - r.shape[1]), (0, 0)), constant_values=255) for r in rows]
    return write_png(np.concatenate(rows[:-1]), path)


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    add_one_condition_arguments(p)
    p.add_argument("--rows", default="off,30,45", help="comma-separated rows: off (the shipped filter) or a hue "
                                                     "tolerance in degrees (default off,30,45)")
    p.add_argument("--min-saturation", type=float, default=0.0,
                   help="blobs less saturated than this (of 255) are dropped too in the checked rows (default 0)")
    p.add_argument("--picture", type=Path, default=None,
                   help="a PNG of the episodes the second row loses, under both rows' filters")
    add_json_argument(p, "target_colour")
    args = p.parse_args()
    cond = one_condition(args, "target_colour")
    try:
        classes = [hue_checked(r, args.min_saturation) for r in args.rows.split(",") if r]
    except ValueError as e:
        sys.exit(f"target_colour: {e}")
    torch.set_num_threads(1)
    env = control_env_config()
    policy = Policy.load(default_controller_path(), "cpu")[0]
    tap = FrameTap(make_mask_source("predicted", None, "cpu"))
    requests = [EpisodeRequest(seed=VALIDATION_BASE + i, condition=cond) for i in range(args.episodes)]
    albedos = [sample_episode_params(env, np.random.default_rng(r.seed)).sphere_rgb for r in requests]
    hues = [albedo_hue_deg(a) for a in albedos]
    rows, first, table = [], None, None
    with RolloutPool(env, 1) as pool:
        for row, cls in zip(args.rows.split(","), classes):
            first_row = first is None
            with filter_class(targeted(cls, hues, tap)) as built:
                recs = pool.run(requests, policy, tap, record=lambda i, keep=first_row: keep, progress=True, desc=row,
                                parallax=SHIPPED)
            if first_row:
                for r, a in zip(recs, albedos):  # the albedo the filter was told is the episode's own
                    if not np.allclose(r.info["params"]["sphere_rgb"], a):
                        sys.exit(f"target_colour: seed {r.seed}: the episode's sphere colour is not its seed's draw")
                table = hue_table(recs, hues)
                print("blobs by hue distance from the target (open gripper):")
                for k in range(len(HUE_BINS_DEG) - 1):
                    print(f"  {HUE_BINS_DEG[k]:3d}-{HUE_BINS_DEG[k + 1]:3d} deg: sphere {table['sphere'][k]:5d}  "
                          f"lure {table['lure'][k]:5d} (in failed episodes {table['lure_failed_episodes'][k]:4d})")
            v = success_counts(recs)
            v["success_by_episode"] = [bool(r.success) for r in recs]
            v["looks_by_episode"] = looks(built)
            v["row"] = row
            del recs
            paired = ""
            if first is None:
                first = v["success_by_episode"]
            else:
                won, lost = won_lost(first, v["success_by_episode"], [r.seed for r in requests])
                v["paired_vs_first_row"] = {"won": won, "lost": lost}
                paired = f"   against the first row: {len(won)} won, {len(lost)} lost"
            print(f"{row:6s} {cond.name:20s} {format_rate(v['successes'], v['episodes'])}{paired}", flush=True)
            rows.append(v)
        lost = rows[1]["paired_vs_first_row"]["lost"] if len(rows) > 1 else []
        if args.picture and lost:
            print(f"picture: {lost_picture(pool, requests, policy, tap, hues, classes, lost, args.picture)}")
    write_results(args.json, "target_colour", {"photos": args.photos.name, "condition": cond.name,
                                               "episodes": args.episodes, "min_saturation": args.min_saturation,
                                               "blobs_by_hue": table, "rows": rows}, args)
    return 0


if __name__ == "__main__":
    sys.exit(main())
