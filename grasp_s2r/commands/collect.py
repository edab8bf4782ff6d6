"""``grasp-s2r collect``: the command over :mod:`grasp_s2r.collect`."""

from __future__ import annotations

import argparse
from pathlib import Path

from grasp_s2r.collect import CollectConfig, collect
from grasp_s2r.common_options import backend_options, check_backend, check_vision_read, env_options
from grasp_s2r.data.episodes import DatasetError, episode_dirname
from grasp_s2r.options import Option, UsageError, add_options, config_from_options, non_negative_int, positive_int
from grasp_s2r.runtime.backend import BackendUnavailable
from grasp_s2r.runtime.masks import VisionUnavailable
from grasp_s2r.sim.config import CONTROL_CAMERA_JITTER_DEG, CONTROL_CAMERA_JITTER_M
from grasp_s2r.stats import format_rate

OPTIONS = (
    Option("--episodes", "number of episodes (indices 0 .. EPISODES-1)", "episodes", type=positive_int),
    Option("--out", "dataset folder (created, or resumed if it holds this same job)", "out", required=True),
    Option("--seed", "episode i uses seed SEED+i", "seed", type=non_negative_int),
    Option("--masks", "the controller input mask recorded at each step: the ground truth or the segmenter's (a DAgger "
           "run takes demonstrations of its own mask source)", "masks"),
    Option("--vision", "segmenter checkpoint for --masks predicted", "vision_checkpoint", metavar="CKPT",
           show=lambda c: c or "the packaged one"),
    Option("--controller-scene", "the controller's camera calibration tolerance (sim/config.py control_env_config, "
           "what 'grasp-s2r dagger' uses): demonstrations for 'dagger --demos'",
           sets={"env.randomization.camera_jitter_m": CONTROL_CAMERA_JITTER_M,
                 "env.randomization.camera_jitter_deg": CONTROL_CAMERA_JITTER_DEG}),
    *backend_options("env worker processes, each with its own PyBullet client"),
    *env_options(),
)


def add_arguments(p: argparse.ArgumentParser) -> None:
    add_options(p, CollectConfig, OPTIONS)


def config_from_args(args: argparse.Namespace) -> CollectConfig:
    cfg = config_from_options(CollectConfig, args, OPTIONS)
    check_backend(cfg.backend)
    check_vision_read(args, cfg.masks)
    return cfg


def run(args: argparse.Namespace) -> int:
    cfg = config_from_args(args)
    try:
        s = collect(cfg)
    except (DatasetError, BackendUnavailable, VisionUnavailable) as e:
        raise UsageError(str(e)) from None
    print(f"dataset     {Path(cfg.out).resolve()}")
    for i, why in s.damaged.items():
        print(f"damaged     {episode_dirname(i)}: {why}; collected again")
    print(f"episodes    {s.episodes} ({s.new_episodes} new this run"
          + (f", {s.removed_partial} half-written removed" if s.removed_partial else "") + ")")
    print(f"success     {format_rate(s.successes, s.episodes)}")
    print(f"steps       {s.steps} (mean {s.steps / max(s.episodes, 1):.1f} per episode)")
    if s.new_episodes:
        capped = f" (asked {cfg.workers}: capped at the CPU cores / episodes left)" if s.workers < cfg.workers else ""
        where = " per Ray actor" if cfg.backend.backend == "ray" else ""
        print(f"speed       {s.episodes_per_s:.2f} episodes/s with {s.workers} worker(s){where}{capped}, "
              f"{s.seconds:.1f} s")
    return 0
