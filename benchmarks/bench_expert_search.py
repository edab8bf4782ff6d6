"""Success of the observable-consistent expert (``Expert.act(pv, sphere_in_view)``) over seeded episodes.

    python benchmarks/bench_expert_search.py [--scenario nominal] [--episodes 200] [--seed 100000]
    python benchmarks/bench_expert_search.py --scenario teleport --episodes 200 --max-steps 160
    python benchmarks/bench_expert_search.py --scenario start-out-of-view --episodes 200 --max-steps 160
    python benchmarks/bench_expert_search.py --privileged      # the same episodes, act(pv) (no flag)

``sphere_in_view`` is whether the ground-truth sphere mask of the frame the env returned is non-empty, and
``Expert.reset()`` is called at every episode's start, as a runtime would. Scenarios:

- ``nominal``: the env's episodes as they are (the sphere is in view at the start).
- ``teleport``: after ``--teleport-step`` steps (mid-approach) the sphere is moved to a random reachable table
  spot outside the camera's current view (at least 5 cm from where it was): the expert returns, searches, grasps.
- ``start-out-of-view``: the sphere starts at a random reachable spot outside the initial view.

Printed: success with its 95 % Wilson interval, episode length, and for the episodes that lost the sphere the
steps spent out of view (RETURN + SEARCH, from the loss to the first frame that sees it again).
"""

from __future__ import annotations

import argparse
import dataclasses
import time

import numpy as np
import pybullet as pb
from results_io import add_json_argument, write_results

SCENARIOS = ("nominal", "teleport", "start-out-of-view")
_SPOT_STREAM = 7
"""The random spot of an episode is drawn from ``default_rng([seed, _SPOT_STREAM])``."""
REACH_M = 0.12
"""Spots are drawn in this half-extent around the spawn centre: the privileged expert grasps anywhere in it (near
the TCP workspace's 0.16 edge the arm cannot always bring the TCP within the 3.5 mm closing tolerance)."""


def move_sphere_out_of_view(env, rng: np.random.Generator, min_move_m: float = 0.05) -> np.ndarray | None:
    """Put the sphere at rest on a random reachable table spot the camera does not see now (rendered to check);
    None (sphere unmoved) when 200 draws found none."""
    s = env.config.scene
    old_pos, old_orn = pb.getBasePositionAndOrientation(env.sphere_uid, physicsClientId=env.client)
    centre = np.asarray(s.spawn_center_world_m)
    for _ in range(200):
        xy = centre + rng.uniform(-REACH_M, REACH_M, size=2)
        if np.linalg.norm(xy - np.asarray(old_pos[:2])) < min_move_m:
            continue
        pos = [xy[0], xy[1], s.table_height_m + s.sphere_radius_m]
        pb.resetBasePositionAndOrientation(env.sphere_uid, pos, [0, 0, 0, 1], physicsClientId=env.client)
        if not env.render().sphere_mask.any():
            pb.resetBaseVelocity(env.sphere_uid, [0, 0, 0], [0, 0, 0], physicsClientId=env.client)
            return np.array(pos)
    pb.resetBasePositionAndOrientation(env.sphere_uid, old_pos, old_orn, physicsClientId=env.client)
    return None


def run_episode(env, expert, seed: int, scenario: str = "nominal", teleport_step: int = 3,
                privileged: bool = False) -> dict:
    """One episode of the observable-consistent expert (``privileged``: ``act(pv)``, no flag, for comparison).

    Returns success, length, phases (list of Phase), in_view (list of bool), out_of_view_runs (lengths of the runs
    of consecutive out-of-view steps that ended with the sphere in view again or the episode's end), moved (bool),
    waypoints (per step: the sweep waypoint SEARCH headed for, -1 in other phases).
    """
    from grasp_s2r.expert.fsm import Phase

    rng = np.random.default_rng([seed, _SPOT_STREAM])
    r = env.reset(seed)
    expert.reset()
    moved = False
    if scenario == "start-out-of-view":
        moved = move_sphere_out_of_view(env, rng) is not None
        r = dataclasses.replace(r, frame=env.render())
    phases, in_view, waypoints = [], [], []
    while not (r.terminated or r.truncated):
        if scenario == "teleport" and len(phases) == teleport_step:
            moved = move_sphere_out_of_view(env, rng) is not None
            r = dataclasses.replace(r, frame=env.render())
        seen = bool(r.frame.sphere_mask.any())
        action, phase = expert.act(env.privileged()) if privileged else expert.act(env.privileged(), seen)
        phases.append(phase)
        in_view.append(seen)
        waypoints.append(expert.waypoint if phase == Phase.SEARCH else -1)
        r = env.step(action)
    runs, n = [], 0
    for seen in in_view:
        if not seen:
            n += 1
        elif n:
            runs.append(n)
            n = 0
    if n:
        runs.append(n)
    return {"success": bool(r.success), "length": len(phases), "phases": phases, "in_view": in_view,
            "out_of_view_runs": runs, "moved": moved, "waypoints": waypoints}


