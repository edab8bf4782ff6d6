"""What the closed-loop runtime is asked to run and what it hands back: an episode request, its record, and the
per-step schema of a recorded episode (the one schema of expert demonstrations and DAgger rounds alike)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, ClassVar, Protocol

import numpy as np

from grasp_s2r.expert.fsm import Phase
from grasp_s2r.runtime.conditions import Condition
from grasp_s2r.sim.config import EnvConfig
from grasp_s2r.sim.env import ACTION_DIM, PROPRIO_NAMES, STATE_NAMES

HOOK_STREAM, DROPOUT_STREAM = 2, 5
"""Per-episode random streams: ``default_rng([seed, stream])`` (condition hooks; mask dropout). The actor's own
streams are its own (DAgger's mixture: ``control.mixing``)."""


class EpisodeActor(Protocol):
    """Who acts at each step of one episode (made by :meth:`Actor.episode`)."""

    def blanks(self, step: int) -> bool:
        """Whether the learner's input mask is blank at ``step`` (a simulated missed detection)."""
        ...

    def choose(self, expert: np.ndarray, learner: np.ndarray | None) -> tuple[np.ndarray, bool]:
        """The action to execute (4,) and whether it is the expert's, from the expert's label (4,) and the learner's
        action (4,) (None when :attr:`Actor.queries_learner` is False)."""
        ...


class Actor(Protocol):
    """Who acts in an episode: the learner (:data:`LEARNER`), the expert (:data:`EXPERT`), or a mixture of both
    (DAgger's, :class:`grasp_s2r.control.mixing.Mixture`). Picklable: requests travel to Ray actors."""

    @property
    def queries_learner(self) -> bool:
        """Whether the learner's action is needed (its controller is run for this episode)."""
        ...

    @property
    def expert_share(self) -> float:
        """Probability that a step executes the expert's label (recorded as the episode's ``beta``)."""
        ...

    def episode(self, seed: int) -> EpisodeActor: ...


@dataclass(frozen=True)
class LearnerActs:
    """The learner's action is executed at every step (evaluation)."""

    queries_learner: ClassVar[bool] = True
    expert_share: ClassVar[float] = 0.0

    def episode(self, seed: int) -> LearnerActs:
        return self

    def blanks(self, step: int) -> bool:
        return False

    def choose(self, expert: np.ndarray, learner: np.ndarray | None) -> tuple[np.ndarray, bool]:
        if learner is None:
            raise ValueError("the learner acts, but no learner action was given")
        return np.asarray(learner, dtype=float).reshape(ACTION_DIM), False


@dataclass(frozen=True)
class ExpertActs:
    """The expert's label is executed at every step (demonstrations: ``collect``)."""

    queries_learner: ClassVar[bool] = False
    expert_share: ClassVar[float] = 1.0

    def episode(self, seed: int) -> ExpertActs:
        return self

    def blanks(self, step: int) -> bool:
        return False

    def choose(self, expert: np.ndarray, learner: np.ndarray | None) -> tuple[np.ndarray, bool]:
        return np.asarray(expert, dtype=float).reshape(ACTION_DIM), True


LEARNER, EXPERT = LearnerActs(), ExpertActs()


@dataclass(frozen=True)
class EpisodeRequest:
    """One episode to run."""

    seed: int
    """Episode seed: the env's randomization and the episode's random streams derive from it."""
    condition: Condition = field(default_factory=Condition)
    """Visual / dynamics condition applied in the worker."""
    actor: Actor = LEARNER
    """Who acts: the learner (default), the expert, or a mixture (:class:`Actor`)."""


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
