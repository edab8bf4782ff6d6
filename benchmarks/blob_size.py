"""The mask's blobs against the sphere's size at their distance: how far size tells the segmenter's lures from the
sphere, and what dropping the blobs too small or too large for a sphere buys the shipped system, on validation
episodes.

    python benchmarks/blob_size.py --photos DIR [--rows off,0.5/1.6,0/1.6,0.5/99/6,0.5/99/6/look,stay+3]
        [--condition table-photo-unseen] [--episodes 300] [--save]

The sphere's size is known (``SceneConfig.sphere_diameter_m``) and so is where the camera is (the TCP's position,
``control.wrist_geometry``): a blob's centroid, cast onto the plane of the sphere's centre, gives the distance at
which a sphere there would be seen and so its width in pixels (the pinhole model,
``vision.testsets.painted_sizes.sphere_diameter_px``). A blob's *ratio* is its width (the diameter of a disc of its
area) over that expected width. First the shipped system runs the episodes as shipped, and every blob of its input
masks (open gripper, not touching the image's border) is counted as on the sphere or a lure (off the ground-truth
sphere), by ratio and TCP height. Then each ``--rows`` row runs the same episodes with the shipped filter and, before
it, a size check (:class:`SizeChecked`): ``LO/HI[/MIN_PX[/look]]`` drops the blobs whose ratio is below LO (only where
the expected width is at least MIN_PX, default 0) or above HI; with ``look`` each new table spot dropped as too small
starts the filter's low look, as a spot given up does (``control.look``); ``stay+N`` drops nothing and gives lures up
sooner where they are specks (:class:`SpeckStays`: a low step over a blob under half the sphere's width, and none of
its width, counts N more hovered steps); ``off`` is the shipped filter alone (the episodes of the count above). Every
row runs with one env process: the segmenter and controller then see batches of one, so an episode's steps do not
depend on which other episode shares its batch (with two processes a change in one episode's length changes the float
sums of the others' forward passes; docs/control.md, *Known limits*), and each row after the first prints the episodes
it grasps that the first does not (won) and the other way (lost), and in how many of those lost the check would drop a
blob of the sphere in the shipped filter's episode (its first sighting in how many). ``DIR``: validation photos, never
the held-out ones. Writes ``runs/benchmarks/blob_size.json`` (``--save``: ``benchmarks/results/``). Not shipped:
docs/experiments/vision.md, *Blob size*.
"""

from __future__ import annotations

import argparse
import contextlib
import itertools
import sys

import cv2
import numpy as np
import torch
from results_io import add_json_argument, write_results
from validation import (
    VALIDATION_BASE,
    add_one_condition_arguments,
    one_condition,
    success_counts,
    won_lost,
)

import grasp_s2r.runtime.pool as pool_module
from grasp_s2r.agent import default_controller_path
from grasp_s2r.control.parallax import SHIPPED, ParallaxFilter
from grasp_s2r.control.policy import Policy
from grasp_s2r.control.wrist_geometry import GRIPPER_CLOSED_INDEX, TCP_INDEX, WristView
from grasp_s2r.runtime.masks import make_mask_source
from grasp_s2r.runtime.pool import RolloutPool
from grasp_s2r.runtime.records import EpisodeRequest
from grasp_s2r.sim.config import CameraConfig, SceneConfig, control_env_config
from grasp_s2r.stats import format_rate
from grasp_s2r.vision.testsets.painted_sizes import sphere_diameter_px

RATIO_BINS = (0.0, 0.3, 0.5, 0.8, 1.2, 1.6, 2.5, np.inf)
"""Edges of the ratio bins of the first table."""
HEIGHT_BINS_M = (0.0, 0.03, 0.06, 0.12, np.inf)
"""Edges of the TCP-height bins of the second table."""


