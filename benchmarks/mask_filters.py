"""EXPERIMENT (reverted after it was run): episode-level filters of the controller's input mask on unseen photo
tables. Arms: none; lure rejection (``control/lures.py``: a table site shown K steps without a grasp is masked out,
``GRASP_S2R_LURE_STEPS``); a size gate (blobs whose table-plane diameter is outside [lo, hi] m dropped,
``GRASP_S2R_SIZE_GATE``). Each arm: ``table-photo-unseen`` on ``--photos``, validation seeds, the shipped system.

    python benchmarks/mask_filters.py --photos VAL-PHOTOS [--episodes 300]
"""

import argparse
import os
import subprocess
import sys

ARMS = {"none": {}, "reject K=20": {"GRASP_S2R_LURE_STEPS": "20"}, "reject K=30": {"GRASP_S2R_LURE_STEPS": "30"},
        "size gate 9-30 mm": {"GRASP_S2R_SIZE_GATE": "0.009,0.03"}, "size gate 6-30 mm": {"GRASP_S2R_SIZE_GATE": "0.006,0.03"}}

CHILD = """
import sys
from pathlib import Path
sys.path.insert(0, "benchmarks")
from validation import VALIDATION_BASE, validation_condition
from grasp_s2r.agent import default_controller_path
from grasp_s2r.control.policy import Policy
from grasp_s2r.runtime.masks import make_mask_source
from grasp_s2r.runtime.pool import RolloutPool
from grasp_s2r.runtime.records import EpisodeRequest
from grasp_s2r.sim.config import control_env_config
from grasp_s2r.stats import wilson_interval
if __name__ == "__main__":
    policy = Policy.load(Path(default_controller_path()), "cpu")[0]
    cond = validation_condition("table-photo-unseen", sys.argv[1])
    reqs = [EpisodeRequest(seed=VALIDATION_BASE + i, condition=cond) for i in range(int(sys.argv[2]))]
    with RolloutPool(control_env_config(), 2) as pool:
        recs = pool.run(reqs, policy, make_mask_source("predicted", "", "cpu"), record=lambda i: False, progress=False)
    k = sum(r.success for r in recs)
    lo, hi = wilson_interval(k, len(recs))
    print(f"{100 * k / len(recs):.1f} % ({100 * lo:.1f}-{100 * hi:.1f})")
"""


def main() -> int:
    p = argparse.ArgumentParser()
    p.add_argument("--photos", required=True)
    p.add_argument("--episodes", type=int, default=300)
    args = p.parse_args()
    for name, env in ARMS.items():
        out = subprocess.run([sys.executable, "-c", CHILD, args.photos, str(args.episodes)], env={**os.environ, **env},
                             capture_output=True, text=True, check=True)
        print(f"{name:20s} table-photo-unseen {out.stdout.strip()}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
