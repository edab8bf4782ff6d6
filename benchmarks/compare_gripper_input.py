"""Does seeing its fingers make the controller robust to the camera mount? Three arms at one label budget.

    python benchmarks/compare_gripper_input.py [--masks gt|predicted] [--out runs/mount] [--episodes 200]

Each arm is one ``grasp-s2r dagger`` run of the shipped controller's recipe (``controller_recipe.RECIPE_ARGS``,
8 rounds of 48 episodes, seed 0; in ``OUT-<arm>``, resumable; OUT defaults to ``runs/mount`` with ground-truth
masks, ``runs/mount-predicted`` with predicted ones), then its ``policy.pt`` on the test episodes
of ``bench_camera_mount.py`` at mount errors of 0, 4, 8 and 12 mm (look 0-6 deg):

- ``A-calibrated``: trained with the camera within 1 mm / 0.5 deg of its nominal mount (the shipped recipe);
- ``B-fulljitter``: trained with the scene's full 4 mm / 2 deg mount jitter, sphere mask only;
- ``C-fulljitter-gripper``: the same, and the controller also reads the gripper fingers' mask (``--gripper-input``).

``--masks gt``: ground-truth masks (the controller question alone); ``predicted``: the shipped segmenter's sphere
masks and its gripper head's finger masks. Writes
(``--save``) ``benchmarks/results/compare_gripper_input-<masks>.json``.
"""

from __future__ import annotations

import argparse
from pathlib import Path

import torch
from bench_camera_mount import mount_rows
from controller_recipe import RECIPE_ARGS, config
from results_io import add_json_argument, default_json, write_results

from grasp_s2r.control.dagger import run_dagger
from grasp_s2r.control.policy import Policy
from grasp_s2r.runtime.masks import make_mask_source
from grasp_s2r.runtime.pool import RolloutPool
from grasp_s2r.sim.config import control_env_config

ARMS = {
    "A-calibrated": "",
    "B-fulljitter": "--camera-jitter-mm 4 --camera-jitter-deg 2",
    "C-fulljitter-gripper": "--camera-jitter-mm 4 --camera-jitter-deg 2 --gripper-input",
}
"""Arm -> the ``grasp-s2r dagger`` options it adds to the recipe."""
BUDGET = "--rounds 8 --episodes-per-round 48 --eval-episodes 40 --seed 0"
LEVELS_MM = (0.0, 4.0, 8.0, 12.0)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--masks", choices=("gt", "predicted"), default="gt")
    p.add_argument("--out", type=Path, default=None, help="prefix of the arms' run folders (OUT-<arm>)")
    p.add_argument("--episodes", type=int, default=200, help="test episodes per mount level")
    p.add_argument("--workers", type=int, default=2)
    add_json_argument(p, "compare_gripper_input")
    args = p.parse_args()
    torch.set_num_threads(1)
    masks = make_mask_source(args.masks, "", "cpu")
    figures: dict[str, dict] = {}
    for arm, extra in ARMS.items():
        prefix = args.out or Path("runs/mount" if args.masks == "gt" else "runs/mount-predicted")
        out = Path(f"{prefix}-{arm}")
        cmd = f"grasp-s2r dagger --out {out} {RECIPE_ARGS} {BUDGET} --masks {args.masks} {extra}".strip()
        print(f"\n=== {arm}: {cmd}", flush=True)
        result = run_dagger(config(cmd), progress=False)
        policy = Policy.load(result.policy_path, "cpu")[0]
        with RolloutPool(control_env_config(), args.workers) as pool:
            rows = mount_rows(pool, policy, masks, list(LEVELS_MM), args.episodes, label=arm)
        figures[arm] = {"command": cmd, "selected_round": result.selected_round, "rows": rows}
    write_results(args.json or default_json("compare_gripper_input", args.masks), "compare_gripper_input",
                  {"masks": args.masks, "arms": figures}, args)


if __name__ == "__main__":
    main()
