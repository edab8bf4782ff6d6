"""Choose the pipeline's DAgger recipe on validation episodes of the TRAINING photos (never the held-out ones).

    python benchmarks/pipeline_recipe.py --pipeline runs/bench-pipeline [--out runs/pipeline-recipe] [--episodes 100]

Takes a finished ``grasp-s2r pipeline`` folder (its fine-tuned segmenter ``vision/model.pt`` and its demonstrations
``demos/``) and trains one DAgger controller per candidate recipe from them (the pipeline's stage 4, each in
``OUT/<recipe>``, resumable); then measures each on validation episodes (seeds no training or test run uses) of
``nominal`` and of ``table-photo`` with the *training* photos as the table's texture. The held-out photos are for
reporting only (``bench_pipeline.py``), so the choice is made here. Writes
(``--save``) ``benchmarks/results/pipeline_recipe.json``.
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

import torch
from results_io import add_json_argument, write_results
from validation import validate

from grasp_s2r.control.dagger import DaggerConfig, run_dagger
from grasp_s2r.control.policy import Policy
from grasp_s2r.runtime.masks import make_mask_source
from grasp_s2r.runtime.pool import RolloutPool
from grasp_s2r.sim.config import control_env_config

RECIPES = {
    "default": {},
    "table-photo-0.3": {"table_photo_prob": 0.3},
    "7x32": {"rounds": 7, "episodes_per_round": 32},
    "7x32-table-photo-0.3": {"rounds": 7, "episodes_per_round": 32, "table_photo_prob": 0.3},
}
"""Candidate recipes: DaggerConfig fields over the pipeline's (5 rounds of 24 episodes, the default mixture)."""
VALIDATION = ("nominal", "table-photo-train")
"""Validation conditions (``validation.TRAIN_PHOTO_CONDITIONS``): the training photos only."""


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--pipeline", type=Path, required=True, help="a finished 'grasp-s2r pipeline' folder")
    p.add_argument("--out", type=Path, default=Path("runs/pipeline-recipe"))
    p.add_argument("--episodes", type=int, default=100, help="validation episodes per condition")
    p.add_argument("--workers", type=int, default=2)
    add_json_argument(p, "pipeline_recipe")
    args = p.parse_args()
    torch.set_num_threads(args.workers)
    model = str(args.pipeline / "vision" / "model.pt")
    masks = make_mask_source("predicted", model, "cpu")
    figures: dict[str, dict] = {}
    for name, fields in RECIPES.items():
        t0 = time.perf_counter()
        cfg = DaggerConfig(out=str(args.out / name), demos=str(args.pipeline / "demos"), vision_checkpoint=model,
                           workers=args.workers, seed=0, **{"rounds": 5, **fields})
        policy = Policy.load(run_dagger(cfg, progress=False).policy_path, "cpu")[0]
        figures[name] = {"fields": fields, "dagger_minutes": (time.perf_counter() - t0) / 60, "validation": {}}
        with RolloutPool(control_env_config(), args.workers) as pool:
            figures[name]["validation"] = validate(pool, policy, masks, VALIDATION, args.episodes, label=name)
    write_results(args.json, "pipeline_recipe", figures, args)


if __name__ == "__main__":
    main()
