"""Training of the segmentation network on composites made on the fly; resumable.

A run from random weights trains on crops of the composites (``crop_px``, :mod:`grasp_s2r.vision.images.crops`) and ends
with a short phase on whole images (``full_size_share``); a fine-tune trains on whole images. On a CPU it runs
channels_last, in bf16 where that pays, with the composites made in a worker process on another core
(:mod:`grasp_s2r.train_speed`).

Run folder layout::

    OUT/run.json               the run's identity (checked on --resume, ``grasp_s2r.run_record`` as DAgger's) and
                               config: SegmenterTrainConfig + DataConfig + EnvConfig + background split (+ the
                               steps' fit to ``time_budget_s``, ``budget``: :mod:`budget`)
    OUT/checkpoint-latest.pt   weights + optimizer, written atomically every ``checkpoint_every`` steps
    OUT/model.pt               final weights (the file ``eval-vision --model`` and the controller load)
    OUT/curve.csv, curve.png   training loss and validation precision / recall / IoU per step
    OUT/composites.png         the first training composites with their masks, to look at
    OUT/mined_crops.json, .png with ``--mined-crop-prob``: the photo crops the starting segmenter fired on
    OUT/runtime.json           per session (a resume starts one): device, precision and why, cores, the CPU
                               (:mod:`sessions`)
"""

from __future__ import annotations

import csv
import io
import json
import time
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np
import torch
from torch.utils.data import DataLoader
from tqdm import tqdm

from grasp_s2r.artifacts import ArtifactFolder
from grasp_s2r.configs import check_same, to_json, with_defaults
from grasp_s2r.cpu import cpu_info
from grasp_s2r.devices import default_device
from grasp_s2r.drawing import save_composite_grid, save_training_curve
from grasp_s2r.files import atomic_write
from grasp_s2r.interrupts import children_ignore_interrupts, dataloader_worker_init
from grasp_s2r.replica_step import ReplicaStep
from grasp_s2r.run_record import RunRecord
from grasp_s2r.tblog import TBLogger
from grasp_s2r.train_speed import (
    AMP_CHOICES,
    StepThreads,
    choose_precision,
    data_and_step_cores,
    step_replicas,
    to_memory_format,
    use_channels_last,
)
from grasp_s2r.vision.evaluation.metrics import pixel_metrics
from grasp_s2r.vision.images.backgrounds import load_backgrounds, photo_weights, split_names
from grasp_s2r.vision.images.crops import CropDataset, flatten_crops
from grasp_s2r.vision.images.dataset import CompositeDataset, make_composites
from grasp_s2r.vision.images.mined import run_mined_crops
from grasp_s2r.vision.networks.model import build_model, count_parameters, to_input_tensor
from grasp_s2r.vision.networks.segmenter import (
    THRESHOLD,
    CheckpointError,
    make_checkpoint,
    read_checkpoint,
    write_checkpoint,
)
from grasp_s2r.vision.training.budget import StepBudget
from grasp_s2r.vision.training.calibrate import calibrate_checkpoint
from grasp_s2r.vision.training.sessions import RUNTIME_FILE, data_text, record_session
from grasp_s2r.vision.training.starting_weights import load_initial_weights
from grasp_s2r.vision.training.train_config import SegmenterTrainConfig, TrainError, lr_factor

VISION_RUN_FORMAT = "grasp_s2r.vision_run"
RUN_FORMAT_VERSION = 1
CURVE_FIELDS = ("step", "elapsed_s", "lr", "train_loss", "val_precision", "val_recall", "val_iou")


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


def _write_curve_csv(history: list[dict[str, float]], path: Path) -> None:
    text = io.StringIO(newline="")
    writer = csv.DictWriter(text, fieldnames=CURVE_FIELDS)
    writer.writeheader()
    writer.writerows(history)
    atomic_write(path, text.getvalue().encode())


def _run_config(cfg: SegmenterTrainConfig, split: dict[str, list[str]]) -> dict[str, Any]:
    return {"format": VISION_RUN_FORMAT, "format_version": RUN_FORMAT_VERSION, "train": cfg.to_dict(),
            "env": cfg.env_config().to_dict(), "background_split": split}


