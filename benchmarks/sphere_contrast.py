"""How much each sphere stands out of what surrounds it, and which the segmenter finds, on the val split.

    python benchmarks/sphere_contrast.py [CKPT ...] [--n-images 2000] [--suites painted,composites] \
        [--picture docs/images/painted_clear_misses.png] [--save]

Per image with a sphere, in CIE Lab (OpenCV's 8-bit scaling undone: L 0-100, a and b centred on 0): the colour
difference between the sphere's mean and its surround's mean (the pixels 2-5 px outside the true mask), Delta E, and
that difference over the surround's own spread (the root-mean-square distance of its pixels from their mean): the
signal-to-clutter ratio of small-target detection. Below 1 the sphere differs from its surround less than the
surround differs within itself. For each checkpoint (default: the shipped one): the share of spheres found (at least
one sphere pixel predicted) in bins of either. ``--picture``: the first suite's clear misses by the first
checkpoint (spheres of 6 px or more, ratio 2 or more, not found), each beside its overlay (missed pixels blue,
false ones red). The split is ``val`` (training photos): held-out photos only report.
Writes ``runs/benchmarks/sphere_contrast.json`` (``--save``: ``benchmarks/results/``).
"""

from __future__ import annotations

import argparse
import itertools
import sys
from pathlib import Path

import cv2
import numpy as np
from results_io import add_json_argument, require_checkpoints, write_results

from grasp_s2r.drawing import save_overlay_grid
from grasp_s2r.vision.networks.segmenter import Segmenter, default_checkpoint_path
from grasp_s2r.vision.testsets.suites import suite_images

SURROUND_PX = (2, 5)
"""The surround: pixels farther than the first and at most the second distance (px, chessboard) from the mask."""
SCR_BINS = (0.0, 0.5, 1.0, 2.0, 4.0, np.inf)
SMALL_PX = 6.0
"""Spheres narrower than this (the width of a disc of the mask's area) are small, as in the issue's targets."""
DELTA_E_BINS = (0.0, 5.0, 10.0, 20.0, 40.0, np.inf)


def lab(image: np.ndarray) -> np.ndarray:
    """float Lab (H, W, 3) of a uint8 RGB image: L 0-100, a and b about -128..127."""
    x = cv2.cvtColor(image, cv2.COLOR_RGB2LAB).astype(np.float32)
    return np.stack([x[..., 0] * (100.0 / 255.0), x[..., 1] - 128.0, x[..., 2] - 128.0], -1)


def contrast(image: np.ndarray, mask: np.ndarray) -> tuple[float, float]:
    """(Delta E, signal-to-clutter ratio) of the sphere ``mask`` in ``image`` against its surround."""
    near, far = (cv2.dilate(mask.astype(np.uint8), np.ones((2 * r + 1, 2 * r + 1), np.uint8)) > 0
                 for r in SURROUND_PX)
    ring = far & ~near
    x = lab(image)
    sphere, around = x[mask].mean(0), x[ring]
    mean = around.mean(0)
    spread = float(np.sqrt(((around - mean) ** 2).sum(1).mean()))
    delta = float(np.linalg.norm(sphere - mean))
    return delta, delta / max(spread, 1e-6)


def binned(values: np.ndarray, found: np.ndarray, edges: tuple[float, ...]) -> list[dict]:
    rows = []
    for lo, hi in itertools.pairwise(edges):
        sel = (values >= lo) & (values < hi)
        rows.append({"low": lo, "high": None if np.isinf(hi) else hi, "spheres": int(sel.sum()),
                     "found": float(found[sel].mean()) if sel.any() else None})
    return rows


def _bin_label(row: dict) -> str:
    return f"{row['low']:g}-{row['high']:g}" if row["high"] is not None else f">= {row['low']:g}"


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("checkpoints", nargs="*", type=Path, help="segmenters (default: the shipped one)")
    p.add_argument("--n-images", type=int, default=2000, help="val images a suite (default 2000)")
    p.add_argument("--suites", default="painted,composites", help="comma-separated suites (default painted,composites)")
    p.add_argument("--picture", type=Path, help="write the first suite's clear misses (>= 6 px, ratio >= 2) here")
    add_json_argument(p, "sphere_contrast")
    args = p.parse_args()
    checkpoints = args.checkpoints or [Path(default_checkpoint_path())]
    require_checkpoints("sphere_contrast", checkpoints)
    segmenters = {str(path): Segmenter.load(path) for path in checkpoints}
    figures: dict = {"n_images": args.n_images, "split": "val", "surround_px": SURROUND_PX, "suites": {}}
    for suite in args.suites.split(","):
        imgs, masks = suite_images(suite, (64, 64), n_images=args.n_images, seed=1, split="val")
        has = masks.reshape(len(masks), -1).any(1)
        imgs, masks = imgs[has], masks[has]
        measured = np.array([contrast(im, m) for im, m in zip(imgs, masks, strict=True)])
        delta, scr = measured[:, 0], measured[:, 1]
        small = np.sqrt(masks.reshape(len(masks), -1).sum(1) * 4 / np.pi) < SMALL_PX
        row: dict = {"spheres": len(masks), "scr_below_1": float((scr < 1).mean()),
                     "median_delta_e": float(np.median(delta)), "median_scr": float(np.median(scr)), "checkpoints": {}}
        print(f"{suite} (val): {len(masks)} spheres, signal-to-clutter below 1: {row['scr_below_1']:.2f}, "
              f"median Delta E {row['median_delta_e']:.1f}, median ratio {row['median_scr']:.2f}")
        for name, seg in segmenters.items():
            pred = np.concatenate([seg.predict(imgs[i:i + 100]) for i in range(0, len(imgs), 100)])
            found = (pred & masks).reshape(len(masks), -1).any(1)
            by_scr, by_delta = binned(scr, found, SCR_BINS), binned(delta, found, DELTA_E_BINS)
            by_width = {f"{size}, ratio {'below' if low else 'from'} 2": {
                "spheres": int(sel.sum()), "found": float(found[sel].mean()) if sel.any() else None}
                for size, small_sel in (("< 6 px", small), (">= 6 px", ~small)) for low in (True, False)
                for sel in [small_sel & ((scr < 2) == low)]}
            row["checkpoints"][name] = {"found": float(found.mean()), "by_scr": by_scr, "by_delta_e": by_delta,
                                        "by_width_and_scr": by_width}
            if args.picture and not figures["suites"] and name == next(iter(segmenters)):
                clear = np.flatnonzero(~found & ~small & (scr >= 2))
                save_overlay_grid(imgs[clear], pred[clear], masks[clear], args.picture, max_images=24, columns=4)
                print(f"picture: {args.picture} ({min(len(clear), 24)} of {len(clear)} clear misses)")
            print(f"  {name}: found {found.mean():.3f}; " + "; ".join(
                f"{k} {v['found']:.2f} (n={v['spheres']})" for k, v in by_width.items() if v["found"] is not None))
            for title, rows in (("signal-to-clutter", by_scr), ("Delta E", by_delta)):
                print(f"    {title:18s} " + "  ".join(
                    f"{_bin_label(r)}: {r['found']:.2f} (n={r['spheres']})" if r["found"] is not None
                    else f"{_bin_label(r)}: - (n=0)" for r in rows))
        figures["suites"][suite] = row
    write_results(args.json, "sphere_contrast", figures, args)
    return 0


if __name__ == "__main__":
    sys.exit(main())
