"""Segmenter training speed on this CPU: today's settings and the new ones side by side, in one run.

    python benchmarks/bench_train_vision.py [--steps 300] [--no-amx] [--skip-end-to-end]

Prints, and writes to ``runs/benchmarks/bench_train_vision[-noamx].json`` (``--save``: ``benchmarks/results/``;
``-noamx`` on a CPU without AMX, or with ``--no-amx``):
- the CPU: its name, cores, AVX-512 BF16 and AMX as oneDNN may use them;
- composition, one core: composites/s of the training recipe (render shared by ``renders_per_view`` composites,
  background, paste, augment) and crops/s (``crops_per_composite`` 32 px crops cut from each);
- the network's training step (forward, backward, AdamW) on one thread, images/s, for each of: 64 px images fp32
  (NCHW, batch 32: the old default), channels_last, bf16 autocast, both; 32 px crops (batch 128) likewise; then on
  all cores, 32 px crops channels_last: torch's intra-op threads against one replica of the network per core;
- ``train-vision`` end to end on all cores (``grasp_s2r.vision.training.train.train`` from random weights, ``--steps`` steps,
  the whole call timed: validation composites, worker start, precision probe, validation and checkpoints included):
  *old* = whole 64 px images, composites made in-process, torch's threads, bf16 only with AMX (the settings before
  crop training); *new* = the defaults (32 px crops then 10 % of the steps on whole images, composites in a worker
  process, the step's batch split over one replica of the network per core, each on one thread, channels_last, bf16
  where a probe finds it faster).

Images/s counts the images the step consumes (a crop is one image, a quarter of a whole image's pixels); pixels/s is
printed beside it. ``--no-amx`` caps oneDNN below AMX (``ONEDNN_MAX_CPU_ISA=AVX512_CORE_BF16``): the CPU as one
without AMX (AVX-512 BF16 only) runs it. The last line is ``end-to-end speedup: N.N×``.
"""

from __future__ import annotations

import argparse
import sys

import isa_cap

isa_cap.cap_if_asked()  # before torch loads oneDNN; spawned DataLoader workers inherit it

import tempfile
import time
from pathlib import Path

import numpy as np
import torch
from results_io import add_save_argument, write_results

from grasp_s2r.cpu import cpu_info
from grasp_s2r.replica_step import ReplicaStep
from grasp_s2r.train_speed import StepThreads
from grasp_s2r.vision.images.backgrounds import load_backgrounds
from grasp_s2r.vision.images.crops import CropConfig, crop_windows, cut
from grasp_s2r.vision.images.dataset import TRAINING_DATA, CompositeDataset, env_config_for
from grasp_s2r.vision.networks.model import build_model
from grasp_s2r.vision.training.train import train
from grasp_s2r.vision.training.train_config import SegmenterTrainConfig, segmentation_loss


def _parse() -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--steps", type=int, default=300, help="steps of each end-to-end train-vision run (default 300)")
    p.add_argument("--step-repeats", type=int, default=12, help="timed steps per step setting (default 12)")
    p.add_argument("--composites", type=int, default=300, help="composites timed for composition (default 300)")
    p.add_argument("--skip-end-to-end", action="store_true", help="only composition and the step")
    p.add_argument("--json", default=None, help="write the figures here (default: runs/benchmarks/...; with --save: "
                   "benchmarks/results/...)")
    add_save_argument(p)
    isa_cap.add_argument(p)
    return p.parse_args()


STEP_SETTINGS = (  # (name, side px, batch, channels_last, bf16)
    ("64 px, fp32, batch 32 (old default)", 64, 32, False, False),
    ("64 px, channels_last", 64, 32, True, False),
    ("64 px, bf16 autocast", 64, 32, False, True),
    ("64 px, channels_last + bf16", 64, 32, True, True),
    ("32 px crops, fp32, batch 128", 32, 128, False, False),
    ("32 px crops, channels_last", 32, 128, True, False),
    ("32 px crops, bf16 autocast", 32, 128, False, True),
    ("32 px crops, channels_last + bf16", 32, 128, True, True),
)


def composition_rates(n: int) -> dict[str, float]:
    """Composites/s and crops/s of the training recipe on one core (in-process, one torch thread)."""
    crop = CropConfig()
    ds = CompositeDataset(env_config=env_config_for(64), data=TRAINING_DATA, backgrounds=load_backgrounds("train"),
                          stream="train", seed=123, length=n + 1)
    ds.sample(0)  # connect and load the scene outside the timing
    rng = np.random.default_rng(0)
    t0 = time.perf_counter()
    for i in range(1, n + 1):
        rgb, mask = ds.sample(i)
        corners = crop_windows(mask, crop, rng)
        cut(rgb, corners, crop.size_px), cut(mask, corners, crop.size_px)
    seconds = time.perf_counter() - t0
    ds.close()
    return {"composites_per_s": n / seconds, "crops_per_s": n * crop.per_composite / seconds,
            "crops_per_composite": crop.per_composite}


def step_rate(side: int, batch: int, channels_last: bool, bf16: bool, repeats: int) -> float:
    """Images/s of the U-Net's full training step on one thread."""
    torch.manual_seed(0)
    model = build_model("unet", width=12, depth=3)
    x = torch.randn(batch, 3, side, side)
    y = (torch.rand(batch, 1, side, side) > 0.97).float()
    if channels_last:
        model, x = model.to(memory_format=torch.channels_last), x.contiguous(memory_format=torch.channels_last)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
    times = []
    for i in range(repeats + 2):
        t = time.perf_counter()
        with torch.autocast("cpu", dtype=torch.bfloat16, enabled=bf16):
            logits = model(x)
        loss = segmentation_loss(logits.float(), y, 1.0)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        if i >= 2:
            times.append(time.perf_counter() - t)
    return batch / float(np.median(times))


