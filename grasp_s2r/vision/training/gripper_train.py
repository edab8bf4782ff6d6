"""Training of a gripper head (``vision/gripper.py``) on a frozen segmenter; ``grasp-s2r train-gripper``.

Data: the segmenter's own training composites (``dataset.TRAINING_DATA``: sim views on photos, textures, flat
colours, the sim table and photo tables, re-shading, augmentation), with the fingers' mask carried through the same
composite and augmentation (``CompositeDataset.sample_with_gripper``). The views' camera mount is jittered more than
the scene default (up to 8 mm / 4 deg, where the controller is tested), so that the fingers are seen where a
miscalibrated camera puts them. The segmenter is in eval mode, its features computed without gradients; only the
head trains (BCE + soft Dice on the fingers' mask). The head's dilated blocks (``GripperTrainConfig.dilations``)
let it see a finger's edges from inside its flat interior.

Run folder::

    OUT/gripper_head.pt   the head (format ``grasp_s2r.gripper_head``: ``gripper.py``)
    OUT/metrics.json      precision / recall / IoU of the fingers' mask on validation composites (training photos,
                          other episodes) and held-out composites (held-out photos), and the loss curve
    OUT/overlays.png      validation then held-out composites beside their predictions (TP green, FP red, FN blue)
"""

from __future__ import annotations

import dataclasses
import math
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch
from torch.utils.data import DataLoader
from tqdm import tqdm

from grasp_s2r import __version__
from grasp_s2r.artifacts import ArtifactFolder
from grasp_s2r.configs import to_dict
from grasp_s2r.drawing import save_overlay_grid
from grasp_s2r.files import write_json
from grasp_s2r.interrupts import children_ignore_interrupts, dataloader_worker_init
from grasp_s2r.sim.config import EnvConfig
from grasp_s2r.train_speed import StepThreads, data_and_step_cores, to_memory_format, use_channels_last
from grasp_s2r.vision.evaluation.metrics import pixel_metrics
from grasp_s2r.vision.images.backgrounds import load_backgrounds, split_names
from grasp_s2r.vision.images.dataset import TRAINING_DATA, CompositeDataset, DataConfig, env_config_for
from grasp_s2r.vision.networks.gripper import (
    GripperHead,
    check_dilations,
    feature_width,
    make_head_checkpoint,
    write_head_checkpoint,
)
from grasp_s2r.vision.networks.model import to_input_tensor
from grasp_s2r.vision.networks.segmenter import CheckpointError, Segmenter, default_checkpoint_path
from grasp_s2r.vision.training.train_config import segmentation_loss

HEAD_FILE = "gripper_head.pt"
GRIPPER_METRICS_FORMAT_VERSION = 1
"""Of ``OUT/metrics.json`` (format ``grasp_s2r.gripper_metrics``)."""
REPORTED = ("precision", "recall", "iou", "f1", "mean_iou", "images")
"""The figures of ``pixel_metrics`` kept in ``metrics.json`` and the checkpoint (all defined: the fingers are in
every view)."""


class GripperTrainError(ValueError):
    """A gripper head training run that cannot start (bad config, missing segmenter, a folder with a head)."""


