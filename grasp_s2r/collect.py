"""``grasp-s2r collect``: run the FSM expert in K worker processes and write an episode dataset.

Episode ``i`` uses seed ``seed + i``, so the dataset is the same whatever the number of workers, the
backend (local processes or Ray actors) and whichever episodes a re-run has to redo. The episodes run
in the package's one episode loop (:class:`~grasp_s2r.control.rollout.RolloutPool`, expert only); this
process writes each finished episode atomically, so a killed run is resumed by running the same command
again.
"""

from __future__ import annotations

import argparse
import os
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tqdm import tqdm

from grasp_s2r.common_options import backend_options, check_backend, env_options
from grasp_s2r.configs import to_dict
from grasp_s2r.control.backend import BackendConfig, BackendUnavailable, open_runner
from grasp_s2r.control.rollout import EpisodeRecord, EpisodeRequest, GroundTruthMasks
from grasp_s2r.data.episodes import (
    DatasetError,
    EpisodeDataset,
    EpisodeWriter,
    finished_indices,
    init_dataset,
    remove_partial,
)
from grasp_s2r.expert.fsm import ExpertConfig, Phase
from grasp_s2r.files import ArtifactFolder
from grasp_s2r.options import Option, UsageError, add_options, config_from_options, non_negative_int, positive_int
from grasp_s2r.sim.config import EnvConfig
from grasp_s2r.sim.env import ACTION_DIM, PROPRIO_NAMES, STATE_NAMES
from grasp_s2r.stats import format_rate

DATASET_KIND = "expert-demonstrations"


@dataclass(frozen=True)
class CollectConfig:
    """What ``grasp-s2r collect`` does; everything but ``episodes``/``workers``/``out`` is in meta.json."""

    out: str = "runs/demos"
    """Output dataset folder."""
    episodes: int = 20
    """Number of episodes (indices 0 .. episodes-1)."""
    workers: int = 1
    """Worker processes, each with its own PyBullet client (per Ray actor with the ray backend)."""
    backend: BackendConfig = field(default_factory=BackendConfig)
    """Where the episodes run (local processes or Ray actors); never changes the data."""
    seed: int = 0
    """Episode i uses seed ``seed + i``."""
    env: EnvConfig = field(default_factory=EnvConfig)
    """Scene, camera and randomization."""
    expert: ExpertConfig = field(default_factory=ExpertConfig)
    """Expert thresholds."""

    def dataset_config(self) -> dict[str, Any]:
        """The part of the config that determines the episodes' content."""
        return {"seed": self.seed, "env": to_dict(self.env), "expert": to_dict(self.expert)}


@dataclass(frozen=True)
class CollectSummary:
    episodes: int
    successes: int
    steps: int
    new_episodes: int
    seconds: float
    removed_partial: int
    workers: int = 0
    """Worker processes used: ``--workers`` capped at the CPU cores and at the episodes left to collect."""

    @property
    def episodes_per_s(self) -> float:
        return self.new_episodes / self.seconds if self.seconds > 0 else float("nan")


def expert_features(env: EnvConfig) -> dict[str, dict[str, Any]]:
    """Feature schema of an expert episode: per-step dtype and shape."""
    hw = [env.camera.height_px, env.camera.width_px]
    return {
        "rgb": {"dtype": "uint8", "shape": [*hw, 3]},
        "sphere_mask": {"dtype": "bool", "shape": hw},
        "gripper_mask": {"dtype": "bool", "shape": hw},
        "proprio": {"dtype": "float32", "shape": [len(PROPRIO_NAMES)], "names": list(PROPRIO_NAMES)},
        "action": {"dtype": "float32", "shape": [ACTION_DIM]},
        "phase": {"dtype": "int8", "shape": [], "names": [p.name for p in Phase]},
        "state": {"dtype": "float64", "shape": [len(STATE_NAMES)], "names": list(STATE_NAMES)},
    }