def main() -> None:
    from grasp_s2r.expert.fsm import Expert, Phase
    from grasp_s2r.sim.config import EnvConfig
    from grasp_s2r.sim.env import GraspEnv
    from grasp_s2r.stats import format_rate

    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--scenario", choices=SCENARIOS, default="nominal")
    p.add_argument("--episodes", type=int, default=200)
    p.add_argument("--seed", type=int, default=100_000, help="first seed (default: a range no test uses)")
    p.add_argument("--max-steps", type=int, default=0, help="episode step budget (default: the scene's)")
    p.add_argument("--teleport-step", type=int, default=3, help="teleport: steps before the sphere is moved")
    p.add_argument("--privileged", action="store_true", help="act(pv) without the flag (today's expert)")
    add_json_argument(p, "bench_expert_search")
    args = p.parse_args()
    cfg = EnvConfig()
    if args.max_steps:
        cfg = cfg.replace(scene=dataclasses.replace(cfg.scene, max_episode_steps=args.max_steps))
    print(f"scenario {args.scenario}, {args.episodes} episodes from seed {args.seed}, budget "
          f"{cfg.scene.max_episode_steps} steps, {'act(pv)' if args.privileged else 'act(pv, sphere_in_view)'}")
    t0 = time.perf_counter()
    out = []
    with GraspEnv(cfg) as env:
        expert = Expert(cfg.scene)
        for s in range(args.seed, args.seed + args.episodes):
            out.append(run_episode(env, expert, s, args.scenario, args.teleport_step, args.privileged))
    ok = [o["success"] for o in out]
    lengths = np.array([o["length"] for o in out])
    print(f"expert success: {format_rate(sum(ok), len(ok))}")
    print(f"episode length: mean {lengths.mean():.1f}, median {np.median(lengths):.0f}, "
          f"p90 {np.percentile(lengths, 90):.0f}, max {lengths.max()} steps")
    if args.scenario != "nominal":
        print(f"sphere moved out of view in {sum(o['moved'] for o in out)} of {len(out)} episodes")
    runs = np.array([sum(o["out_of_view_runs"]) for o in out if o["out_of_view_runs"]])
    if len(runs):
        print(f"steps out of view until seen again, {len(runs)} episodes that lost it: "
              f"mean {runs.mean():.1f}, median {np.median(runs):.0f}, p90 {np.percentile(runs, 90):.0f}, "
              f"max {runs.max()}")
    searched = [max(o["waypoints"]) for o in out if Phase.SEARCH in o["phases"]]
    if searched:
        print(f"episodes that searched: {len(searched)}; found while rising or heading for the spiral's first point: "
              f"{searched.count(0)}, further along the sweep: {len(searched) - searched.count(0)} (furthest waypoint "
              f"{max(searched)})")
    counts = {ph.name: sum(o["phases"].count(ph) for o in out) for ph in Phase}
    print("steps per phase: " + ", ".join(f"{k} {v}" for k, v in counts.items() if v))
    failed = [args.seed + i for i, o in enumerate(out) if not o["success"]]
    if failed:
        print(f"failed seeds: {failed[:20]}{' ...' if len(failed) > 20 else ''}")
    seconds = time.perf_counter() - t0
    print(f"{seconds:.0f} s")
    write_results(args.json, "bench_expert_search", {
        "successes": sum(ok), "episodes": len(ok), "mean_length": float(lengths.mean()), "max_length": int(lengths.max()),
        "moved": sum(o["moved"] for o in out), "out_of_view_steps": [int(r) for r in runs],
        "searched": len(searched), "found_at_first_waypoint": searched.count(0), "steps_per_phase": counts,
        "failed_seeds": failed, "seconds": seconds}, args, args.scenario, "privileged" if args.privileged else "")


if __name__ == "__main__":
    main()