@dataclass(frozen=True)
class GripperTrainConfig:
    """One ``train-gripper`` run; saved in the head's checkpoint and ``metrics.json``."""

    vision: str = ""
    """The segmenter checkpoint the head is trained on (frozen); "" = the shipped one."""
    out: str = "runs/gripper"
    """Run folder."""
    steps: int = 1500
    """Optimizer steps."""
    batch_size: int = 32
    """Composites per step."""
    lr: float = 3e-3
    """Peak learning rate (AdamW; linear warm-up over a tenth of the steps, cosine decay to 5 %)."""
    weight_decay: float = 1e-4
    """AdamW weight decay."""
    dice_weight: float = 1.0
    """Weight of the soft Dice loss added to the BCE (0: BCE only)."""
    seed: int = 0
    """Seed of the head's initial weights and of every composite."""
    camera_jitter_m: float = 0.008
    """Max camera mount jitter of the training (and evaluation) views, per axis: twice the scene default, the
    controller's test range."""
    camera_jitter_deg: float = 4.0
    """Max camera look-at jitter of the views, per axis."""
    dilations: tuple[int, ...] = (1, 2, 4, 8)
    """The head's 3 x 3 blocks, one per dilation (``gripper.GripperHead``); ``(1,)``: a single block, which sees too
    little of a finger (docs/vision.md)."""
    threshold: float = 0.5
    """Probability above which a pixel is a finger's."""
    val_images: int = 256
    """Validation composites (training photos, episodes no training step draws)."""
    heldout_images: int = 256
    """Held-out composites (held-out photos and episodes)."""
    workers: int | None = None
    """DataLoader worker processes making composites (spawned); 0 = in-process; None = automatic: one on a CPU of two
    or more cores, the frozen segmenter's forward and the head's step on the others (:func:`grasp_s2r.cpu.split_cores`)."""
    data: DataConfig = TRAINING_DATA
    """How composites are made: the segmenter's training recipe."""

    def __post_init__(self) -> None:
        if min(self.steps, self.batch_size, self.val_images, self.heldout_images) < 1:
            raise GripperTrainError("steps, batch size, val_images and heldout_images must be >= 1, got "
                                    f"{self.steps}, {self.batch_size}, {self.val_images}, {self.heldout_images}")
        if not 0.0 < self.lr < math.inf:
            raise GripperTrainError(f"lr must be a positive number, got {self.lr}")
        if not 0.0 < self.threshold < 1.0:
            raise GripperTrainError(f"threshold must be in (0, 1), got {self.threshold}")
        if not all(0.0 <= j < math.inf for j in (self.camera_jitter_m, self.camera_jitter_deg)):
            raise GripperTrainError(f"camera jitter must be finite and >= 0, got {self.camera_jitter_m * 1000:g} mm, "
                                    f"{self.camera_jitter_deg:g} deg")
        try:
            check_dilations(self.dilations)
        except ValueError as e:
            raise GripperTrainError(str(e)) from None
        if self.workers is not None and not 0 <= self.workers <= 64:
            raise GripperTrainError(f"workers must be in [0, 64], got {self.workers}")
        if not 0.0 <= self.dice_weight < math.inf:
            raise GripperTrainError(f"dice_weight must be >= 0, got {self.dice_weight}")

    @property
    def segmenter_path(self) -> Path:
        return Path(self.vision) if self.vision else default_checkpoint_path()


def view_env_config(image_size_px: int, cfg: GripperTrainConfig) -> EnvConfig:
    """The scene of the head's views: the segmenter's (``dataset.env_config_for``) with the config's camera jitter."""
    env = env_config_for(image_size_px)
    return env.replace(randomization=dataclasses.replace(env.randomization, camera_jitter_m=cfg.camera_jitter_m,
                                                         camera_jitter_deg=cfg.camera_jitter_deg))


class GripperComposites(CompositeDataset):
    """Item ``i`` -> (image float32 (3, H, W) normalized, the fingers' mask float32 (1, H, W))."""

    def __getitem__(self, index: int) -> tuple[torch.Tensor, torch.Tensor]:
        rgb, _, gripper = self.sample_with_gripper(int(index))
        return to_input_tensor(rgb[None])[0], torch.from_numpy(gripper[None].astype(np.float32))


def gripper_composites(dataset: CompositeDataset, n: int, desc: str) -> tuple[np.ndarray, np.ndarray]:
    """Items 0..n-1 of ``dataset`` as (rgb uint8 (n, H, W, 3), fingers' mask bool (n, H, W))."""
    h, w = dataset.image_hw
    images, masks = np.empty((n, h, w, 3), np.uint8), np.empty((n, h, w), bool)
    for i in tqdm(range(n), desc=desc, unit="img", leave=False, disable=n < 64):
        images[i], _, masks[i] = dataset.sample_with_gripper(i)
    return images, masks


def load_frozen_segmenter(cfg: GripperTrainConfig, device: Any = None) -> Segmenter:
    """The segmenter of ``cfg`` (eval mode, no gradients); :class:`GripperTrainError` (one line) when unusable."""
    path = cfg.segmenter_path
    if not path.is_file():
        raise GripperTrainError(f"no segmenter checkpoint at {path}")
    try:
        segmenter = Segmenter.load(path, device=device)
        feature_width(segmenter)
    except CheckpointError as e:
        raise GripperTrainError(str(e)) from None
    segmenter.model.requires_grad_(False)
    return segmenter


