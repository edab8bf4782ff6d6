"""How each session of a segmenter training run used its machine (``OUT/runtime.json``; a resume starts a session).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import torch

from grasp_s2r.files import write_json

RUNTIME_FILE = "runtime.json"
"""How each session of a run used its machine (:func:`record_session`)."""


def data_text(workers: int, threads: int | None, replicas: int, device: torch.device) -> str:
    """How the session makes its composites and runs its step, in words (its first line)."""
    data = f"composites made by {workers} worker process{'es' * (workers != 1)}" if workers else \
        "composites made in-process"
    if replicas > 1:
        return data + f", the step's batch split over {replicas} replicas of the network, one thread each"
    return data + (f", step on {threads} thread{'s' * (threads != 1)}" if device.type == "cpu" and threads else "")


def runtime_sessions(out_dir: Path) -> list[dict[str, Any]]:
    """The sessions ``OUT/runtime.json`` records, oldest first ([] when there is none)."""
    path = Path(out_dir) / RUNTIME_FILE
    return json.loads(path.read_text())["sessions"] if path.is_file() else []


def record_session(out_dir: Path, session: dict[str, Any]) -> None:
    """Append how this session runs (device, precision, cores) to ``OUT/runtime.json``: a resumed run may run on
    another machine or precision, and every session stays on record."""
    blob = {"format": "grasp_s2r.vision_runtime", "format_version": 1,
            "sessions": [*runtime_sessions(out_dir), session]}
    write_json(out_dir / RUNTIME_FILE, blob, indent=2)
