"""Each round of DAgger runs measured on more of the recipe's own evaluation episodes than the run used to pick it.

    python benchmarks/round_evaluation.py RUN [RUN ...] [--per-condition 40] [--rounds 3-7] [--save]

A run picks its ``policy.pt`` as the round that did best on its ``--eval-episodes`` (40 in the shipped controller's
recipe: 8 a condition). This measures every round of ``--rounds`` (default: those at beta 0 in the recipe) on
``--per-condition`` episodes of each condition the recipe evaluates on, plus ``table-photo-train`` (the training
photos as the table), the shipped segmenter's masks through the shipped mask filter, on DAgger's evaluation seeds
(``seeds.DAGGER_EVAL_BASE`` up, never the validation seeds of ``validation.py``, nor test seeds): what a larger
evaluation would have picked, without spending validation episodes on the choice. Prints, per run, the round with
the most successes over the recipe's conditions (ties: the later round) beside the run's own pick. Writes
``benchmarks/results/round_evaluation.json`` with ``--save``.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import torch
from results_io import add_json_argument, write_results
from validation import validation_condition

from grasp_s2r.control import curves, seeds
from grasp_s2r.control.dagger_config import SHIPPED_EVAL_CONDITIONS
from grasp_s2r.control.parallax import SHIPPED as SHIPPED_PARALLAX
from grasp_s2r.control.policy import Policy, read_policy_blob
from grasp_s2r.control.run_store import RunStore
from grasp_s2r.runtime.masks import make_mask_source
from grasp_s2r.runtime.pool import RolloutPool
from grasp_s2r.runtime.records import EpisodeRequest
from grasp_s2r.sim.config import control_env_config

CONDITIONS = (*SHIPPED_EVAL_CONDITIONS, "table-photo-train")


def round_range(text: str) -> list[int]:
    """``"3-7"`` -> [3, 4, 5, 6, 7]; ``"5"`` -> [5]."""
    lo, _, hi = text.partition("-")
    try:
        rounds = list(range(int(lo), int(hi or lo) + 1))
    except ValueError:
        raise argparse.ArgumentTypeError(f"rounds as FIRST-LAST, e.g. 3-7; got {text!r}") from None
    if not rounds or rounds[0] < 0:
        raise argparse.ArgumentTypeError(f"rounds as FIRST-LAST with 0 <= FIRST <= LAST; got {text!r}")
    return rounds


def best_round(row: dict[int, dict[str, int]]) -> int:
    """The round with the most successes over the shipped recipe's evaluation conditions
    (:data:`~grasp_s2r.control.dagger_config.SHIPPED_EVAL_CONDITIONS`), by DAgger's own rule
    (:func:`grasp_s2r.control.curves.best_round`: ties go to the later round)."""
    return curves.best_round([{"round": r, "dagger_successes": sum(v[c] for c in SHIPPED_EVAL_CONDITIONS)}
                              for r, v in row.items()])


def own_pick(run: Path) -> int | None:
    """The round the run itself picked as its ``policy.pt``."""
    return read_policy_blob(run / "policy.pt").get("round")


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("runs", nargs="+", type=Path, help="grasp-s2r dagger run folders (with checkpoints/)")
    p.add_argument("--per-condition", type=int, default=40, help="episodes a condition a round (default 40)")
    p.add_argument("--rounds", type=round_range, default=round_range("3-7"), help="FIRST-LAST (default 3-7)")
    p.add_argument("--workers", type=int, default=2)
    add_json_argument(p, "round_evaluation")
    args = p.parse_args()
    missing = [str(path) for run in args.runs for r in args.rounds if not (path := RunStore(run).ckpt(r)).is_file()]
    if missing:
        sys.exit(f"round_evaluation: no such round checkpoints: {', '.join(missing[:4])}"
                 + (f" and {len(missing) - 4} more" if len(missing) > 4 else ""))
    torch.set_num_threads(1)
    masks = make_mask_source("predicted", "", "cpu")
    runs: dict[str, dict] = {}
    requests = {c: [EpisodeRequest(seed=seeds.DAGGER_EVAL_BASE + i, condition=validation_condition(c))
                    for i in range(args.per_condition)] for c in CONDITIONS}
    with RolloutPool(control_env_config(), args.workers) as pool:
        for run in args.runs:
            rows: dict[int, dict[str, int]] = {}
            for r in args.rounds:
                policy = Policy.load(RunStore(run).ckpt(r), "cpu")[0]
                rows[r] = {}
                for c in CONDITIONS:
                    recs = pool.run(requests[c], policy, masks, record=lambda i: False, progress=False,
                                    parallax=SHIPPED_PARALLAX)
                    rows[r][c] = sum(rec.success for rec in recs)
                print(f"{run} round {r}: " + ", ".join(f"{c} {k}" for c, k in rows[r].items()), flush=True)
            runs[str(run)] = {"rounds": {str(r): v for r, v in rows.items()}, "best_round": best_round(rows),
                              "own_pick": own_pick(run)}
            print(f"{run}: best round {runs[str(run)]['best_round']} (its own policy.pt: round "
                  f"{runs[str(run)]['own_pick']})", flush=True)
    write_results(args.json, "round_evaluation", {"runs": runs, "per_condition": args.per_condition,
                                                        "conditions": list(CONDITIONS),
                                                        "recipe_conditions": list(SHIPPED_EVAL_CONDITIONS)}, args)
    print(json.dumps({k: (v["best_round"], v["own_pick"]) for k, v in runs.items()}))


if __name__ == "__main__":
    main()
