"""The parallax filter of far-away detections beside the shipped controller, on validation episodes: with and
without it, with other vote counts, and with other settings of its rules.

    python benchmarks/parallax_filter.py --photos DIR [--votes 0,3,2] [--hover 10/0.03,16/0.04] [--held 5,3/disjoint]
        [--closes 4,6] [--near 0+0,1+0,1+16] [--look 0/spot/0,0.08/spot/16] [--lead 3/1,4/2] [--episodes 300]
        [--conditions C,...] [--workers 2] [--save]

The shipped segmenter and controller act in every row. A ``--votes`` row of 0 gives the controller the segmenter's masks
as they are (no filter); each other one drops the detections that stay put in the image while the camera moves
(:class:`~grasp_s2r.control.parallax.ParallaxFilter`), with that many votes, the rest of the filter as shipped; each
``--hover STEPS/HEIGHT_M`` row is the shipped filter with hovered spots after STEPS steps of the open gripper below
HEIGHT_M (``control.hovered``; 0 steps: none); each ``--held STEPS[/disjoint]`` row is the shipped filter that gives up
to STEPS empty masks in a row the last non-empty one while the closed gripper holds something (``control.held``; 0:
none; /disjoint: masks that do not touch it too); each ``--closes N`` row is the shipped filter with re-closed spots
after N closes begun near one table point (``control.hovered``; 0: none); each ``--near STEPS[+HOVER]`` row is the
shipped filter with the near sphere's last mask for up to STEPS empty frames under the open gripper (``control.near``;
0: none), and with +HOVER hovered spots after HOVER low steps (0: none); each ``--look HEIGHT_M/WHEN[/HOVER]`` row is
the shipped filter with the low look (``control.look``) from HEIGHT_M at the start, after each spot given up, or both
(WHEN: ``start``, ``spot``, ``start+spot``), and with /HOVER hovered spots after HOVER low steps; each ``--lead
FRAMES/STEPS`` row is the shipped filter with the rolling lead (``control.lead``) over FRAMES frames adding STEPS of
the sphere's step to the controller's (0 frames: none). Rows run the same
episodes: each row after the first prints, per condition, the episodes it grasps that the first row does not (won) and
the other way (lost).
``DIR``: a folder of validation photos for the unseen conditions (never the
held-out ones). Writes ``runs/benchmarks/parallax_filter.json`` (``--save``:
``benchmarks/results/``).
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
    won_lost,
)

from grasp_s2r.agent import default_controller_path
from grasp_s2r.control.parallax import SHIPPED, ParallaxConfig
from grasp_s2r.control.policy import Policy
from grasp_s2r.runtime.masks import make_mask_source
from grasp_s2r.runtime.pool import RolloutPool
from grasp_s2r.runtime.records import EpisodeRequest
from grasp_s2r.sim.config import control_env_config
from grasp_s2r.stats import format_rate

CONDITIONS = "table-photo-unseen,backgrounds-unseen,start-out-of-view,nominal,dropout,perturbation"


def _hovering(text: str) -> ParallaxConfig:
    """The shipped filter with the hovered spots of ``--hover``'s ``STEPS/HEIGHT_M``."""
    steps, sep, height = text.partition("/")
    if not sep:
        raise ValueError(f"--hover takes STEPS/HEIGHT_M, e.g. 10/0.03; got {text!r}")
    return dataclasses.replace(SHIPPED, hover_steps=int(steps), hover_height_m=float(height))


def _held(text: str) -> ParallaxConfig:
    """The shipped filter with the held sphere of ``--held``'s ``STEPS`` or ``STEPS/disjoint``."""
    steps, _, how = text.partition("/")
    if how not in ("", "disjoint"):
        raise ValueError(f"--held takes STEPS or STEPS/disjoint, got {text!r}")
    return dataclasses.replace(SHIPPED, held_steps=int(steps), held_disjoint=how == "disjoint")


def _near(text: str) -> ParallaxConfig:
    """The shipped filter with the near sphere of ``--near``'s ``STEPS`` or ``STEPS+HOVER``."""
    steps, _, hover = text.partition("+")
    return dataclasses.replace(SHIPPED, near_steps=int(steps), **({"hover_steps": int(hover)} if hover else {}))


def _look(text: str) -> ParallaxConfig:
    """The shipped filter with the low look of ``--look``'s ``HEIGHT_M/WHEN[/HOVER[/DWELL]]`` (WHEN: start, spot or
    start+spot; HOVER: hovered spots after that many low steps; DWELL: steps the look stays at its point while the
    mask is empty)."""
    height, _, rest = text.partition("/")
    when, _, rest = rest.partition("/")
    hover, _, dwell = rest.partition("/")
    if when not in ("start", "spot", "start+spot"):
        raise ValueError(f"--look takes HEIGHT_M/start|spot|start+spot[/HOVER[/DWELL]], got {text!r}")
    return dataclasses.replace(SHIPPED, look_height_m=float(height), look_at_start="start" in when,
                               look_after_spot="spot" in when, **({"hover_steps": int(hover)} if hover else {}),
                               **({"look_dwell_steps": int(dwell)} if dwell else {}))


def _lead(text: str) -> ParallaxConfig:
    """The shipped filter with the rolling lead of ``--lead``'s ``FRAMES/STEPS``."""
    frames, _, steps = text.partition("/")
    return dataclasses.replace(SHIPPED, lead_frames=int(frames), lead_steps=float(steps or 1.0))


