"""What defines a DAgger run (:class:`DaggerConfig`, saved in ``run.json`` and every checkpoint), its beta
schedule and the shipped controller's recipe: the leaf that the trainer (:mod:`~grasp_s2r.control.dagger`), its
training episodes (:mod:`~grasp_s2r.control.training_episodes`) and the BC baseline all import."""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field, fields, replace
from typing import Any, Literal, get_args

from grasp_s2r.configs import to_dict
from grasp_s2r.control import seeds
from grasp_s2r.control.policy import PolicyConfig
from grasp_s2r.control.train import PolicyTrainConfig
from grasp_s2r.expert.fsm import LearnerSees
from grasp_s2r.runtime.backend import BackendConfig
from grasp_s2r.runtime.conditions import CONDITIONS
from grasp_s2r.runtime.masks import MaskInput
from grasp_s2r.sim.config import EnvConfig, control_env_config

BetaSchedule = Literal["linear", "exponential"]
BETA_SCHEDULES: tuple[str, ...] = get_args(BetaSchedule)
_POLICY_INPUT_FLAGS = tuple(f.name for f in fields(PolicyConfig) if f.default is False)
"""``PolicyConfig``'s switches of extra inputs (memory, gripper, tcp_xy, ...): off, a run's identity leaves them out,
so that runs made before a switch existed resume."""
_RESUMABLE_FIELDS = ("rounds", "workers", "backend", "device", "torch_threads", "out")
"""Config fields that may differ when a run is resumed (e.g. ask for more rounds; the folder moved or copied)."""
_LEGACY_VALUES = {"observable_expert": False, "out_of_view_prob": 0.0, "table_photo_prob": 0.0, "dropout_prob": 0.0,
                  "search_height_m": 0.22, "first_look_height_m": 0.0, "learner_sees": "mask", "init_policy": ""}
"""Fields added later, left out of a run's identity at the value that reproduces runs made before they existed
(so those runs still resume)."""


