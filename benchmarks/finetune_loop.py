"""The fine-tune loop of experiment scripts that train the shipped segmenter on batches of their own making
(``episode_frames.py``, ``two_frame.py``): the recipe's composites they mix in, ``train-vision``'s schedule and loss
(AdamW, warm-up and cosine decay, BCE + Dice), and the checkpoint and loss curve they write."""

from __future__ import annotations

import csv
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import numpy as np
import torch
from torch.utils.data import DataLoader
from tqdm import tqdm

from grasp_s2r.interrupts import dataloader_worker_init
from grasp_s2r.vision.images.backgrounds import load_backgrounds
from grasp_s2r.vision.images.dataset import CompositeDataset, DataConfig, env_config_for
from grasp_s2r.vision.networks.segmenter import make_checkpoint, write_checkpoint
from grasp_s2r.vision.training.train_config import SegmenterTrainConfig, lr_factor

CURVE_EVERY = 250
"""Steps between the loss curve's rows."""


def composite_batches(data: DataConfig, seed: int, steps: int,
                      batch: int) -> Iterator[tuple[torch.Tensor, torch.Tensor]] | None:
    """Batches of ``batch`` of the recipe ``data``'s composites on the training photos, made by one worker process
    as ``train-vision`` makes them, enough for ``steps`` steps; None when ``batch`` is 0."""
    if not batch:
        return None
    comps = CompositeDataset(env_config=env_config_for(64), data=data, backgrounds=load_backgrounds("train"),
                             stream="train", seed=seed, length=steps * batch)
    return iter(DataLoader(comps, batch_size=batch, num_workers=1, multiprocessing_context="spawn",
                           worker_init_fn=dataloader_worker_init))


def draw_items(rng: np.random.Generator, n_items: int, size: int, hard: np.ndarray, hard_share: float) -> np.ndarray:
    """``size`` indices of ``n_items`` items, each drawn, with probability ``hard_share``, from ``hard`` instead (its
    own draws: without ``hard`` the indices drawn stay the same)."""
    pick = rng.integers(n_items, size=size)
    if len(hard):
        from_hard = rng.random(size) < hard_share
        pick[from_hard] = hard[rng.integers(len(hard), size=int(from_hard.sum()))]
    return pick


def fine_tune(model: torch.nn.Module, next_batch: Callable[[int], tuple[torch.Tensor, torch.Tensor]],
              cfg: SegmenterTrainConfig, desc: str = "fine-tune") -> list[dict[str, float]]:
    """Train ``model`` in place for ``cfg.steps`` steps on ``next_batch(step) -> (x, y)``; returns the loss curve
    (a row every :data:`CURVE_EVERY` steps). Leaves the model in eval mode."""
    optimizer = torch.optim.AdamW(model.parameters(), lr=cfg.lr, weight_decay=cfg.weight_decay)
    history, t0 = [], time.perf_counter()
    model.train()
    for step in tqdm(range(cfg.steps), desc=desc, unit="step"):
        x, y = next_batch(step)
        for group in optimizer.param_groups:
            group["lr"] = cfg.lr * lr_factor(step, cfg)
        loss = cfg.loss(model(x), y)
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        optimizer.step()
        if (step + 1) % CURVE_EVERY == 0:
            history.append({"step": step + 1, "elapsed_s": time.perf_counter() - t0, "train_loss": loss.item()})
    model.eval()
    return history


def write_run(out: Path, model: torch.nn.Module, init: dict[str, Any], config: dict[str, Any], step: int,
              history: list[dict[str, float]]) -> Path:
    """``out/model.pt`` (a segmenter checkpoint of ``init``'s network whose ``config`` is ``config``) and
    ``out/curve.csv``; returns the checkpoint's path."""
    path = out / "model.pt"
    write_checkpoint(make_checkpoint(model, architecture=init["architecture"], arch_kwargs=init["arch_kwargs"],
                                     input_hw=tuple(init["input_hw"]), background_split=init["background_split"],
                                     config=config, step=step, history=history),
                     path)
    with open(out / "curve.csv", "w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=["step", "elapsed_s", "train_loss"])
        writer.writeheader()
        writer.writerows(history)
    return path
