"""The one writer and reader of benchmark results: ``benchmarks/results/<name>.json``.

Every benchmark calls :func:`write_results` beside what it prints; ``benchmarks/tables.py`` reads the files with
:func:`load_results` and renders the README's and docs' figure tables from them. A run writes the tracked file only
when asked (``--save``, or ``--json`` naming it): by default its figures go to ``runs/benchmarks/<name>.json``, so
running a benchmark leaves the checkout as it was. A file holds::

    format, format_version   "grasp_s2r.benchmark", FORMAT_VERSION
    benchmark                the script's name, e.g. "bench_expert"
    command                  the exact command line that reproduces it, from the repository root
    config                   the script's arguments
    machine                  CPU cores, load average, platform, Python, torch, device
    date                     UTC, ISO 8601
    package_version, git_commit, git_dirty
    shipped_weights          sha256 of each file in grasp_s2r/weights/ when it ran (the README flags a figure of the
                             shipped system once those weights change: :func:`changed_weights`)
    figures                  what the benchmark measured (its own keys)

Files written before this format (``eval_shipped.json``: an ``eval.json``; ``compare_memory.json``) load as
``figures`` with ``command`` None.
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import platform
import re
import shlex
import subprocess
import sys
from pathlib import Path
from typing import Any

from grasp_s2r import __version__
from grasp_s2r.cpu import cpu_info
from grasp_s2r.files import write_json
from grasp_s2r.vision.images.corpus_manifest import sha256_of

FORMAT = "grasp_s2r.benchmark"
FORMAT_VERSION = 1
REPO = Path(__file__).resolve().parent.parent
RESULTS_DIR = REPO / "benchmarks" / "results"
SCRATCH_DIR = REPO / "runs" / "benchmarks"
"""Where a run's figures go when not ``--save``: ignored by git (``runs/``)."""
WEIGHTS_DIR = REPO / "grasp_s2r" / "weights"
"""The shipped weights, whose sha256 each results file records."""


def display_path(path: str) -> str:
    """``path`` relative to the repository where it lies inside it (results files name files the same on every
    clone)."""
    p = Path(path).absolute()
    return str(p.relative_to(REPO)) if p.is_relative_to(REPO) else path


def default_json(name: str, *variant: str) -> Path:
    """``benchmarks/results/<name>[-<variant>...].json``; empty variant parts are left out."""
    return RESULTS_DIR / ("-".join([name, *(v for v in variant if v)]) + ".json")


def add_save_argument(parser: argparse.ArgumentParser) -> None:
    """``--save``: record the figures in the tracked ``benchmarks/results/`` file the docs' tables are made from."""
    parser.add_argument("--save", action="store_true", help="record the figures in benchmarks/results/ (the tracked "
                        "file the docs' tables are generated from; default: runs/benchmarks/, ignored by git)")


def add_json_argument(parser: argparse.ArgumentParser, name: str) -> None:
    """``--json PATH`` and ``--save``; no ``--json`` means :func:`default_json` of the run's variant with ``--save``,
    else the same name under ``runs/benchmarks/``."""
    parser.add_argument("--json", type=Path, default=None,
                        help=f"write the figures here (default: runs/benchmarks/{name}[-VARIANT].json; with --save: "
                             f"benchmarks/results/{name}[-VARIANT].json)")
    add_save_argument(parser)


def require_checkpoints(prog: str, paths) -> None:
    """Exit with ``PROG: no such checkpoint: A, B`` where any of a benchmark's checkpoint arguments is not a file."""
    if missing := [str(c) for c in paths if not Path(c).is_file()]:
        sys.exit(f"{prog}: no such checkpoint: {', '.join(missing)}")


def require_folder(prog: str, flag: str, path: Path | None) -> None:
    """Exit with ``PROG: FLAG PATH is not a folder`` where a benchmark's folder argument was given and is not one."""
    if path is not None and not Path(path).is_dir():
        sys.exit(f"{prog}: {flag} {path} is not a folder")


def _destination(path: Path, explicit: Path | None, save: bool) -> Path:
    """``path``, or the same name under :data:`SCRATCH_DIR` when it is a default in ``benchmarks/results/`` that the
    user did not ask to record (no ``--save``, no ``--json`` naming it)."""
    if save or (explicit is not None and Path(explicit) == path) or path.resolve().parent != RESULTS_DIR:
        return path
    return SCRATCH_DIR / path.name


RECORDED_REPO = "/work/main"
"""Where the repository lay on the machines that recorded the results files written before :func:`command_line`
made its paths relative: :func:`portable_text` reads their absolute paths relative to it."""


def portable_text(text: str, repo: str | Path = RECORDED_REPO) -> str:
    """``text`` with each absolute path inside ``repo`` made relative to it and each one beside it (under its parent)
    written ``../...``: the command of a results file as it runs from any checkout, from the repository's root."""
    repo = str(repo).rstrip("/")
    parent = str(Path(repo).parent).rstrip("/")
    text = re.sub(rf"(?<![\w.-]){re.escape(repo)}/", "", text)
    text = re.sub(rf"(?<![\w.-]){re.escape(repo)}(?![\w.-])", ".", text)
    return re.sub(rf"(?<![\w.-]){re.escape(parent)}/", "../", text) if parent else text


def command_line(argv: list[str] | None = None) -> str:
    """The command that reproduces this run: ``python <script relative to the repository> <arguments>``, its paths
    in or beside the repository relative to it (:func:`portable_text`)."""
    argv = list(sys.argv if argv is None else argv)
    script = Path(argv[0]).resolve()
    try:
        argv[0] = str(script.relative_to(REPO))
    except ValueError:
        argv[0] = str(script)
    return shlex.join(["python", *(portable_text(a, REPO) for a in argv)])


