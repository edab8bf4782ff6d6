"""Why ``table-photo`` episodes fail: per episode, how often the sphere was in view, how often the controller's mask
found it then, and how often the mask fired elsewhere; successes against failures.

    python benchmarks/table_photo_failures.py [--backgrounds DIR] [--episodes 100] [--vision CKPT] [--policy CKPT]
        [--crops PNG] [--validation CONDITION] [--strips DIR] [--truth close|far] [--truth-px 20]
        [--compare JSON ...] [--save]

Runs the shipped system (its parallax filter too; or ``--vision`` / ``--policy``) on ``table-photo`` (the embedded held-out photos, or
``--backgrounds``: yours, all of them) with the evaluation's seeds, recording every step. Per episode: ``in_view``
(share of steps whose ground-truth mask is not empty), ``found`` (share of those where the controller's mask
overlaps it), ``false_blob`` (share of steps with 3 or more mask pixels off the sphere), ``first_found`` (the
first step that finds it, -1 never) and ``width0_px`` (the sphere's width at the first step); a failure's kind
(:func:`failure_kind`: lured away by false blobs, lost, never found, found but not grasped, dropped in the lift: the
controller opened the gripper on a sphere it was lifting) and ``rolled`` (1 where the sphere rolled on the table for
10 steps or more, slipped from the fingers or pushed: :func:`rolled_steps`). Prints the means of
successes and of failures and one line a failure; writes ``runs/benchmarks/table_photo_failures.json``
(``--save``: ``benchmarks/results/``). ``--crops PNG``: a picture of the failures, each sphere where the episode
started: a 16 px window around it, as the camera saw it and with the controller's mask (green: on the sphere, red:
elsewhere, blue: the sphere missed). ``--validation CONDITION``: instead, one of the conditions that show no held-out
photo (``validation.TRAIN_PHOTO_CONDITIONS``, e.g. ``start-out-of-view``) on the validation seeds, where candidates are
compared; or an unseen-photo one (``table-photo-unseen``, ``backgrounds-unseen``) on ``--backgrounds``' photos.
``--strips DIR``: each failed episode as a strip of 20 frames overlaid with the controller's mask
(``DIR/seed-SEED.png``). Also, over the failed episodes' frames whose sphere (3 px or more) is in view and missed,
the segmenter's highest sphere probability on the sphere's pixels (:func:`missed_sphere_probability`): near its
threshold, a lower threshold or evidence summed over frames could find it; near 0, only a segmenter that sees it;
and the share of those frames where it finds the sphere when only 4, 8 or 16 px of the frame around the sphere are
left, the rest the colour around it (:func:`within_context`): whether its surroundings suppress it.
``--truth close`` (``far``): the controller gets the ground-truth mask in the frames whose sphere covers at least
(fewer than) ``--truth-px`` pixels and the segmenter's elsewhere: which failures a right mask at that range would
turn into grasps. ``--compare JSON ...``: results files of earlier runs of the same episodes (another segmenter or
controller): for each, the failed episodes both runs share and those only one of them fails (:func:`compare_failures`):
whether two systems fail the same episodes, or errors that a combination of them might cancel.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import numpy as np
import torch
from results_io import add_json_argument, write_results
from validation import TRAIN_PHOTO_CONDITIONS, UNSEEN_CONDITIONS, VALIDATION_BASE, validation_condition

from grasp_s2r.agent import default_controller_path
from grasp_s2r.control import seeds
from grasp_s2r.control.parallax import SHIPPED as SHIPPED_PARALLAX
from grasp_s2r.control.policy import Policy
from grasp_s2r.drawing import crop_around, image_grid, overlay_tile, write_png
from grasp_s2r.expert.fsm import Phase
from grasp_s2r.runtime.conditions import photo_names, resolve_condition
from grasp_s2r.runtime.masks import make_mask_source
from grasp_s2r.runtime.pool import RolloutPool
from grasp_s2r.runtime.records import STATE_NAMES, EpisodeRequest
from grasp_s2r.sim.config import control_env_config
from grasp_s2r.vision.evaluation.metrics import mask_width_px, nanmean

KEYS = ("in_view", "found", "false_blob", "first_found", "width0_px", "steps", "opened_in_lift", "rolled")
ROLLING_M_S, ROLLED_STEPS = 0.015, 10
"""A sphere on the table moving faster than ROLLING_M_S (m/s, in the table's plane) rolls; an episode whose sphere
rolls ROLLED_STEPS steps or more ``rolled``: it slipped from the fingers or was pushed, and rolled on (its rolling
resistance is near zero). A sphere nudged as the fingers close rolls a step or two."""
_SPHERE_VXY = [STATE_NAMES.index(k) for k in ("sphere_vx", "sphere_vy")]
_SPHERE_Z = STATE_NAMES.index("sphere_z")
FAILURE_KINDS = ("lured away", "lost", "never found", "found, not grasped", "dropped in the lift")
"""What a failed episode did (:func:`failure_kind`), in the order the summary counts them."""


def episode_row(arrays: dict[str, np.ndarray]) -> dict[str, float]:
    gt, seen = np.asarray(arrays["sphere_mask"], bool), np.asarray(arrays["input_mask"], bool)
    n = len(gt)
    in_view = gt.reshape(n, -1).any(1)
    hit = (gt & seen).reshape(n, -1).any(1)
    blob = (seen & ~gt).reshape(n, -1).sum(1) >= 3
    return {"in_view": float(in_view.mean()), "found": float(hit[in_view].mean()) if in_view.any() else float("nan"),
            "false_blob": float(blob.mean()), "first_found": int(np.argmax(hit)) if hit.any() else -1,
            "width0_px": float(mask_width_px(gt[:1])[0]), "steps": n,
            "opened_in_lift": int(((np.asarray(arrays["phase"]) == Phase.LIFT)
                                   & (np.asarray(arrays["learner_action"])[:, 3] < 0)).sum()),
            "rolled": int(rolled_steps(np.asarray(arrays["state"])).sum() >= ROLLED_STEPS)}


def rolled_steps(state: np.ndarray) -> np.ndarray:
    """bool (T,): the steps of an episode's privileged ``state`` (T, len(STATE_NAMES)) whose sphere rolls on the table
    (planar speed above :data:`ROLLING_M_S`, within 5 mm of its height at the first step, where it lies)."""
    speed = np.linalg.norm(state[:, _SPHERE_VXY], axis=1)
    return (speed > ROLLING_M_S) & (state[:, _SPHERE_Z] < state[0, _SPHERE_Z] + 0.005)


def failure_kind(row: dict) -> str:
    """What a failed episode did: ``dropped in the lift`` (the controller opened the gripper while the expert would
    have lifted the sphere it held: a step of the expert's LIFT phase), ``lured away`` (the sphere in view under half
    the steps, the mask firing elsewhere in 30 % or more), ``lost`` (in view under half the steps, no such lure),
    ``never found`` (in view, found in under 20 % of those steps), ``found, not grasped``."""
    lured, lost, never_found, not_grasped, dropped = FAILURE_KINDS
    if row.get("opened_in_lift", 0) > 0:
        return dropped
    if row["in_view"] < 0.5:
        return lured if row["false_blob"] >= 0.3 else lost
    return never_found if row["found"] < 0.2 else not_grasped


class TruthInRange:
    """A mask source: the segmenter's masks (``source``), with the ground truth in the frames whose sphere covers at
    least ``px`` pixels (``where`` = ``close``) or fewer (``far``)."""

    kind = "predicted"

    def __init__(self, source, where: str, px: int):
        if where not in ("close", "far") or px < 1:
            raise ValueError(f"truth where close or far, from px >= 1; got {where!r}, {px}")
        self.source, self.where, self.px = source, where, px
        self.segmenter = source.segmenter

    def __call__(self, rgb: np.ndarray, gt_mask: np.ndarray) -> np.ndarray:
        masks = np.array(self.source(rgb, gt_mask), dtype=bool)
        truth = np.asarray(gt_mask, dtype=bool)
        close = truth.reshape(len(truth), -1).sum(1) >= self.px
        use = close if self.where == "close" else ~close
        masks[use] = truth[use]
        return masks


CONTEXT_PX = (4, 8, 16)
"""Radii (px) of the context left around a missed sphere by :func:`within_context`."""


def within_context(rgb: np.ndarray, gt: np.ndarray, radius_px: float) -> np.ndarray:
    """A copy of a frame uint8 (H, W, 3) with every pixel farther than ``radius_px`` from the sphere's centroid
    (``gt``, bool (H, W)) set to the mean colour of the pixels around the sphere (off it, within 3 px of its
    farthest pixel; the frame's mean where none is off it)."""
    ys, xs = np.nonzero(gt)
    rows, cols = np.mgrid[: gt.shape[0], : gt.shape[1]]
    far = np.hypot(rows - ys.mean(), cols - xs.mean())
    around = ~gt & (far <= far[gt].max() + 3)
    out = np.array(rgb, copy=True)
    out[far > radius_px] = (rgb[around] if around.any() else rgb.reshape(-1, 3)).mean(0).round().astype(np.uint8)
    return out


def sphere_found(segmenter, images: np.ndarray, masks: np.ndarray, threshold: float) -> np.ndarray:
    """bool (N,): the segmenter's probability is above ``threshold`` on one of each image's sphere pixels."""
    return np.array([p[m].max() > threshold for p, m in zip(segmenter.predict_proba(images), masks)], dtype=bool)


def found_within_context(segmenter, images: np.ndarray, masks: np.ndarray, threshold: float) -> dict[int, np.ndarray]:
    """Per radius of :data:`CONTEXT_PX`, :func:`sphere_found` on the images with only that much of each around its
    sphere (:func:`within_context`)."""
    return {radius: sphere_found(segmenter, np.stack([within_context(x, m, radius) for x, m in zip(images, masks)]),
                                 masks, threshold) for radius in CONTEXT_PX}


def missed_sphere_probability(records, segmenter, threshold: float) -> dict[str, float]:
    """Over the frames of ``records`` whose sphere (3 px or more) is in view and missed by the controller's mask: the
    segmenter's highest sphere probability on the sphere's pixels, its median and 90th percentile, and the share of
    those frames where it reaches half the threshold; and the share of them where the segmenter finds the sphere
    (its probability above the threshold on a sphere pixel) with only :data:`CONTEXT_PX` px of the frame around it
    (:func:`found_within_context`): whether the sphere's surroundings suppress it."""
    peaks, context = [], {r: [] for r in CONTEXT_PX}
    for r in records:
        gt, seen = np.asarray(r.arrays["sphere_mask"], bool), np.asarray(r.arrays["input_mask"], bool)
        n = len(gt)
        missed = (gt.reshape(n, -1).sum(1) >= 3) & ~(gt & seen).reshape(n, -1).any(1)
        if missed.any():
            rgb, spheres = np.asarray(r.arrays["rgb"])[missed], gt[missed]
            peaks += [float(p[g].max()) for p, g in zip(segmenter.predict_proba(rgb), spheres)]
            for radius, found in found_within_context(segmenter, rgb, spheres, threshold).items():
                context[radius] += found.tolist()
    if not peaks:
        return {"frames": 0}
    peaks = np.array(peaks)
    return {"frames": len(peaks), "median": float(np.median(peaks)), "p90": float(np.percentile(peaks, 90)),
            "share_above_half_threshold": float((peaks >= threshold / 2).mean()),
            "found_within_context_px": {str(r): float(np.mean(v)) for r, v in context.items()}}


def table_photo(info: dict, names: list[str]) -> str:
    """The name of the photo an episode had as its table (its ``table-photo`` event's texture)."""
    k = next(e["texture"] for e in info["events"] if e["event"] == "table-photo")
    return names[k % len(names)]


def failures_by_photo(rows: list[dict]) -> dict[str, tuple[int, int]]:
    """Table photo -> (failed episodes, episodes), most failures first."""
    out: dict[str, list[int]] = {}
    for r in rows:
        out.setdefault(r["table_photo"], [0, 0])
        out[r["table_photo"]][0] += not r["success"]
        out[r["table_photo"]][1] += 1
    return {n: (k, e) for n, (k, e) in sorted(out.items(), key=lambda kv: (-kv[1][0], kv[0]))}


def compare_failures(rows: list[dict], other_rows: list[dict]) -> dict:
    """Two runs' episode rows of the same seeds -> the seeds both fail (``shared``), only the first fails
    (``only_here``) and only the second (``only_there``), and, for the first run's own failures, the share of in-view
    frames the second run's mask found the sphere in (``there_found``; its own episode: the same start, another
    course). ValueError where the runs are not of the same seeds, or had other table photos in them."""
    here = {r["seed"]: r for r in rows}
    there = {r["seed"]: r for r in other_rows}
    if set(here) != set(there):
        raise ValueError(f"the runs are of other episodes ({len(set(here) ^ set(there))} seeds not in both)")
    other_tables = [s for s in here if here[s].get("table_photo") != there[s].get("table_photo")]
    if other_tables:
        raise ValueError(f"the runs had other table photos ({len(other_tables)} episodes, e.g. seed "
                         f"{other_tables[0]})")
    failed_here = {s for s, r in here.items() if not r["success"]}
    failed_there = {s for s, r in there.items() if not r["success"]}
    only_here = sorted(failed_here - failed_there)
    return {"shared": sorted(failed_here & failed_there), "only_here": only_here,
            "only_there": sorted(failed_there - failed_here),
            "there_found": {s: there[s]["found"] for s in only_here}}


def failure_crops(records, side: int = 16) -> np.ndarray:
    """Per episode, the first frame around the sphere: as seen, and overlaid with the controller's mask (TP green,
    FP red, FN blue); two tiles an episode, five episodes a row, 8x."""
    tiles = []
    for r in records:
        rgb, gt = np.asarray(r.arrays["rgb"])[0], np.asarray(r.arrays["sphere_mask"], bool)[0]
        seen = np.asarray(r.arrays["input_mask"], bool)[0]
        tiles += [crop_around(rgb, gt, side), crop_around(overlay_tile(rgb, seen, gt), gt, side)]
    return image_grid(tiles, columns=10, scale=8)


def episode_strip(record, frames: int = 20) -> np.ndarray:
    """``frames`` evenly spaced steps of an episode, each overlaid with the controller's mask, ten a row, 3x."""
    rgb = np.asarray(record.arrays["rgb"])
    gt, seen = np.asarray(record.arrays["sphere_mask"], bool), np.asarray(record.arrays["input_mask"], bool)
    steps = np.unique(np.linspace(0, len(rgb) - 1, min(frames, len(rgb))).round().astype(int))
    return image_grid([overlay_tile(rgb[i], seen[i], gt[i]) for i in steps], columns=10, scale=3)


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--backgrounds", default="", help="your photos as the table (default: the embedded held-out)")
    p.add_argument("--episodes", type=int, default=100)
    p.add_argument("--vision", default="", help="segmenter checkpoint (default: the shipped one)")
    p.add_argument("--policy", default="", help="controller checkpoint (default: the shipped one)")
    p.add_argument("--workers", type=int, default=2)
    p.add_argument("--crops", default="", help="write a PNG of each failure's sphere at the start (16 px around it)")
    p.add_argument("--validation", default="", choices=("", *TRAIN_PHOTO_CONDITIONS, *UNSEEN_CONDITIONS),
                   help="this condition on the validation seeds instead of table-photo on the test seeds (an unseen "
                        "one on --backgrounds' photos)")
    p.add_argument("--strips", type=Path, default=None, help="write each failed episode's strip in this folder")
    p.add_argument("--truth", default="", choices=("", "close", "far"),
                   help="the ground-truth mask where the sphere covers at least (close) / fewer than (far) --truth-px "
                        "pixels, the segmenter's elsewhere")
    p.add_argument("--truth-px", type=int, default=20, help="the sphere's area in pixels that --truth splits at")
    p.add_argument("--compare", nargs="+", type=Path, default=[],
                   help="results files of earlier runs of the same episodes: the failures shared and each run's own")
    add_json_argument(p, "table_photo_failures")
    args = p.parse_args()
    name = args.validation or "table-photo"
    earlier = {}
    for path in args.compare:
        try:
            figures = json.loads(path.read_text())["figures"]
            earlier[str(path)], condition = figures["episodes"], figures["condition"]
        except (OSError, ValueError, KeyError, TypeError) as e:
            sys.exit(f"table_photo_failures: --compare {path}: not a results file of this benchmark ({e})")
        if condition != name:
            sys.exit(f"table_photo_failures: --compare {path} is a run of {condition}, this one of {name}: compare "
                     "runs of the same episodes")
        if len(earlier[str(path)]) != args.episodes:
            sys.exit(f"table_photo_failures: --compare {path} holds {len(earlier[str(path)])} episodes, this run "
                     f"{args.episodes}: compare runs of the same episodes")
    unseen = args.validation in UNSEEN_CONDITIONS
    if (unseen and not args.backgrounds) or (args.validation and not unseen and args.backgrounds):
        sys.exit(f"table_photo_failures: --backgrounds goes with table-photo or --validation "
                 f"{' / '.join(UNSEEN_CONDITIONS)} (the photos they show); the other validation conditions show the "
                 "training photos")
    torch.set_num_threads(1)
    policy = Policy.load(Path(args.policy or default_controller_path()), "cpu")[0]
    masks = make_mask_source("predicted", args.vision, "cpu")
    if args.truth:
        try:
            masks = TruthInRange(masks, args.truth, args.truth_px)
        except ValueError as e:  # --truth-px below 1
            sys.exit(f"table_photo_failures: {e}")
    if args.validation:
        cond, base = validation_condition(args.validation, args.backgrounds or None), VALIDATION_BASE
    else:
        cond, base = resolve_condition("table-photo", args.backgrounds or None), seeds.TEST_BASE
    requests = [EpisodeRequest(seed=base + i, condition=cond) for i in range(args.episodes)]
    with RolloutPool(control_env_config(), args.workers) as pool:
        recs = pool.run(requests, policy, masks, record=lambda i: True, progress=True, desc=name,
                        parallax=SHIPPED_PARALLAX)
    names = photo_names(cond.table_photos) if cond.table_photos else []
    rows = [{"seed": r.request.seed, "success": bool(r.success), **episode_row(r.arrays),
             **({"table_photo": table_photo(r.info, names)} if names else {})} for r in recs]
    summary = {}
    for label, ok in (("successes", True), ("failures", False)):
        sel = [r for r in rows if r["success"] == ok]
        summary[label] = {"episodes": len(sel),
                          **{k: nanmean(np.array([r[k] for r in sel], float)) if sel else None for k in KEYS}}
        if sel:
            print(f"{label:9s} {len(sel):4d}: " + ", ".join(f"{k} {summary[label][k]:.2f}" for k in KEYS))
    for r in rows:
        if not r["success"]:
            r["kind"] = failure_kind(r)
            print(f"  failed seed {r['seed']} ({r['kind']}): " + ", ".join(f"{k} {r[k]:.2f}" for k in KEYS))
    kinds = [r["kind"] for r in rows if not r["success"]]
    summary["failure_kinds"] = {k: kinds.count(k) for k in FAILURE_KINDS}
    print("failures by kind: " + ", ".join(f"{k} {n}" for k, n in summary["failure_kinds"].items()))
    seg = masks.segmenter
    peaks = missed_sphere_probability([r for r in recs if not r.success], seg, seg.threshold)
    summary["missed_sphere_probability"] = peaks
    if peaks["frames"]:
        print(f"failed episodes, {peaks['frames']} frames with the sphere in view and missed: the segmenter's highest "
              f"sphere probability on it: median {peaks['median']:.3f}, 90th percentile {peaks['p90']:.3f}; "
              f"{peaks['share_above_half_threshold']:.2f} of the frames reach half its threshold "
              f"({seg.threshold / 2:.2f}); found with only this many px of the frame around it: "
              + ", ".join(f"{r} px {v:.2f}" for r, v in peaks["found_within_context_px"].items()))
    if names:
        by_photo = failures_by_photo(rows)
        print("failures by table photo: " + ", ".join(f"{n} {k}/{e}" for n, (k, e) in by_photo.items() if k))
        summary["failures_by_table_photo"] = by_photo
    if earlier:
        summary["compared"] = {}
    for path, other in earlier.items():
        try:
            c = compare_failures(rows, other)
        except ValueError as e:
            sys.exit(f"table_photo_failures: --compare {path}: {e}")
        summary["compared"][path] = c
        print(f"against {path}: {len(c['shared'])} failures shared, {len(c['only_here'])} only here "
              f"({sum(v > 0 for v in c['there_found'].values())} of them found there), {len(c['only_there'])} only "
              "there")
    if args.crops:
        failed = [r for r in recs if not r.success]
        if failed:
            print(f"crops: {write_png(failure_crops(failed), args.crops)}")
    if args.strips:
        for r in recs:
            if not r.success:
                write_png(episode_strip(r), args.strips / f"seed-{r.request.seed}.png")
        print(f"strips: {args.strips}/seed-SEED.png, one a failed episode")
    where = args.backgrounds or "embedded held-out"
    if args.validation:
        where = f"validation seeds, {args.validation}" + (f", {args.backgrounds}" if args.backgrounds else "")
    write_results(args.json, "table_photo_failures", {"backgrounds": where, "condition": name,
                                                      "summary": summary, "episodes": rows}, args)
    return 0


if __name__ == "__main__":
    sys.exit(main())