RUNTIME_FIELDS = ("steps", "workers", "val_every", "checkpoint_every")
"""Training-config fields that are not part of a run's identity: the step count (which may grow on resume), how
the data is made (the same items either way), and how often it validates and checkpoints (the same weights either
way; ``--val-every`` is capped at ``--steps``, so a short run resumed with more steps asks another one)."""
LEGACY_DEFAULTS = {"crop_px": 0, "full_size_share": 0.0}
"""The values of identity fields added since older runs were made that reproduce those runs (they trained on whole
images at every step): a resumed old run is checked, and continues, with them."""


def _identity(run_cfg: dict[str, Any]) -> dict[str, Any]:
    """What defines a vision run's results (``run.json``'s identity): its training config but
    :data:`RUNTIME_FIELDS`, and the photos it trains on."""
    train_cfg = {k: v for k, v in run_cfg["train"].items() if k not in RUNTIME_FIELDS}
    return {**train_cfg, "background_photos": run_cfg["background_split"]}


def _identity_defaults() -> dict[str, Any]:
    """Identity fields a stored record may lack, with the values that reproduce the runs made before them."""
    defaults = {k: v for k, v in to_json(SegmenterTrainConfig()).items() if k not in RUNTIME_FIELDS}
    return {**defaults, **LEGACY_DEFAULTS}


def _run_record(out_dir: Path) -> RunRecord:
    return RunRecord(out_dir, VISION_RUN_FORMAT, RUN_FORMAT_VERSION, "a segmenter training run", error=TrainError)


RESUME_HINT = "use the original options or another --out"


def _check_resume(saved: dict[str, Any], new: dict[str, Any]) -> None:
    """The resume check of runs made before ``run.json`` (their config is in ``checkpoint-latest.pt``)."""
    saved, new = json.loads(json.dumps(saved)), json.loads(json.dumps(new))
    check_same({**with_defaults(saved["train"], _identity_defaults()), "background_photos": saved["background_split"]},
               {**new["train"], "background_photos": new["background_split"]}, "--resume of a run made",
               RESUME_HINT, ignore=RUNTIME_FIELDS, error=TrainError)


def train(cfg: SegmenterTrainConfig, out_dir: Path, *, resume: bool = False, backgrounds_dir: Path | None = None,
          device: torch.device | None = None, amp: str = "auto", threads: int | None = None,
          replicas: int | None = None, progress: bool = True, tensorboard: Path | None = None) -> Path:
    """Train (or resume) into ``out_dir``; returns the path of the final ``model.pt``.

    ``device``, ``amp`` (bf16 mixed precision: :func:`grasp_s2r.train_speed.choose_precision`), ``threads``
    (torch threads of the step; None = the cores the data workers leave) and ``replicas`` (of the network sharing the
    step's batch, :func:`grasp_s2r.train_speed.step_replicas`) are runtime choices: a run may be resumed
    on another device or precision. ``tensorboard``: a folder for TensorBoard logs (``tblog``).
    """
    with ArtifactFolder(Path(out_dir), "vision-run"), TBLogger(tensorboard) as tb:
        return _train(cfg, out_dir, resume=resume, backgrounds_dir=backgrounds_dir, device=device, amp=amp,
                      threads=threads, replicas=replicas, progress=progress, tb=tb)


def check_run(cfg: SegmenterTrainConfig, out_dir: Path, *, backgrounds_dir: Path | None = None) -> None:
    """Raise :class:`TrainError` unless ``out_dir``'s ``run.json`` records a run of ``cfg`` on these photos (the
    identity ``--resume`` checks; the step count is not part of it); writes nothing."""
    record = _run_record(Path(out_dir))
    if not record.exists():
        raise TrainError(f"{out_dir} holds no record of the run that made it ({record.path.name}); {RESUME_HINT}")
    run_cfg = _run_config(cfg, split_names(backgrounds_dir, cfg.hold_out_photos))
    record.check(_identity(run_cfg), hint=RESUME_HINT, defaults=_identity_defaults(), ignore=RUNTIME_FIELDS)


