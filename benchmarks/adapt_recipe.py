"""Which composites should ``grasp-s2r adapt`` fine-tune the segmenter on? One arm: adapt's segmenter stage (the
shipped weights, their recipe) with some of the recipe's settings changed, then the shipped controller over its
masks on a set's test parts.

    python benchmarks/adapt_recipe.py TUNE_DIR TEST_DIR --out RUN [--set KEY=VALUE ...] [--steps 3000] [--lr 1e-3]
        [--rank-weight 0] [--minutes 0] [--episodes 300] [--workers 2] [--save]

``TUNE_DIR`` / ``TEST_DIR``: a set's tuning and test parts as ``benchmarks/own_scene.py`` cuts them
(``OUT/<set>/tune``, ``OUT/<set>/test``); choose recipes on a validation set's parts, never on a report set's. Each
``--set`` changes one field of the recipe read from the shipped checkpoint (``train_config.recipe_of``, what
``adapt`` trains with): ``distractor_prob=0``, or a field of one of its parts, ``mix.photo_table=0.5``,
``view.far_view_prob=0.5`` (values as JSON; a list is a range); ``--rank-weight W`` adds the ranking loss
(``train-vision --rank-weight``). The fine-tune runs as ``adapt``'s
(``adapt.segmenter_train_config``: ``--steps`` at peak ``--lr``, whole images, every tuning part; with
``--minutes``, as many of them as fit, as ``adapt --segmenter-minutes``) into ``RUN``; a
finished ``RUN`` is evaluated again, not retrained (a changed arm is refused, as ``train-vision --resume`` refuses).
Then ``table-photo`` and ``heldout-backgrounds`` on the test parts, ``--episodes`` each, the evaluation's seeds: the
same episodes as ``own_scene.py``'s rows and as every other arm's. Writes ``runs/benchmarks/adapt_recipe.json``
(``--save``: ``benchmarks/results/``).
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import sys
import time
from pathlib import Path

from own_scene import evaluate
from results_io import add_json_argument, write_results

from grasp_s2r.adapt import AdaptConfig, segmenter_train_config
from grasp_s2r.agent import default_controller_path
from grasp_s2r.options import replaced
from grasp_s2r.stats import format_rate
from grasp_s2r.vision.training.budget import steps_of_run
from grasp_s2r.vision.training.train import TrainError, check_run, train


def is_field(config, path: str) -> bool:
    """Whether the dotted ``path`` names a field of dataclass ``config`` (or of its dataclass parts)."""
    for name in path.split("."):
        if not dataclasses.is_dataclass(config) or name not in {f.name for f in dataclasses.fields(config)}:
            return False
        config = getattr(config, name)
    return True


def with_settings(data, settings: list[str]):
    """``data`` (a ``DataConfig``) with each ``KEY=VALUE`` of ``settings`` set (``PART.FIELD`` for a field of one of
    its dataclass parts; ``options.replaced``); ValueError naming the setting for an unknown field or a value that is
    not JSON."""
    overrides = {}
    for setting in settings:
        key, sep, text = setting.partition("=")
        try:
            value = json.loads(text)
        except json.JSONDecodeError:
            raise ValueError(f"--set {setting!r}: the value is not JSON (a number, true/false, a list)") from None
        if not sep or not is_field(data, key):
            raise ValueError(f"--set {setting!r}: KEY must be a field of the recipe or of one of its parts "
                             f"(e.g. distractor_prob, mix.photo_table, view.far_view_prob)")
        overrides[key] = tuple(value) if isinstance(value, list) else value
    return replaced(data, overrides)


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("tune", type=Path, help="the set's tuning parts (own_scene.py's OUT/<set>/tune)")
    p.add_argument("test", type=Path, help="the set's test parts (own_scene.py's OUT/<set>/test)")
    p.add_argument("--out", type=Path, required=True, help="the fine-tune's run folder")
    p.add_argument("--set", action="append", default=[], metavar="KEY=VALUE", help="a recipe setting (repeatable)")
    p.add_argument("--steps", type=int, default=AdaptConfig.segmenter_steps, help="fine-tuning steps (adapt's)")
    p.add_argument("--lr", type=float, default=AdaptConfig.segmenter_lr, help="peak learning rate (adapt's)")
    p.add_argument("--rank-weight", type=float, default=0.0, help="weight of the ranking loss (default 0: adapt's)")
    p.add_argument("--minutes", type=float, default=0.0,
                   help="the fine-tune's time budget (adapt's --segmenter-minutes); default 0: --steps steps, so "
                        "that arms run alike on any machine")
    p.add_argument("--episodes", type=int, default=300, help="episodes per condition (default 300)")
    p.add_argument("--workers", type=int, default=2, help="env processes (default 2)")
    add_json_argument(p, "adapt_recipe")
    args = p.parse_args()
    for folder in (args.tune, args.test):
        if not folder.is_dir():
            sys.exit(f"adapt_recipe: {folder} is not a folder of photos")
    cfg = AdaptConfig(photos=str(args.tune), out=str(args.out), segmenter_steps=args.steps, segmenter_lr=args.lr,
                      segmenter_minutes=args.minutes)
    train_cfg = segmenter_train_config(cfg)
    try:
        train_cfg = dataclasses.replace(train_cfg, data=with_settings(train_cfg.data, args.set),
                                        rank_weight=args.rank_weight)
    except (ValueError, TypeError) as e:
        sys.exit(f"adapt_recipe: {e}")
    model, start = args.out / "model.pt", time.monotonic()
    try:
        if model.is_file():
            check_run(train_cfg, args.out, backgrounds_dir=args.tune)
        else:
            train(train_cfg, args.out, resume=(args.out / "checkpoint-latest.pt").is_file(),
                  backgrounds_dir=args.tune, progress=True)
    except TrainError as e:
        sys.exit(f"adapt_recipe: {e}")
    minutes = (time.monotonic() - start) / 60
    print(f"adapt_recipe: evaluating {model} with the shipped controller on {args.test}", flush=True)
    results = evaluate(str(default_controller_path()), str(model), args.test, args.episodes, args.workers)
    for name, r in results.items():
        print(f"  {name:20s} {format_rate(r['successes'], r['episodes'])}")
    trained = steps_of_run(json.loads((args.out / "run.json").read_text())["config"])
    write_results(args.json, "adapt_recipe", {"settings": args.set, "steps": args.steps, "lr": args.lr,
                                              "rank_weight": args.rank_weight,
                                              "minutes_budget": args.minutes, "steps_trained": trained,
                                              "fine_tune_minutes": minutes, "model": str(model),
                                              "conditions": results}, args)
    return 0


if __name__ == "__main__":
    sys.exit(main())
