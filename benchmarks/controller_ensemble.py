"""Controllers averaged: several DAgger runs' networks acting as one, on validation episodes (no training).

    python benchmarks/controller_ensemble.py --photos DIR --members A.pt,B.pt[,...] [--members ...]
        [--episodes 300] [--conditions C,...] [--workers 2] [--save]

The shipped segmenter and parallax filter act in every row; the first row is the shipped controller alone. Each
``--members`` adds a row whose action is the members' mean TCP displacement and whose gripper command is the sign
of their mean gripper logit. Every member reads the same masks, proprioception and episode memory (the memory
records the executed action, the ensemble's), so the members must share the shipped controller's inputs.
``DIR``: a folder of validation photos for the unseen conditions (never the held-out ones). Writes
``runs/benchmarks/controller_ensemble.json`` (``--save``: ``benchmarks/results/``).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np
import torch
from results_io import add_json_argument, display_path, write_results
from validation import add_episode_arguments, check_episode_arguments, validate

from grasp_s2r.agent import default_controller_path
from grasp_s2r.control.policy import Policy, actions_from_outputs
from grasp_s2r.runtime.masks import make_mask_source
from grasp_s2r.runtime.pool import RolloutPool
from grasp_s2r.sim.config import control_env_config

CONDITIONS = "table-photo-unseen,backgrounds-unseen"


class MeanPolicy:
    """``act`` like :class:`~grasp_s2r.control.policy.Policy`: the members' mean displacement, the sign of their mean
    gripper logit."""

    def __init__(self, members: list[Policy]):
        configs = {m.cfg for m in members}
        if len(configs) != 1:
            raise ValueError(f"the members read different inputs: {sorted(map(str, configs))}")
        self.members = members
        self.cfg = members[0].cfg

    def act(self, masks: np.ndarray, proprio: np.ndarray, memory: np.ndarray | None = None,
            gripper_masks: np.ndarray | None = None) -> np.ndarray:
        xyz, logits = zip(*(m.outputs(masks, proprio, memory, gripper_masks) for m in self.members))
        return actions_from_outputs(torch.stack(xyz).mean(0), torch.stack(logits).mean(0))


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--members", action="append", default=[], metavar="A.pt,B.pt",
                   help="comma-separated controller checkpoints averaged in one row (repeat for more rows)")
    add_episode_arguments(p, CONDITIONS)
    add_json_argument(p, "controller_ensemble")
    args = p.parse_args()
    check_episode_arguments(args, "controller_ensemble")
    rows_members = [[Path(c) for c in group.split(",") if c] for group in args.members]
    for path in (c for group in rows_members for c in group):
        if not path.is_file():
            sys.exit(f"controller_ensemble: no controller checkpoint at {path}")
    torch.set_num_threads(1)
    shipped = default_controller_path()
    try:
        systems = [("shipped controller", [shipped], Policy.load(shipped, "cpu")[0])]
        for group in rows_members:
            names = [display_path(str(c)) for c in group]
            systems.append((" + ".join(names), group, MeanPolicy([Policy.load(c, "cpu")[0] for c in group])))
    except ValueError as e:
        sys.exit(f"controller_ensemble: {e}")
    masks = make_mask_source("predicted", None, "cpu")
    conditions = args.conditions.split(",")
    rows = []
    with RolloutPool(control_env_config(), args.workers) as pool:
        for k, (name, members, policy) in enumerate(systems):
            label = "shipped" if k == 0 else f"row {k}, {len(members)} averaged"
            try:
                figures = validate(pool, policy, masks, conditions, args.episodes, label=label,
                                   unseen_photos=str(args.photos))
            except (KeyError, ValueError) as e:
                sys.exit(f"controller_ensemble: {e}")
            rows.append({"name": name, "members": [display_path(str(c)) for c in members], "conditions": figures})
    write_results(args.json, "controller_ensemble", {"photos": args.photos.name, "episodes": args.episodes,
                                                     "conditions": conditions, "rows": rows}, args)
    return 0


if __name__ == "__main__":
    sys.exit(main())
