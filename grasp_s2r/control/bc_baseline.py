"""Behavior cloning at DAgger's label budget: the experiment each DAgger round is compared with.

After DAgger round r has trained on N expert labels, BC trains the same network (warm-started from its own round
r-1) on N labels of expert-only episodes — round 0's, then ``bc-expert/`` episodes collected as needed — and is
measured on the same evaluation episodes. Round 0 is behavior cloning already (beta = 1): it is its own baseline.
``benchmarks/bench_dagger.py`` reports the comparison; ``grasp-s2r dagger --no-bc`` skips it.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any, Protocol

import numpy as np

from grasp_s2r.control import seeds
from grasp_s2r.control.dagger_config import DaggerConfig
from grasp_s2r.control.policy import Policy
from grasp_s2r.control.run_store import BC_KIND, RunStore
from grasp_s2r.control.training_episodes import TrainingEpisodes
from grasp_s2r.data.episodes import EpisodeDataset, finished_indices
from grasp_s2r.runtime.records import EpisodeRecord, EpisodeRequest

EXPERT_STEPS_PER_EPISODE = 12.0
"""A lower estimate of an expert episode's labels (~14 steps), to size the episodes still to collect."""


class Trainer(Protocol):
    """What BC uses of :class:`~grasp_s2r.control.dagger.DaggerTrainer` (which imports this module, not the reverse):
    its run, its training episodes, its rollouts and its training step."""

    cfg: DaggerConfig
    store: RunStore
    episodes: TrainingEpisodes

    def rollouts_to(self, root: Path, config: dict[str, Any], kind: str, todo: list[int],
                    requests: list[EpisodeRequest], policy: Policy | None, **run_kw: Any) -> list[EpisodeRecord]: ...

    def load_or_new(self, path: Path | None) -> Policy: ...

    def train_and_measure(self, policy: Policy, roots: list[Path], limit: int | None, rng_key: list[int],
                          name: str) -> dict[str, Any]: ...


def bc_labels(trainer: Trainer, n_labels: int) -> list[Path]:
    """Expert-only datasets holding at least ``n_labels`` labels: round 0, then ``bc-expert/`` (extended)."""
    store = trainer.store
    root = store.bc_dir
    have = EpisodeDataset(store.round_dir(0)).num_steps()
    done: set[int] = set()
    if root.is_dir() and finished_indices(root):
        have += EpisodeDataset(root).num_steps()
        done = set(finished_indices(root))
    while have < n_labels:
        n_eps = int(np.ceil((n_labels - have) / EXPERT_STEPS_PER_EPISODE)) + 1
        todo = [i for i in range(len(done) + n_eps) if i not in done][:n_eps]  # fills gaps left by a kill
        requests = [trainer.episodes.request(seeds.BC_EXPERT_BASE + i, 1.0) for i in todo]
        recs = trainer.rollouts_to(root, {"run": trainer.cfg.identity()}, BC_KIND, todo, requests, None,
                                   desc="BC expert episodes")
        have += sum(rec.length for rec in recs)
        done |= set(todo)
    return [store.round_dir(0), root]


def bc_round(trainer: Trainer, r: int, dagger: dict[str, Any],
             dagger_policy: Policy) -> tuple[dict[str, Any], Policy]:
    """Train and measure BC at the labels DAgger round ``r`` had (``dagger``: its metrics); returns the ``bc_*``
    columns of the round's learning-curve row and the BC controller (for its checkpoint)."""
    t0 = time.perf_counter()
    if r == 0:  # round 0 is behavior cloning: same labels, same network
        bc, policy = dagger, dagger_policy
    else:
        policy = trainer.load_or_new(trainer.store.ckpt(r - 1, "bc"))
        bc = trainer.train_and_measure(policy, bc_labels(trainer, dagger["labels"]), dagger["labels"], [r, 1],
                                       f"BC at {dagger['labels']} labels")
    columns = {f"bc_{k}": bc[k] for k in ("loss", "successes", "success_rate", "ci_low", "ci_high")}
    columns["bc_s"] = time.perf_counter() - t0
    return columns, policy
