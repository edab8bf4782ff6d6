"""The fine-tune loop of experiment scripts that train the shipped segmenter on batches of their own making
(``episode_frames.py``): ``train-vision``'s schedule and loss (AdamW, warm-up and cosine decay, BCE + Dice), and the
checkpoint and loss curve they write."""

from __future__ import annotations

import csv
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch
from tqdm import tqdm

from grasp_s2r.vision.networks.segmenter import make_checkpoint, write_checkpoint
from grasp_s2r.vision.training.train_config import SegmenterTrainConfig, lr_factor

CURVE_EVERY = 250
"""Steps between the loss curve's rows."""


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
