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
    if len(sys.argv) != 4:
        sys.exit(__doc__.split("\n\n")[1].strip())
    try:
        print(average_rounds(Path(sys.argv[1]), round_range(sys.argv[2]), Path(sys.argv[3])))
    except (FileNotFoundError, ValueError, argparse.ArgumentTypeError) as e:
        sys.exit(f"average_rounds: {e}")
