"""How a training run uses the machine it runs on: precision, memory format, and cores for data and the step.

These are runtime choices, not part of a run's identity: a run may be resumed on another machine or precision.

- **bf16 autocast** (``amp="auto"``): on CUDA; on a CPU only where it multiplies bf16 in hardware
  (:func:`grasp_s2r.cpu.cpu_info`: AVX-512 BF16 or AMX) *and* a short probe of the real step shows it faster than
  fp32 (where oneDNN lacks a fast bf16 kernel for these small convolutions it is slower; the probe costs ~2 s).
- **channels_last** on a CPU: oneDNN's convolutions run faster on NHWC tensors (x1.3-1.8 for the U-Net's step).
- **cores**: the data worker(s) and the step on separate cores (:func:`grasp_s2r.cpu.split_cores`); the step's
  batch split over one replica of the network per core (:func:`step_replicas`, :mod:`grasp_s2r.replica_step`).
"""

from __future__ import annotations

import copy
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Self

import torch
from torch import nn

from grasp_s2r.cpu import available_cores, cpu_info, split_cores

AMP_CHOICES = ("auto", "on", "off")
BF16_MIN_GAIN = 1.05
"""``amp="auto"`` takes bf16 on a CPU only when its probed step is at least this much faster than fp32's."""


@dataclass(frozen=True)
class Precision:
    """The precision a run trains in, and why."""

    bf16: bool
    reason: str

    @property
    def name(self) -> str:
        return "bf16 autocast" if self.bf16 else "fp32"

    def describe(self) -> str:
        return f"{self.name} ({self.reason})"


def probe_bf16_gain(model: nn.Module, step: Callable[[nn.Module, bool], None], rounds: int = 4) -> float:
    """fp32's step time over bf16's for ``step(model, bf16)``: one warm-up each, then ``rounds`` of one fp32 and one
    bf16 step in turn, the fastest of each. Taking turns and the fastest keep another process's load (a data
    worker, a second training run) from deciding: it slows both settings' slow steps, not their fastest."""
    step(model, False)
    step(model, True)
    best = {False: float("inf"), True: float("inf")}
    for _ in range(rounds):
        for bf16 in (False, True):
            t = time.perf_counter()
            step(model, bf16)
            best[bf16] = min(best[bf16], time.perf_counter() - t)
    return best[False] / max(best[True], 1e-9)


def choose_precision(amp: str, device: torch.device, model: nn.Module | None = None,
                     step: Callable[[nn.Module, bool], None] | None = None) -> Precision:
    """bf16 autocast or fp32 for ``amp`` ("auto", "on", "off") on ``device``.

    On a CPU with bf16 in hardware, ``"auto"`` probes ``step(copy_of_model, bf16)`` (a forward + backward on a
    batch of the run's shape) both ways and keeps bf16 only where it is :data:`BF16_MIN_GAIN` faster; without
    ``model`` and ``step`` the hardware decides alone. ``"on"`` forces bf16 (emulated where the CPU lacks it).
    """
    if amp not in AMP_CHOICES:
        raise ValueError(f"amp must be one of {', '.join(AMP_CHOICES)}, got {amp!r}")
    if amp != "auto":
        return Precision(amp == "on", f"--amp {amp}")
    if device.type == "cuda":
        return Precision(True, "CUDA")
    if device.type != "cpu":
        return Precision(False, f"{device.type} device")
    cpu = cpu_info()
    if not cpu.bf16:
        return Precision(False, "this CPU has neither AVX-512 BF16 nor AMX")
    hardware = "AMX" if cpu.amx_bf16 else "AVX-512 BF16"
    if model is None or step is None:
        return Precision(True, hardware)
    gain = probe_bf16_gain(copy.deepcopy(model), step)
    return Precision(gain >= BF16_MIN_GAIN, f"{hardware}; probed step bf16 {gain:.2f}x fp32's speed")


def data_and_step_cores(device: torch.device, workers: int | None,
                        threads: int | None) -> tuple[int, int | None]:
    """(DataLoader workers, torch threads of the step or None to leave torch's) for a run on ``device``.

    ``workers`` None = automatic. On a CPU: :func:`grasp_s2r.cpu.split_cores` (one worker, the step on the cores it
    leaves; given ``threads`` win). On an accelerator the step does not use the CPU: up to 4 workers make data on
    its cores, and torch's threads are left as they are unless ``threads`` is given.
    """
    if device.type != "cpu":
        return (min(4, max(0, available_cores() - 1)) if workers is None else workers), threads
    workers, step_threads = split_cores(available_cores(), workers)
    return workers, threads or step_threads


def step_replicas(device: torch.device, threads: int | None, replicas: int | None) -> int:
    """How many replicas of the network share the step's batch (:class:`grasp_s2r.replica_step.ReplicaStep`).

    ``replicas`` None = automatic: on a CPU, one per core, each on one torch thread (the data worker shares the
    cores: it is idle most of the time, and the replicas do not wait on each other's threads), unless ``threads``
    asks for torch's own threads instead; on an accelerator, 1.
    """
    if replicas is not None:
        if replicas < 1:
            raise ValueError(f"replicas must be >= 1, got {replicas}")
        return replicas
    return available_cores() if device.type == "cpu" and threads is None else 1


def use_channels_last(device: torch.device) -> bool:
    """NHWC tensors for the convolutions: on the CPU (oneDNN); CUDA keeps its default."""
    return device.type == "cpu"


def to_memory_format(x: torch.Tensor, channels_last: bool) -> torch.Tensor:
    """``x`` (N, C, H, W) in channels_last when asked, else unchanged."""
    return x.contiguous(memory_format=torch.channels_last) if channels_last and x.dim() == 4 else x


class StepThreads:
    """Sets torch's CPU threads for the step while the block runs, and restores them after (a pipeline goes on
    with other stages)."""

    def __init__(self, threads: int | None):
        self.threads = threads
        self._saved = 0

    def __enter__(self) -> Self:
        self._saved = torch.get_num_threads()
        if self.threads:
            torch.set_num_threads(self.threads)
        return self

    def __exit__(self, *exc: object) -> None:
        torch.set_num_threads(self._saved)
