"""Training of the segmentation network on composites made on the fly; resumable.

Run folder layout::

    OUT/run.json               the run's identity (checked on --resume, ``grasp_s2r.run_record`` as DAgger's) and
                               config: SegmenterTrainConfig + DataConfig + EnvConfig + background split
    OUT/checkpoint-latest.pt   weights + optimizer, written atomically every ``checkpoint_every`` steps
    OUT/model.pt               final weights (the file ``eval-vision --model`` and the controller load)
    OUT/curve.csv, curve.png   training loss and validation precision / recall / IoU per step
    OUT/composites.png         the first training composites with their masks, to look at
"""

from __future__ import annotations

import csv
import io
import json
import math
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch
from torch.nn import functional as F
from torch.utils.data import DataLoader
from tqdm import tqdm

from grasp_s2r.configs import check_same, to_dict, to_json
from grasp_s2r.devices import default_device
from grasp_s2r.drawing import save_composite_grid, save_training_curve
from grasp_s2r.files import ArtifactFolder, atomic_write
from grasp_s2r.interrupts import children_ignore_interrupts, ignore_interrupts_in_child
from grasp_s2r.run_record import RunRecord
from grasp_s2r.tblog import TBLogger
from grasp_s2r.vision.backgrounds import load_backgrounds, split_names
from grasp_s2r.vision.calibrate import calibrate_checkpoint
from grasp_s2r.vision.dataset import TRAINING_DATA, CompositeDataset, DataConfig, env_config_for, make_composites
from grasp_s2r.vision.metrics import pixel_metrics
from grasp_s2r.vision.model import ARCHITECTURES, Architecture, build_model, count_parameters, to_input_tensor
from grasp_s2r.vision.segmenter import (
    THRESHOLD,
    CheckpointError,
    make_checkpoint,
    read_checkpoint,
    write_checkpoint,
)

VISION_RUN_FORMAT = "grasp_s2r.vision_run"
RUN_FORMAT_VERSION = 1
CURVE_FIELDS = ("step", "elapsed_s", "lr", "train_loss", "val_precision", "val_recall", "val_iou")


class TrainError(ValueError):
    """A training run that cannot start (existing run without --resume, changed config, bad options)."""


@dataclass(frozen=True)
class SegmenterTrainConfig:
    """One ``train-vision`` run; saved in ``run.json`` and in every checkpoint."""

    architecture: Architecture = "unet"
    """Network name (see ``model.ARCHITECTURES``)."""
    width: int = 12
    """U-Net channels at full resolution (ignored by other architectures)."""
    depth: int = 3
    """U-Net poolings (ignored by other architectures)."""
    image_size_px: int = 64
    """Square input resolution = wrist camera resolution of the rendered views."""
    steps: int = 3000
    """Optimizer steps in total (a resumed run continues up to this)."""
    batch_size: int = 32
    """Composites per step."""
    lr: float = 3e-3
    """Peak learning rate (AdamW; linear warm-up, then cosine decay to 5 %)."""
    warmup_steps: int = 100
    """Linear warm-up of the learning rate (at most a fifth of ``steps``)."""
    weight_decay: float = 1e-4
    """AdamW weight decay."""
    dice_weight: float = 1.0
    """Weight of the soft Dice loss (the target covers 0-20 % of the image) added to the BCE."""
    dice_per_image: bool = False
    """Dice computed per image and averaged (every sphere, small or large, and every empty image weighs the same)
    instead of over the whole batch (large spheres dominate)."""
    seed: int = 0
    """Seed of the initial weights and of every composite (train and validation streams)."""
    val_every: int = 250
    """Validate and write the curve every this many steps."""
    val_images: int = 256
    """Validation composites (training photos, episode seeds disjoint from training)."""
    checkpoint_every: int = 250
    """Write ``checkpoint-latest.pt`` every this many steps."""
    workers: int = 0
    """DataLoader worker processes (spawned; each renders with its own PyBullet client); 0 = in-process."""
    data: DataConfig = TRAINING_DATA
    """How composites are made: the background mixture, re-shading and distractors of ``TRAINING_DATA``
    (camouflage and recolouring: options, off by default, see docs/vision.md)."""
    init_checkpoint: str = ""
    """Segmenter checkpoint whose weights start the run (fine-tuning); "" = random initial weights."""
    calibration_images: int = 0
    """Validation composites (training photos) on which the final model's break-even threshold is chosen
    (``vision/calibrate.py``); 0 = keep the threshold at 0.5 (the default: see docs/vision.md, *Operating point*)."""

    def __post_init__(self) -> None:
        if self.architecture not in ARCHITECTURES:
            raise TrainError(f"architecture must be one of {', '.join(ARCHITECTURES)}, got {self.architecture!r}")
        if self.image_size_px % 8 or self.image_size_px < 16:
            raise TrainError(f"image size must be a multiple of 8 and at least 16, got {self.image_size_px}")
        if self.calibration_images < 0:
            raise TrainError(f"calibration_images must be >= 0, got {self.calibration_images}")

    @property
    def arch_kwargs(self) -> dict[str, Any]:
        return {"width": self.width, "depth": self.depth} if self.architecture == "unet" else {}

    def to_dict(self) -> dict[str, Any]:
        return to_dict(self)