def _lr_factor(step: int, steps: int) -> float:
    warmup = max(1, steps // 10)
    if step < warmup:
        return (step + 1) / warmup
    t = (step - warmup) / max(1, steps - warmup)
    return 0.05 + 0.95 * 0.5 * (1.0 + math.cos(math.pi * min(t, 1.0)))


def predict_in_batches(segmenter: Segmenter, images: np.ndarray, batch_size: int = 128) -> np.ndarray:
    """uint8 (N, H, W, 3) -> the fingers' masks bool (N, H, W) of the segmenter's attached head."""
    out = [segmenter.predict_gripper(images[i:i + batch_size]) for i in range(0, len(images), batch_size)]
    return np.concatenate(out) if out else np.zeros(images.shape[:3], bool)


def evaluation_sets(cfg: GripperTrainConfig, hw: tuple[int, int]) -> dict[str, tuple[np.ndarray, np.ndarray]]:
    """``{"val": ..., "heldout": ...}``: (images, fingers' masks) of the validation stream (training photos, other
    episodes) and the held-out stream (held-out photos), made with the run's recipe and camera jitter."""
    env = view_env_config(hw[0], cfg)
    sets = {}
    for stream, split, n in (("val", "train", cfg.val_images), ("heldout", "heldout", cfg.heldout_images)):
        dataset = CompositeDataset(env_config=env, data=cfg.data, backgrounds=load_backgrounds(split),
                                   stream=stream, seed=cfg.seed, length=n)
        try:
            sets[stream] = gripper_composites(dataset, n, f"{stream} composites")
        finally:
            dataset.close()
    return sets


def measure(segmenter: Segmenter, sets: dict[str, tuple[np.ndarray, np.ndarray]]) -> dict[str, dict[str, Any]]:
    """The reported figures of the attached head on each set, and the predictions (under ``"pred"``)."""
    results = {}
    for name, (images, target) in sets.items():
        pred = predict_in_batches(segmenter, images)
        m = pixel_metrics(pred, target)
        results[name] = {**{k: m[k] for k in REPORTED}, "pred": pred}
    return results


def train_gripper_head(cfg: GripperTrainConfig, *, device: Any = None, threads: int | None = None,
                       progress: bool = True) -> dict[str, Any]:
    """Train a head into ``cfg.out``; returns the ``metrics.json`` dict. Refuses (:class:`GripperTrainError`) a
    missing or unusable segmenter and a folder that already holds a head; ``artifacts.ArtifactError`` a folder holding
    something else. ``threads``: torch threads of the step on a CPU (None: the cores the data workers leave)."""
    out = Path(cfg.out)
    segmenter = load_frozen_segmenter(cfg, device)  # checked before the folder is made
    with ArtifactFolder(out, "gripper-run"):
        if (out / HEAD_FILE).exists():
            raise GripperTrainError(f"{out} already holds a gripper head ({HEAD_FILE}); choose another --out")
        return _train(cfg, segmenter, out, progress, threads)


def _train(cfg: GripperTrainConfig, segmenter: Segmenter, out: Path, progress: bool,
           threads: int | None = None) -> dict[str, Any]:
    device = segmenter.device
    leak = sorted(set(split_names()["heldout"]) & set(segmenter.config["background_split"]["train"]))
    if leak:
        raise GripperTrainError(f"held-out photos {', '.join(leak)} were used to train the segmenter")
    torch.manual_seed(cfg.seed)
    head = GripperHead(feature_width(segmenter), cfg.dilations).to(device)
    hw = segmenter.input_hw
    train_set = GripperComposites(env_config=view_env_config(hw[0], cfg), data=cfg.data,
                                  backgrounds=load_backgrounds("train"), stream="train", seed=cfg.seed,
                                  length=cfg.steps * cfg.batch_size)
    sets = evaluation_sets(cfg, hw)
    workers, threads = data_and_step_cores(device, cfg.workers, threads)
    channels_last = use_channels_last(device)  # the frozen U-Net's convolutions; fp32, as it runs when deployed
    if channels_last:
        segmenter.model.to(memory_format=torch.channels_last)
    loader = DataLoader(train_set, batch_size=cfg.batch_size, shuffle=False, num_workers=workers,
                        multiprocessing_context="spawn" if workers > 0 else None,
                        worker_init_fn=dataloader_worker_init if workers > 0 else None)
    optimizer = torch.optim.AdamW(head.parameters(), lr=cfg.lr, weight_decay=cfg.weight_decay)
    log_every = max(1, cfg.steps // 20)
    history, losses, step, t0 = [], [], 0, time.perf_counter()
    bar = tqdm(total=cfg.steps, desc="train-gripper", unit="step", disable=not progress)
    with children_ignore_interrupts():
        batches = iter(loader)
    head.train()
    with StepThreads(threads):
        try:
            for x, y in batches:
                for group in optimizer.param_groups:
                    group["lr"] = cfg.lr * _lr_factor(step, cfg.steps)
                x, y = to_memory_format(x.to(device), channels_last), y.to(device)
                with torch.no_grad():
                    features = segmenter.model.features(x)
                loss = segmentation_loss(head(features), y, cfg.dice_weight)
                optimizer.zero_grad(set_to_none=True)
                loss.backward()
                optimizer.step()
                losses.append(loss.item())
                step += 1
                bar.update(1)
                if step % log_every == 0 or step == cfg.steps:
                    history.append({"step": step, "elapsed_s": round(time.perf_counter() - t0, 2),
                                    "train_loss": float(np.mean(losses))})
                    bar.set_postfix(loss=f"{history[-1]['train_loss']:.3f}")
                    losses = []
        finally:
            bar.close()
            train_set.close()
    head.eval()
    segmenter.gripper_head, segmenter.gripper_threshold = head, cfg.threshold
    results = measure(segmenter, sets)
    metrics = {"format": "grasp_s2r.gripper_metrics", "format_version": GRIPPER_METRICS_FORMAT_VERSION,
               "package_version": __version__, "segmenter": str(cfg.segmenter_path.resolve()),
               "segmenter_sha256": segmenter.checkpoint_sha256, "config": to_dict(cfg),
               "steps": step, "train_seconds": round(time.perf_counter() - t0, 1), "history": history,
               **{name: {k: v for k, v in r.items() if k != "pred"} for name, r in results.items()}}
    ckpt = make_head_checkpoint(head, threshold=cfg.threshold, segmenter_sha256=str(segmenter.checkpoint_sha256),
                                config=to_dict(cfg), metrics={k: metrics[k] for k in ("val", "heldout", "steps")})
    write_head_checkpoint(ckpt, out / HEAD_FILE)
    write_json(out / "metrics.json", metrics, indent=2)
    n = 24
    images = np.concatenate([sets[s][0][:n] for s in ("val", "heldout")])
    target = np.concatenate([sets[s][1][:n] for s in ("val", "heldout")])
    pred = np.concatenate([results[s]["pred"][:n] for s in ("val", "heldout")])
    save_overlay_grid(images, pred, target, out / "overlays.png", max_images=2 * n)
    return metrics


def evaluate_head(head: Path | str | None = None, cfg: GripperTrainConfig | None = None,
                  device: Any = None) -> dict[str, dict[str, Any]]:
    """The figures of ``head`` (default: the shipped one) on ``cfg``'s segmenter, validation and held-out
    composites (``cfg.val_images``, ``cfg.heldout_images``, its seed and camera jitter): what ``train-gripper``
    reports, measured again. ``{"val": {...}, "heldout": {...}}``."""
    from grasp_s2r.vision.networks.gripper import attach_gripper_head

    cfg = cfg or GripperTrainConfig()
    segmenter = load_frozen_segmenter(cfg, device)
    if attach_gripper_head(segmenter, head) is None:
        raise GripperTrainError(f"no gripper head ships for the segmenter {cfg.segmenter_path}")
    results = measure(segmenter, evaluation_sets(cfg, segmenter.input_hw))
    return {name: {k: v for k, v in r.items() if k != "pred"} for name, r in results.items()}


def format_metrics(metrics: dict[str, Any]) -> str:
    """The head's figures as lines for the terminal."""
    lines = [f"  {'set':<8} {'images':>6} {'precision':>9} {'recall':>7} {'IoU':>6}"]
    for name in ("val", "heldout"):
        m = metrics[name]
        lines.append(f"  {name:<8} {m['images']:>6} {m['precision']:9.3f} {m['recall']:7.3f} {m['iou']:6.3f}")
    return "\n".join(lines)
