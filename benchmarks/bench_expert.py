"""Success rate of the FSM expert over seeded episodes, with its 95 % Wilson interval.

    python benchmarks/bench_expert.py [--episodes 200] [--seed 100000] [--workers 2]
"""

from __future__ import annotations

import argparse
import tempfile

from grasp_s2r.collect import CollectConfig, collect
from grasp_s2r.data.episodes import EpisodeDataset
from grasp_s2r.stats import format_rate


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--episodes", type=int, default=200)
    p.add_argument("--seed", type=int, default=100_000, help="first seed (default: a range no test uses)")
    p.add_argument("--workers", type=int, default=2)
    args = p.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        s = collect(CollectConfig(out=tmp, episodes=args.episodes, workers=args.workers, seed=args.seed))
        lengths = [len(e) for e in EpisodeDataset(tmp)]
    print(f"expert success: {format_rate(s.successes, s.episodes)}")
    print(f"episode length: mean {sum(lengths) / len(lengths):.1f} steps, max {max(lengths)}")


if __name__ == "__main__":
    main()
