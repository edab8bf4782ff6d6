"""The DAgger learning curve as data: success rate and loss per round, DAgger and BC, as CSV + JSON; the round a
run selects. Its picture: :func:`grasp_s2r.drawing.plot_curve`."""

from __future__ import annotations

import csv
import io
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from grasp_s2r.files import atomic_write, write_json

CURVE_COLUMNS = (
    "round", "beta", "labels", "new_labels", "dagger_loss", "dagger_successes", "dagger_success_rate",
    "dagger_ci_low", "dagger_ci_high", "bc_loss", "bc_successes", "bc_success_rate", "bc_ci_low", "bc_ci_high",
    "eval_episodes", "rollout_s", "train_s", "eval_s", "bc_s", "round_s", "rollout_env_steps_per_s",
    "train_samples_per_s",
)
"""Columns of ``curve.csv``, one row per completed round."""


def write_curve_csv(rows: Sequence[dict[str, Any]], path: Path) -> Path:
    buf = io.StringIO()
    writer = csv.DictWriter(buf, fieldnames=CURVE_COLUMNS, extrasaction="ignore")
    writer.writeheader()
    for row in rows:
        writer.writerow({k: row.get(k, "") for k in CURVE_COLUMNS})
    atomic_write(Path(path), buf.getvalue().encode())
    return Path(path)


def best_round(rows: Sequence[dict[str, Any]], learner: str = "dagger") -> int:
    """The round whose ``learner`` ("dagger" or "bc") controller succeeded most on the per-round evaluation
    episodes (the validation set: their seeds are never test seeds); ties go to the later round.

    DAgger as published (Ross, Gordon, Bagnell 2011, algorithm 3.1) returns the best policy of the
    sequence on validation, not the last one: a round can get worse, e.g. after many blind-wander labels."""
    scored = [(row[f"{learner}_successes"], row["round"]) for row in rows
              if row.get(f"{learner}_successes") not in (None, "")]
    if not scored:
        raise ValueError(f"no round has a {learner} success count")
    return max(scored)[1]


def summary_line(row: dict[str, Any], rounds: int) -> str:
    """The one-line summary of a finished round (printed by ``grasp-s2r dagger``)."""
    bc = f" | BC {100 * row['bc_success_rate']:5.1f} %" if row.get("bc_success_rate") is not None else ""
    return (f"round {row['round']}/{rounds - 1}  beta {row['beta']:.2f}  labels {row['labels']} "
            f"(+{row['new_labels']})  loss {row['dagger_loss']:.4f}  success {100 * row['dagger_success_rate']:5.1f} % "
            f"[{100 * row['dagger_ci_low']:.0f}-{100 * row['dagger_ci_high']:.0f}]{bc}  "
            f"({row['round_s']:.0f} s: rollout {row['rollout_s']:.0f}, train {row['train_s']:.0f}, "
            f"eval {row['eval_s']:.0f}, BC {row['bc_s']:.0f})")


CURVE_FORMAT = "grasp_s2r.dagger-curve"
CURVE_FORMAT_VERSION = 1
CURVE_SOFTWARE = f"{CURVE_FORMAT} v{CURVE_FORMAT_VERSION}"
"""Stamped into ``curve.png``'s metadata (``Software``)."""


def write_curve_json(rows: Sequence[dict[str, Any]], config: dict[str, Any], path: Path) -> Path:
    """The curve with its format version and the config of the run that made it."""
    blob = {"format": CURVE_FORMAT, "format_version": CURVE_FORMAT_VERSION, "config": config,
            "columns": list(CURVE_COLUMNS), "rows": list(rows)}
    write_json(Path(path), blob, indent=2)  # a rate of no rollouts (round 0 from --demos) is null
    return Path(path)
