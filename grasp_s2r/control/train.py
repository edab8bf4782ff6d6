"""Supervised training of the controller on expert labels (used by DAgger and by the BC baseline)."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Literal, get_args

import numpy as np
import torch
from torch.nn import functional as F
from tqdm import tqdm

from grasp_s2r.control.memory import episode_memory_features
from grasp_s2r.control.policy import Policy
from grasp_s2r.data.episodes import Episode, EpisodeDataset

LRSchedule = Literal["constant", "cosine"]
LR_SCHEDULES: tuple[str, ...] = get_args(LRSchedule)


@dataclass(frozen=True)
class PolicyTrainConfig:
    """Optimisation of one training phase (one DAgger round)."""

    steps: int = 1500
    """Gradient steps per round (the network is warm-started from the previous round)."""
    batch_size: int = 128
    """Labels per gradient step."""
    lr: float = 2e-3
    """Adam learning rate."""
    weight_decay: float = 1e-5
    """Adam weight decay."""
    xyz_loss: Literal["l1", "mse"] = "l1"
    """Loss of the x, y, z action: "mse", or "l1" (weighs the small, precise actions near the sphere more)."""
    grip_loss_weight: float = 0.5
    """Weight of the gripper (binary cross-entropy) term next to the x, y, z loss."""
    lr_schedule: LRSchedule = "constant"
    """The learning rate over one round's steps: "constant" (``lr`` throughout), or "cosine" (from ``lr`` down to
    nothing by the round's last step, restarted each round), meant to end a round in a minimum rather than wherever
    the last minibatches left the weights; measured no steadier across seeds (docs/experiments/recipes.md)."""

    def __post_init__(self) -> None:
        if self.xyz_loss not in ("mse", "l1"):
            raise ValueError(f"xyz_loss must be 'mse' or 'l1', got {self.xyz_loss!r}")
        if self.lr_schedule not in LR_SCHEDULES:
            raise ValueError(f"lr_schedule must be one of {LR_SCHEDULES}, got {self.lr_schedule!r}")
        if min(self.steps, self.batch_size) < 1 or self.lr <= 0:
            raise ValueError("steps and batch_size must be >= 1 and lr > 0")


@dataclass
class LabelSet:
    """Expert-labelled states, in memory."""

    masks: np.ndarray
    """The controller's input mask, bool (N, H, W)."""
    proprio: np.ndarray
    """Env proprio, float32 (N, 5)."""
    actions: np.ndarray
    """Expert action labels, float32 (N, 4)."""
    memory: np.ndarray
    """The controller's episode memory at each state, float32 (N, N_MEMORY) (``control.memory``)."""
    gripper_masks: np.ndarray | None = None
    """The gripper fingers' mask of each state, bool (N, H, W): the ground truth the episode recorded (read only by
    a controller with ``PolicyConfig.gripper``; None: not loaded)."""

    def __len__(self) -> int:
        return len(self.actions)

    def __post_init__(self) -> None:
        n = {len(self.masks), len(self.proprio), len(self.actions), len(self.memory)}
        if self.gripper_masks is not None:
            n.add(len(self.gripper_masks))
        if len(n) != 1:
            raise ValueError("masks, proprio, actions, memory (and gripper masks) must have the same length")

    def head(self, n: int) -> LabelSet:
        return LabelSet(self.masks[:n], self.proprio[:n], self.actions[:n], self.memory[:n],
                        None if self.gripper_masks is None else self.gripper_masks[:n])


def load_labels(roots: Iterable[Path], limit: int | None = None,
                gripper: Callable[[Episode], np.ndarray] | None = None) -> LabelSet:
    """All labels of the episode datasets ``roots`` (in order), at most ``limit`` of them, with the memory the
    controller had at each state (replayed from the episode's input masks, proprio and executed actions).

    ``gripper``: the fingers' masks the controller saw in an episode, bool (T, H, W) (a segmenter's, recomputed
    from the recorded images: ``DaggerTrainer.predicted_gripper``); default: the recorded ground truth."""
    masks, proprio, actions, memory, fingers, n = [], [], [], [], [], 0
    for root in roots:
        for ep in EpisodeDataset(Path(root)):
            if limit is not None and n >= limit:
                break
            take = len(ep) if limit is None else min(len(ep), limit - n)
            ep_masks = np.asarray(ep["input_mask"], dtype=bool)
            ep_proprio = np.asarray(ep["proprio"], dtype=np.float32)
            masks.append(ep_masks[:take])
            proprio.append(ep_proprio[:take])
            actions.append(np.asarray(ep["action"][:take], dtype=np.float32))
            fingers.append(np.asarray(ep["gripper_mask"] if gripper is None else gripper(ep), dtype=bool)[:take])
            memory.append(episode_memory_features(ep_masks, ep_proprio, np.asarray(ep["executed_action"]))[:take])
            n += take
    if not actions:
        raise ValueError("no labelled steps to train on")
    return LabelSet(np.concatenate(masks), np.concatenate(proprio), np.concatenate(actions), np.concatenate(memory),
                    np.concatenate(fingers))


def lr_scheduler(opt: torch.optim.Optimizer, cfg: PolicyTrainConfig) -> torch.optim.lr_scheduler.LRScheduler | None:
    """The scheduler of ``cfg.lr_schedule`` over one round's ``cfg.steps`` (stepped once a step); None: constant."""
    if cfg.lr_schedule == "cosine":
        return torch.optim.lr_scheduler.CosineAnnealingLR(opt, T_max=cfg.steps)
    return None


def fit(
    policy: Policy, labels: LabelSet, cfg: PolicyTrainConfig, rng: np.random.Generator, *,
    progress: bool = True, desc: str = "train",
) -> float:
    """Train ``policy`` in place for ``cfg.steps`` steps; returns the mean loss of the last quarter of steps."""
    opt = torch.optim.Adam(policy.net.parameters(), lr=cfg.lr, weight_decay=cfg.weight_decay)
    schedule = lr_scheduler(opt, cfg)
    masks, proprio, memory = policy.tensors(labels.masks, labels.proprio, labels.memory, labels.gripper_masks)
    target = torch.from_numpy(labels.actions).to(policy.device)
    policy.net.train()
    losses = []
    bar = tqdm(range(cfg.steps), desc=desc, unit="step", disable=not progress, leave=False)
    for _ in bar:
        idx = torch.from_numpy(rng.integers(0, len(labels), size=min(cfg.batch_size, len(labels)))).to(policy.device)
        xyz, logit = policy.net(masks[idx].float(), proprio[idx], None if memory is None else memory[idx])
        t = target[idx]
        xyz_loss = F.l1_loss(xyz, t[:, :3]) if cfg.xyz_loss == "l1" else F.mse_loss(xyz, t[:, :3])
        loss = xyz_loss + cfg.grip_loss_weight * F.binary_cross_entropy_with_logits(
            logit, (t[:, 3] > 0).float())
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        if schedule is not None:
            schedule.step()
        losses.append(float(loss.detach()))
        if len(losses) % 50 == 0:
            bar.set_postfix(loss=f"{np.mean(losses[-50:]):.4f}")
    policy.net.eval()
    if not policy.weights_finite():
        raise ValueError(f"training diverged: the controller's weights are not finite after {cfg.steps} steps at lr "
                         f"{cfg.lr:g}; use a smaller --lr")
    return float(np.mean(losses[-max(1, cfg.steps // 4):]))
