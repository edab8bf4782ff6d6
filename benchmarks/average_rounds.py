"""One controller whose weights are the mean of a DAgger run's rounds FIRST..LAST (a tried remedy; not shipped).

    python benchmarks/average_rounds.py RUN FIRST-LAST OUT.pt

The rounds of a run are warm-started from each other, so their weights might lie in one basin where their mean is a
steadier controller than any one round (stochastic weight averaging). Measured in docs/experiments/recipes.md
(*Draws of the recipe*): it is not. The file keeps the last round's checkpoint fields and records
``averaged_rounds``.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from round_evaluation import round_range

from grasp_s2r.control.policy import Policy
from grasp_s2r.control.run_store import RunStore


def average_rounds(run: Path, rounds: list[int], out: Path) -> Path:
    paths = [RunStore(run).ckpt(r) for r in rounds]
    missing = [str(p) for p in paths if not p.is_file()]
    if missing:
        raise FileNotFoundError(f"no such round checkpoints: {', '.join(missing)}")
    loaded = [Policy.load(p, "cpu") for p in paths]
    policy, blob = loaded[-1]
    states = [p.net.state_dict() for p, _ in loaded]
    policy.net.load_state_dict({k: sum(s[k].float() for s in states) / len(states) for k in states[0]})
    extra = {k: v for k, v in blob.items() if k != "state_dict"}
    policy.save(out, {**extra, "averaged_rounds": [rounds[0], rounds[-1]]})
    return out


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("run", type=Path, help="a DAgger run folder")
    parser.add_argument("rounds", type=round_range, metavar="FIRST-LAST", help="the rounds to average, e.g. 3-7")
    parser.add_argument("out", type=Path, help="the averaged controller's checkpoint (OUT.pt)")
    args = parser.parse_args()
    try:
        print(average_rounds(args.run, args.rounds, args.out))
    except (FileNotFoundError, ValueError) as e:
        sys.exit(f"average_rounds: {e}")
