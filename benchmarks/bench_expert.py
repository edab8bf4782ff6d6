"""Success rate of the FSM expert over seeded episodes, with its 95 % Wilson interval.

    python benchmarks/bench_expert.py [--episodes 200] [--seed 100000] [--workers 2]
    python benchmarks/bench_expert.py --condition dynamics-shift --episodes 200 [--physics pre-issue-16]

Without ``--condition`` the episodes are collected as ``grasp-s2r collect`` does (a dataset in a temporary folder).
``--condition NAME`` runs them in this process under that evaluation condition's dynamics, applied through its
:class:`~grasp_s2r.runtime.episode_hooks.EpisodeHooks` (sphere mass and friction, action noise, latency, moving
sphere; the expert reads the world state, so the condition's photo backgrounds are left out), and also reports
whether the sphere stays held while the expert lifts it on to 12 cm. ``--physics pre-issue-16`` runs the physics
every scene had before issue 16 (240 Hz, PGS solver, 50 IK iterations) to compare with.
"""

from __future__ import annotations

import argparse
import dataclasses
import tempfile
import time

import numpy as np
from results_io import add_json_argument, write_results

from grasp_s2r.sim.config import EnvConfig

PHYSICS = ("current", "pre-issue-16")
HOLD_STEPS = 20
"""After a success, the expert goes on this many steps (lifting to 12 cm) and the sphere must still be held."""


def env_config(physics: str) -> EnvConfig:
    cfg = EnvConfig()
    return cfg if physics == "current" else cfg.replace(scene=cfg.scene.with_pre_issue_16_physics())


def run_condition(condition: str, cfg: EnvConfig, episodes: int, seed: int) -> dict[str, list]:
    """Expert episodes under a named condition, in this process: success, length, held after lifting on."""
    from grasp_s2r.expert.fsm import Expert
    from grasp_s2r.runtime.conditions import resolve_condition
    from grasp_s2r.runtime.episode_hooks import EpisodeHooks
    from grasp_s2r.sim.env import GraspEnv

    cond = dataclasses.replace(resolve_condition(condition), backgrounds="")
    out: dict[str, list] = {"success": [], "length": [], "held": []}
    with GraspEnv(cfg) as env:
        expert = Expert(cfg.scene)
        for s in range(seed, seed + episodes):
            r = env.reset(s)
            hooks = EpisodeHooks(env, cond, np.random.default_rng(s))
            r = hooks.on_reset() or r
            n = 0
            while not (r.terminated or r.truncated):
                r = env.step(hooks.before_step(expert.act(env.privileged())[0]))
                n += 1
            out["success"].append(bool(r.success))
            out["length"].append(n)
            if r.success:
                for _ in range(HOLD_STEPS):
                    env.step(hooks.before_step(expert.act(env.privileged())[0]))
                pv = env.privileged()
                out["held"].append(bool(pv.held and pv.sphere_pos_world_m[2] > pv.sphere_rest_z_m + 0.1))
    return out


def main() -> None:
    from grasp_s2r.stats import format_rate, wilson_interval

    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--episodes", type=int, default=200)
    p.add_argument("--seed", type=int, default=100_000, help="first seed (default: a range no test uses)")
    p.add_argument("--workers", type=int, default=2, help="collect worker processes (without --condition)")
    p.add_argument("--condition", default="", help="a condition of grasp-s2r eval, e.g. dynamics-shift")
    p.add_argument("--physics", choices=PHYSICS, default="current")
    add_json_argument(p, "bench_expert")
    args = p.parse_args()
    cfg = env_config(args.physics)
    sc = cfg.scene
    print(f"physics: {args.physics} ({sc.physics_hz:g} Hz, {sc.free_space_physics_hz:g} Hz in free space, "
          f"{sc.constraint_solver}, {sc.ik_iterations} IK iterations)"
          f"{', condition ' + args.condition if args.condition else ''}")
    t0 = time.perf_counter()
    if args.condition:
        out = run_condition(args.condition, cfg, args.episodes, args.seed)
        successes, lengths = sum(out["success"]), out["length"]
        held_k, held_n = sum(out["held"]), len(out["held"])
        held = f", held at 12 cm {HOLD_STEPS} steps later: {format_rate(sum(out['held']), len(out['held']))}"
    else:
        from grasp_s2r.collect import CollectConfig, collect
        from grasp_s2r.data.episodes import EpisodeDataset

        with tempfile.TemporaryDirectory() as tmp:
            s = collect(CollectConfig(out=tmp, episodes=args.episodes, workers=args.workers, seed=args.seed, env=cfg))
            lengths = [len(e) for e in EpisodeDataset(tmp)]
        successes, held, held_k, held_n = s.successes, "", None, None
    seconds = time.perf_counter() - t0
    print(f"expert success: {format_rate(successes, len(lengths))}{held}")
    print(f"episode length: mean {sum(lengths) / len(lengths):.1f} steps, max {max(lengths)}")
    print(f"{seconds:.0f} s")
    lo, hi = wilson_interval(successes, len(lengths))
    write_results(args.json, "bench_expert", {
        "successes": successes, "episodes": len(lengths), "success_rate": successes / len(lengths), "ci_low": lo,
        "ci_high": hi, "mean_length": sum(lengths) / len(lengths), "max_length": max(lengths),
        "held_successes": held_k, "held_episodes": held_n, "seconds": seconds}, args, args.condition,
        "" if args.physics == "current" else args.physics)


if __name__ == "__main__":
    main()