def blob_ratios(mask: np.ndarray, proprio: np.ndarray, camera: CameraConfig, scene: SceneConfig) -> dict:
    """Each 8-connected blob of ``mask`` bool (H, W) seen from the TCP of ``proprio`` (5,): ``labels`` int (H, W)
    (blob k is label k + 1), and per blob ``ratio`` (its disc-equivalent width over the sphere's expected width at
    its centroid's distance; NaN where the centroid's ray misses the plane), ``expected_px``, ``edge`` (touches the
    image's border: a sphere cut off by it looks small) and ``table_xy_m`` (K, 2), on the plane of the sphere's
    centre."""
    mask = np.asarray(mask, dtype=bool)
    n, labels, stats, centroids = cv2.connectedComponentsWithStats(mask.astype(np.uint8), connectivity=8)
    tcp = np.asarray(proprio, dtype=float)[TCP_INDEX]
    view = WristView.at(tcp - [0.0, 0.0, scene.sphere_diameter_m / 2], camera)  # its plane as the table's
    xy, ahead = view.table_xy(centroids[1:n].reshape(-1, 2))
    distance_m = np.linalg.norm(np.concatenate([xy, np.zeros((n - 1, 1))], 1) - view.eye, axis=1)
    with np.errstate(divide="ignore", invalid="ignore"):
        expected = np.where(ahead, sphere_diameter_px(1.0, camera, scene) / distance_m, np.nan)
        width = np.sqrt(4.0 * stats[1:n, cv2.CC_STAT_AREA] / np.pi)
        ratio = width / expected
    h, w = mask.shape
    x, y, bw, bh = (stats[1:n, i] for i in range(4))
    edge = (x == 0) | (y == 0) | (x + bw >= w) | (y + bh >= h)
    return {"labels": labels, "ratio": ratio, "expected_px": expected, "edge": edge, "table_xy_m": xy}


class SizeChecked(ParallaxFilter):
    """The shipped filter after a size check: blobs too small (``lo``, where the expected width is at least
    ``min_px``) or too large (``hi``) for the sphere at their distance leave the mask while the gripper is open; with
    ``look`` each new spot dropped as too small (2 cm apart) starts a low look, as a spot given up does."""

    lo, hi, min_px, look_on_drop = 0.0, np.inf, 0.0, False

    def reset(self) -> None:
        super().reset()
        self.small_spots = np.zeros((0, 2))
        """Table (x, y) of the spots dropped as too small this episode."""

    def filter(self, mask: np.ndarray, proprio: np.ndarray) -> np.ndarray:
        mask = np.asarray(mask, dtype=bool)
        if mask.any() and np.asarray(proprio)[GRIPPER_CLOSED_INDEX] < 0.5:
            b = blob_ratios(mask, proprio, self.camera, self.scene)
            keep = ~np.isfinite(b["ratio"]) | b["edge"]
            small = ~keep & (b["ratio"] < self.lo) & (b["expected_px"] >= self.min_px)
            drop = small | (~keep & (b["ratio"] > self.hi))
            for xy in b["table_xy_m"][small]:
                if not len(self.small_spots) or np.linalg.norm(self.small_spots - xy, axis=1).min() > 0.02:
                    self.small_spots = np.vstack([self.small_spots, xy])
            if drop.any():
                mask = mask & ~np.isin(b["labels"], np.flatnonzero(drop) + 1)
        return super().filter(mask, proprio)

    def spots_given_up(self) -> int:
        """With ``look``, the spots dropped as too small count as given up: each new one starts a low look."""
        return super().spots_given_up() + (len(self.small_spots) if self.look_on_drop else 0)


class SpeckStays(ParallaxFilter):
    """The shipped filter, its hovered spots given up sooner over specks: each low, open-gripper step whose mask
    shows, within the hovered rule's radius of the stay's anchor, a blob under half the sphere's width (where it would
    be 6 px wide or more) and no blob of the sphere's width counts ``extra`` steps more. Nothing is dropped."""

    extra = 0

    def filter(self, mask: np.ndarray, proprio: np.ndarray) -> np.ndarray:
        mask, p, h = np.asarray(mask, dtype=bool), np.asarray(proprio, dtype=float), self.hovered
        if (h is not None and h._anchor is not None and mask.any() and p[GRIPPER_CLOSED_INDEX] < 0.5
                and p[TCP_INDEX][2] < h.height_m):
            b = blob_ratios(mask, p, self.camera, self.scene)
            seen = np.isfinite(b["ratio"]) & (np.hypot(*(b["table_xy_m"] - h._anchor).T) <= h.radius_m)
            speck = seen & ~b["edge"] & (b["ratio"] < 0.5) & (b["expected_px"] >= 6.0)
            if speck.any() and not (seen & (b["ratio"] >= 0.5)).any():
                h._count += self.extra
        return super().filter(mask, p)