def step_rate_all_cores(cores: int, replicas: bool, repeats: int) -> float:
    """Images/s of the step on 32 px crops (batch 128, channels_last) on ``cores``: torch's intra-op threads, or
    one replica of the network per core (:class:`grasp_s2r.replica_step.ReplicaStep`)."""
    torch.manual_seed(0)
    model = build_model("unet", width=12, depth=3).to(memory_format=torch.channels_last)
    x = torch.randn(128, 3, 32, 32).contiguous(memory_format=torch.channels_last)
    y = (torch.rand(128, 1, 32, 32) > 0.97).float()
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
    step = ReplicaStep(model, cores if replicas else 1, lambda logits, t: segmentation_loss(logits, t, 1.0))
    times = []
    with StepThreads(1 if replicas else cores):
        for i in range(repeats + 2):
            t = time.perf_counter()
            step(x, y)
            opt.step()
            if i >= 2:
                times.append(time.perf_counter() - t)
    step.close()
    return 128 / float(np.median(times))


def end_to_end(name: str, cfg: SegmenterTrainConfig, amp: str, threads: int | None,
               replicas: int | None) -> dict[str, float]:
    """One ``train`` call from random weights, timed whole; images and pixels the step consumed per second."""
    with tempfile.TemporaryDirectory() as tmp:
        t0 = time.perf_counter()
        train(cfg, Path(tmp) / "run", amp=amp, threads=threads, replicas=replicas, progress=False)
        seconds = time.perf_counter() - t0
    crop_steps = cfg.crop_steps
    images = crop_steps * cfg.batch_size * cfg.crops_per_composite + (cfg.steps - crop_steps) * cfg.batch_size
    pixels = (crop_steps * cfg.batch_size * cfg.crops_per_composite * cfg.crop_px**2
              + (cfg.steps - crop_steps) * cfg.batch_size * cfg.image_size_px**2)
    out = {"seconds": seconds, "steps": cfg.steps, "images_per_s": images / seconds,
           "megapixels_per_s": pixels / seconds / 1e6, "steps_per_s": cfg.steps / seconds}
    print(f"  {name:<44} {out['images_per_s']:7.0f} img/s  {out['megapixels_per_s']:5.2f} Mpx/s  "
          f"{out['steps_per_s']:5.2f} steps/s  ({seconds:.0f} s)", flush=True)
    return out


def main() -> None:
    args = _parse()
    cpu = cpu_info()
    print(f"CPU: {cpu.describe()}; torch {torch.__version__}", flush=True)
    figures: dict = {"cpu": {"name": cpu.name, "cores": cpu.cores, "avx512_bf16": cpu.avx512_bf16,
                             "amx_bf16": cpu.amx_bf16, "isa_cap": cpu.isa_cap}}

    torch.set_num_threads(1)
    comp = composition_rates(args.composites)
    figures["composition_one_core"] = comp
    print(f"composition, one core: {comp['composites_per_s']:.0f} composites/s = {comp['crops_per_s']:.0f} crops/s "
          f"({comp['crops_per_composite']} crops of 32 px each)", flush=True)

    print("training step, one thread (forward, backward, AdamW):", flush=True)
    steps = {}
    for name, side, batch, cl, bf16 in STEP_SETTINGS:
        steps[name] = step_rate(side, batch, cl, bf16, args.step_repeats)
        print(f"  {name:<40} {steps[name]:6.0f} img/s", flush=True)
    figures["step_one_thread_images_per_s"] = steps
    cores = {"torch threads": step_rate_all_cores(cpu.cores, False, args.step_repeats),
             "one replica per core": step_rate_all_cores(cpu.cores, True, args.step_repeats)}
    print(f"training step on {cpu.cores} cores, 32 px crops, channels_last, no data worker:", flush=True)
    for name, rate in cores.items():
        print(f"  {name:<40} {rate:6.0f} img/s", flush=True)
    figures["step_all_cores_images_per_s"] = cores
    torch.set_num_threads(cpu.cores)

    if not args.skip_end_to_end:
        print(f"train-vision end to end, {cpu.cores} cores, {args.steps} steps from random weights:", flush=True)
        old_cfg = SegmenterTrainConfig(steps=args.steps, crop_px=0, full_size_share=0.0, workers=0,
                                       val_every=args.steps, checkpoint_every=args.steps)
        new_cfg = SegmenterTrainConfig(steps=args.steps, val_every=args.steps, checkpoint_every=args.steps)
        old = end_to_end("old: 64 px, in-process, bf16 only with AMX", old_cfg,
                         "on" if cpu.amx_bf16 else "off", None, 1)
        new = end_to_end("new: defaults (crops, worker, replicas, channels_last)", new_cfg, "auto", None, None)
        figures["end_to_end"] = {"old": old, "new": new, "speedup_images": new["images_per_s"] / old["images_per_s"],
                                 "speedup_pixels": new["megapixels_per_s"] / old["megapixels_per_s"]}
    write_results(args.json, "bench_train_vision", figures, args, "" if cpu.amx_bf16 else "noamx")
    if "end_to_end" in figures:
        e = figures["end_to_end"]
        print(f"pixels the step consumed: {e['speedup_pixels']:.1f}× as many per second")
        print(f"end-to-end speedup: {e['speedup_images']:.1f}×")


if __name__ == "__main__":
    sys.exit(main())
