"""Benchmark summary: DAgger vs BC pooled over several ``bench_dagger.py`` runs (seeds) from their curve.csv.

    python benchmarks/pool_dagger.py runs/bench-dagger-s0 runs/bench-dagger-s1

Each run's learning curve holds, per round, the successes of DAgger and of BC (same label budget) on
the same evaluation episodes. Prints, per run and pooled over all runs, the successes over rounds
1..R (after round 0, where both are the same expert data) and over the rounds with beta = 0, with the
difference's 95 % confidence interval (Newcombe) and the verdict; writes them to
(``--save``) ``benchmarks/results/pool_dagger.json`` (``--json PATH``).
"""

from __future__ import annotations

import argparse
import csv
import sys
from pathlib import Path

from bench_dagger import _pooled, pooled_counts
from results_io import add_json_argument, write_results


def _read_curve(run: Path) -> list[dict[str, str]]:
    path = run / "curve.csv"
    if not path.is_file():
        raise SystemExit(f"pool_dagger: {path} not found (is {run} a finished bench_dagger / grasp-s2r dagger run?)")
    rows = list(csv.DictReader(path.open()))
    if not rows or not rows[-1].get("bc_successes"):
        raise SystemExit(f"pool_dagger: {path} has no BC baseline column (run without --no-bc)")
    return rows


def _pairs(rows: list[dict[str, str]], method: str) -> list[tuple[int, int]]:
    return [(int(r[f"{method}_successes"]), int(r["eval_episodes"])) for r in rows]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("runs", nargs="+", type=Path, help="run folders of bench_dagger.py / grasp-s2r dagger")
    add_json_argument(parser, "pool_dagger")
    args = parser.parse_args(argv)
    figures: dict[str, dict] = {"per_run": {}, "pooled": {}}
    selections = {"rounds 1..R": lambda r: int(r["round"]) >= 1,
                  "rounds with beta = 0": lambda r: float(r["beta"]) == 0.0 and int(r["round"]) >= 1}
    pooled: dict[str, list[list[dict[str, str]]]] = {name: [] for name in selections}
    for run in args.runs:
        rows = _read_curve(run)
        for name, keep in selections.items():
            chosen = [r for r in rows if keep(r)]
            pooled[name].append(chosen)
            if chosen:
                figures["per_run"].setdefault(str(run), {})[name] = pooled_counts(_pairs(chosen, "dagger"),
                                                                                  _pairs(chosen, "bc"))
                print(f"{run}  {name} ({', '.join(r['round'] for r in chosen)}): "
                      + _pooled(_pairs(chosen, "dagger"), _pairs(chosen, "bc")))
    print(f"\npooled over {len(args.runs)} runs:")
    for name, per_run in pooled.items():
        rows = [r for chosen in per_run for r in chosen]
        if rows:
            figures["pooled"][name] = pooled_counts(_pairs(rows, "dagger"), _pairs(rows, "bc"))
            print(f"  {name:<22} " + _pooled(_pairs(rows, "dagger"), _pairs(rows, "bc")))
    write_results(args.json, "pool_dagger", figures, args)
    return 0


if __name__ == "__main__":
    sys.exit(main())
