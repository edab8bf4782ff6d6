"""``grasp-s2r adapt``: the command over :mod:`grasp_s2r.adapt`."""

from __future__ import annotations

import argparse
from pathlib import Path

from grasp_s2r.adapt import AdaptConfig, adapt
from grasp_s2r.common_options import check_photo_folder
from grasp_s2r.options import Option, UsageError, add_options, config_from_options, non_negative_int, positive_int

OPTIONS = (
    Option("--photos", "folder of photos of your scene (the table, floor, walls the camera will see)", "photos",
           metavar="DIR", required=True),
    Option("--out", "output folder (re-running the same command resumes)", "out"),
    Option("--table-photo-prob", "share of training episodes with one of your photos as the table's texture",
           "table_photo_prob", type=float, metavar="P"),
    Option("--rounds", "DAgger rounds of the controller, round 0 included (0: keep the shipped controller)", "rounds",
           type=non_negative_int),
    Option("--episodes-per-round", "training episodes per DAgger round", "episodes_per_round", type=positive_int),
    Option("--eval-episodes", "episodes per condition measuring each round (the best round is kept)",
           "eval_episodes", type=positive_int),
    Option("--segmenter-steps", "first fine-tune the shipped segmenter this many steps on your photos (0: keep it)",
           "segmenter_steps", type=non_negative_int),
    Option("--segmenter-minutes", "wall-time budget of the segmenter's fine-tune: as many of --segmenter-steps as "
           "fit (it times its first steps; 0: no budget)", "segmenter_minutes", type=float, metavar="MIN"),
    Option("--segmenter-lr", "peak learning rate of the segmenter's fine-tuning", "segmenter_lr", type=float),
    Option("--mined-crop-prob", "share of the segmenter's photo backgrounds drawn from the crops of your photos the "
           "shipped segmenter fires on (its lures in your scene)", "mined_crop_prob", type=float),
    Option("--check-views", "sim views with your photos as the table on which the shipped and the fine-tuned "
           "segmenter are compared after the fine-tune (OUT/scene_check.png; 0: none)", "check_views",
           type=non_negative_int),
    Option("--check-photos", "photos for that check (photos of the scene kept back tell more than the ones it "
           "trained on)", "check_photos", metavar="DIR", show=lambda d: d or "--photos"),
    Option("--workers", "environment processes", "workers", type=positive_int),
    Option("--seed", "seed of every stage", "seed", type=non_negative_int),
)


def add_arguments(p: argparse.ArgumentParser) -> None:
    add_options(p, AdaptConfig, OPTIONS)
    p.add_argument("--no-progress", action="store_true", help="no progress bars")


def config_from_args(args: argparse.Namespace) -> AdaptConfig:
    """The :class:`AdaptConfig` of parsed :func:`add_arguments` options, or :class:`UsageError` (the command and
    ``benchmarks/own_scene.py``, which checks its ``--adapt-args`` before it evaluates, share it)."""
    try:
        return config_from_options(AdaptConfig, args, OPTIONS)
    except ValueError as e:
        raise UsageError(str(e)) from None


def run(args: argparse.Namespace) -> int:
    cfg = config_from_args(args)
    if not cfg.photos.strip():
        raise UsageError("--photos: an empty path")
    for flag, folder in (("--photos", cfg.photos), ("--check-photos", cfg.check_photos)):
        if not folder:
            continue
        if not Path(folder).is_dir():
            raise UsageError(f"{flag} {folder} is not a folder of photos")
        check_photo_folder(flag, folder)  # every photo read once here: the env workers would stop mid-run on one
    adapt(cfg, progress=not args.no_progress)
    return 0
