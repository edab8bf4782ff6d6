"""Every size a command is given, bounded before any work starts (issue 25): the one table of the ranges of the
integer options (documented in docs/commands.md, "Ranges"), what the machine can hold (memory estimated from image
size, batch and count), worker processes and threads capped at the cores (the cap reported on stderr), and no
empty path. :func:`check` runs on the parsed arguments of every command before the command's own code
(``grasp_s2r.cli.main``); a refusal is a :class:`~grasp_s2r.options.UsageError`: one line, exit 2, nothing
written.

Float options (learning rates, probabilities, angles) are checked by the configs they set.

Imports the standard library, :mod:`grasp_s2r.options`, :mod:`grasp_s2r.cpu` and :mod:`grasp_s2r.control.seeds`; a command's config module (for the
defaults of the options left out) only when its command runs.
"""

from __future__ import annotations

import argparse
import functools
import importlib
import math
import os
import sys
from collections.abc import Sequence

from grasp_s2r.control.seeds import ROUND_STRIDE
from grasp_s2r.cpu import available_cores
from grasp_s2r.options import UsageError, default_of

BIG = 10_000_000
RANGES: dict[str, tuple[int, int]] = {
    "--episodes": (1, 100_000), "--demo-episodes": (1, 100_000), "--episodes-per-round": (1, ROUND_STRIDE),
    "--eval-episodes": (1, 100_000), "--video": (0, 100), "--rounds": (1, 1000), "--dagger-rounds": (1, 1000),
    "--beta-rampdown": (1, 1000), "--max-steps": (1, 10_000), "--blind-cutoff": (0, 10_000),
    "--seed": (0, 2**31 - 1), "--resolution": (8, 1024), "--image-size": (16, 1024), "--width": (1, 512),
    "--steps": (1, BIG), "--train-steps": (1, BIG), "--vision-steps": (1, BIG), "--val-every": (1, BIG),
    "--batch-size": (1, 4096), "--n-images": (1, 100_000), "--val-images": (1, 100_000),
    "--heldout-images": (1, 100_000), "--calibration-images": (0, 100_000), "--crop-px": (0, 1024),
    "--crops-per-composite": (1, 256), "--ray-actors": (0, 1024), "--workers": (0, 100_000),
    "--threads": (1, 100_000), "--replicas": (1, 100_000),
}
"""Option -> (least, most) accepted, the same for every command that has it (``--workers 0``: in-process, where a
command allows it; its own parser refuses it elsewhere), but for :data:`COMMAND_RANGES`."""
COMMAND_RANGES: dict[str, dict[str, tuple[int, int]]] = {"adapt": {"--rounds": (0, 1000)}}
"""Command -> option -> range where a command reads an option's 0 differently (``adapt --rounds 0``: keep the
shipped controller)."""
FLOAT_MAX = {"--lr": 10.0}
"""Float options' upper bounds where their configs check only the lower one (an lr of 1e308 makes NaN weights)."""
RAY_WORKERS_MAX = 256
"""``--workers`` per Ray actor (on other machines: not capped at this one's cores)."""
PATH_OPTIONS = ("--out", "--model", "--policy", "--data", "--demos", "--init", "--backgrounds", "--debs", "--cache",
                "--allowlist", "--vision", "--photos", "--check-photos")
"""Options naming a file or folder: an empty value would silently mean the current directory."""
MEMORY_SHARE = 0.8
"""A command may plan to use at most this share of the memory available when it starts."""
PYBULLET_WORKER_BYTES = 200e6
"""Resident memory of one env worker process (PyBullet, the scene, the renderer), measured ~150 MB."""


def check(command: str, args: argparse.Namespace, argv: Sequence[str]) -> None:
    """Refuse (``UsageError``) an empty path, an option out of :data:`RANGES` or a run the memory cannot hold;
    cap ``args.workers`` / ``args.threads`` at what is useful, saying so on stderr. Touches no file."""
    _check_empty(args, argv)
    for flag, (lo, hi) in {**RANGES, **COMMAND_RANGES.get(command, {})}.items():
        value = getattr(args, flag[2:].replace("-", "_"), None)
        if isinstance(value, int) and not isinstance(value, bool) and not lo <= value <= hi:
            raise UsageError(f"{flag} must be in [{lo}, {hi}], got {value}")
    for flag, hi in FLOAT_MAX.items():
        value = getattr(args, flag[2:].replace("-", "_"), None)
        if isinstance(value, float) and math.isfinite(value) and value > hi:  # nan, inf: the config's message
            raise UsageError(f"{flag} must be at most {hi:g}, got {value:g}")
    _cap_cores(command, args)
    need, what = estimate_memory(command, args)
    require_memory(need, what)


def _check_empty(args: argparse.Namespace, argv: Sequence[str]) -> None:
    for i, a in enumerate(argv):
        flag, eq, value = a.partition("=")
        if flag in PATH_OPTIONS and (value == "" if eq else i + 1 < len(argv) and argv[i + 1] == ""):
            raise UsageError(f"{flag}: an empty path; name a file or folder")
    if getattr(args, "dataset", None) == "":
        raise UsageError("an empty DATASET path; name a folder")


