"""Where the search pays: the observable expert's search heights and what it counts as seen, end to end on
validation episodes, as the expert itself and as controllers trained to imitate it.

    python benchmarks/search_recipe.py --photos DIR [--controllers RUN/policy.pt,...] [--episodes 300]
        [--conditions start-out-of-view,table-photo-unseen] [--vision SEGMENTER.pt] [--search-heights 0.11,0.08] [--workers 2] [--save]

On tables it never saw, the shipped system fails where its segmenter misses a sphere 2-3 px wide at the search
height (``error_budget.py``). Two rows of figures, on the same validation episodes (``DIR``'s photos as the table for
``table-photo-unseen``; the training photos elsewhere):

- **the expert as the agent** (a ceiling): the observable expert itself acts, on the segmenter's masks (the shipped
  one, or ``--vision``), and counts the sphere as seen only where the mask touches it
  (``SearchConfig.learner_sees="sphere"``: it never follows a false detection, and where the segmenter misses the
  sphere it searches), for each search of :data:`SEARCHES` (or of ``--search-heights``);
- **controllers**: the shipped one, then each of ``--controllers`` (``grasp-s2r dagger`` runs trained with a
  search's options), over the same masks.

The gap between the two is what the controller does not learn of the expert's search. Writes
``runs/benchmarks/search_recipe.json`` (``--save``: ``benchmarks/results/``).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import torch
from results_io import add_json_argument, display_path, require_folder, write_results
from validation import UNSEEN_TABLE, VALIDATION_BASE, success_counts, validation_condition

from grasp_s2r.agent import default_controller_path
from grasp_s2r.control.policy import Policy
from grasp_s2r.expert.fsm import SearchConfig
from grasp_s2r.runtime.masks import make_mask_source
from grasp_s2r.runtime.pool import RolloutPool
from grasp_s2r.runtime.records import EXPERT, LEARNER, EpisodeRequest
from grasp_s2r.sim.config import control_env_config
from grasp_s2r.stats import format_rate

SEARCHES = {
    "search at 0.22 m (the recipe's)": {},
    "search at 0.15 m": {"search_height_m": 0.15},
    "search at 0.11 m": {"search_height_m": 0.11},
    "first look from 0.11 m, search at 0.22 m": {"first_look_height_m": 0.11},
}
"""The expert's searches compared (``SearchConfig`` fields; ``grasp-s2r dagger --search-height``,
``--first-look-height``)."""


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--photos", required=True, type=Path, help="a folder of validation photos, the unseen table")
    p.add_argument("--controllers", default="", help="comma-separated policy.pt files besides the shipped one")
    p.add_argument("--episodes", type=int, default=300, help="validation episodes a condition (default 300)")
    p.add_argument("--conditions", default=f"start-out-of-view,{UNSEEN_TABLE}", help="validation conditions")
    p.add_argument("--search-heights", default="", help="comma-separated search heights (m) to compare instead of "
                                                        "the searches of SEARCHES")
    p.add_argument("--vision", default="", help="segmenter checkpoint whose masks every agent acts on (default: the "
                                                "shipped one)")
    p.add_argument("--workers", type=int, default=2, help="env processes (default 2)")
    add_json_argument(p, "search_recipe")
    args = p.parse_args()
    require_folder("search_recipe", "--photos", args.photos)
    controllers = [str(default_controller_path()), *filter(None, args.controllers.split(","))]
    missing = [c for c in controllers if not Path(c).is_file()]
    if args.vision and not Path(args.vision).is_file():
        sys.exit(f"search_recipe: --vision {args.vision} is not a file")
    if missing or args.episodes < 1:
        sys.exit(f"search_recipe: no such controller: {', '.join(missing)}" if missing else
                 "search_recipe: --episodes must be >= 1")
    env = control_env_config()
    top = env.scene.workspace_max_height_m
    try:
        searches = {f"search at {h:g} m": {"search_height_m": h}
                    for h in map(float, filter(None, args.search_heights.split(",")))} or SEARCHES
        for fields in searches.values():
            SearchConfig(**fields)
            if fields["search_height_m"] > top:
                raise ValueError(f"a search height above the workspace's top ({top} m)")
    except ValueError as e:
        sys.exit(f"search_recipe: --search-heights {args.search_heights!r}: {e}")
    torch.set_num_threads(1)
    conditions = [validation_condition(c, str(args.photos)) for c in args.conditions.split(",")]
    masks = make_mask_source("predicted", args.vision, "cpu")

    def requests(actor=LEARNER):
        return [EpisodeRequest(seed=VALIDATION_BASE + i, condition=c, actor=actor)
                for c in conditions for i in range(args.episodes)]

    def by_condition(records) -> dict:
        return {c.name: success_counts(records[k * args.episodes:(k + 1) * args.episodes]) for k, c in enumerate(conditions)}

    rows = []
    for name, fields in searches.items():
        search = SearchConfig(**fields, learner_sees="sphere")
        with RolloutPool(env, args.workers, observable_expert=True, search=search) as pool:
            recs = pool.run(requests(EXPERT), None, masks, record=lambda i: False, progress=True, desc=name)
        rows.append({"agent": "expert", "name": name, "search": fields, "conditions": by_condition(recs)})
    with RolloutPool(env, args.workers) as pool:
        for path in controllers:
            policy = Policy.load(Path(path), "cpu")[0]
            recs = pool.run(requests(), policy, masks, record=lambda i: False, progress=True, desc=Path(path).name)
            rows.append({"agent": "controller", "name": display_path(path), "conditions": by_condition(recs)})
    for row in rows:
        print(f"{row['agent']:10s} {row['name']:45s} " + "  ".join(
            f"{c}: {format_rate(v['successes'], v['episodes'])}" for c, v in row["conditions"].items()), flush=True)
    write_results(args.json, "search_recipe", {"photos": args.photos.name, "episodes": args.episodes,
                                               **({"vision": display_path(args.vision)} if args.vision else {}),
                                               "conditions": [c.name for c in conditions], "rows": rows}, args)
    return 0


if __name__ == "__main__":
    sys.exit(main())