def _probe_step(cfg: SegmenterTrainConfig, step: int, device: torch.device,
                channels_last: bool) -> Callable[[torch.nn.Module, bool], None] | None:
    """A forward + backward on a random batch of the shape of step ``step``'s, for the precision probe."""
    if step >= cfg.steps:
        return None
    crops = step < cfg.crop_steps
    n = cfg.batch_size * (cfg.crops_per_composite if crops else 1)
    side = cfg.crop_px if crops else cfg.input_px
    gen = torch.Generator().manual_seed(0)
    x = to_memory_format(torch.randn(n, 3, side, side, generator=gen).to(device), channels_last)
    y = (torch.rand(n, 1, side, side, generator=gen) > 0.97).float().to(device)

    def step(model: torch.nn.Module, bf16: bool) -> None:
        with torch.autocast(device_type=device.type, dtype=torch.bfloat16, enabled=bf16):
            logits = model(x)
        model.zero_grad(set_to_none=True)
        cfg.loss(logits.float(), y).backward()
    return step


def _train(cfg: SegmenterTrainConfig, out_dir: Path, *, resume: bool = False, backgrounds_dir: Path | None = None,
          device: torch.device | None = None, amp: str = "auto", threads: int | None = None,
          replicas: int | None = None, progress: bool = True, tb: TBLogger | None = None) -> Path:
    start_s = time.perf_counter()  # the clock of the run's time budget
    out_dir = Path(out_dir)
    tb = tb or TBLogger(None)
    device = device or default_device()
    if amp not in AMP_CHOICES:
        raise TrainError(f"amp must be one of {', '.join(AMP_CHOICES)}, got {amp!r}")
    latest = out_dir / "checkpoint-latest.pt"
    split = split_names(backgrounds_dir, cfg.hold_out_photos)
    run_cfg = _run_config(cfg, split)
    if latest.exists() and not resume:
        raise TrainError(f"{out_dir} already holds a run; pass --resume to continue it or choose another --out")
    if resume and not latest.exists():
        raise TrainError(f"--resume: {latest} does not exist")
    out_dir.mkdir(parents=True, exist_ok=True)
    record = _run_record(out_dir)
    if not resume:  # a new run: the record of one that never reached its first checkpoint is replaced
        record.path.unlink(missing_ok=True)
        (out_dir / RUNTIME_FILE).unlink(missing_ok=True)
        record.open(_identity(run_cfg), run_cfg, hint=RESUME_HINT)

    # make network and optimizer, or restore them
    torch.manual_seed(cfg.seed)
    model = build_model(cfg.architecture, **cfg.arch_kwargs).to(device)
    optimizer = torch.optim.AdamW(model.parameters(), lr=cfg.lr, weight_decay=cfg.weight_decay)
    step, history, elapsed0, losses_carried = 0, [], 0.0, []
    if cfg.init_checkpoint and not resume:
        load_initial_weights(model, cfg)
    if resume:
        try:
            ckpt = read_checkpoint(latest)
        except CheckpointError as e:
            raise TrainError(str(e)) from None
        if cfg.time_budget_s and "budget" in ckpt["config"]:  # fitted to its budget: a resume keeps the fit
            cfg = replace(cfg, steps=ckpt["config"]["budget"]["steps"])
            run_cfg = {**_run_config(cfg, split), "budget": ckpt["config"]["budget"]}
        if record.exists():
            record.open(_identity(run_cfg), run_cfg, hint=RESUME_HINT, defaults=_identity_defaults(),
                        ignore=RUNTIME_FIELDS)
        else:  # a run made before run.json: checked against its checkpoint's config, then recorded
            _check_resume(ckpt["config"], run_cfg)
            record.open(_identity(run_cfg), run_cfg, hint=RESUME_HINT)
        model.load_state_dict(ckpt["state_dict"])
        optimizer.load_state_dict(ckpt["optimizer"])
        step, history = int(ckpt["step"]), list(ckpt["history"])
        progress_saved = ckpt.get("progress") or {}  # absent from checkpoints of older versions
        elapsed0 = float(progress_saved.get("elapsed_s", history[-1]["elapsed_s"] if history else 0.0))
        losses_carried = list(progress_saved.get("losses_since_row", []))
    budget = StepBudget(cfg.time_budget_s, cfg.steps, start_s, first_step=step) \
        if cfg.time_budget_s and "budget" not in run_cfg else None

    # how this machine runs it: cores for data and step, memory format, precision (probed on a batch of the first
    # step's shape before the workers start)
    try:
        replicas = step_replicas(device, threads, replicas)
    except ValueError as e:
        raise TrainError(str(e)) from None
    workers, threads = data_and_step_cores(device, cfg.workers, threads)
    threads = 1 if replicas > 1 else threads
    channels_last = use_channels_last(device)
    model = model.to(memory_format=torch.channels_last) if channels_last else model
    with StepThreads(threads):
        precision = choose_precision(amp, device, model, _probe_step(cfg, step, device, channels_last))
    print(f"train-vision: {count_parameters(model):,} parameters on {device} ({precision.describe()}), "
          f"{data_text(workers, threads, replicas, device)}; steps {step} -> {cfg.steps}"
          + (f", crops of {cfg.crop_px} px up to step {cfg.crop_steps}" if cfg.crop_steps else "")
          + (f" at most, fitted to {cfg.time_budget_s / 60:.1f} min at step {budget.timed[1]}" if budget else ""))
    if device.type == "cpu":
        print(f"train-vision: CPU {cpu_info().describe()}")
    record_session(out_dir, {"from_step": step, "device": str(device), "precision": precision.name,
                             "precision_reason": precision.reason, "channels_last": channels_last,
                             "workers": workers, "threads": threads, "replicas": replicas,
                             "cpu": cpu_info().describe() if device.type == "cpu" else None})

    # make data: the on-the-fly training stream (crops, then whole images: composite i at step i // batch_size) in
    # the workers, started first so that they load while this process makes the fixed validation set (training
    # photos, other episode seeds)
    env_cfg = cfg.env_config()
    train_photos = load_backgrounds("train", backgrounds_dir, cfg.hold_out_photos)
    weights = photo_weights("train", backgrounds_dir, cfg.embedded_photo_share, cfg.hold_out_photos)
    mined = run_mined_crops(out_dir, cfg.init_checkpoint, train_photos, share=cfg.data.mined_crop_prob,
                            image_px=cfg.input_px, crops_per_photo=cfg.mine_crops_per_photo, seed=cfg.seed,
                            device=str(device), progress=progress)
    train_set = CompositeDataset(env_config=env_cfg, data=cfg.data, backgrounds=train_photos, stream="train",
                                 seed=cfg.seed, length=cfg.steps * cfg.batch_size, photo_weights=weights,
                                 mined=mined)
    dataset = CropDataset(train_set, cfg.crop_config, crop_items=cfg.crop_steps * cfg.batch_size) \
        if cfg.crop_steps else train_set
    loader = DataLoader(
        dataset, batch_size=cfg.batch_size, sampler=range(step * cfg.batch_size, cfg.steps * cfg.batch_size),
        num_workers=workers, multiprocessing_context="spawn" if workers > 0 else None,
        worker_init_fn=dataloader_worker_init if workers > 0 else None, pin_memory=device.type == "cuda",
    )
    with children_ignore_interrupts():  # the workers start here; Ctrl-C is this process's to handle
        batches = iter(loader)
    val_set = CompositeDataset(env_config=env_cfg, data=cfg.data, backgrounds=train_photos, stream="val",
                               seed=cfg.seed, length=cfg.val_images, photo_weights=weights, mined=mined)
    val_images, val_masks = make_composites(val_set, cfg.val_images, desc="validation composites",
                                           progress=progress)
    val_set.close()
    if not resume:
        save_composite_grid([train_set.sample(i) for i in range(32)], out_dir / "composites.png")
        tb.image_file("train/composites", out_dir / "composites.png", step)

    def checkpoint(with_optimizer: bool) -> dict[str, Any]:
        since_row = step - (history[-1]["step"] if history else 0)  # an interrupt may fall between a step's
        progress_now = {"elapsed_s": elapsed0 + time.perf_counter() - t0,  # loss and its count, or a row and its reset
                        "losses_since_row": losses[:max(since_row, 0)]}
        return make_checkpoint(
            model, architecture=cfg.architecture, arch_kwargs=cfg.arch_kwargs,
            input_hw=(cfg.input_px, cfg.input_px), background_split=split, config=run_cfg, step=step,
            history=history, optimizer=optimizer.state_dict() if with_optimizer else None,
            progress=progress_now if with_optimizer else None,
        )

    # loop: one step per batch of fresh composites; validate, plot and checkpoint periodically
    model.train()
    forward_backward = ReplicaStep(model, replicas, cfg.loss, precision.bf16)
    t0, losses = time.perf_counter(), losses_carried  # a resume's first curve row averages the steps before it too
    bar = tqdm(total=cfg.steps, initial=step, desc=f"train-vision {cfg.architecture}", unit="step",
               disable=not progress)
    step_at_start = step
    try:
        with StepThreads(threads):
            for x, y in batches:
                x, y = flatten_crops(x, y)
                for group in optimizer.param_groups:
                    group["lr"] = cfg.lr * lr_factor(step, cfg)
                x = to_memory_format(x.to(device, non_blocking=True), channels_last)
                losses.append(forward_backward(x, y.to(device, non_blocking=True)))
                optimizer.step()
                step += 1
                bar.update(1)
                if budget and (fit := budget.after_step(step, time.perf_counter())):
                    cfg = replace(cfg, steps=fit.steps)
                    run_cfg = {**_run_config(cfg, split), "budget": fit.to_dict()}
                    record.open(_identity(run_cfg), run_cfg, hint=RESUME_HINT, defaults=_identity_defaults(),
                                ignore=RUNTIME_FIELDS)
                    bar.total = cfg.steps
                    bar.write(f"train-vision: time budget: {fit.describe()}")
                tb.scalars(step, {"train/loss": losses[-1], "train/lr": optimizer.param_groups[0]["lr"]})
                if step % cfg.val_every == 0 or step == cfg.steps:
                    pred = predict_masks(model, val_images, device)
                    m = pixel_metrics(pred, val_masks)
                    tb.validation(step, m, val_images, pred, val_masks)
                    history.append({"step": step, "elapsed_s": round(elapsed0 + time.perf_counter() - t0, 2),
                                    "lr": optimizer.param_groups[0]["lr"], "train_loss": float(np.mean(losses)),
                                    "val_precision": m["precision"], "val_recall": m["recall"],
                                    "val_iou": m["iou"]})
                    losses = []
                    bar.set_postfix(loss=f"{history[-1]['train_loss']:.3f}", P=f"{m['precision']:.3f}",
                                    R=f"{m['recall']:.3f}")
                    _write_curve_csv(history, out_dir / "curve.csv")
                    save_training_curve(history, out_dir / "curve.png", run_cfg)
                if step % cfg.checkpoint_every == 0 or step == cfg.steps:
                    write_checkpoint(checkpoint(with_optimizer=True), latest)
                if step >= cfg.steps:  # the data runs on to the steps asked when a budget cut them
                    break
    except KeyboardInterrupt:  # keep what was learned since the last periodic checkpoint; resume with --resume
        if step > step_at_start:
            write_checkpoint(checkpoint(with_optimizer=True), latest)
        raise
    finally:
        forward_backward.close()
        bar.close()  # now, not at exit: the interrupted command's last line stays its own message
        del batches  # the loop stops on its last batch, before the iterator ends: its workers go now, not at exit
    train_set.close()
    final = out_dir / "model.pt"
    write_checkpoint(checkpoint(with_optimizer=False), final)
    if cfg.calibration_images:
        cal = calibrate_checkpoint(final, n_images=cfg.calibration_images, seed=cfg.seed, data=cfg.data,
                                   backgrounds_dir=backgrounds_dir, device=device, progress=progress)
        print(f"train-vision: threshold {cal['threshold']:.3f} (break-even on {cal['n_images']} validation "
              f"composites: precision {cal['precision']:.3f}, recall {cal['recall']:.3f})")
    return final
