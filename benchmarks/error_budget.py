"""Which of the segmenter's errors cost the grasps on tables it never saw: its misses or its false blobs, and where.

    python benchmarks/error_budget.py --photos DIR [--vision CKPT] [--episodes 300] [--camera-px 64] [--workers 2]
        [--save]

The shipped controller runs the same ``--episodes`` validation episodes with ``DIR``'s photos as the table
(``table-photo-unseen``) four times, on four masks:

- ``segmenter``: the segmenter's (``--vision``, default the shipped one), as deployed;
- ``no false blobs``: the segmenter's, kept only within 2 px of the sphere (its misses stay);
- ``no misses``: the segmenter's with the sphere's true pixels added (its false blobs stay);
- ``ground truth``: the simulator's.

The gaps between the rows are what each kind of error costs end to end. For the ``segmenter`` row, every frame is
also sorted by the TCP's height above the table, failed against succeeded episodes: frames with the sphere in view,
the share where the mask touches it (found), the share with 3 or more mask pixels elsewhere (false blob; both
``sphere_context.hits``), and the sphere's median width; and the frames whose sphere the mask misses: the share where
its most probable pixel still reaches ``MISSED_SIGNAL_PROB`` (what a lower threshold, or a controller reading
probabilities, could recover), and the share where it is the frame's most probable pixel (beyond ``NEAR_PX`` of the
sphere). The photos must be ones no checkpoint trained on (a validation set; the held-out ones only report). Writes
``runs/benchmarks/error_budget.json`` (``--save``: ``benchmarks/results/``).
"""

from __future__ import annotations

import argparse
import itertools
import sys
from pathlib import Path

import cv2
import numpy as np
import torch
from results_io import add_json_argument, display_path, require_folder, write_results
from sphere_context import hits
from validation import UNSEEN_TABLE, VALIDATION_BASE, success_counts, validation_condition

from grasp_s2r.agent import default_controller_path
from grasp_s2r.control.policy import Policy
from grasp_s2r.learner import SegmenterMasks
from grasp_s2r.runtime.masks import make_mask_source
from grasp_s2r.runtime.pool import RolloutPool
from grasp_s2r.runtime.records import EpisodeRecord, EpisodeRequest
from grasp_s2r.sim.config import control_env_config
from grasp_s2r.sim.env import PROPRIO_NAMES
from grasp_s2r.stats import format_rate
from grasp_s2r.vision.evaluation.metrics import mask_width_px
from grasp_s2r.vision.networks.segmenter import Segmenter, default_checkpoint_path

HEIGHT_BINS_CM = (0, 2, 5, 10, 15, 20, 30)
"""TCP heights above the table (cm) the frames are sorted by; an episode starts at 18 cm and searches at 22 cm."""
NEAR_PX = 2
"""``no false blobs`` keeps the segmenter's mask within this many pixels of the sphere (its halo stays)."""
MISSED_SIGNAL_PROB = 0.1
"""A missed sphere whose most probable pixel reaches this probability holds a signal below the threshold."""
_HEIGHT = PROPRIO_NAMES.index("tcp_z_above_table_m")
_NEAR_KERNEL = np.ones((2 * NEAR_PX + 1, 2 * NEAR_PX + 1), np.uint8)


def near_sphere(gt: np.ndarray) -> np.ndarray:
    """bool (n, H, W): the pixels within :data:`NEAR_PX` of each frame's true sphere mask (n, H, W)."""
    return np.stack([cv2.dilate(g.astype(np.uint8), _NEAR_KERNEL) > 0 for g in gt]).reshape(np.shape(gt))


class OracleMasks(SegmenterMasks):
    """The segmenter's masks with one kind of its errors removed using the simulator's ground truth (``rule``: "no
    false blobs" or "no misses"); test-only: it reads the ground truth."""

    def __init__(self, segmenter: Segmenter, rule: str):
        super().__init__(segmenter)
        self.rule = rule

    def __call__(self, rgb: np.ndarray, gt_mask: np.ndarray | None = None) -> np.ndarray:
        pred, gt = super().__call__(rgb), np.asarray(gt_mask, bool)
        if self.rule == "no misses":
            return pred | gt
        return pred & near_sphere(gt)


