"""Benchmark: DAgger against behavior cloning at the same label budget, and DAgger's throughput.

    python benchmarks/bench_dagger.py --out runs/bench-dagger [any ``grasp-s2r dagger`` option]

Takes exactly the options of ``grasp-s2r dagger`` (the run is resumable the same way), then prints
the learning curve, whether DAgger beats BC (mean success over the rounds after round 0, where
both had the same number of expert labels, and pooled over the rounds with beta = 0), then evaluates
the selected DAgger controller (``policy.pt``: its best round on the evaluation episodes) and the BC
controller selected by the same rule on the shifted conditions of ``grasp-s2r eval``
(``--compare-episodes`` each, 0 to skip), and prints the throughput on this
machine: device, rounds per minute, rollout env-steps per second (all workers, batched inference
included), training samples per second. Run it on a GPU machine too to compare devices. Writes the figures to
(``--save``) ``benchmarks/results/bench_dagger-<out folder name>.json`` (``--json PATH``).
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np
import torch
from results_io import RESULTS_DIR, add_json_argument, write_results

from grasp_s2r.commands import dagger as cli_dagger
from grasp_s2r.control.curves import best_round
from grasp_s2r.control.dagger import run_dagger
from grasp_s2r.control.evaluate import PolicyEvalConfig, evaluate_policy
from grasp_s2r.devices import default_device
from grasp_s2r.stats import difference_interval, format_difference


def _rate(r: dict) -> str:
    return f"{100 * r['success_rate']:5.1f} % [{100 * r['ci_low']:.0f}-{100 * r['ci_high']:.0f}]"


def pooled_counts(dagger: list[tuple[int, int]], bc: list[tuple[int, int]]) -> dict[str, object]:
    """DAgger vs BC from (successes, episodes) pairs summed up: both counts, the rate difference and its 95 % CI."""
    kd, nd = map(sum, zip(*dagger))
    kb, nb = map(sum, zip(*bc))
    diff, lo, hi = difference_interval(kd, nd, kb, nb)
    return {"dagger": [kd, nd], "bc": [kb, nb], "difference": diff, "ci": [lo, hi]}


def _pooled(dagger: list[tuple[int, int]], bc: list[tuple[int, int]]) -> str:
    """DAgger vs BC from (successes, episodes) pairs summed up: both rates and the difference with its 95 % CI."""
    p = pooled_counts(dagger, bc)
    (kd, nd), (kb, nb), (lo, hi) = p["dagger"], p["bc"], p["ci"]
    verdict = ("DAgger beats BC (interval above 0)" if lo > 0 else "BC beats DAgger (interval below 0)" if hi < 0
               else "no significant difference (interval spans 0)")
    return (f"DAgger {kd}/{nd} = {100 * kd / nd:.1f} %, BC {kb}/{nb} = {100 * kb / nb:.1f} %, "
            f"difference {format_difference(kd, nd, kb, nb)}: {verdict}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    cli_dagger.add_arguments(parser)
    parser.add_argument("--compare-episodes", type=int, default=50,
                        help="episodes per condition for the DAgger-vs-BC robustness comparison (0: skip)")
    parser.add_argument("--compare-conditions", default="dynamics-shift,moving-target,perturbation")
    add_json_argument(parser, "bench_dagger")
    args = parser.parse_args(argv)
    cfg = cli_dagger.config_from_args(args)
    device = cfg.device or str(default_device())
    t0 = time.perf_counter()
    result = run_dagger(cfg, progress=not args.quiet)
    wall_s = time.perf_counter() - t0
    rows = result.rows
    figures: dict[str, object] = {"rows": rows, "selected_round": result.selected_round}

    print(f"\nDAgger vs BC, {cfg.episodes_per_round} episodes/round, masks={cfg.masks}, "
          f"{cfg.eval_episodes} evaluation episodes per point, {cfg.beta_schedule} beta")
    print(f"{'round':>5} {'beta':>5} {'labels':>7} {'DAgger %':>9} {'95 % CI':>11} {'BC %':>6} {'95 % CI':>11} "
          f"{'DAgger loss':>11}")
    for r in rows:
        bc = (f"{100 * r['bc_success_rate']:6.1f} {100 * r['bc_ci_low']:5.1f}-{100 * r['bc_ci_high']:<5.1f}"
              if r.get("bc_success_rate") is not None else f"{'-':>6} {'':>11}")
        print(f"{r['round']:>5} {r['beta']:>5.2f} {r['labels']:>7} {100 * r['dagger_success_rate']:>9.1f} "
              f"{100 * r['dagger_ci_low']:5.1f}-{100 * r['dagger_ci_high']:<5.1f} {bc} {r['dagger_loss']:>11.4f}")
    later = [r for r in rows[1:] if r.get("bc_success_rate") is not None]
    if later:
        dag = float(np.mean([r["dagger_success_rate"] for r in later]))
        bc = float(np.mean([r["bc_success_rate"] for r in later]))
        print(f"mean success over rounds 1..{rows[-1]['round']}: DAgger {100 * dag:.1f} %, BC {100 * bc:.1f} % "
              f"-> DAgger {'beats' if dag > bc else 'does NOT beat'} BC; last round: DAgger "
              f"{100 * rows[-1]['dagger_success_rate']:.1f} %, BC {100 * rows[-1]['bc_success_rate']:.1f} %")
        on_policy = [r for r in later if r["beta"] == 0.0]
        if on_policy:
            figures["pooled_beta_0"] = pooled_counts([(r["dagger_successes"], r["eval_episodes"]) for r in on_policy],
                                                     [(r["bc_successes"], r["eval_episodes"]) for r in on_policy])
            print(f"pooled over the rounds with beta = 0 ({', '.join(str(r['round']) for r in on_policy)}): "
                  + _pooled([(r["dagger_successes"], r["eval_episodes"]) for r in on_policy],
                            [(r["bc_successes"], r["eval_episodes"]) for r in on_policy]))

    last = rows[-1]["round"]
    bc_round = best_round(rows, "bc")  # the same selection rule as DAgger's policy.pt
    bc_ckpt = result.policy_path.parent / "checkpoints" / f"bc-{bc_round:03d}.pt"
    if args.compare_episodes > 0 and bc_ckpt.is_file():
        conditions = tuple(c for c in args.compare_conditions.split(",") if c)
        rates = {}
        for name, ckpt in (("DAgger", result.policy_path), ("BC", bc_ckpt)):
            res = evaluate_policy(PolicyEvalConfig(policy=str(ckpt), vision=cfg.vision_checkpoint, masks=cfg.masks,
                                      episodes=args.compare_episodes, conditions=conditions, workers=cfg.workers,
                                      device=cfg.device, torch_threads=cfg.torch_threads), progress=not args.quiet)
            rates[name] = res["conditions"]
        figures["robustness"] = {"bc_round": bc_round, "episodes": args.compare_episodes, "conditions": {
            c: {m: {k: rates[m][c][k] for k in ("successes", "episodes", "success_rate", "ci_low", "ci_high")}
                for m in rates} for c in conditions}}
        labels = {r["round"]: r["labels"] for r in rows}
        print(f"\nrobustness of the selected controllers (each method's best round on the evaluation episodes, "
              f"rounds 0-{last}: DAgger round {result.selected_round}, {labels[result.selected_round]} labels; "
              f"BC round {bc_round}, {labels[bc_round]} labels), {args.compare_episodes} test episodes each, "
              f"masks={cfg.masks}:")
        for c in conditions:
            d, b = rates["DAgger"][c], rates["BC"][c]
            print(f"  {c:<20} DAgger {_rate(d)}   BC {_rate(b)}")
        print("  pooled over these conditions: " + _pooled(
            [(rates["DAgger"][c]["successes"], rates["DAgger"][c]["episodes"]) for c in conditions],
            [(rates["BC"][c]["successes"], rates["BC"][c]["episodes"]) for c in conditions]))

    rollout_s = sum(r["rollout_s"] for r in rows)
    train_s = sum(r["train_s"] for r in rows)
    new_labels = sum(r["new_labels"] for r in rows)
    round_s = sum(r["round_s"] for r in rows)
    print(f"\nthroughput on {device} ({torch.get_num_threads()} torch threads, {cfg.workers} env workers, "
          f"{'CUDA ' + torch.cuda.get_device_name() if torch.cuda.is_available() else 'no GPU'}):")
    print(f"  rounds/min          {60 * len(rows) / max(round_s, 1e-9):.2f}  (BC baseline and per-round evaluation "
          f"included; {round_s:.0f} s for {len(rows)} rounds, this call's wall time {wall_s:.0f} s)")
    print(f"  labelled samples/s  {new_labels / max(rollout_s, 1e-9):.1f}  (DAgger rollouts, batched inference)")
    train_samples = sum(r["train_samples_per_s"] * r["train_s"] for r in rows)
    print(f"  train samples/s     {train_samples / max(train_s, 1e-9):.0f}")
    print(f"curve: {result.curve_csv}, {result.curve_png}")
    figures["throughput"] = {
        "device": device, "rounds_per_min": 60 * len(rows) / max(round_s, 1e-9), "wall_s": wall_s,
        "labelled_samples_per_s": new_labels / max(rollout_s, 1e-9),
        "train_samples_per_s": train_samples / max(train_s, 1e-9)}
    write_results(args.json or RESULTS_DIR / f"bench_dagger-{Path(cfg.out).name}.json", "bench_dagger", figures, args)
    return 0


if __name__ == "__main__":
    sys.exit(main())
