"""Env-steps/s of the grasping env on one core, against a bare render loop at the same resolution.

    python benchmarks/bench_env.py [--steps 600] [--resolutions 64 96 128] [--physics current|pre-issue-16]
    python benchmarks/bench_env.py --profile 1500 [--physics pre-issue-16]

An env step = IK + the physics substeps (4 when a contact is possible, else 1; always 24 with ``--physics
pre-issue-16``, the physics of before issue 16) + one wrist-camera render (RGB + segmentation) + proprioception;
the steps are driven by the expert, resets included. The bare loop calls only ``GraspEnv.render`` with the same
camera and scene (at the pose the env loop ended in), so the ratio env/render is the share of a step that is its
image. ``--profile N`` instead profiles N expert-driven steps at 64 px (cProfile, CPU time) and groups the time
into physics, render, inverse kinematics and everything else.
"""

from __future__ import annotations

import argparse
import cProfile
import os
import pstats
import time

import numpy as np
from results_io import add_json_argument, write_results

from grasp_s2r.expert.fsm import Expert
from grasp_s2r.sim.config import CameraConfig, EnvConfig
from grasp_s2r.sim.env import GraspEnv

PHYSICS = ("current", "pre-issue-16")
PROFILE_GROUPS = {
    "physics": ("stepSimulation",),
    "render": ("getCameraImage",),
    "inverse kinematics": ("calculateInverseKinematics",),
}
"""PyBullet calls whose own time makes each group of ``--profile``; the rest (Python included) is "other"."""


def env_config(resolution: int, physics: str) -> EnvConfig:
    cfg = EnvConfig(camera=CameraConfig(width_px=resolution, height_px=resolution))
    return cfg if physics == "current" else cfg.replace(scene=cfg.scene.with_pre_issue_16_physics())


def expert_steps(env: GraspEnv, steps: int) -> int:
    """``steps`` expert-driven env steps over consecutive seeds (realistic poses, contacts and grasps)."""
    expert = Expert(env.config.scene)
    seed, n = 0, 0
    r = env.reset(seed)
    while n < steps:
        action, _ = expert.act(env.privileged())
        r = env.step(action)
        n += 1
        if r.terminated or r.truncated:
            seed += 1
            r = env.reset(seed)
    return n


def measure(resolution: int, steps: int, physics: str = "current") -> tuple[float, float]:
    env = GraspEnv(env_config(resolution, physics))
    t0 = time.perf_counter()
    n = expert_steps(env, steps)
    env_rate = n / (time.perf_counter() - t0)
    t0 = time.perf_counter()
    for _ in range(steps):
        env.render()
    render_rate = steps / (time.perf_counter() - t0)
    env.close()
    return env_rate, render_rate


def profile(steps: int, physics: str) -> tuple[dict[str, float], int]:
    """CPU seconds per group (see :data:`PROFILE_GROUPS`) over ``steps`` expert-driven steps at 64 px, and the
    number of physics substeps they ran."""
    with GraspEnv(env_config(CameraConfig.width_px, physics)) as env:
        prof = cProfile.Profile(time.process_time)
        prof.runcall(expert_steps, env, steps)
    own: dict[str, float] = {}
    calls: dict[str, int] = {}
    for (_, _, name), (_, ncalls, tottime, _, _) in pstats.Stats(prof).stats.items():  # type: ignore[attr-defined]
        own[name] = own.get(name, 0.0) + tottime
        calls[name] = calls.get(name, 0) + ncalls
    groups = {g: sum(t for name, t in own.items() if any(f"pybullet.{c}>" in name for c in names))
              for g, names in PROFILE_GROUPS.items()}
    groups["other"] = sum(own.values()) - sum(groups.values())
    return groups, sum(n for name, n in calls.items() if "pybullet.stepSimulation>" in name)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--steps", type=int, default=600)
    p.add_argument("--resolutions", type=int, nargs="+", default=[CameraConfig.width_px, 96, 128])
    p.add_argument("--physics", choices=PHYSICS, default="current")
    p.add_argument("--profile", type=int, default=0, metavar="STEPS", help="profile this many steps instead")
    p.add_argument("--runs", type=int, default=3, help="runs per resolution; the median is reported (default 3)")
    add_json_argument(p, "bench_env")
    args = p.parse_args()
    variant = "" if args.physics == "current" else args.physics
    if hasattr(os, "sched_setaffinity"):
        os.sched_setaffinity(0, {min(os.sched_getaffinity(0))})  # one core
    if args.profile:
        groups, substeps = profile(args.profile, args.physics)
        total = sum(groups.values())
        print(f"{args.profile} expert-driven steps at 64 px, {args.physics} physics: {total:.2f} s CPU "
              f"({1e3 * total / args.profile:.2f} ms a step under cProfile), "
              f"{substeps / args.profile:.1f} physics substeps a step")
        for g, t in groups.items():
            print(f"  {g:<20} {t:6.2f} s {100 * t / total:4.0f} %  {1e3 * t / args.profile:5.2f} ms/step")
        write_results(args.json, "bench_env", {"cpu_s": groups, "total_cpu_s": total, "steps": args.profile,
                                               "substeps_per_step": substeps / args.profile}, args, "profile", variant)
        return
    print(f"{args.physics} physics")
    print(f"{'resolution':>10} {'env-steps/s':>12} {'bare render/s':>14} {'env/render':>11}")
    rows = []
    for res in args.resolutions:
        rates = [measure(res, args.steps, args.physics) for _ in range(args.runs)]
        env_rate = float(np.median([r[0] for r in rates]))
        render_rate = float(np.median([r[1] for r in rates]))
        default = "  (default)" if res == CameraConfig.width_px else ""
        print(f"{res:>7} px {env_rate:>12.0f} {render_rate:>14.0f} {env_rate / render_rate:>11.2f}{default}")
        rows.append({"resolution_px": res, "env_steps_per_s": env_rate, "render_per_s": render_rate,
                     "ratio": env_rate / render_rate, "ratios": [e / r for e, r in rates], "runs": args.runs,
                     "default": res == CameraConfig.width_px})
    write_results(args.json, "bench_env", {"rows": rows}, args, variant)


if __name__ == "__main__":
    main()