class FrameLog:
    """Per frame of each finished episode: height, sphere in view, found, false blob, width, and for a missed sphere
    its peak probability and whether that is the frame's peak (``on_episode``; ``seg`` gives the probabilities)."""

    def __init__(self, seg: Segmenter) -> None:
        self.seg = seg
        self.rows: list[tuple[bool, float, bool, bool, bool, float, float, bool]] = []

    def __call__(self, rec: EpisodeRecord) -> None:
        gt, pred = np.asarray(rec.arrays["sphere_mask"], bool), np.asarray(rec.arrays["input_mask"], bool)
        n = len(gt)
        height_cm = 100.0 * np.asarray(rec.arrays["proprio"])[:n, _HEIGHT]
        in_view = gt.reshape(n, -1).any(1)
        found, false_blob = hits(pred, gt)
        width = mask_width_px(gt)
        peak, top = np.zeros(n), np.zeros(n, bool)
        missed = np.flatnonzero(in_view & ~found)
        if len(missed):
            prob = self.seg.predict_proba(np.asarray(rec.arrays["rgb"])[missed])
            near = near_sphere(gt[missed])
            peak[missed] = np.where(gt[missed], prob, 0.0).reshape(len(missed), -1).max(1)
            top[missed] = peak[missed] > np.where(near, 0.0, prob).reshape(len(missed), -1).max(1)
        self.rows += [(bool(rec.success), float(h), bool(v), bool(f), bool(b), float(w), float(p), bool(t))
                      for h, v, f, b, w, p, t in zip(height_cm, in_view, found, false_blob, width, peak, top)]

    def misses(self) -> dict[str, dict]:
        """For failed and succeeded episodes: the frames whose sphere is in view but missed, the share of them where
        the sphere's peak probability reaches :data:`MISSED_SIGNAL_PROB`, and where it is the frame's peak."""
        a = np.array(self.rows, dtype=float).reshape(-1, 8)
        out = {}
        for label, success in (("failed", 0.0), ("succeeded", 1.0)):
            m = a[(a[:, 0] == success) & (a[:, 2] == 1) & (a[:, 3] == 0)]
            out[label] = {"missed": len(m), "signal": float((m[:, 6] >= MISSED_SIGNAL_PROB).mean()) if len(m) else None,
                          "top": float(m[:, 7].mean()) if len(m) else None, "signal_prob": MISSED_SIGNAL_PROB}
        return out

    def by_height(self) -> list[dict]:
        """One dict a height bin: for failed and succeeded episodes, frames, in view, found, false blob, width."""
        a = np.array(self.rows, dtype=float).reshape(-1, 8)
        out = []
        for lo, hi in itertools.pairwise(HEIGHT_BINS_CM):
            row: dict = {"height_cm": [lo, hi]}
            for label, success in (("failed", 0.0), ("succeeded", 1.0)):
                sel = a[(a[:, 0] == success) & (a[:, 1] >= lo) & (a[:, 1] < hi)]
                seen = sel[sel[:, 2] == 1]
                row[label] = {"frames": len(sel), "in_view": len(seen),
                              "found": float(seen[:, 3].mean()) if len(seen) else None,
                              "false_blob": float(sel[:, 4].mean()) if len(sel) else None,
                              "width_px": float(np.median(seen[:, 5])) if len(seen) else None}
            out.append(row)
        return out


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--photos", required=True, type=Path, help="a folder of validation photos, the table")
    p.add_argument("--vision", default="", help="segmenter checkpoint (default: the shipped one)")
    p.add_argument("--episodes", type=int, default=300, help="validation episodes a row (default 300)")
    p.add_argument("--camera-px", type=int, default=64, help="the wrist camera's side in px (default 64)")
    p.add_argument("--workers", type=int, default=2, help="env processes (default 2)")
    add_json_argument(p, "error_budget")
    args = p.parse_args()
    require_folder("error_budget", "--photos", args.photos)
    if args.episodes < 1 or args.camera_px < 16 or args.camera_px % 8:
        sys.exit("error_budget: --episodes must be >= 1 and --camera-px a multiple of 8, at least 16")
    torch.set_num_threads(1)
    vision = args.vision or str(default_checkpoint_path())
    seg = Segmenter.load(vision)
    policy = Policy.load(Path(default_controller_path()), "cpu")[0]
    cond = validation_condition(UNSEEN_TABLE, str(args.photos))
    requests = [EpisodeRequest(seed=VALIDATION_BASE + i, condition=cond) for i in range(args.episodes)]
    env = control_env_config(camera_px=args.camera_px)
    log = FrameLog(seg)
    sources = {"segmenter": SegmenterMasks(seg), "no false blobs": OracleMasks(seg, "no false blobs"),
               "no misses": OracleMasks(seg, "no misses"), "ground truth": make_mask_source("gt")}
    rows = {}
    with RolloutPool(env, args.workers) as pool:
        for name, source in sources.items():
            recs = pool.run(requests, policy, source, record=lambda i, keep=name == "segmenter": keep,
                            on_episode=log if name == "segmenter" else None, progress=True, desc=name)
            rows[name] = success_counts(recs)
            print(f"{name:16s} {format_rate(rows[name]['successes'], len(recs))}", flush=True)
    heights = log.by_height()
    for h in heights:
        print(f"{h['height_cm'][0]:>2}-{h['height_cm'][1]:<2} cm  " + "  ".join(
            f"{label}: in view {h[label]['in_view']:5d} found {h[label]['found'] or 0:.2f} "
            f"false blob {h[label]['false_blob'] or 0:.2f}" for label in ("failed", "succeeded")))
    misses = log.misses()
    for label, m in misses.items():
        if m["missed"]:
            print(f"{label}: {m['missed']} frames miss the sphere in view; its peak probability >= "
                  f"{MISSED_SIGNAL_PROB} in {m['signal']:.2f}, the frame's peak in {m['top']:.2f}")
    write_results(args.json, "error_budget", {"photos": args.photos.name, "vision": display_path(vision),
                                              "camera_px": args.camera_px, "episodes": args.episodes,
                                              "rows": rows, "by_height": heights, "misses": misses}, args)
    return 0


if __name__ == "__main__":
    sys.exit(main())