def size_checked(row: str) -> type[ParallaxFilter]:
    """The filter class of a ``--rows`` entry: ``off``, ``LO/HI[/MIN_PX[/look]]`` or ``stay+N``."""
    if row == "off":
        return ParallaxFilter
    if row.startswith("stay+"):
        return type(f"SpeckStays_{row[5:]}", (SpeckStays,), {"extra": int(row[5:])})
    parts = row.split("/")
    if not 2 <= len(parts) <= 4 or (len(parts) == 4 and parts[3] != "look"):
        raise ValueError(f"--rows takes off, LO/HI[/MIN_PX[/look]] or stay+N, e.g. 0.5/1.6, 0.5/99/6/look, stay+3; "
                         f"got {row!r}")
    lo, hi = float(parts[0]), float(parts[1])
    attrs = {"lo": lo, "hi": hi, "min_px": float(parts[2]) if len(parts) > 2 else 0.0, "look_on_drop": len(parts) == 4}
    return type("SizeChecked_" + row.replace("/", "_").replace(".", "p"), (SizeChecked,), attrs)


@contextlib.contextmanager
def filter_class(cls: type[ParallaxFilter]):
    """The rollout pool builds its episodes' filters from ``cls`` inside the block; yields the list of the filters it
    builds, in the order it starts the episodes (with one env process, the requests' order)."""
    built: list[ParallaxFilter] = []

    class Built(cls):
        def __init__(self, *args, **kwargs):
            super().__init__(*args, **kwargs)
            built.append(self)

    before, pool_module.ParallaxFilter = pool_module.ParallaxFilter, Built
    try:
        yield built
    finally:
        pool_module.ParallaxFilter = before


def looks(built: list[ParallaxFilter]) -> list[int]:
    """The low looks each episode's filter started."""
    return [0 if f.look is None else f.look.looks for f in built]


def blob_tables(records, camera: CameraConfig, scene: SceneConfig) -> tuple[dict, dict[int, list]]:
    """Blob-frames of the records' input masks (open gripper, off the border) on the sphere and off it, by ratio and
    by TCP height; and per seed the sphere's blobs as the shipped filter's episode saw them, [step, ratio, expected
    width px, first sighting of the episode] each, from which a row's lost episodes are told apart."""
    rows = []  # (ratio, height_m, on_sphere)
    sightings: dict[int, list] = {}
    for r in records:
        a, seen = r.arrays, sightings.setdefault(r.request.seed, [])
        for step, (mask, gt, p) in enumerate(zip(a["input_mask"], a["sphere_mask"], a["proprio"])):
            if not np.any(mask) or p[GRIPPER_CLOSED_INDEX] >= 0.5:
                continue
            b = blob_ratios(mask, p, camera, scene)
            on = [bool(np.any((b["labels"] == k + 1) & np.asarray(gt, bool))) for k in range(len(b["ratio"]))]
            rows += [(q, float(p[TCP_INDEX][2]), o) for q, e, o in zip(b["ratio"], b["edge"], on)
                     if np.isfinite(q) and not e]
            seen += [[step, float(q), float(x), not seen] for q, x, e, o in
                     zip(b["ratio"], b["expected_px"], b["edge"], on) if o and np.isfinite(q) and not e]
    q = np.array([r[0] for r in rows]); z = np.array([r[1] for r in rows]); on = np.array([r[2] for r in rows], bool)
    by_ratio = [{"ratio": [lo, hi], "sphere": int((on & (q >= lo) & (q < hi)).sum()),
                 "lure": int((~on & (q >= lo) & (q < hi)).sum())} for lo, hi in itertools.pairwise(RATIO_BINS)]
    by_height = []
    for lo, hi in itertools.pairwise(HEIGHT_BINS_M):
        sel = (z >= lo) & (z < hi)
        row = {"height_m": [lo, hi]}
        for name, kind in (("sphere", on), ("lure", ~on)):
            k = sel & kind
            row[name] = {"n": int(k.sum()), "below_0.5": float((q[k] < 0.5).mean()) if k.any() else None,
                         "above_1.6": float((q[k] > 1.6).mean()) if k.any() else None}
        by_height.append(row)
    quantiles = {name: {str(p): float(np.percentile(q[kind], p)) for p in (1, 5, 25, 50, 75, 95, 99)}
                 for name, kind in (("sphere", on), ("lure", ~on)) if kind.any()}
    return {"blob_frames": {"sphere": int(on.sum()), "lure": int((~on).sum())}, "by_ratio": by_ratio,
            "by_height": by_height, "quantiles": quantiles}, sightings


def sphere_dropped(cls: type[ParallaxFilter], sightings: list) -> tuple[bool, bool]:
    """Whether a size check ``cls`` would have dropped one of the sphere's blobs of the shipped filter's episode
    (:func:`blob_tables`' sightings), and whether that blob was the episode's first sighting of it."""
    if not issubclass(cls, SizeChecked):  # nothing dropped
        return False, False
    hit = [first for _, q, x, first in sightings if (q < cls.lo and x >= cls.min_px) or q > cls.hi]
    return bool(hit), any(hit)