@dataclass(frozen=True)
class DaggerConfig:
    """Everything that defines a DAgger run; saved in ``run.json`` and in every checkpoint."""

    out: str
    """Run folder (created, or resumed when it holds a run of this same config)."""
    rounds: int = 6
    """Rounds in all, round 0 (expert demonstrations) included."""
    episodes_per_round: int = 24
    """Episodes rolled out (and labelled) per round."""
    eval_episodes: int = 40
    """Episodes (beta = 0, fixed seeds) that measure the success rate after each round."""
    eval_conditions: tuple[str, ...] = ("nominal",)
    """Conditions (``conditions.CONDITIONS``) of those episodes, taken in turn: e.g. ("nominal",
    "dynamics-shift", "perturbation") makes the learning curve measure robustness too. Training never
    sees them (the push of ``disturbance_prob`` is its own, different, training condition)."""
    beta_schedule: BetaSchedule = "linear"
    """"linear": beta_r = max(0, 1 - r / beta_rampdown_rounds); "exponential": beta_r = beta_decay ** r."""
    beta_rampdown_rounds: int = 3
    """Linear schedule: rounds until the expert is no longer executed at all."""
    beta_decay: float = 0.5
    """Exponential schedule: factor per round."""
    masks: MaskInput = "predicted"
    """Controller input: "predicted" (segmenter on the camera image) or "gt" (ground-truth mask)."""
    vision_checkpoint: str = ""
    """Segmenter checkpoint for predicted masks ("" = the one packaged with grasp_s2r)."""
    backgrounds: str = "train"
    """Rollout visuals: "train" composites onto the training photos (the segmenter's training
    distribution), "" keeps the raw sim render, a folder composites onto the photos in it (your own scene's: they
    are the table's texture too, with ``table_photo_prob``)."""
    disturbance_prob: float = 0.4
    """Share of training episodes (DAgger rollouts and BC demonstrations alike) in which the sphere is
    pushed once: the learner then visits states with the sphere off target or out of view, and the
    expert shows how to recover. Per-round evaluation episodes are never disturbed."""
    disturbance_distance_m: tuple[float, float] = (0.02, 0.06)
    """Range of the push distance."""
    disturbance_below_m: tuple[float, float] = (0.02, 0.08)
    """The push happens when the TCP first descends to a height above the sphere drawn from this range
    (low pushes put the sphere out of view: the learner must learn to rise and look)."""
    blind_start_prob: float = 0.3
    """Share of training episodes (DAgger and BC alike) whose first steps show the controller an empty
    mask, a simulated missed detection (the expert's labels are unchanged): the learner learns what to do
    before it has seen the sphere, and descends for a closer look (measured: docs/control.md)."""
    blind_start_steps: tuple[int, int] = (2, 8)
    """Range (inclusive) of the number of such blank first steps."""
    blind_cutoff_steps: int = 0
    """DAgger rollouts in which the learner acts (beta < 1) end once the controller's input mask has been
    empty for more than this many consecutive steps (0: never, plain DAgger). The first blind steps
    are labelled; the rest of a blind wander would only add labels the mask cannot explain. Measured
    (docs/control.md): 5 made no difference beyond run-to-run noise, hence off by default."""
    demos: str = ""
    """Optional ``grasp-s2r collect`` dataset used as round 0 (its first episodes_per_round episodes)."""
    init_policy: str = ""
    """Optional controller checkpoint that round 0 trains on from, instead of new weights (a fine-tune: e.g. the
    shipped controller on your own scene). Its architecture must be ``policy``'s."""
    out_of_view_prob: float = 0.0
    """Share of training episodes whose sphere starts outside the camera's view (the ``start-out-of-view``
    condition's placement): the learner must learn to search."""
    table_photo_prob: float = 0.0
    """Share of training episodes with a training photo as the sim table's texture (``table-photo``'s rendering,
    with the training photos) instead of the composite."""
    dropout_prob: float = 0.0
    """Share of training episodes whose controller mask is blanked for 3-10 steps mid-approach (``dropout``)."""
    observable_expert: bool = False
    """Where the learner does not see the sphere (out of view, a missed detection, a blanked step), label as an
    agent without the sphere's position would act: back to where it was last seen, then a search (the expert's
    RETURN / SEARCH phases). False: the privileged expert, which points at a sphere the learner cannot see."""
    search_height_m: float = 0.22
    """With ``observable_expert``: the TCP's height above the table while the expert searches for a sphere the learner
    does not see (``SearchConfig.search_height_m``)."""
    first_look_height_m: float = 0.0
    """With ``observable_expert``: a sphere the learner has not seen this episode is first looked for from this height
    above the middle of where spheres spawn, then the search (``SearchConfig.first_look_height_m``; 0: none)."""
    learner_sees: LearnerSees = "mask"
    """With ``observable_expert``: when the learner counts as seeing the sphere, "mask" (any mask pixel) or "sphere"
    (its mask touches the sphere: a false detection alone is labelled as nothing seen); ``SearchConfig.learner_sees``."""
    bc_baseline: bool = True
    """Also train and evaluate behavior cloning at the same label budget every round."""
    workers: int = 2
    """Env worker processes (per Ray actor with the ray backend)."""
    backend: BackendConfig = field(default_factory=BackendConfig)
    """Where rollouts and evaluation episodes run: local processes or Ray actors (the learner stays here)."""
    device: str = ""
    """Torch device of the learner and the segmenter ("" = CUDA when present, else CPU)."""
    torch_threads: int = 1
    """Torch CPU threads of the main process."""
    seed: int = 0
    """Seeds network initialisation and minibatch sampling."""
    train: PolicyTrainConfig = field(default_factory=PolicyTrainConfig)
    """Optimisation per round."""
    policy: PolicyConfig = field(default_factory=PolicyConfig)
    """Controller architecture."""
    env: EnvConfig = field(default_factory=control_env_config)
    """Scene and camera (default: the scene with the controller's camera calibration tolerance)."""

    def __post_init__(self) -> None:
        if self.policy.tcp_xy:  # the TCP's (x, y) input is measured from this scene's spawn centre
            origin = tuple(float(v) for v in self.env.scene.spawn_center_world_m)
            object.__setattr__(self, "policy", replace(self.policy, tcp_xy_origin_m=origin))
        if self.beta_schedule not in BETA_SCHEDULES:
            raise ValueError(f"beta_schedule must be one of {BETA_SCHEDULES}, got {self.beta_schedule!r}")
        unknown = [c for c in self.eval_conditions if c not in CONDITIONS]
        if unknown or not self.eval_conditions:
            raise ValueError(f"eval_conditions must be names from {', '.join(CONDITIONS)}, got {self.eval_conditions}")
        if self.blind_cutoff_steps < 0:
            raise ValueError(f"blind_cutoff_steps must be >= 0, got {self.blind_cutoff_steps}")
        shares = {"disturbance_prob": self.disturbance_prob, "blind_start_prob": self.blind_start_prob,
                  "out_of_view_prob": self.out_of_view_prob, "table_photo_prob": self.table_photo_prob,
                  "dropout_prob": self.dropout_prob}
        bad = {k: v for k, v in shares.items() if not 0.0 <= v <= 1.0}
        if bad:
            raise ValueError(f"{', '.join(bad)} must be in [0, 1], got {', '.join(map(str, bad.values()))}")
        top = self.env.scene.workspace_max_height_m
        if not (0.05 <= self.search_height_m <= top and (self.first_look_height_m == 0 or
                                                         0.05 <= self.first_look_height_m <= top)):
            raise ValueError(f"search_height_m (and first_look_height_m unless 0) must be in [0.05, {top}] m, got "
                             f"{self.search_height_m}, {self.first_look_height_m}")
        if not 0.0 <= self.beta_decay <= 1.0:
            raise ValueError(f"beta_decay must be in [0, 1], got {self.beta_decay}")
        if min(self.rounds, self.episodes_per_round, self.eval_episodes, self.workers, self.beta_rampdown_rounds) < 1:
            raise ValueError("rounds, episodes_per_round, eval_episodes, workers and beta_rampdown_rounds must be >= 1")
        if self.episodes_per_round > seeds.ROUND_STRIDE:
            raise ValueError(f"episodes_per_round must be <= {seeds.ROUND_STRIDE}")
        if not 0.0 < self.train.lr < math.inf:
            raise ValueError(f"lr must be a positive number, got {self.train.lr}")
        if any(c < 1 for c in self.policy.channels):
            raise ValueError(f"CNN channels must be positive, got {self.policy.channels}")
        jitter = (self.env.randomization.camera_jitter_m, self.env.randomization.camera_jitter_deg)
        if not all(0.0 <= j < math.inf for j in jitter):
            raise ValueError(f"camera jitter must be finite and >= 0, got {jitter[0] * 1000:g} mm, {jitter[1]:g} deg")

    def to_dict(self) -> dict[str, Any]:
        return to_dict(self)

    def identity(self) -> dict[str, Any]:
        """The fields that define the run's results (not how many rounds, nor where it computes)."""
        identity = {k: v for k, v in self.to_dict().items()
                    if k not in _RESUMABLE_FIELDS and not (k in _LEGACY_VALUES and v == _LEGACY_VALUES[k])}
        for flag in _POLICY_INPUT_FLAGS:  # inputs off: as before these inputs existed (a flag added later too)
            if not identity["policy"].get(flag):
                identity["policy"].pop(flag, None)
        if "tcp_xy" not in identity["policy"]:
            identity["policy"].pop("tcp_xy_origin_m", None)
        if identity["train"].get("lr_schedule") == "constant":  # as before the schedule existed
            identity["train"].pop("lr_schedule")
        return json.loads(json.dumps(identity))


