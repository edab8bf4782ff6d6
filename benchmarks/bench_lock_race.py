"""The artifact lock under a start race (issue 25): WRITERS processes start at the same instant into one folder,
ROUNDS times (a third of the rounds over a stale lock of a dead process, a third over an unreadable old lock), and
count simultaneous double owners. The test (tests/test_lock_race.py) runs 200 starts; this runs as many as asked.

    python benchmarks/bench_lock_race.py [--writers 16] [--rounds 50] [--save]
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))
from results_io import add_json_argument, write_results
from test_lock_race import race


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--writers", type=int, default=16)
    p.add_argument("--rounds", type=int, default=50)
    add_json_argument(p, "bench_lock_race")
    a = p.parse_args()
    t0 = time.perf_counter()
    with tempfile.TemporaryDirectory() as root:
        r = race(Path(root), a.writers, a.rounds)
    print(f"{r['starts']} simultaneous starts ({a.writers} writers x {a.rounds} rounds): {r['double']} double owners, "
          f"{r['owned']} owned, {r['refused']} refused in one line; {time.perf_counter() - t0:.1f} s")
    write_results(a.json, "bench_lock_race", {**r, "seconds": time.perf_counter() - t0}, a)


if __name__ == "__main__":
    main()
