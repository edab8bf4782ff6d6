"""How wide the sphere appears in the wrist camera over expert episodes: what the ``painted`` suite's sizes follow.

    python benchmarks/sphere_sizes.py [--episodes 200] [--seed 5000]

Runs the FSM expert (``grasp-s2r collect``, default scene, 64 px camera, ground-truth masks) into a temporary
folder and, over every frame whose ground-truth mask holds the sphere, takes its width as the diameter of a disc of
the mask's area (``2 sqrt(area / pi)``: fingers in front of the sphere make it narrower, as the camera sees it).
Prints the width percentiles and the camera distances they correspond to by the pinhole model
(``painted_sizes.distance_for_diameter_px``): the tuple ``painted_sizes.EPISODE_DISTANCE_QUANTILES_M`` holds, and
checks it against what is stored. Writes (``--save``) ``benchmarks/results/sphere_sizes.json``.
"""

from __future__ import annotations

import argparse
import tempfile
from pathlib import Path

import numpy as np
from results_io import add_json_argument, write_results

from grasp_s2r.collect import CollectConfig, collect
from grasp_s2r.data.episodes import EpisodeDataset
from grasp_s2r.sim.config import CameraConfig, SceneConfig
from grasp_s2r.vision.evaluation.metrics import mask_width_px
from grasp_s2r.vision.testsets.painted_sizes import (
    EPISODE_DISTANCE_QUANTILES_M,
    QUANTILE_LEVELS,
    distance_for_diameter_px,
)


def episode_widths_px(episodes: int, seed: int) -> np.ndarray:
    """Widths float (n,) in px of every sphere the camera shows over ``episodes`` expert episodes."""
    with tempfile.TemporaryDirectory() as tmp:
        collect(CollectConfig(out=str(Path(tmp) / "demos"), episodes=episodes, seed=seed))
        masks = [np.array(e["sphere_mask"]) for e in EpisodeDataset(Path(tmp) / "demos")]
    widths = mask_width_px(np.concatenate(masks))
    return widths[widths > 0]


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--episodes", type=int, default=200, help="expert episodes (default 200)")
    p.add_argument("--seed", type=int, default=5000, help="seed of the first episode (default 5000)")
    add_json_argument(p, "sphere_sizes")
    args = p.parse_args()
    widths = episode_widths_px(args.episodes, args.seed)
    percent = [100 * q for q in QUANTILE_LEVELS]
    width_q = np.percentile(widths, percent)
    camera, scene = CameraConfig(), SceneConfig()
    distance_q = [round(float(distance_for_diameter_px(w, camera, scene)), 4) for w in width_q[::-1]]
    print(f"{len(widths)} frames with the sphere in view, {args.episodes} episodes, {camera.height_px} px camera")
    for pc, w in zip(percent, width_q):
        print(f"  width percentile {pc:5.1f}: {w:5.2f} px")
    print(f"distance quantiles (m, nearest first): {tuple(distance_q)}")
    stored = np.allclose(distance_q, EPISODE_DISTANCE_QUANTILES_M, rtol=0.02)
    print(f"painted_sizes.EPISODE_DISTANCE_QUANTILES_M {'matches' if stored else 'DIFFERS from'} this measurement")
    write_results(args.json, "sphere_sizes", {
        "frames": len(widths), "episodes": args.episodes, "camera_px": camera.height_px,
        "width_percentiles_px": {f"{pc:g}": float(w) for pc, w in zip(percent, width_q)},
        "distance_quantiles_m": distance_q, "matches_stored": bool(stored),
    }, args)


if __name__ == "__main__":
    main()
