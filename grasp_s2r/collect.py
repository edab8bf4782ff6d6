"""``grasp-s2r collect``: run the FSM expert in K worker processes and write an episode dataset.

Collection is a beta = 1 run of the package's one closed-loop runtime (:class:`~grasp_s2r.runtime.pool.RolloutPool`,
the expert acts at every step) and writes the schema of a DAgger round (``runtime.records.rollout_features``),
including the controller's input mask of each step from the mask source asked for (ground truth, or a segmenter's
prediction with ``--masks predicted``): demonstrations collected with the run's scene and mask source are a DAgger
run's round 0 as they are (``grasp-s2r dagger --demos``).

Episode ``i`` uses seed ``seed + i``, so the dataset is the same whatever the number of workers, the
backend (local processes or Ray actors) and whichever episodes a re-run has to redo. This process writes
each finished episode atomically, so a killed run is resumed by running the same command again.
"""

from __future__ import annotations

import os
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tqdm import tqdm

from grasp_s2r.configs import to_dict
from grasp_s2r.data.episodes import (
    EpisodeDataset,
    EpisodeWriter,
    finished_indices,
    init_dataset,
    remove_damaged,
    remove_partial,
)
from grasp_s2r.expert.fsm import ExpertConfig
from grasp_s2r.runtime.backend import BackendConfig, claimed, open_runner
from grasp_s2r.runtime.masks import MaskInput, MaskSource, make_mask_source, mask_source_identity
from grasp_s2r.runtime.records import EXPERT, EpisodeRecord, EpisodeRequest, rollout_features
from grasp_s2r.sim.config import EnvConfig

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
    masks: MaskInput = "gt"
    """The controller's input mask recorded at each step: "gt" (ground truth) or "predicted" (a segmenter's)."""
    vision_checkpoint: str = ""
    """Segmenter checkpoint for predicted masks ("" = the one packaged with grasp_s2r)."""

    def dataset_config(self) -> dict[str, Any]:
        """The part of the config that determines the episodes' content."""
        return {"seed": self.seed, "env": to_dict(self.env), "expert": to_dict(self.expert),
                "masks": mask_source_identity(self.masks, self.vision_checkpoint)}


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
    damaged: dict[int, str] = field(default_factory=dict)
    """Finished episodes found damaged on resume (index: why), removed and collected again."""

    @property
    def episodes_per_s(self) -> float:
        return self.new_episodes / self.seconds if self.seconds > 0 else float("nan")


def collect(cfg: CollectConfig, progress: bool = True) -> CollectSummary:
    """Collect (or finish collecting) ``cfg.episodes`` expert episodes into ``cfg.out``."""
    masks = make_mask_source(cfg.masks, cfg.vision_checkpoint, "cpu")  # refused before anything is written
    with claimed(cfg.out, "dataset", cfg.backend):  # Ray reached before anything is written
        return _collect(cfg, masks, progress)


_INFO_KEYS = ("seed", "length", "success", "params", "final_sphere_pos_world_m", "beta", "condition")
"""What a dataset episode's info.json holds (besides its index)."""


def _collect(cfg: CollectConfig, masks: MaskSource, progress: bool = True) -> CollectSummary:
    if cfg.episodes <= 0 or cfg.workers <= 0:
        raise ValueError("episodes and workers must be positive")
    root = Path(cfg.out)
    init_dataset(root, cfg.dataset_config(), rollout_features(cfg.env), DATASET_KIND)
    removed = remove_partial(root)
    damaged = remove_damaged(root)  # named, then collected again below
    done = set(finished_indices(root))
    todo = [i for i in range(cfg.episodes) if i not in done]
    t0 = time.perf_counter()
    tally = {"new": 0, "success": 0}
    bar = tqdm(total=cfg.episodes, initial=cfg.episodes - len(todo), unit="ep", desc="collect", disable=not progress)
    workers = cfg.workers if cfg.backend.backend == "ray" else useful_workers(cfg.workers, len(todo))

    def write(rec: EpisodeRecord) -> None:
        index = todo[rec.info["request_index"]]
        writer.write(index, rec.arrays, {k: rec.info[k] for k in _INFO_KEYS})
        tally["new"] += 1
        tally["success"] += rec.success
        bar.update(1)
        bar.set_postfix_str(f"success {tally['success'] / tally['new']:.0%}")

    if todo:
        # the one episode loop of the package, expert only (beta = 1), recording the mask source's input masks
        requests = [EpisodeRequest(seed=cfg.seed + i, actor=EXPERT) for i in todo]
        try:
            with EpisodeWriter(root) as writer, open_runner(cfg.backend, cfg.env, workers, cfg.expert) as runner:
                runner.run(requests, None, masks, on_episode=write, progress=False)
        finally:
            bar.close()
    bar.close()
    seconds = time.perf_counter() - t0
    ds = EpisodeDataset(root, verify=False)  # verified when the run started; its new episodes were just written
    n_success = sum(int(e.info["success"]) for e in ds)
    return CollectSummary(episodes=len(ds), successes=n_success, steps=ds.num_steps(), new_episodes=tally["new"],
                          seconds=seconds, removed_partial=removed, workers=workers, damaged=damaged)


def useful_workers(requested: int, jobs: int) -> int:
    """``requested`` worker processes capped at this machine's CPU cores and at the ``jobs`` to run (at least 1):
    PyBullet renders on the CPU, so more processes than cores add nothing."""
    return max(1, min(requested, jobs, os.cpu_count() or 1))
