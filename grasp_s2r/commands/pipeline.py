"""``grasp-s2r pipeline``: the command over :mod:`grasp_s2r.pipeline`."""

from __future__ import annotations

import argparse
from pathlib import Path

from grasp_s2r.options import Option, UsageError, add_options, config_from_options, positive_int
from grasp_s2r.pipeline import PipelineConfig, run_pipeline

OPTIONS = (
    Option("--out", "root folder", "out"),
    Option("--demo-episodes", "expert episodes of collect (DAgger round 0)", "demo_episodes", type=positive_int),
    Option("--vision-steps", "optimizer steps of the segmentation network", "vision_steps", type=positive_int),
    Option("--vision-from-scratch", "train the segmenter from random weights instead of fine-tuning the shipped one",
           sets={"vision_from_scratch": True}),
    Option("--backgrounds", "your own photos: the segmenter is fine-tuned on them and tested on their held-out ones",
           "backgrounds", metavar="DIR", show=lambda d: d or "the embedded photos"),
    Option("--dagger-rounds", "DAgger rounds, round 0 included", "dagger_rounds", type=positive_int),
    Option("--dagger-table-photo-prob", "share of DAgger training episodes with a training photo as the table texture",
           "dagger_table_photo_prob", type=float, metavar="P"),
    Option("--dagger-eval-episodes", "episodes measuring each DAgger round (the best round is kept)",
           "dagger_eval_episodes", type=positive_int),
    Option("--eval-episodes", "episodes per condition of the end-to-end evaluation", "eval_episodes",
           type=positive_int),
    Option("--workers", "worker processes for collection and rollouts", "workers", type=positive_int),
)


def add_arguments(p: argparse.ArgumentParser) -> None:
    add_options(p, PipelineConfig, OPTIONS)


def config_from_args(args: argparse.Namespace) -> PipelineConfig:
    """The :class:`PipelineConfig` of parsed :func:`add_arguments` options (the CLI and the benchmark share it)."""
    from grasp_s2r.vision.images.backgrounds import BackgroundError, load_backgrounds  # cv2: only here, not for --help

    cfg = config_from_options(PipelineConfig, args, OPTIONS)
    if cfg.backgrounds and not Path(cfg.backgrounds).is_dir():
        raise UsageError(f"--backgrounds {cfg.backgrounds} is not a folder")
    if cfg.backgrounds:  # every stage reads them: a folder without usable photos is refused before collect starts
        try:
            for split in ("train", "heldout"):
                load_backgrounds(split, Path(cfg.backgrounds))
        except BackgroundError as e:
            raise UsageError(f"--backgrounds: {e}") from None
    return cfg


def run(args: argparse.Namespace) -> int:
    from grasp_s2r.run_record import RunRecordError

    try:
        run_pipeline(config_from_args(args))
    except RunRecordError as e:  # OUT holds a pipeline of other options
        raise UsageError(str(e)) from None
    return 0
