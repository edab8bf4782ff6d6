"""Where the segmenter misses painted spheres, on the val split: grey against coloured spheres, near the image's
middle against off it, and where the training recipe puts its spheres.

    python benchmarks/painted_misses.py [CKPT ...] [--n-images 1000] [--save]

For each checkpoint (default: the shipped one), the share of painted spheres found (at least one sphere pixel
predicted) split by the sphere's mean HSV saturation (grey: below 50 of 255) and by its centre (middle: the middle
half of the columns and the lower three quarters of the rows, where the training views put almost all spheres;
off: elsewhere). Then the share of training composites' sphere centres in each quarter cell of the image, for the
recipe and with ``--relocate-prob 1``. The split is ``val`` (training photos): the held-out photos only report.
Writes ``runs/benchmarks/painted_misses.json`` (``--save``: ``benchmarks/results/``).
"""

from __future__ import annotations

import argparse
import dataclasses
import sys
from pathlib import Path

import cv2
import numpy as np
from results_io import add_json_argument, require_checkpoints, write_results

from grasp_s2r.vision.images.backgrounds import load_backgrounds
from grasp_s2r.vision.images.dataset import TRAINING_DATA, CompositeDataset, env_config_for
from grasp_s2r.vision.networks.segmenter import Segmenter, default_checkpoint_path
from grasp_s2r.vision.testsets.suites import suite_images

GREY_SATURATION = 50
"""A sphere whose pixels' mean HSV saturation (0-255) is below this counts as grey."""
MIDDLE_ROWS, MIDDLE_COLUMNS = (1, 2, 3), (1, 2)
"""The image's middle, as cells of its 4 x 4 grid (rows top to bottom): the middle half of the columns, the lower
three quarters of the rows, where the training views put almost every sphere."""


def _cell(px: np.ndarray, size: int) -> np.ndarray:
    """The grid cell index (0-3) of each coordinate in px (NaN: -1)."""
    return np.where(np.isnan(px), -1, np.clip(np.nan_to_num(px) * 4 // size, 0, 3)).astype(int)


def middle_share(cells: list[list[float]]) -> float:
    """The share of sphere centres in the middle, from :func:`_cells`' grid."""
    return float(sum(cells[r][c] for r in MIDDLE_ROWS for c in MIDDLE_COLUMNS))


def _centres(masks: np.ndarray) -> np.ndarray:
    """(N, 2) sphere centres (row, column) in px; NaN where there is no sphere."""
    out = np.full((len(masks), 2), np.nan)
    for i, m in enumerate(masks):
        if m.any():
            ys, xs = np.nonzero(m)
            out[i] = ys.mean(), xs.mean()
    return out


def _cells(centres: np.ndarray, size: int) -> list[list[float]]:
    """Share of the sphere centres in each of the 4 x 4 cells of the image (rows top to bottom)."""
    c = centres[~np.isnan(centres[:, 0])]
    h = np.histogram2d(c[:, 0], c[:, 1], bins=4, range=[[0, size], [0, size]])[0]
    return (h / max(h.sum(), 1)).round(3).tolist()


def _training_centres(n: int, relocate: float) -> np.ndarray:
    data = dataclasses.replace(TRAINING_DATA, composite=dataclasses.replace(TRAINING_DATA.composite,
                                                                            relocate_prob=relocate))
    ds = CompositeDataset(env_config=env_config_for(64), data=data, backgrounds=load_backgrounds("train"),
                          stream="val", seed=7, length=n)
    try:
        return _centres(np.stack([ds.sample(i)[1] for i in range(n)]))
    finally:
        ds.close()


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("checkpoints", nargs="*", type=Path, help="segmenters (default: the shipped one)")
    p.add_argument("--n-images", type=int, default=1000, help="painted val images (default 1000)")
    p.add_argument("--training-items", type=int, default=400, help="training composites for the positions")
    add_json_argument(p, "painted_misses")
    args = p.parse_args()
    checkpoints = args.checkpoints or [Path(default_checkpoint_path())]
    require_checkpoints("painted_misses", checkpoints)
    imgs, masks = suite_images("painted", (64, 64), n_images=args.n_images, seed=1, split="val")
    has = masks.reshape(len(masks), -1).any(1)
    hsv = np.stack([cv2.cvtColor(im, cv2.COLOR_RGB2HSV) for im in imgs])
    sat = np.array([hsv[i][..., 1][masks[i]].mean() if has[i] else -1.0 for i in range(len(imgs))])
    centres = _centres(masks)
    middle = has & np.isin(_cell(centres[:, 0], 64), MIDDLE_ROWS) & np.isin(_cell(centres[:, 1], 64), MIDDLE_COLUMNS)
    groups = {"grey": has & (sat < GREY_SATURATION), "coloured": has & (sat >= GREY_SATURATION),
              "middle": middle, "off the middle": has & ~middle,
              "grey, middle": middle & (sat < GREY_SATURATION), "grey, off the middle": has & ~middle & (sat < GREY_SATURATION)}
    rows = {}
    for path in checkpoints:
        seg = Segmenter.load(path)
        pred = np.concatenate([seg.predict(imgs[i:i + 100]) for i in range(0, len(imgs), 100)])
        found = (pred & masks).reshape(len(masks), -1).sum(1) > 0
        rows[str(path)] = {g: {"images": int(sel.sum()), "found_rate": float(found[sel].mean())}
                           for g, sel in groups.items()}
        print(f"{path}: " + "; ".join(f"{g} {r['found_rate']:.3f} (n={r['images']})" for g, r in rows[str(path)].items()))
    positions = {"painted (val)": _cells(centres, 64),
                 "training recipe": _cells(_training_centres(args.training_items, 0.0), 64),
                 "training, --relocate-prob 1": _cells(_training_centres(args.training_items, 1.0), 64)}
    for name, cells in positions.items():
        print(f"sphere centres, {name} (share per quarter cell, rows top to bottom):")
        for r in cells:
            print("   " + " ".join(f"{100 * v:5.1f}" for v in r))
    write_results(args.json, "painted_misses", {"n_images": args.n_images, "split": "val", "grey_saturation":
                                                GREY_SATURATION, "checkpoints": rows, "positions": positions}, args)
    return 0


if __name__ == "__main__":
    sys.exit(main())