def _cap_cores(command: str, args: argparse.Namespace) -> None:
    cores = available_cores()
    ray = getattr(args, "backend", None) == "ray"
    workers = getattr(args, "workers", None)
    if isinstance(workers, int) and ray and workers > RAY_WORKERS_MAX:
        raise UsageError(f"--workers must be in [1, {RAY_WORKERS_MAX}] per Ray actor, got {workers}")
    if isinstance(workers, int) and not ray and workers > cores:
        args.workers = cores
        print(f"grasp-s2r {command}: --workers {workers} capped at {cores} (the CPU cores this process may use)",
              file=sys.stderr)
    for name in ("threads", "replicas"):
        asked = getattr(args, name, None)
        if isinstance(asked, int) and asked > cores:
            setattr(args, name, cores)
            print(f"grasp-s2r {command}: --{name} {asked} capped at {cores} (the CPU cores this process may use)",
                  file=sys.stderr)


_CONFIGS = {  # command -> its config dataclass, whose defaults stand in for the options left out
    "collect": ("grasp_s2r.collect", "CollectConfig"), "dagger": ("grasp_s2r.control.dagger", "DaggerConfig"),
    "eval": ("grasp_s2r.control.evaluate", "PolicyEvalConfig"),
    "train-vision": ("grasp_s2r.vision.training.train_config", "SegmenterTrainConfig"),
    "train-gripper": ("grasp_s2r.vision.training.gripper_train", "GripperTrainConfig"),
    "eval-vision": ("grasp_s2r.vision.evaluation.evaluate", "VisionEvalConfig"),
    "calibrate-vision": ("grasp_s2r.vision.training.calibrate", "CalibrationConfig"),
}


def _value(command: str, args: argparse.Namespace, dest: str, field: str) -> int:
    """The option ``dest`` as given, else the default of ``field`` in the command's config (or, for the scene, of
    :class:`~grasp_s2r.sim.config.EnvConfig`)."""
    value = getattr(args, dest, None)
    if value is not None:
        return int(value)
    module, name = _CONFIGS[command]
    if field.startswith("env.") and command in ("eval", "train-gripper"):  # their scene is not an option
        module, name, field = "grasp_s2r.sim.config", "EnvConfig", field[4:]
    return int(default_of(getattr(importlib.import_module(module), name), field))


def estimate_memory(command: str, args: argparse.Namespace) -> tuple[float, str]:
    """(bytes, what needs them) of the run ``args`` asks for, an estimate of its peak; (0, "") when it is small
    whatever its options."""
    if command not in _CONFIGS:
        return 0.0, ""
    v = functools.partial(_value, command, args)
    if command in ("collect", "dagger", "eval"):
        px, steps = v("resolution", "env.camera.width_px"), v("max_steps", "env.scene.max_episode_steps")
        workers = min(v("workers", "workers"), RAY_WORKERS_MAX)
        episode = steps * px * px * 8.0  # rgb (3 bytes a pixel) + the masks (1 byte each) of every step
        in_flight = 16 + 2 * workers  # the episode writer's queue + one per worker, plus its copy on the way
        need = in_flight * episode + workers * PYBULLET_WORKER_BYTES
        what = f"--resolution {px} with --max-steps {steps} and {workers} worker(s)"
        if command == "dagger":  # every round's input masks, as the controller trains on them (1 byte a pixel)
            episodes = v("rounds", "rounds") * v("episodes_per_round", "episodes_per_round")
            need += episodes * steps * px * px * 2.0
            what = f"{episodes} episodes (--rounds x --episodes-per-round) of {what}"
        return need, what
    if command in ("train-vision", "train-gripper"):
        if _on_accelerator(args):
            return 0.0, ""  # the step's memory is the accelerator's (torch reports its own out-of-memory)
        px = v("image_size", "image_size_px") if command == "train-vision" else v("", "env.camera.width_px")
        batch = v("batch_size", "batch_size")
        width = v("width", "width") if command == "train-vision" else 16
        # activations and their gradients of the U-Net, ~128 bytes a channel of its first level a pixel
        return batch * px * px * (128.0 * width + 16.0), f"--batch-size {batch} of {px} px images"
    n = v("n_images", "n_images")
    # each image's RGB, label and probability map at the packaged segmenter's 64 px (a larger model is checked
    # again once its checkpoint is read: :func:`require_images`)
    return n * 64 * 64 * 8.0, f"--n-images {n}"


def _on_accelerator(args: argparse.Namespace) -> bool:
    device = getattr(args, "device", None)
    if device:
        return not str(device).startswith("cpu")
    import torch  # the training commands import it anyway

    return torch.cuda.is_available()


def require_images(n: int, pixels: int, batch: int) -> None:
    """The memory check of an evaluation of ``n`` images of ``pixels`` pixels each, in batches of ``batch``, once the
    model's image size is known (its RGB, label and probability map an image; the network's activations a batch)."""
    require_memory(n * pixels * 8.0 + min(batch, n) * pixels * 128.0 * 16, f"--n-images {n} of {round(pixels ** 0.5)} px images")


def available_memory() -> float:
    """Bytes this machine can give a new run now (``MemAvailable``; the physical memory where it is unknown)."""
    try:
        with open("/proc/meminfo") as f:
            for line in f:
                if line.startswith("MemAvailable:"):
                    return float(line.split()[1]) * 1024
    except OSError:
        pass
    return float(os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES"))


def require_memory(need: float, what: str) -> None:
    have = available_memory()
    if need > MEMORY_SHARE * have:
        raise UsageError(f"{what} needs about {need / 1e9:.1f} GB of memory, this machine has "
                         f"{have / 1e9:.1f} GB available; ask for less")