def _share(x: float | None) -> str:
    return "-" if x is None else f"{x:.3f}"


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    add_one_condition_arguments(p)
    p.add_argument("--rows", default="off,0.5/1.6,0/1.6,0.5/99/6,0.5/99/6/look",
                   help="comma-separated rows: off (the shipped filter), LO/HI[/MIN_PX[/look]] or stay+N (default "
                        "off,0.5/1.6,0/1.6,0.5/99/6,0.5/99/6/look)")
    add_json_argument(p, "blob_size")
    args = p.parse_args()
    cond = one_condition(args, "blob_size")
    try:
        classes = [size_checked(r) for r in args.rows.split(",") if r]
    except ValueError as e:
        sys.exit(f"blob_size: {e}")
    torch.set_num_threads(1)
    env = control_env_config()
    policy = Policy.load(default_controller_path(), "cpu")[0]
    masks = make_mask_source("predicted", None, "cpu")
    requests = [EpisodeRequest(seed=VALIDATION_BASE + i, condition=cond) for i in range(args.episodes)]
    rows, first = [], None
    with RolloutPool(env, 1) as pool:
        with filter_class(ParallaxFilter) as built:
            recs = pool.run(requests, policy, masks, record=lambda i: True, progress=True, desc="blobs",
                            parallax=SHIPPED)
        tables, sightings = blob_tables(recs, env.camera, env.scene)
        shipped = success_counts(recs)
        shipped["success_by_episode"] = [bool(r.success) for r in recs]
        shipped["looks_by_episode"] = looks(built)
        del recs
        print(f"blob-frames (open gripper, off the border): {tables['blob_frames']}")
        for b in tables["by_ratio"]:
            print(f"  ratio {b['ratio'][0]:.1f}-{b['ratio'][1]:.1f}: sphere {b['sphere']:5d}  lure {b['lure']:5d}")
        for b in tables["by_height"]:
            s, u = b["sphere"], b["lure"]
            print(f"  TCP {100 * b['height_m'][0]:.0f}-{100 * b['height_m'][1]:.0f} cm: below 0.5 / above 1.6: sphere "
                  f"{_share(s['below_0.5'])} / {_share(s['above_1.6'])} of {s['n']}, lure {_share(u['below_0.5'])} / "
                  f"{_share(u['above_1.6'])} of {u['n']}")
        for row, cls in zip(args.rows.split(","), classes):
            if cls is ParallaxFilter:  # the shipped filter: the episodes just run
                v = dict(shipped)
            else:
                with filter_class(cls) as built:
                    recs = pool.run(requests, policy, masks, record=lambda i: False, progress=True, desc=row,
                                    parallax=SHIPPED)
                v = success_counts(recs)
                v["success_by_episode"] = [bool(r.success) for r in recs]
                v["looks_by_episode"] = looks(built)
            v["row"] = row
            paired = ""
            if first is not None:
                won, lost = won_lost(first, v["success_by_episode"], [r.seed for r in requests])
                hits = [sphere_dropped(cls, sightings[seed]) for seed in lost]
                lost_at = [seed - VALIDATION_BASE for seed in lost]
                looked = (sum(shipped["looks_by_episode"][i] > 0 for i in lost_at),
                          sum(v["looks_by_episode"][i] > 0 for i in lost_at))
                v["paired_vs_first_row"] = {"won": won, "lost": lost,
                                            "lost_with_a_sphere_blob_dropped": sum(h for h, _ in hits),
                                            "of_them_its_first_sighting": sum(f for _, f in hits),
                                            "lost_with_a_look": {"shipped": looked[0], "this_row": looked[1]}}
                paired = f"   against the first row: {len(won)} won, {len(lost)} lost; of those lost, "
                if issubclass(cls, SizeChecked):
                    paired += (f"{sum(h for h, _ in hits)} where the check drops a blob of the sphere of the shipped "
                               f"episode ({sum(f for _, f in hits)} its first sighting), ")
                paired += f"{looked[0]} with a low look as shipped, {looked[1]} in this row"
            else:
                first = v["success_by_episode"]
            print(f"{row:16s} {cond.name:20s} {format_rate(v['successes'], v['episodes'])}{paired}", flush=True)
            rows.append(v)
    write_results(args.json, "blob_size", {"photos": args.photos.name, "condition": cond.name,
                                           "episodes": args.episodes, "blobs": tables, "rows": rows}, args)
    return 0


if __name__ == "__main__":
    sys.exit(main())
