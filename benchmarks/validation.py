"""Validation episodes of the control stack: seeds no training or test run uses, on the TRAINING photos only.

Recipes, seeds and checkpoints are chosen here (``pipeline_recipe.py``, ``controller_recipe.py``); the held-out
photos and the test seeds (``grasp-s2r eval``, ``bench_eval.py``, ``bench_pipeline.py``) only report.
"""

from __future__ import annotations

import argparse
import dataclasses
import sys
from collections.abc import Iterable
from pathlib import Path

from grasp_s2r.control import seeds
from grasp_s2r.control.parallax import SHIPPED as SHIPPED_PARALLAX
from grasp_s2r.control.parallax import ParallaxConfig
from grasp_s2r.runtime.conditions import CONDITIONS, Condition, resolve_condition
from grasp_s2r.runtime.masks import MaskSource
from grasp_s2r.runtime.pool import RolloutPool
from grasp_s2r.runtime.records import EpisodeRequest
from grasp_s2r.stats import format_rate, wilson_interval

VALIDATION_BASE = seeds.DAGGER_EVAL_BASE + 50_000
"""Validation episode i: seed ``VALIDATION_BASE + i`` (past DAgger's per-round episodes, before any test seed)."""
TRAIN_PHOTO_CONDITIONS: dict[str, Condition] = {
    **{name: c for name, c in CONDITIONS.items() if c.backgrounds == "train"},
    "table-photo-train": dataclasses.replace(CONDITIONS["table-photo"], name="table-photo-train", table_photos="train"),
    "sim-render": CONDITIONS["sim-render"],
}
"""Every condition of ``grasp-s2r eval`` that shows no held-out photo, and ``table-photo`` with the training photos
as the table's texture; ``heldout-backgrounds`` and ``table-photo`` (held-out photos) are for reporting only."""


UNSEEN_TABLE = "table-photo-unseen"
"""``table-photo`` with a validation folder of photos no segmenter trained on as the table (``unseen_photos``): how
the segmenter carries to new tables, chosen on without touching the held-out photos."""


UNSEEN_BACKDROP = "backgrounds-unseen"
"""``heldout-backgrounds`` with that folder composited behind the sphere instead of the held-out photos: how the
segmenter carries to new scenes behind the sphere, the other way ``grasp-s2r eval`` shows photos it never trained on."""
UNSEEN_CONDITIONS = {UNSEEN_TABLE: "table-photo", UNSEEN_BACKDROP: "heldout-backgrounds"}
"""Each validation condition on a folder of photos, and the held-out condition whose photos that folder replaces."""


def validation_condition(name: str, unseen_photos: str | None = None) -> Condition:
    """The condition ``name``: a key of :data:`TRAIN_PHOTO_CONDITIONS`, or one of :data:`UNSEEN_CONDITIONS` (needs
    ``unseen_photos``, a folder of validation photos)."""
    if name in UNSEEN_CONDITIONS:
        if not unseen_photos:
            raise ValueError(f"{name} needs a folder of validation photos")
        return dataclasses.replace(resolve_condition(UNSEEN_CONDITIONS[name], str(unseen_photos)), name=name)
    return TRAIN_PHOTO_CONDITIONS[name]


def success_counts(records) -> dict:
    """{successes, episodes, ci_low, ci_high} (Wilson 95 %) of finished episodes' records."""
    k, n = sum(r.success for r in records), len(records)
    lo, hi = wilson_interval(k, n)
    return {"successes": k, "episodes": n, "ci_low": lo, "ci_high": hi}


def won_lost(before: list[bool], after: list[bool], seeds: list[int]) -> tuple[list[int], list[int]]:
    """Two runs of the same episodes (success by episode, in ``seeds``' order): the seeds ``after`` grasps and
    ``before`` does not (won), and the other way (lost)."""
    won = [s for s, a, b in zip(seeds, before, after, strict=True) if b and not a]
    lost = [s for s, a, b in zip(seeds, before, after, strict=True) if a and not b]
    return won, lost


def validate(pool: RolloutPool, policy, masks: MaskSource, conditions: Iterable[str], episodes: int,
             label: str = "", unseen_photos: str | None = None,
             parallax: ParallaxConfig | None = SHIPPED_PARALLAX) -> dict[str, dict]:
    """Success of ``policy`` on ``episodes`` validation episodes of each named condition (keys of
    :data:`TRAIN_PHOTO_CONDITIONS`, or :data:`UNSEEN_TABLE` with ``unseen_photos``), printed one line a condition:
    {name: {successes, episodes, ci_low, ci_high}}. ``parallax``: the filter of far-away detections the shipped
    system runs (None: the segmenter's masks as they are)."""
    out = {}
    for name in conditions:
        cond = validation_condition(name, unseen_photos)
        requests = [EpisodeRequest(seed=VALIDATION_BASE + i, condition=cond) for i in range(episodes)]
        out[name] = success_counts(pool.run(requests, policy, masks, record=lambda i: False, progress=False,
                                            parallax=parallax))
        print(f"{label:24s} {name:22s} {format_rate(out[name]['successes'], episodes)}", flush=True)
    return out


def add_episode_arguments(p: argparse.ArgumentParser, conditions: str) -> None:
    """``--photos DIR`` (required), ``--episodes``, ``--conditions`` (default ``conditions``) and ``--workers``: the
    options of a benchmark that compares systems on validation episodes; :func:`check_episode_arguments` checks them."""
    p.add_argument("--photos", required=True, type=Path, help="a folder of validation photos (the unseen conditions)")
    p.add_argument("--episodes", type=int, default=300, help="validation episodes a condition (default 300)")
    p.add_argument("--conditions", default=conditions, help=f"validation conditions (default {conditions})")
    p.add_argument("--workers", type=int, default=2, help="env processes (default 2)")


def add_one_condition_arguments(p: argparse.ArgumentParser) -> None:
    """``--photos DIR`` (required), ``--condition`` (default ``table-photo-unseen``) and ``--episodes`` (default 300):
    the options of a benchmark that runs rows of one validation condition with one env process;
    :func:`one_condition` checks them."""
    p.add_argument("--photos", required=True, type=Path, help="a folder of validation photos (the unseen conditions)")
    p.add_argument("--condition", default=UNSEEN_TABLE, help=f"validation condition (default {UNSEEN_TABLE})")
    p.add_argument("--episodes", type=int, default=300, help="validation episodes (default 300)")


def one_condition(args: argparse.Namespace, prog: str) -> Condition:
    """The condition of :func:`add_one_condition_arguments`' options; exits with a one-line message where they cannot
    run."""
    check_episode_arguments(args, prog)
    try:
        return validation_condition(args.condition, str(args.photos) if args.condition in UNSEEN_CONDITIONS else None)
    except KeyError:
        sys.exit(f"{prog}: --condition {args.condition!r} is not a validation condition; one of "
                 f"{', '.join([*TRAIN_PHOTO_CONDITIONS, *UNSEEN_CONDITIONS])}")
    except ValueError as e:
        sys.exit(f"{prog}: {e}")


def check_episode_arguments(args: argparse.Namespace, prog: str) -> None:
    """Exit with a one-line message where :func:`add_episode_arguments`' options cannot run."""
    if not args.photos.is_dir():
        sys.exit(f"{prog}: --photos {args.photos} is not a folder")
    if args.episodes < 1:
        sys.exit(f"{prog}: --episodes must be >= 1")
