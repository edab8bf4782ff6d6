"""The parallax filter of far-away detections beside the shipped controller, on validation episodes: with and
without it, and with other vote counts.

    python benchmarks/parallax_filter.py --photos DIR [--votes 3,2] [--episodes 300] [--conditions C,...]
        [--workers 2] [--save]

The shipped segmenter and controller act in every row. The first row gives the controller the segmenter's masks as
they are; each further row drops the detections that stay put in the image while the camera moves
(:class:`~grasp_s2r.control.parallax.ParallaxFilter`), with that many votes (``--votes``; the shipped filter's
first). ``DIR``: a folder of validation photos for the unseen conditions (never the held-out ones). Writes
``runs/benchmarks/parallax_filter.json`` (``--save``: ``benchmarks/results/``).
"""

from __future__ import annotations

import argparse
import dataclasses
import sys

import torch
from results_io import add_json_argument, write_results
from validation import (
    VALIDATION_BASE,
    add_episode_arguments,
    check_episode_arguments,
    success_counts,
    validation_condition,
)

from grasp_s2r.agent import default_controller_path
from grasp_s2r.control.parallax import SHIPPED
from grasp_s2r.control.policy import Policy
from grasp_s2r.runtime.masks import make_mask_source
from grasp_s2r.runtime.pool import RolloutPool
from grasp_s2r.runtime.records import EpisodeRequest
from grasp_s2r.sim.config import control_env_config
from grasp_s2r.stats import format_rate

CONDITIONS = "table-photo-unseen,backgrounds-unseen,start-out-of-view,nominal,dropout,perturbation"


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--votes", default=str(SHIPPED.votes), help="comma-separated vote counts, one row each "
                                                               f"(default: the shipped filter's, {SHIPPED.votes})")
    add_episode_arguments(p, CONDITIONS)
    add_json_argument(p, "parallax_filter")
    args = p.parse_args()
    check_episode_arguments(args, "parallax_filter")
    try:
        filters = [None] + [dataclasses.replace(SHIPPED, votes=int(v)) for v in args.votes.split(",")]
        conditions = [validation_condition(c, str(args.photos)) for c in args.conditions.split(",")]
    except (ValueError, KeyError) as e:
        sys.exit(f"parallax_filter: {e}")
    torch.set_num_threads(1)
    policy = Policy.load(default_controller_path(), "cpu")[0]
    masks = make_mask_source("predicted", None, "cpu")
    rows = []
    with RolloutPool(control_env_config(), args.workers) as pool:
        for parallax in filters:
            name = "no filter" if parallax is None else f"parallax, {parallax.votes} votes"
            row = {"name": name, "parallax": None if parallax is None else dataclasses.asdict(parallax),
                   "conditions": {}}
            for c in conditions:
                reqs = [EpisodeRequest(seed=VALIDATION_BASE + i, condition=c) for i in range(args.episodes)]
                recs = pool.run(reqs, policy, masks, record=lambda i: False, progress=True, desc=f"{name} {c.name}",
                                parallax=parallax)
                v = row["conditions"][c.name] = success_counts(recs)
                print(f"{name:18s} {c.name:22s} {format_rate(v['successes'], v['episodes'])}", flush=True)
            rows.append(row)
    write_results(args.json, "parallax_filter", {"photos": args.photos.name, "episodes": args.episodes,
                                                 "conditions": [c.name for c in conditions], "rows": rows}, args)
    return 0


if __name__ == "__main__":
    sys.exit(main())
