"""Benchmark: how much wrist-camera mount error the shipped system tolerates.

    python benchmarks/bench_camera_mount.py [--episodes 200] [--levels 0,4,8,12] [--masks predicted|gt]
                                            [--policy CKPT] [--vision CKPT]

The controller sees only the sphere's mask, so it cannot tell where its fingers are in the image: it relies on
the camera being mounted where it was in training (``control_env_config``: 1 mm / 0.5 deg). Each level L (mm)
jitters the camera's mount by up to +-L mm per axis and its look direction by up to +-L/2 deg per axis, drawn
per episode (the ``camera-miscalibration`` condition is level 4, the scene's own range), composited onto the
training photos, on the test episodes of ``grasp-s2r eval`` (seeds ``TEST_BASE + i``: reporting, nothing is
chosen on them), through the shipped system's parallax filter (``--no-parallax``: without). ``--policy``: another
controller (default: the shipped one); one that reads the gripper fingers' mask (``dagger --gripper-input``) gets it
from the mask source. Writes
(``--save``) ``benchmarks/results/bench_camera_mount[-<policy run>][-gt].json``.
"""

from __future__ import annotations

import argparse
import dataclasses
from pathlib import Path

import torch
from results_io import add_json_argument, default_json, write_results

from grasp_s2r.agent import default_controller_path
from grasp_s2r.control import seeds
from grasp_s2r.control.parallax import SHIPPED as SHIPPED_PARALLAX
from grasp_s2r.control.parallax import ParallaxConfig
from grasp_s2r.control.policy import Policy
from grasp_s2r.runtime.conditions import CONDITIONS
from grasp_s2r.runtime.masks import make_mask_source
from grasp_s2r.runtime.pool import RolloutPool
from grasp_s2r.runtime.records import EpisodeRequest
from grasp_s2r.sim.config import control_env_config
from grasp_s2r.stats import format_rate, wilson_interval

DEG_PER_MM = 0.5
"""Look-direction jitter (deg) per mm of mount jitter at each level: the scene's own ratio (4 mm / 2 deg)."""


def mount_rows(pool: RolloutPool, policy: Policy, masks, levels_mm: list[float], episodes: int,
               label: str = "", parallax: ParallaxConfig | None = None) -> list[dict]:
    """Success of ``policy`` on ``episodes`` test episodes at each mount jitter level (mm), printed as it goes;
    ``parallax``: the filter of far-away detections (None: the masks as they are)."""
    rows = []
    for mm in levels_mm:
        cond = dataclasses.replace(CONDITIONS["camera-miscalibration"], name=f"mount-{mm:g}mm",
                                   camera_jitter_m=mm / 1000, camera_jitter_deg=mm * DEG_PER_MM)
        requests = [EpisodeRequest(seed=seeds.TEST_BASE + i, condition=cond) for i in range(episodes)]
        k = sum(r.success for r in pool.run(requests, policy, masks, record=lambda i: False,
                                            desc=f"{label} mount +-{mm:g} mm".strip(), parallax=parallax))
        lo, hi = wilson_interval(k, episodes)
        rows.append({"mount_jitter_mm": mm, "look_jitter_deg": mm * DEG_PER_MM, "successes": k, "episodes": episodes,
                     "ci_low": lo, "ci_high": hi})
        print(f"{label} mount +-{mm:g} mm, look +-{mm * DEG_PER_MM:g} deg: {format_rate(k, episodes)}".strip(),
              flush=True)
    return rows


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--episodes", type=int, default=200, help="test episodes per level")
    p.add_argument("--levels", default="0,4,8,12", help="mount jitter levels, mm (comma-separated)")
    p.add_argument("--masks", choices=("predicted", "gt"), default="predicted")
    p.add_argument("--policy", type=Path, default=None, help="controller checkpoint (default: the shipped one)")
    p.add_argument("--vision", default="", help="segmenter checkpoint (default: the shipped one)")
    p.add_argument("--workers", type=int, default=2)
    p.add_argument("--no-parallax", action="store_true", help="without the shipped system's parallax filter")
    add_json_argument(p, "bench_camera_mount")
    args = p.parse_args()
    levels = [float(x) for x in args.levels.split(",")]
    if args.episodes < 1 or any(x < 0 for x in levels):
        p.error("--episodes must be >= 1 and --levels >= 0")
    torch.set_num_threads(1)
    policy = Policy.load(args.policy or default_controller_path(), "cpu")[0]
    masks = make_mask_source(args.masks, args.vision, "cpu")
    with RolloutPool(control_env_config(), args.workers) as pool:
        rows = mount_rows(pool, policy, masks, levels, args.episodes,
                          parallax=None if args.no_parallax else SHIPPED_PARALLAX)
    run = "" if args.policy is None else args.policy.resolve().parent.name
    path = args.json or default_json("bench_camera_mount", run, "" if args.masks == "predicted" else args.masks)
    write_results(path, "bench_camera_mount", {"masks": args.masks, "policy": str(args.policy or "shipped"),
                                               "parallax": not args.no_parallax,
                                               "policy_config": dataclasses.asdict(policy.cfg), "rows": rows}, args)


if __name__ == "__main__":
    main()
