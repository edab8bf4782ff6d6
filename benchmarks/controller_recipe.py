"""Choose the shipped controller on validation episodes of the TRAINING photos (never the held-out ones).

    python benchmarks/controller_recipe.py [--out runs/controller-recipe] [--episodes 200] [--ship]

Trains one ``grasp-s2r dagger`` run per candidate (:data:`CANDIDATES`: the shipped recipe at several seeds, and a
longer budget; each in ``OUT/<name>``, resumable) over the shipped segmenter's masks, then measures each
``policy.pt`` on validation episodes (seeds no training or test run uses) of every condition that shows no
held-out photo (``validation.TRAIN_PHOTO_CONDITIONS``). The candidate with the best mean success is chosen (ties:
the smaller budget of episodes, then the earlier candidate); ``--ship`` copies its controller to
``grasp_s2r/weights/controller.pt``. The command printed for it reproduces it alone. The held-out photos and the
test seeds report (``bench_eval.py``). Writes (``--save``) ``benchmarks/results/controller_recipe.json``.
"""

from __future__ import annotations

import argparse
import json
import shlex
import shutil
import time
from pathlib import Path

import torch
from results_io import REPO, add_json_argument, write_results
from validation import TRAIN_PHOTO_CONDITIONS, validate

from grasp_s2r.cli import build_parser
from grasp_s2r.commands import dagger as cli_dagger
from grasp_s2r.control.dagger import DaggerConfig, run_dagger
from grasp_s2r.control.policy import Policy
from grasp_s2r.files import file_sha256, write_json
from grasp_s2r.runtime.masks import make_mask_source
from grasp_s2r.runtime.pool import RolloutPool
from grasp_s2r.sim.config import control_env_config

RECIPE_ARGS = ("--memory --observable-expert --out-of-view-prob 0.3 --dropout-prob 0.3 --table-photo-prob 0.2 "
               "--eval-conditions nominal,start-out-of-view,dropout,dynamics-shift,perturbation "
               "--no-bc")
"""The shipped controller's recipe: ``grasp-s2r dagger`` options besides the budget and the seed (each candidate's
config is parsed from its command, so the printed command is what ran)."""
FINGERS = "--gripper-input --camera-jitter-mm 4 --camera-jitter-deg 2"
"""The controller also reads the gripper fingers' mask, trained with the scene's full camera mount jitter."""
CANDIDATES = {
    "8x48-eval40-seed0": {"rounds": 8, "episodes_per_round": 48, "eval_episodes": 40, "seed": 0},
    "8x48-eval100-seed0": {"rounds": 8, "episodes_per_round": 48, "eval_episodes": 100, "seed": 0},
    "8x48-eval100-seed1": {"rounds": 8, "episodes_per_round": 48, "eval_episodes": 100, "seed": 1},
    "12x48-eval100-seed0": {"rounds": 12, "episodes_per_round": 48, "eval_episodes": 100, "seed": 0},
    "8x48-eval40-seed0-fingers": {"rounds": 8, "episodes_per_round": 48, "eval_episodes": 40, "seed": 0,
                                  "options": FINGERS},
}
"""Budget (rounds x episodes a round), per-round evaluation episodes (which pick the run's ``policy.pt``: DAgger's
own validation episodes), seed (network init and minibatches) and further ``grasp-s2r dagger`` options of each
candidate."""
WEIGHTS = REPO / "grasp_s2r" / "weights" / "controller.pt"


def command(fields: dict, out: str) -> str:
    """The ``grasp-s2r dagger`` command of a candidate."""
    return (f"grasp-s2r dagger --out {shlex.quote(out)} {RECIPE_ARGS} --rounds {fields['rounds']} "
            f"--episodes-per-round {fields['episodes_per_round']} --eval-episodes {fields['eval_episodes']} "
            f"--seed {fields['seed']} {fields.get('options', '')}").strip()


def config(cmd: str) -> DaggerConfig:
    """The DaggerConfig the ``grasp-s2r dagger`` command ``cmd`` runs with."""
    return cli_dagger.config_from_args(build_parser(only="dagger").parse_args(shlex.split(cmd)[1:]))


def _dagger_minutes(out: Path, seconds_now: float) -> float:
    """The run's own DAgger time (its rounds' recorded seconds), not the time to find it finished."""
    rows = json.loads((out / "curve.json").read_text())["rows"]
    return sum(r.get("round_s", 0.0) for r in rows) / 60 or seconds_now / 60


def _validation(policy_path: Path, masks, args: argparse.Namespace) -> dict[str, dict]:
    """The controller's validation figures, measured once per controller file (cached beside it by its sha256)."""
    digest = file_sha256(policy_path)
    cache = policy_path.parent / f"validation-{args.episodes}.json"
    if cache.is_file():
        stored = json.loads(cache.read_text())
        if stored.get("policy_sha256") == digest and list(stored["validation"]) == list(TRAIN_PHOTO_CONDITIONS):
            return stored["validation"]
    policy = Policy.load(policy_path, "cpu")[0]
    with RolloutPool(control_env_config(), args.workers) as pool:
        val = validate(pool, policy, masks, TRAIN_PHOTO_CONDITIONS, args.episodes, label=policy_path.parent.name)
    write_json(cache, {"policy_sha256": digest, "validation": val}, indent=1)
    return val


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--out", type=Path, default=Path("runs/controller-recipe"))
    p.add_argument("--episodes", type=int, default=200, help="validation episodes per condition")
    p.add_argument("--workers", type=int, default=2, help="env processes of the validation episodes")
    p.add_argument("--ship", action="store_true", help="copy the chosen controller to grasp_s2r/weights/")
    add_json_argument(p, "controller_recipe")
    args = p.parse_args()
    torch.set_num_threads(1)
    masks = make_mask_source("predicted", "", "cpu")
    figures: dict[str, dict] = {}
    for name, fields in CANDIDATES.items():
        t0 = time.perf_counter()
        cmd = command(fields, str(args.out / name))
        cfg = config(cmd)
        result = run_dagger(cfg, progress=False)
        figures[name] = {"fields": fields, "command": cmd, "selected_round": result.selected_round,
                         "dagger_minutes": _dagger_minutes(Path(cfg.out), time.perf_counter() - t0)}
        figures[name]["validation"] = val = _validation(result.policy_path, masks, args)
        figures[name]["mean_success"] = sum(v["successes"] for v in val.values()) / (args.episodes * len(val))
        print(f"{name:24s} mean validation success {100 * figures[name]['mean_success']:.1f} %  "
              f"(policy.pt = round {result.selected_round})", flush=True)
    budget = {n: f["fields"]["rounds"] * (f["fields"]["episodes_per_round"] + f["fields"]["eval_episodes"])
              for n, f in figures.items()}
    order = list(figures)
    chosen = max(figures, key=lambda n: (figures[n]["mean_success"], -budget[n], -order.index(n)))
    print(f"chosen: {chosen}: {figures[chosen]['command']}")
    if args.ship:
        shutil.copyfile(args.out / chosen / "policy.pt", WEIGHTS)
        print(f"copied to {WEIGHTS.relative_to(REPO)}")
    write_results(args.json, "controller_recipe", {"candidates": figures, "chosen": chosen,
                                                   "validation_conditions": list(TRAIN_PHOTO_CONDITIONS)}, args)


if __name__ == "__main__":
    main()