LOST_SPHERE_RECIPE: dict[str, Any] = {
    "observable_expert": True, "out_of_view_prob": 0.3, "dropout_prob": 0.3, "table_photo_prob": 0.2,
    "policy": PolicyConfig(memory=True),
}
"""The training recipe of the shipped controller: a controller with memory, labels
of an expert that does not see what the learner does not see, and training episodes that lose the sphere (start
out of view, dropout) or show a photo as the table (``grasp-s2r dagger --memory --observable-expert
--out-of-view-prob 0.3 --dropout-prob 0.3 --table-photo-prob 0.2``). Not the pipeline's: at its small budget (5
rounds of 24 episodes) these harder episodes cost it nominal and held-out success (measured: docs/control.md)."""
SHIPPED_EVAL_CONDITIONS: tuple[str, ...] = ("nominal", "start-out-of-view", "dropout", "dynamics-shift",
                                            "perturbation")
"""The shipped controller's run's ``--eval-conditions``: the conditions its best round was chosen on."""


def beta_for_round(round_index: int, schedule: str = "linear", rampdown_rounds: int = 3, decay: float = 0.5) -> float:
    """Probability that the expert's action is executed in round ``round_index`` (round 0: 1)."""
    if schedule == "linear":
        return float(max(0.0, 1.0 - round_index / rampdown_rounds))
    if schedule == "exponential":
        return float(decay**round_index)
    raise ValueError(f"unknown beta schedule {schedule!r}")