def collect(cfg: CollectConfig, progress: bool = True) -> CollectSummary:
    """Collect (or finish collecting) ``cfg.episodes`` expert episodes into ``cfg.out``."""
    with ArtifactFolder(Path(cfg.out), "dataset"):
        return _collect(cfg, progress)


_INFO_KEYS = ("seed", "length", "success", "params", "final_sphere_pos_world_m")
"""What a dataset episode's info.json holds (besides its index)."""


def _collect(cfg: CollectConfig, progress: bool = True) -> CollectSummary:
    if cfg.episodes <= 0 or cfg.workers <= 0:
        raise ValueError("episodes and workers must be positive")
    root = Path(cfg.out)
    features = expert_features(cfg.env)
    init_dataset(root, cfg.dataset_config(), features, DATASET_KIND)
    removed = remove_partial(root)
    done = set(finished_indices(root))
    todo = [i for i in range(cfg.episodes) if i not in done]
    t0 = time.perf_counter()
    tally = {"new": 0, "success": 0}
    bar = tqdm(total=cfg.episodes, initial=cfg.episodes - len(todo), unit="ep", desc="collect", disable=not progress)
    workers = cfg.workers if cfg.backend.backend == "ray" else useful_workers(cfg.workers, len(todo))

    def write(rec: EpisodeRecord) -> None:
        index = todo[rec.info["request_index"]]
        writer.write(index, {k: rec.arrays[k] for k in features}, {k: rec.info[k] for k in _INFO_KEYS})
        tally["new"] += 1
        tally["success"] += rec.success
        bar.update(1)
        bar.set_postfix_str(f"success {tally['success'] / tally['new']:.0%}")

    if todo:
        # the one episode loop of the package, expert only (beta = 1), ground-truth masks (unused)
        requests = [EpisodeRequest(seed=cfg.seed + i, beta=1.0) for i in todo]
        try:
            with EpisodeWriter(root) as writer, open_runner(cfg.backend, cfg.env, workers, cfg.expert) as runner:
                runner.run(requests, None, GroundTruthMasks(), on_episode=write, progress=False)
        finally:
            bar.close()
    bar.close()
    seconds = time.perf_counter() - t0
    ds = EpisodeDataset(root)
    n_success = sum(int(e.info["success"]) for e in ds)
    return CollectSummary(episodes=len(ds), successes=n_success, steps=ds.num_steps(), new_episodes=tally["new"],
                          seconds=seconds, removed_partial=removed, workers=workers)


def useful_workers(requested: int, jobs: int) -> int:
    """``requested`` worker processes capped at this machine's CPU cores and at the ``jobs`` to run (at least 1):
    PyBullet renders on the CPU, so more processes than cores add nothing."""
    return max(1, min(requested, jobs, os.cpu_count() or 1))


# --- CLI ------------------------------------------------------------------------------------------
OPTIONS = (
    Option("--episodes", "number of episodes (indices 0 .. EPISODES-1)", "episodes", type=positive_int),
    Option("--out", "dataset folder (created, or resumed if it holds this same job)", "out", required=True),
    Option("--seed", "episode i uses seed SEED+i", "seed", type=non_negative_int),
    *backend_options("env worker processes, each with its own PyBullet client"),
    *env_options(),
)


def add_arguments(p: argparse.ArgumentParser) -> None:
    add_options(p, CollectConfig, OPTIONS)


def config_from_args(args: argparse.Namespace) -> CollectConfig:
    cfg = config_from_options(CollectConfig, args, OPTIONS)
    check_backend(cfg.backend)
    return cfg


def run(args: argparse.Namespace) -> int:
    cfg = config_from_args(args)
    try:
        s = collect(cfg)
    except (DatasetError, BackendUnavailable) as e:
        raise UsageError(str(e)) from None
    print(f"dataset     {Path(cfg.out).resolve()}")
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
