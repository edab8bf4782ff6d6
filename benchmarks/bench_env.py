"""Env-steps/s of the grasping env on one core, against a bare render loop at the same resolution.

    python benchmarks/bench_env.py [--steps 600] [--resolutions 64 96 128]

An env step = IK + 24 physics substeps + one wrist-camera render (RGB + segmentation) +
proprioception. The bare loop calls only ``getCameraImage`` with the same camera and scene.
"""

from __future__ import annotations

import argparse
import os
import time

import numpy as np

from grasp_s2r.expert.fsm import Expert
from grasp_s2r.sim.config import CameraConfig, EnvConfig
from grasp_s2r.sim.env import GraspEnv


def measure(resolution: int, steps: int) -> tuple[float, float]:
    env = GraspEnv(EnvConfig(camera=CameraConfig(width_px=resolution, height_px=resolution)))
    expert = Expert(env.config.scene)
    seed, n = 0, 0
    r = env.reset(seed)
    t0 = time.perf_counter()
    while n < steps:  # expert-driven episodes: realistic poses, contacts and grasps
        action, _ = expert.act(env.privileged())
        r = env.step(action)
        n += 1
        if r.terminated or r.truncated:
            seed += 1
            r = env.reset(seed)
    env_rate = n / (time.perf_counter() - t0)
    t0 = time.perf_counter()
    for _ in range(steps):
        env.render()
    render_rate = steps / (time.perf_counter() - t0)
    env.close()
    return env_rate, render_rate


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--steps", type=int, default=600)
    p.add_argument("--resolutions", type=int, nargs="+", default=[CameraConfig.width_px, 96, 128])
    args = p.parse_args()
    if hasattr(os, "sched_setaffinity"):
        os.sched_setaffinity(0, {min(os.sched_getaffinity(0))})  # one core
    print(f"{'resolution':>10} {'env-steps/s':>12} {'bare render/s':>14} {'env/render':>11}")
    for res in args.resolutions:
        rates = [measure(res, args.steps) for _ in range(3)]
        env_rate = float(np.median([r[0] for r in rates]))
        render_rate = float(np.median([r[1] for r in rates]))
        default = "  (default)" if res == CameraConfig.width_px else ""
        print(f"{res:>7} px {env_rate:>12.0f} {render_rate:>14.0f} {env_rate / render_rate:>11.2f}{default}")


if __name__ == "__main__":
    main()
