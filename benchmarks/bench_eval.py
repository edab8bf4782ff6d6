"""Benchmark: end-to-end success (wrist RGB -> segmentation -> controller) against the issue's targets.

    python benchmarks/bench_eval.py --episodes 200 --conditions all [any ``grasp-s2r eval`` option]

(``--policy`` defaults to the shipped controller; ``--conditions all`` = every named condition.)

Takes exactly the options of ``grasp-s2r eval`` (plus ``--json``), prints the results table and, per condition,
the target and whether the measured rate (and the lower end of its 95 % interval) reaches it, and writes the results
(``eval.json``'s content under ``figures``) to ``eval_shipped.json`` for the shipped system, to
``bench_eval-<policy>.json`` for another ``--policy``: under ``runs/benchmarks/``, or ``benchmarks/results/`` with
``--save``.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from results_io import RESULTS_DIR, add_json_argument, write_results

from grasp_s2r.agent import default_controller_path
from grasp_s2r.commands import eval as cli_eval
from grasp_s2r.control.evaluate import evaluate_policy, results_table

TARGETS = {"nominal": 0.95, "heldout-backgrounds": 0.95, "table-photo": 0.95, "sim-render": 0.95,
           "start-out-of-view": 0.90, "dropout": 0.90, "camera-miscalibration": 0.90, "dynamics-shift": 0.90,
           "moving-target": 0.90, "perturbation": 0.90}
"""Success-rate targets of the shipped controller + shipped segmenter (200 episodes per condition)."""


def verdict(r: dict, target: float) -> str:
    """Whether a condition's result (eval.json's success_rate, ci_low) reaches ``target``."""
    if r["success_rate"] < target:
        return "NOT met"
    return "met" if r["ci_low"] >= target else "met (point estimate)"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    cli_eval.add_arguments(parser)
    add_json_argument(parser, "eval_shipped")
    args = parser.parse_args(argv)
    cfg = cli_eval.config_from_args(args)
    results = evaluate_policy(cfg, progress=not args.quiet)
    print(results_table(results))
    print(f"\nmasks={cfg.masks}, {cfg.episodes} episodes per condition, device {results['device']}, "
          f"{results['seconds']:.0f} s in all")
    print(f"{'condition':<22} {'target':>7} {'measured':>9} {'CI low':>7}  verdict")
    for name, r in results["conditions"].items():
        target = TARGETS.get(name)
        if target is None:
            continue
        rate, low = 100 * r["success_rate"], 100 * r["ci_low"]
        print(f"{name:<22} {100 * target:>6.0f}% {rate:>8.1f}% {low:>6.1f}%  {verdict(r, target)}")
    shipped = Path(cfg.policy).resolve() == default_controller_path().resolve() and not cfg.vision
    default = RESULTS_DIR / ("eval_shipped.json" if shipped else f"bench_eval-{Path(cfg.policy).parent.name}.json")
    write_results(args.json or default, "bench_eval", {**results, "targets": TARGETS}, args)
    return 0


if __name__ == "__main__":
    sys.exit(main())
