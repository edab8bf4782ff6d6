"""Guards beside the shipped controller, on validation episodes: a scripted search lower down, and the parallax
filter of far-away detections, each alone and together, against the controller alone.

    python benchmarks/agent_guards.py --photos DIR [--variants none,parallax,search,parallax+search]
        [--search-height 0.11] [--after 3] [--votes 3] [--min-shift-px 3] [--episodes 300] [--conditions C,...] [--workers 2] [--save]

The shipped segmenter and controller act in every row. ``search``: wherever the mask has shown nothing for
``--after`` steps with the gripper open, :class:`~grasp_s2r.control.search.ScriptedSearch` acts instead (the
observable expert's RETURN and SEARCH on the robot's own inputs), sweeping at ``--search-height``. ``parallax``: the
controller's input masks lose the detections that stay put in the image while the camera moves
(:class:`~grasp_s2r.control.parallax.ParallaxFilter`). ``DIR``: a folder of validation photos for the unseen
conditions (never the held-out ones). Writes ``runs/benchmarks/agent_guards.json`` (``--save``:
``benchmarks/results/``).
"""

from __future__ import annotations

import argparse
import dataclasses
import sys
from pathlib import Path

import torch
from results_io import add_json_argument, write_results
from validation import VALIDATION_BASE, success_counts, validation_condition

from grasp_s2r.agent import default_controller_path
from grasp_s2r.control.parallax import ParallaxConfig
from grasp_s2r.control.policy import Policy
from grasp_s2r.control.search import ScriptedSearchConfig
from grasp_s2r.expert.fsm import SearchConfig
from grasp_s2r.runtime.masks import make_mask_source
from grasp_s2r.runtime.pool import RolloutPool
from grasp_s2r.runtime.records import EpisodeRequest
from grasp_s2r.sim.config import control_env_config
from grasp_s2r.stats import format_rate

CONDITIONS = "table-photo-unseen,backgrounds-unseen,start-out-of-view,nominal,dropout,perturbation"
GUARDS = ("parallax", "search")


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--photos", required=True, type=Path, help="a folder of validation photos (the unseen conditions)")
    p.add_argument("--variants", default="none,parallax,search,parallax+search",
                   help="comma-separated rows: none, or guards joined by + (parallax, search)")
    p.add_argument("--search-height", type=float, default=0.11, help="the scripted search's height, metres")
    p.add_argument("--after", type=int, default=3, help="blind steps before the scripted search acts")
    p.add_argument("--votes", type=int, default=ParallaxConfig.votes, help="the parallax filter's votes")
    p.add_argument("--min-shift-px", type=float, default=ParallaxConfig.min_shift_px,
                   help="the parallax filter's least predicted shift, pixels")
    p.add_argument("--episodes", type=int, default=300, help="validation episodes a condition (default 300)")
    p.add_argument("--conditions", default=CONDITIONS, help="validation conditions")
    p.add_argument("--workers", type=int, default=2, help="env processes (default 2)")
    add_json_argument(p, "agent_guards")
    args = p.parse_args()
    if not args.photos.is_dir():
        sys.exit(f"agent_guards: --photos {args.photos} is not a folder")
    variants = [v.strip() for v in args.variants.split(",")]
    for v in variants:
        if v != "none" and not set(v.split("+")) <= set(GUARDS):
            sys.exit(f"agent_guards: unknown variant {v!r}: none, or guards joined by + ({', '.join(GUARDS)})")
    try:
        search = ScriptedSearchConfig(args.after, SearchConfig(search_height_m=args.search_height))
        parallax = ParallaxConfig(min_shift_px=args.min_shift_px, votes=args.votes)
        conditions = [validation_condition(c, str(args.photos)) for c in args.conditions.split(",")]
    except (ValueError, KeyError) as e:
        sys.exit(f"agent_guards: {e}")
    torch.set_num_threads(1)
    env = control_env_config()
    policy = Policy.load(default_controller_path(), "cpu")[0]
    masks = make_mask_source("predicted", None, "cpu")
    rows = []
    with RolloutPool(env, args.workers) as pool:
        for name in variants:
            guards = set(name.split("+"))
            row = {"name": name, "conditions": {}}
            for c in conditions:
                reqs = [EpisodeRequest(seed=VALIDATION_BASE + i, condition=c) for i in range(args.episodes)]
                recs = pool.run(reqs, policy, masks, record=lambda i: False, progress=True, desc=f"{name} {c.name}",
                                scripted_search=search if "search" in guards else None,
                                parallax=parallax if "parallax" in guards else None)
                v = row["conditions"][c.name] = success_counts(recs)
                print(f"{name:18s} {c.name:22s} {format_rate(v['successes'], v['episodes'])}", flush=True)
            rows.append(row)
    write_results(args.json, "agent_guards", {
        "photos": args.photos.name, "episodes": args.episodes, "search_height_m": args.search_height,
        "after_blind_steps": args.after, "parallax": dataclasses.asdict(parallax), "conditions": [c.name for c in conditions], "rows": rows}, args)
    return 0


if __name__ == "__main__":
    sys.exit(main())
