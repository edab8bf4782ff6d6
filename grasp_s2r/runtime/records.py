"""What the closed-loop runtime is asked to run and what it hands back: an episode request, its record, and the
per-step schema of a recorded episode (the one schema of expert demonstrations and DAgger rounds alike)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from grasp_s2r.expert.fsm import Phase
from grasp_s2r.runtime.conditions import Condition
from grasp_s2r.sim.config import EnvConfig
from grasp_s2r.sim.env import ACTION_DIM, PROPRIO_NAMES, STATE_NAMES

MIX_STREAM, HOOK_STREAM, DROPOUT_STREAM = 1, 2, 5
"""Per-episode random streams: ``default_rng([seed, stream])`` (mixture coin; condition hooks; mask dropout)."""


def mix_actions(
    expert: np.ndarray, learner: np.ndarray | None, beta: float, rng: np.random.Generator,
) -> tuple[np.ndarray, np.ndarray]:
    """DAgger's mixture policy for N states: each row is the expert's action with probability ``beta``.

    expert, learner: (N, 4); learner may be None only when ``beta >= 1``. Returns (executed (N, 4),
    from_expert bool (N,)). beta = 1 executes only the expert, beta = 0 only the learner.
    """
    expert = np.asarray(expert, dtype=float).reshape(-1, ACTION_DIM)
    from_expert = rng.random(len(expert)) < beta
    if learner is None:
        if not from_expert.all():
            raise ValueError(f"a learner action is needed when beta < 1 (beta = {beta})")
        return expert.copy(), from_expert
    learner = np.asarray(learner, dtype=float).reshape(-1, ACTION_DIM)
    return np.where(from_expert[:, None], expert, learner), from_expert


@dataclass(frozen=True)
class EpisodeRequest:
    """One episode to run."""

    seed: int
    """Episode seed: the env's randomization and both per-episode random streams derive from it."""
    beta: float = 0.0
    """Probability that the expert's action is executed at a step (1: expert only, 0: learner only)."""
    condition: Condition = field(default_factory=Condition)
    """Visual / dynamics condition applied in the worker."""
    blind_start_steps: int = 0
    """The controller's input mask is blank for this many first steps (a simulated missed detection, for
    training); the expert, its labels and the recorded ground truth are unaffected."""


@dataclass
class EpisodeRecord:
    """A finished episode: summary, and the per-step arrays when they were recorded."""

    request: EpisodeRequest
    success: bool
    length: int
    """Number of actions taken (labelled steps)."""
    info: dict[str, Any]
    """Seed, success, length, condition, beta, randomization params, condition events."""
    arrays: dict[str, np.ndarray]
    """Time-first, T = length: rgb uint8 (T, H, W, 3), sphere_mask bool (T, H, W) (ground truth of the
    image shown), input_mask bool (T, H, W) (what the controller saw), proprio float32 (T, 5),
    action float32 (T, 4) (the expert's label), learner_action float32 (T, 4) (NaN where not
    queried), executed_action float32 (T, 4), from_expert bool (T,), phase int8 (T,),
    state float64 (T, 36). Empty when not recorded."""



SUMMARY_KEYS = ("seed", "success", "length", "request_index", "condition")
"""What a record keeps of its info once ``on_episode`` has taken the episode."""


def hand_over(rec: EpisodeRecord, on_episode: Callable[[EpisodeRecord], None] | None) -> None:
    """Give a finished episode to ``on_episode`` (e.g. to write it); the record then keeps only its summary, so that
    a long run holds only the episodes in flight. Without ``on_episode`` the record is kept whole."""
    if on_episode is not None:
        on_episode(rec)
        rec.arrays, rec.info = {}, {k: rec.info[k] for k in SUMMARY_KEYS}


STEP_KEYS = ("rgb", "sphere_mask", "gripper_mask", "input_mask", "proprio", "action", "learner_action",
             "executed_action", "from_expert", "phase", "state")
"""The per-step arrays of a recorded episode (see :attr:`EpisodeRecord.arrays`)."""
STEP_DTYPES = {"rgb": np.uint8, "sphere_mask": bool, "gripper_mask": bool, "input_mask": bool, "proprio": np.float32,
               "action": np.float32, "learner_action": np.float32, "executed_action": np.float32, "from_expert": bool,
               "phase": np.int8, "state": np.float64}


def rollout_features(env: EnvConfig) -> dict[str, dict[str, Any]]:
    """Feature schema (per-step dtype, shape, and the names of vector entries) of a recorded episode, for
    ``init_dataset``: the one schema of expert demonstrations (``collect``) and DAgger rounds."""
    hw = [env.camera.height_px, env.camera.width_px]
    shapes = {"rgb": [*hw, 3], "sphere_mask": hw, "gripper_mask": hw, "input_mask": hw, "proprio": [len(PROPRIO_NAMES)],
              "action": [ACTION_DIM], "learner_action": [ACTION_DIM], "executed_action": [ACTION_DIM],
              "from_expert": [], "phase": [], "state": [len(STATE_NAMES)]}
    names = {"proprio": list(PROPRIO_NAMES), "phase": [p.name for p in Phase], "state": list(STATE_NAMES)}
    return {k: {"dtype": np.dtype(STEP_DTYPES[k]).name, "shape": shapes[k], **({"names": names[k]} if k in names else {})}
            for k in STEP_KEYS}
