"""What hides the sphere on tables the segmenter never saw: its look, or the texture around it?

    python benchmarks/sphere_context.py --photos DIR [--vision CKPT] [--episodes 300] [--save]

Runs the shipped system (``--vision``: another segmenter, with the shipped controller) on ``--episodes`` validation
episodes with ``DIR``'s photos as the table (``table-photo-unseen``), takes the first frame of every episode it
fails, and asks the segmenter again with the sphere's pixels kept and the table around it changed: blurred (Gaussian,
sigma 1, 2, 4 px) or flat (its mean colour); with the sphere drawn twice as wide on the table as seen; and with the
sphere repainted in another colour, its shading kept (is it missed for its colour?). Prints,
for the failures' first frames and for as many succeeding episodes', the share where the mask touches the sphere
(found) and where it fires on 3 or more other pixels (false blob). Then replays the failed episodes with
ground-truth masks (the controller approaches the sphere, which grows from ~3 px) and reports by which sphere width
the segmenter first finds it on those frames. Writes ``runs/benchmarks/sphere_context.json``
(``--save``: ``benchmarks/results/``).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import cv2
import numpy as np
import torch
from results_io import add_json_argument, display_path, write_results
from validation import UNSEEN_TABLE, VALIDATION_BASE, validation_condition

from grasp_s2r.agent import default_controller_path
from grasp_s2r.control.policy import Policy
from grasp_s2r.runtime.masks import make_mask_source
from grasp_s2r.runtime.pool import RolloutPool
from grasp_s2r.runtime.records import EpisodeRequest
from grasp_s2r.sim.config import control_env_config
from grasp_s2r.vision.evaluation.metrics import mask_width_px
from grasp_s2r.vision.images.composite import relative_shading, ring_around
from grasp_s2r.vision.networks.segmenter import Segmenter, default_checkpoint_path

BLUR_SIGMAS_PX = (1.0, 2.0, 4.0)
REPAINT_RGB = {"red": (210, 40, 40), "green": (40, 190, 40), "blue": (40, 60, 220), "magenta": (200, 40, 200),
               "white": (235, 235, 235), "grey": (128, 128, 128)}
"""Colours the sphere is repainted in (each pixel this colour times its brightness over the sphere's mean)."""
NEAR_HUE_DEG = 40.0
"""A sphere's hue is the table's where the two differ by less than this (the table: a ring of HUE_RING_PX)."""
HUE_RING_PX = 4
"""The table's hue is taken within this many px of the sphere."""
WIDTHS_PX = (4, 6, 8, 12)
"""Sphere widths the approach's first detection is counted by."""


def first_frames(records) -> tuple[np.ndarray, np.ndarray]:
    """The step-0 frames of recorded episodes (rgb uint8 (n, H, W, 3), sphere masks bool (n, H, W)): what the camera
    saw before the first action, whichever masks the episode then ran on."""
    return (np.stack([np.asarray(r.arrays["rgb"])[0] for r in records]),
            np.stack([np.asarray(r.arrays["sphere_mask"], bool)[0] for r in records]))


def variants(rgb: np.ndarray, masks: np.ndarray) -> dict[str, tuple[np.ndarray, np.ndarray]]:
    """(frames, sphere masks): as seen, with the table around the sphere blurred or flat, and with the sphere twice as
    wide."""
    out = {"as seen": (rgb, masks)}
    for sigma in BLUR_SIGMAS_PX:
        blurred = np.stack([cv2.GaussianBlur(f, (0, 0), sigma) for f in rgb])
        blurred[masks] = rgb[masks]
        out[f"table blurred {sigma:g} px"] = (blurred, masks)
    flat = rgb.copy()
    for f, m in zip(flat, masks):
        f[~m] = f[~m].mean(axis=0).astype(np.uint8)
    out["table flat"] = (flat, masks)
    wide, masks2 = rgb.copy(), np.zeros_like(masks)
    for f, src, m, m2 in zip(wide, rgb, masks, masks2):
        ys, xs = np.nonzero(m)
        cy, cx = float(ys.mean()), float(xs.mean())
        for y, x in zip(ys, xs):  # each sphere pixel becomes a 2 x 2 block, scaled about the sphere's centre
            y2, x2 = round(cy + 2 * (y - cy)), round(cx + 2 * (x - cx))
            f[max(0, y2):y2 + 2, max(0, x2):x2 + 2] = src[y, x]
            m2[max(0, y2):y2 + 2, max(0, x2):x2 + 2] = True
    out["sphere twice as wide"] = (wide, masks2)
    for name, colour in REPAINT_RGB.items():
        out[f"sphere repainted {name}"] = (repainted(rgb, masks, np.array(colour, np.float32)), masks)
    return out


def repainted(rgb: np.ndarray, masks: np.ndarray, colour: np.ndarray) -> np.ndarray:
    """Frames with each sphere pixel ``colour`` times its brightness relative to the sphere's mean (its shading and
    highlight kept, its hue and saturation replaced: :func:`relative_shading`)."""
    out = rgb.copy()
    for f, m in zip(out, masks):
        f[m] = np.clip(colour[None] * relative_shading(f[m].astype(np.float32), np.mean)[:, None], 0, 255).astype(np.uint8)
    return out


def mean_hue_deg(hsv: np.ndarray, region: np.ndarray) -> float:
    """The mean hue (degrees) of ``region`` of an OpenCV HSV frame: hues as unit vectors weighted by saturation."""
    angle, weight = np.deg2rad(hsv[region, 0] * 2.0), hsv[region, 1]
    return float(np.rad2deg(np.arctan2((weight * np.sin(angle)).sum(), (weight * np.cos(angle)).sum())))


def hue_near_table(rgb: np.ndarray, masks: np.ndarray) -> np.ndarray:
    """Per frame, whether the sphere's mean hue lies within :data:`NEAR_HUE_DEG` of the hue of the table in a ring
    :data:`HUE_RING_PX` around it (:func:`mean_hue_deg`). bool (n,)."""
    near = []
    for f, m in zip(rgb, masks):
        ring = ring_around(m, HUE_RING_PX)
        hsv = cv2.cvtColor(np.ascontiguousarray(f), cv2.COLOR_RGB2HSV).astype(np.float32)
        gap = abs(mean_hue_deg(hsv, m) - mean_hue_deg(hsv, ring)) % 360.0
        near.append(min(gap, 360.0 - gap) < NEAR_HUE_DEG)
    return np.array(near, bool)


FALSE_BLOB_PX = 3
"""A frame has a false blob where its mask holds at least this many pixels off the sphere."""


def hits(pred: np.ndarray, masks: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Per frame of predicted and true sphere masks bool (n, H, W): (found: the mask touches the sphere, false blob:
    :data:`FALSE_BLOB_PX` or more mask pixels elsewhere), bool (n,) each."""
    n = len(masks)
    return (pred & masks).reshape(n, -1).any(1), (pred & ~masks).reshape(n, -1).sum(1) >= FALSE_BLOB_PX


def scores(seg: Segmenter, rgb: np.ndarray, masks: np.ndarray) -> dict[str, float]:
    found, false_blob = hits(seg.predict(rgb), masks)
    return {"found": float(found.mean()), "false_blob": float(false_blob.mean())}


def first_found_width_px(seg: Segmenter, records) -> np.ndarray:
    """Per recorded episode, the smallest sphere width (px) on a frame where ``seg``'s mask touches the sphere;
    inf where it never does. float (n,)."""
    out = []
    for r in records:
        masks = np.asarray(r.arrays["sphere_mask"], bool)
        hit = (seg.predict(np.asarray(r.arrays["rgb"])) & masks).reshape(len(masks), -1).any(1)
        out.append(float(mask_width_px(masks)[hit].min()) if hit.any() else np.inf)
    return np.array(out)


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--photos", required=True, help="a folder of validation photos, the table (no segmenter's training)")
    p.add_argument("--vision", default="", help="segmenter checkpoint (default: the shipped one)")
    p.add_argument("--episodes", type=int, default=300)
    p.add_argument("--workers", type=int, default=2)
    add_json_argument(p, "sphere_context")
    args = p.parse_args()
    torch.set_num_threads(1)
    vision = args.vision or str(default_checkpoint_path())
    policy = Policy.load(Path(default_controller_path()), "cpu")[0]
    cond = validation_condition(UNSEEN_TABLE, args.photos)
    requests = [EpisodeRequest(seed=VALIDATION_BASE + i, condition=cond) for i in range(args.episodes)]
    with RolloutPool(control_env_config(), args.workers) as pool:
        recs = pool.run(requests, policy, make_mask_source("predicted", vision, "cpu"), record=lambda i: False,
                        progress=True, desc="table-photo-unseen")
        # replayed with ground-truth masks and recorded: the failures' approach, and both sets' first frames
        failed = [r.request for r in recs if not r.success]
        succeeded = [r.request for r in recs if r.success][:len(failed)]
        replays = {label: pool.run(reqs, policy, make_mask_source("gt"), record=lambda i: True, progress=True,
                                   desc=f"{label}, ground-truth masks")
                   for label, reqs in (("failed", failed), ("succeeded", succeeded)) if reqs}
    print(f"{len(failed)} of {len(recs)} episodes failed; their first frames, and as many succeeding episodes':")
    seg = Segmenter.load(vision)
    rows: dict[str, dict[str, dict[str, float]]] = {}
    firsts = {label: first_frames(records) for label, records in replays.items()}
    for label, (first_rgb, first_masks) in firsts.items():
        for name, (frames, masks) in variants(first_rgb, first_masks).items():
            rows.setdefault(name, {})[label] = scores(seg, frames, masks)
    print(f"{'first frames':24s} {'failed: found':>14s} {'false blob':>11s} {'succeeded: found':>17s} {'false blob':>11s}")
    for name, r in rows.items():
        f, s = r.get("failed", {}), r.get("succeeded", {})
        print(f"{name:24s} {f.get('found', float('nan')):14.2f} {f.get('false_blob', float('nan')):11.2f} "
              f"{s.get('found', float('nan')):17.2f} {s.get('false_blob', float('nan')):11.2f}")
    near = {label: float(hue_near_table(*frames).mean()) for label, frames in firsts.items()}
    print(f"sphere's hue within {NEAR_HUE_DEG:g} degrees of the table's around it: "
          + ", ".join(f"{label} {v:.2f}" for label, v in near.items()))
    first = first_found_width_px(seg, replays.get("failed", []))
    found_by = {str(w): float(np.mean(first <= w)) for w in WIDTHS_PX} if len(first) else {}
    print("the failures replayed with ground-truth masks, found by sphere width: "
          + ", ".join(f"<= {w} px {v:.2f}" for w, v in found_by.items()))
    write_results(args.json, "sphere_context", {"photos": Path(args.photos).name, "vision": display_path(vision),
                                                "episodes": len(recs), "failed": len(failed), "rows": rows,
                                                "approach_found_by_width_px": found_by,
                                                "hue_near_table": near, "near_hue_deg": NEAR_HUE_DEG}, args)
    return 0


if __name__ == "__main__":
    sys.exit(main())