def describe(parallax: ParallaxConfig | None) -> str:
    """A row's name: what the filter does."""
    if parallax is None:
        return "no filter"
    hovered = (f", hovered spots after {parallax.hover_steps} steps below {100 * parallax.hover_height_m:g} cm"
               if parallax.hover_steps else "")
    closes = f", re-closed spots after {parallax.hover_closes} closes" if parallax.hover_closes else ""
    held = (f", held sphere for {parallax.held_steps} steps{' (or off it)' if parallax.held_disjoint else ''}"
            if parallax.held_steps else "")
    near = (f", near sphere for {parallax.near_steps} steps below {100 * parallax.near_height_m:g} cm"
            if parallax.near_steps else "")
    when = " and ".join(w for w, on in (("at the start", parallax.look_at_start),
                                          ("after a spot", parallax.look_after_spot)) if on)
    dwell = f", dwelling {parallax.look_dwell_steps} steps" if parallax.look_dwell_steps else ""
    look = f", low look from {100 * parallax.look_height_m:g} cm {when}{dwell}" if parallax.look_height_m else ""
    lead = (f", rolling lead of {parallax.lead_steps:g} steps over {parallax.lead_frames} frames"
            if parallax.lead_frames else "")
    return f"parallax, {parallax.votes} votes{hovered}{closes}{held}{near}{look}{lead}"


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--votes", default=f"0,{SHIPPED.votes}", help="comma-separated vote counts, one row each; 0: no "
                                                                  f"filter (default: 0,{SHIPPED.votes}, the shipped)")
    p.add_argument("--hover", default="", help="comma-separated STEPS/HEIGHT_M, one row each: the shipped filter with "
                                               "hovered spots after STEPS low steps below HEIGHT_M (default: none)")
    p.add_argument("--held", default="", help="comma-separated STEPS or STEPS/disjoint, one row each: the shipped "
                                              "filter with the held sphere's last mask for up to STEPS empty frames "
                                              "(/disjoint: or frames whose mask does not touch it) (default: none)")
    p.add_argument("--closes", default="", help="comma-separated CLOSES, one row each: the shipped filter with "
                                                "re-closed spots after CLOSES closes at one table point (default: none)")
    p.add_argument("--near", default="", help="comma-separated STEPS or STEPS+HOVER, one row each: the shipped filter "
                                              "with the near sphere's last mask for up to STEPS empty frames (and "
                                              "hovered spots after HOVER low steps) (default: none)")
    p.add_argument("--look", default="", help="comma-separated HEIGHT_M/WHEN[/HOVER], one row each: the shipped "
                                              "filter with a low look from HEIGHT_M (control.look) at the start, "
                                              "after a given-up spot, or both (WHEN: start, spot, start+spot), and "
                                              "hovered spots after HOVER low steps (default: none)")
    p.add_argument("--lead", default="", help="comma-separated FRAMES/STEPS, one row each: the shipped filter with "
                                              "the rolling lead (control.lead) over FRAMES frames, STEPS of the "
                                              "sphere's step added (default: none)")
    add_episode_arguments(p, CONDITIONS)
    add_json_argument(p, "parallax_filter")
    args = p.parse_args()
    check_episode_arguments(args, "parallax_filter")
    try:
        filters = ([None if int(v) == 0 else dataclasses.replace(SHIPPED, votes=int(v)) for v in args.votes.split(",")
                    if v] + [_hovering(h) for h in args.hover.split(",") if h]
                   + [_held(h) for h in args.held.split(",") if h]
                   + [dataclasses.replace(SHIPPED, hover_closes=int(n)) for n in args.closes.split(",") if n]
                   + [_near(n) for n in args.near.split(",") if n] + [_look(v) for v in args.look.split(",") if v]
                   + [_lead(v) for v in args.lead.split(",") if v])
        if not filters:
            raise ValueError("no rows: give --votes, --hover, --held, --closes, --near, --look or --lead")
        conditions = [validation_condition(c, str(args.photos)) for c in args.conditions.split(",")]
    except (ValueError, KeyError) as e:
        sys.exit(f"parallax_filter: {e}")
    torch.set_num_threads(1)
    policy = Policy.load(default_controller_path(), "cpu")[0]
    masks = make_mask_source("predicted", None, "cpu")
    rows = []
    with RolloutPool(control_env_config(), args.workers) as pool:
        for parallax in filters:
            name = describe(parallax)
            row = {"name": name, "parallax": None if parallax is None else dataclasses.asdict(parallax),
                   "conditions": {}}
            for c in conditions:
                reqs = [EpisodeRequest(seed=VALIDATION_BASE + i, condition=c) for i in range(args.episodes)]
                recs = pool.run(reqs, policy, masks, record=lambda i: False, progress=True, desc=f"{name} {c.name}",
                                parallax=parallax)
                v = row["conditions"][c.name] = success_counts(recs)
                v["success_by_episode"] = [bool(r.success) for r in recs]  # request order: rows pair episode by episode
                paired = ""
                if rows:  # against the first row, the same episodes
                    first = rows[0]["conditions"][c.name]["success_by_episode"]
                    won, lost = map(len, won_lost(first, v["success_by_episode"], [r.seed for r in reqs]))
                    v["paired_vs_first_row"] = {"won": won, "lost": lost}
                    paired = f"   against the first row: {won} won, {lost} lost"
                print(f"{name:60s} {c.name:22s} {format_rate(v['successes'], v['episodes'])}{paired}", flush=True)
            rows.append(row)
    write_results(args.json, "parallax_filter", {"photos": args.photos.name, "episodes": args.episodes,
                                                 "conditions": [c.name for c in conditions], "rows": rows}, args)
    return 0


if __name__ == "__main__":
    sys.exit(main())