def segmentation_loss(logits: torch.Tensor, target: torch.Tensor, dice_weight: float,
                      per_image: bool = False) -> torch.Tensor:
    """BCE + ``dice_weight`` x soft Dice; logits and target float (N, 1, H, W).

    The Dice is over the whole batch, or with ``per_image`` over each image (smoothed by 1 pixel, so an empty
    target image costs ``1 - 1 / (1 + predicted area)``) and then averaged.
    """
    bce = F.binary_cross_entropy_with_logits(logits, target)
    p = torch.sigmoid(logits)
    dims = (1, 2, 3) if per_image else (0, 1, 2, 3)
    dice = 1.0 - (2.0 * (p * target).sum(dims) + 1.0) / (p.sum(dims) + target.sum(dims) + 1.0)
    return bce + dice_weight * dice.mean()


def _lr_factor(step: int, cfg: SegmenterTrainConfig) -> float:
    warmup = max(1, min(cfg.warmup_steps, cfg.steps // 5))  # short runs warm up for a fifth of their steps
    if step < warmup:
        return (step + 1) / warmup
    t = (step - warmup) / max(1, cfg.steps - warmup)
    return 0.05 + 0.95 * 0.5 * (1.0 + math.cos(math.pi * min(t, 1.0)))


@torch.inference_mode()
def predict_masks(model: torch.nn.Module, images: np.ndarray, device: torch.device, batch_size: int = 128) -> np.ndarray:
    """uint8 (N, H, W, 3) -> bool (N, H, W) with ``model`` in eval mode (restores its mode)."""
    was_training = model.training
    model.eval()
    out = []
    for i in range(0, len(images), batch_size):
        logits = model(to_input_tensor(images[i:i + batch_size]).to(device))
        out.append((torch.sigmoid(logits[:, 0].float()) > THRESHOLD).cpu().numpy())
    model.train(was_training)
    return np.concatenate(out) if out else np.zeros((0, *images.shape[1:3]), bool)


def cpu_has_amx_bf16() -> bool:
    """Whether this CPU multiplies bf16 matrices in hardware (Intel AMX): bf16 autocast then trains ~2x faster."""
    try:
        return "amx_bf16" in Path("/proc/cpuinfo").read_text()
    except OSError:
        return False


def resolve_amp(amp: str, device: torch.device) -> bool:
    """``"auto"``: bf16 autocast on CUDA and on AMX CPUs; ``"on"`` / ``"off"`` force it."""
    if amp not in ("auto", "on", "off"):
        raise TrainError(f"amp must be auto, on or off, got {amp!r}")
    if amp == "auto":
        return device.type == "cuda" or (device.type == "cpu" and cpu_has_amx_bf16())
    return amp == "on"


def _write_curve_csv(history: list[dict[str, float]], path: Path) -> None:
    text = io.StringIO(newline="")
    writer = csv.DictWriter(text, fieldnames=CURVE_FIELDS)
    writer.writeheader()
    writer.writerows(history)
    atomic_write(path, text.getvalue().encode())


def _run_config(cfg: SegmenterTrainConfig, split: dict[str, list[str]]) -> dict[str, Any]:
    return {"format": VISION_RUN_FORMAT, "format_version": RUN_FORMAT_VERSION, "train": cfg.to_dict(),
            "env": env_config_for(cfg.image_size_px).to_dict(), "background_split": split}


def _identity(run_cfg: dict[str, Any]) -> dict[str, Any]:
    """What defines a vision run's results (``run.json``'s identity): its training config but the step count (which
    may grow on resume), and the photos it trains on."""
    return {**{k: v for k, v in run_cfg["train"].items() if k != "steps"}, "background_photos": run_cfg["background_split"]}


def _run_record(out_dir: Path) -> RunRecord:
    return RunRecord(out_dir, VISION_RUN_FORMAT, RUN_FORMAT_VERSION, "a segmenter training run", error=TrainError)


RESUME_HINT = "use the original options or another --out"


def _check_resume(saved: dict[str, Any], new: dict[str, Any]) -> None:
    """The resume check of runs made before ``run.json`` (their config is in ``checkpoint-latest.pt``)."""
    defaults = to_json(SegmenterTrainConfig())  # fields added since the run started take their defaults
    saved, new = json.loads(json.dumps(saved)), json.loads(json.dumps(new))
    check_same({**defaults, **saved["train"], "background_photos": saved["background_split"]},
               {**new["train"], "background_photos": new["background_split"]}, "--resume of a run made",
               RESUME_HINT, ignore=("steps",), error=TrainError)


def check_init_checkpoint(cfg: SegmenterTrainConfig) -> dict[str, Any]:
    """The checkpoint of ``cfg.init_checkpoint``, read and checked to be the same network at the same input size;
    :class:`TrainError` (one line) otherwise. ``train-vision`` calls it before anything is made or written."""
    try:
        init = read_checkpoint(Path(cfg.init_checkpoint))
    except CheckpointError as e:
        raise TrainError(f"--init: {e}") from None
    same = (init["architecture"] == cfg.architecture and dict(init["arch_kwargs"]) == cfg.arch_kwargs
            and tuple(init["input_hw"]) == (cfg.image_size_px, cfg.image_size_px))
    if not same:
        raise TrainError(f"--init {cfg.init_checkpoint}: it is {init['architecture']} {init['arch_kwargs']} at "
                         f"{tuple(init['input_hw'])} px, this run is {cfg.architecture} {cfg.arch_kwargs} at "
                         f"{cfg.image_size_px} px")
    return init


def _load_initial_weights(model: torch.nn.Module, cfg: SegmenterTrainConfig) -> None:
    """Start from the weights of ``cfg.init_checkpoint``; it must be the same network at the same input size."""
    model.load_state_dict(check_init_checkpoint(cfg)["state_dict"])


def train(cfg: SegmenterTrainConfig, out_dir: Path, *, resume: bool = False, backgrounds_dir: Path | None = None,
          device: torch.device | None = None, amp: str = "auto", progress: bool = True,
          tensorboard: Path | None = None) -> Path:
    """Train (or resume) into ``out_dir``; returns the path of the final ``model.pt``.

    ``device`` and ``amp`` (bf16 mixed precision, see :func:`resolve_amp`) are runtime choices: a run
    may be resumed on another device or precision. ``tensorboard``: a folder for TensorBoard logs (``tblog``).
    """
    with ArtifactFolder(Path(out_dir), "vision-run"), TBLogger(tensorboard) as tb:
        return _train(cfg, out_dir, resume=resume, backgrounds_dir=backgrounds_dir, device=device, amp=amp,
                      progress=progress, tb=tb)


def _dataloader_worker_init(worker_id: int) -> None:
    """A DataLoader worker ignores Ctrl-C (its parent handles it) and stays stoppable by SIGTERM."""
    ignore_interrupts_in_child(ignore_sigterm=False)


def _train(cfg: SegmenterTrainConfig, out_dir: Path, *, resume: bool = False, backgrounds_dir: Path | None = None,
          device: torch.device | None = None, amp: str = "auto", progress: bool = True,
          tb: TBLogger | None = None) -> Path:
    out_dir = Path(out_dir)
    tb = tb or TBLogger(None)
    device = device or default_device()
    use_amp = resolve_amp(amp, device)
    latest = out_dir / "checkpoint-latest.pt"
    split = split_names(backgrounds_dir)
    run_cfg = _run_config(cfg, split)
    if latest.exists() and not resume:
        raise TrainError(f"{out_dir} already holds a run; pass --resume to continue it or choose another --out")
    if resume and not latest.exists():
        raise TrainError(f"--resume: {latest} does not exist")
    out_dir.mkdir(parents=True, exist_ok=True)
    record = _run_record(out_dir)
    if not resume:  # a new run: the record of one that never reached its first checkpoint is replaced
        record.path.unlink(missing_ok=True)
        record.open(_identity(run_cfg), run_cfg, hint=RESUME_HINT)

    # make data: on-the-fly training stream, fixed validation set (training photos, other episode seeds)
    torch.manual_seed(cfg.seed)
    env_cfg = env_config_for(cfg.image_size_px)
    train_photos = load_backgrounds("train", backgrounds_dir)
    train_set = CompositeDataset(env_config=env_cfg, data=cfg.data, backgrounds=train_photos, stream="train",
                                 seed=cfg.seed, length=cfg.steps * cfg.batch_size)
    val_set = CompositeDataset(env_config=env_cfg, data=cfg.data, backgrounds=train_photos, stream="val",
                               seed=cfg.seed, length=cfg.val_images)
    val_images, val_masks = make_composites(val_set, cfg.val_images, desc="validation composites")
    val_set.close()

    # make network and optimizer, or restore them
    model = build_model(cfg.architecture, **cfg.arch_kwargs).to(device)
    optimizer = torch.optim.AdamW(model.parameters(), lr=cfg.lr, weight_decay=cfg.weight_decay)
    step, history, elapsed0 = 0, [], 0.0
    if cfg.init_checkpoint and not resume:
        _load_initial_weights(model, cfg)
    if resume:
        try:
            ckpt = read_checkpoint(latest)
        except CheckpointError as e:
            raise TrainError(str(e)) from None
        if record.exists():
            defaults = {k: v for k, v in to_json(SegmenterTrainConfig()).items() if k != "steps"}
            record.open(_identity(run_cfg), run_cfg, hint=RESUME_HINT, defaults=defaults)
        else:  # a run made before run.json: checked against its checkpoint's config, then recorded
            _check_resume(ckpt["config"], run_cfg)
            record.open(_identity(run_cfg), run_cfg, hint=RESUME_HINT)
        model.load_state_dict(ckpt["state_dict"])
        optimizer.load_state_dict(ckpt["optimizer"])
        step, history = int(ckpt["step"]), list(ckpt["history"])
        elapsed0 = history[-1]["elapsed_s"] if history else 0.0
    else:
        save_composite_grid([train_set.sample(i) for i in range(32)], out_dir / "composites.png")
        tb.image_file("train/composites", out_dir / "composites.png", step)

    def checkpoint(with_optimizer: bool) -> dict[str, Any]:
        return make_checkpoint(
            model, architecture=cfg.architecture, arch_kwargs=cfg.arch_kwargs,
            input_hw=(cfg.image_size_px, cfg.image_size_px), background_split=split, config=run_cfg, step=step,
            history=history, optimizer=optimizer.state_dict() if with_optimizer else None,
        )

    # loop: one step per batch of fresh composites; validate, plot and checkpoint periodically
    loader = DataLoader(
        train_set, batch_size=cfg.batch_size, sampler=range(step * cfg.batch_size, cfg.steps * cfg.batch_size),
        num_workers=cfg.workers, multiprocessing_context="spawn" if cfg.workers > 0 else None,
        worker_init_fn=_dataloader_worker_init if cfg.workers > 0 else None,
        pin_memory=device.type == "cuda",
    )
    model.train()
    t0, losses = time.perf_counter(), []
    bar = tqdm(total=cfg.steps, initial=step, desc=f"train-vision {cfg.architecture}", unit="step",
               disable=not progress)
    precision = "bf16 autocast" if use_amp else "fp32"
    print(f"train-vision: {count_parameters(model):,} parameters on {device} ({precision}), steps {step} -> {cfg.steps}")
    step_at_start = step
    with children_ignore_interrupts():  # the DataLoader's workers start here; Ctrl-C is this process's to handle
        batches = iter(loader)
    try:
        for x, y in batches:
            for group in optimizer.param_groups:
                group["lr"] = cfg.lr * _lr_factor(step, cfg)
            x, y = x.to(device, non_blocking=True), y.to(device, non_blocking=True)
            with torch.autocast(device_type=device.type, dtype=torch.bfloat16, enabled=use_amp):
                logits = model(x)
            loss = segmentation_loss(logits.float(), y, cfg.dice_weight, cfg.dice_per_image)
            optimizer.zero_grad(set_to_none=True)
            loss.backward()
            optimizer.step()
            losses.append(loss.item())
            step += 1
            bar.update(1)
            tb.scalars(step, {"train/loss": losses[-1], "train/lr": optimizer.param_groups[0]["lr"]})
            if step % cfg.val_every == 0 or step == cfg.steps:
                pred = predict_masks(model, val_images, device)
                m = pixel_metrics(pred, val_masks)
                tb.validation(step, m, val_images, pred, val_masks)
                history.append({"step": step, "elapsed_s": round(elapsed0 + time.perf_counter() - t0, 2),
                                "lr": optimizer.param_groups[0]["lr"], "train_loss": float(np.mean(losses)),
                                "val_precision": m["precision"], "val_recall": m["recall"], "val_iou": m["iou"]})
                losses = []
                bar.set_postfix(loss=f"{history[-1]['train_loss']:.3f}", P=f"{m['precision']:.3f}",
                                R=f"{m['recall']:.3f}")
                _write_curve_csv(history, out_dir / "curve.csv")
                save_training_curve(history, out_dir / "curve.png")
            if step % cfg.checkpoint_every == 0 or step == cfg.steps:
                write_checkpoint(checkpoint(with_optimizer=True), latest)
    except KeyboardInterrupt:  # keep what was learned since the last periodic checkpoint; resume with --resume
        if step > step_at_start:
            write_checkpoint(checkpoint(with_optimizer=True), latest)
        raise
    finally:
        bar.close()  # now, not at exit: the interrupted command's last line stays its own message
    train_set.close()
    final = out_dir / "model.pt"
    write_checkpoint(checkpoint(with_optimizer=False), final)
    if cfg.calibration_images:
        cal = calibrate_checkpoint(final, n_images=cfg.calibration_images, seed=cfg.seed, data=cfg.data,
                                   backgrounds_dir=backgrounds_dir, device=device)
        print(f"train-vision: threshold {cal['threshold']:.3f} (break-even on {cal['n_images']} validation "
              f"composites: precision {cal['precision']:.3f}, recall {cal['recall']:.3f})")
    return final
