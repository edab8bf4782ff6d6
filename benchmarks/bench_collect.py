"""Worker scaling of ``grasp-s2r collect``: episodes/s with 1 and 2 worker processes.

    python benchmarks/bench_collect.py [--episodes 120]
"""

from __future__ import annotations

import argparse
import tempfile

from results_io import add_json_argument, write_results

from grasp_s2r.collect import CollectConfig, collect


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--episodes", type=int, default=120)
    p.add_argument("--workers", type=int, nargs="+", default=[1, 2])
    add_json_argument(p, "bench_collect")
    args = p.parse_args()
    rates, rows = {}, []
    for workers in args.workers:
        with tempfile.TemporaryDirectory() as tmp:
            s = collect(CollectConfig(out=tmp, episodes=args.episodes, workers=workers, seed=0), progress=False)
        rates[workers] = s.episodes_per_s
        rows.append({"workers": workers, "episodes_per_s": s.episodes_per_s, "env_steps_per_s": s.steps / s.seconds,
                     "seconds": s.seconds, "episodes": s.episodes, "successes": s.successes})
        print(f"workers={workers}: {s.episodes_per_s:.2f} episodes/s ({s.steps / s.seconds:.0f} env-steps/s, "
              f"{s.seconds:.1f} s for {s.episodes} episodes, success {s.successes}/{s.episodes})")
    base = rates[args.workers[0]]
    for workers, rate in rates.items():
        print(f"speed-up workers={workers} / workers={args.workers[0]}: {rate / base:.2f}x")
    write_results(args.json, "bench_collect", {"rows": rows}, args)


if __name__ == "__main__":
    main()