def _git(*args: str) -> str | None:
    try:
        out = subprocess.run(["git", *args], check=False, cwd=REPO, capture_output=True, text=True, timeout=10)
    except (OSError, subprocess.SubprocessError):
        return None
    return out.stdout.strip() if out.returncode == 0 else None


def machine() -> dict[str, Any]:
    """CPU cores, the 1-minute load average when the figures were written (other jobs slow timings down),
    platform, the CPU (name, bf16 / AMX, a oneDNN ISA cap), Python, torch version and the device torch would use (a
    CUDA device's name or cpu)."""
    info: dict[str, Any] = {"cpu_count": os.cpu_count(), "load_average_1min": os.getloadavg()[0],
                            "platform": platform.platform(), "processor": platform.processor() or platform.machine(),
                            "python": platform.python_version()}
    cpu = cpu_info()
    info |= {"cpu": cpu.describe()} | ({"onednn_isa_cap": cpu.isa_cap} if cpu.isa_cap else {})
    try:
        import torch
    except ImportError:
        return {**info, "torch": None, "device": "cpu"}
    cuda = torch.cuda.is_available()
    return {**info, "torch": torch.__version__, "device": torch.cuda.get_device_name() if cuda else "cpu"}


def _plain(value: Any) -> Any:
    """JSON-ready: paths as strings, tuples as lists, dict keys as strings."""
    if isinstance(value, dict):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    if isinstance(value, Path):
        return str(value)
    return value


def write_results(path: Path | None, name: str, figures: dict[str, Any], config: dict[str, Any] | argparse.Namespace,
                  *variant: str, argv: list[str] | None = None, save: bool | None = None) -> Path:
    """Write one benchmark's figures atomically (``path`` None: :func:`default_json`); returns the path.

    A path in ``benchmarks/results/`` is written only with ``save`` (default: the config's ``save``, i.e. ``--save``)
    or when it is the config's own ``json`` (``--json`` named it); otherwise the file goes to ``runs/benchmarks/``.
    """
    cfg = vars(config) if isinstance(config, argparse.Namespace) else config
    save = bool(cfg.get("save")) if save is None else save
    path = _destination(Path(path) if path is not None else default_json(name, *variant), cfg.get("json"), save)
    path.parent.mkdir(parents=True, exist_ok=True)
    dirty = _git("status", "--porcelain", "--untracked-files=no")
    data = {"format": FORMAT, "format_version": FORMAT_VERSION, "benchmark": name, "command": command_line(argv),
            "config": _plain({k: v for k, v in cfg.items() if k not in ("json", "save")}), "machine": machine(),
            "date": datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds"),
            "package_version": __version__, "git_commit": _git("rev-parse", "HEAD"),
            "git_dirty": None if dirty is None else bool(dirty), "shipped_weights": shipped_weights(),
            "figures": _plain(figures)}
    write_json(path, data, indent=2)
    print(f"results: {path}" + ("" if path.parent.resolve() != SCRATCH_DIR else " (--save records them in "
                                                                          "benchmarks/results/)"))
    return path


def shipped_weights() -> dict[str, str]:
    """File name -> sha256 of each shipped weights file (``grasp_s2r/weights/*.pt``)."""
    return {p.name: sha256_of(p) for p in sorted(WEIGHTS_DIR.glob("*.pt"))}


GRIPPER_HEAD = "gripper_head_64px.pt"
SEGMENTER = "segmenter_64px.pt"
SYSTEM_WEIGHTS = (SEGMENTER, "controller.pt")
"""What the shipped system's figures read (the gripper head too when the shipped controller reads the fingers:
:func:`system_weights`)."""


def system_weights() -> tuple[str, ...]:
    """The shipped weights files an episode of the shipped system reads: the segmenter and the controller, and the
    gripper head when the shipped controller reads the fingers' mask (its ``policy_config["gripper"]``)."""
    from grasp_s2r.control.policy import read_policy_blob

    reads = bool(read_policy_blob(WEIGHTS_DIR / "controller.pt")["policy_config"].get("gripper", False))
    return SYSTEM_WEIGHTS + ((GRIPPER_HEAD,) if reads else ())


def changed_weights(res: dict[str, Any], reads: tuple[str, ...] | None = None) -> list[str]:
    """The shipped weights files that differ from those ``res`` (a loaded results file) was measured with; empty when
    they are the same or the file predates the record. ``reads``: only these files count (what the figure reads)."""
    recorded = res.get("shipped_weights")
    if recorded is None:
        return []
    now = shipped_weights()
    return sorted(name for name in recorded.keys() | now.keys()
                  if recorded.get(name) != now.get(name) and (reads is None or name in reads))


def load_results(path: Path) -> dict[str, Any]:
    """One results file; a file from before this format comes back as its ``figures`` with ``command`` None."""
    data = json.loads(Path(path).read_text())
    if data.get("format") == FORMAT:
        if data["format_version"] > FORMAT_VERSION:
            raise ValueError(f"{path}: results format_version {data['format_version']} is newer than this code's "
                             f"{FORMAT_VERSION}; update the checkout")
        return data
    return {"format": FORMAT, "format_version": FORMAT_VERSION, "benchmark": Path(path).stem, "command": None,
            "config": data.get("config", {}), "figures": data}
