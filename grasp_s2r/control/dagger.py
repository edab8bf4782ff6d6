"""DAgger (Ross, Gordon, Bagnell 2011) for the mask-based controller: a small trainer, resumable.

Round r: (1) roll out the mixture policy (β_r; round 0 is β = 1, the expert) and label every visited state with
the expert; (2) train the controller on the labels of rounds 0..r, warm-started from round r-1; (3) measure its
success (β = 0) on the same evaluation episodes every round; (4) the behavior-cloning baseline at the same label
budget (:mod:`~grasp_s2r.control.bc_baseline`). The run's controller is its best round on those evaluation
episodes. The run folder and its resume: :mod:`~grasp_s2r.control.run_store`; the training episodes' conditions:
:mod:`~grasp_s2r.control.training_episodes`; the episodes run in :mod:`grasp_s2r.runtime`.
"""

from __future__ import annotations

import dataclasses
import json
import math
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal, get_args

import numpy as np
import torch
from tqdm import tqdm

from grasp_s2r.configs import differences, to_dict, to_json
from grasp_s2r.control import seeds
from grasp_s2r.control.bc_baseline import bc_round
from grasp_s2r.control.curves import CURVE_SOFTWARE, best_round, summary_line, write_curve_csv, write_curve_json
from grasp_s2r.control.policy import Policy, PolicyConfig
from grasp_s2r.control.run_store import ROUND_KIND, RunStore
from grasp_s2r.control.train import PolicyTrainConfig, fit, load_labels
from grasp_s2r.control.training_episodes import TrainingEpisodes
from grasp_s2r.data.episodes import (
    Episode,
    EpisodeDataset,
    EpisodeWriter,
    finished_indices,
    init_dataset,
    remove_partial,
)
from grasp_s2r.devices import default_device
from grasp_s2r.drawing import plot_curve
from grasp_s2r.files import ArtifactFolder
from grasp_s2r.runtime.backend import BackendConfig, EpisodeRunner, open_runner
from grasp_s2r.runtime.conditions import CONDITIONS
from grasp_s2r.runtime.masks import MaskInput, MaskSource, make_mask_source, mask_source_identity
from grasp_s2r.runtime.records import STEP_KEYS, EpisodeRecord, EpisodeRequest, rollout_features
from grasp_s2r.sim.config import EnvConfig, control_env_config
from grasp_s2r.stats import wilson_interval
from grasp_s2r.tblog import TBLogger

BetaSchedule = Literal["linear", "exponential"]
BETA_SCHEDULES: tuple[str, ...] = get_args(BetaSchedule)
_RESUMABLE_FIELDS = ("rounds", "workers", "backend", "device", "torch_threads")
"""Config fields that may differ when a run is resumed (e.g. ask for more rounds)."""
_LEGACY_VALUES = {"observable_expert": False, "out_of_view_prob": 0.0, "table_photo_prob": 0.0, "dropout_prob": 0.0}
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
    backgrounds: Literal["train", ""] = "train"
    """Rollout visuals: "train" composites onto the training photos (the segmenter's training
    distribution), "" keeps the raw sim render."""
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
        for flag in ("memory", "gripper"):  # inputs off: as before these inputs existed
            if not identity["policy"].get(flag):
                identity["policy"].pop(flag, None)
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


def beta_for_round(round_index: int, schedule: str = "linear", rampdown_rounds: int = 3, decay: float = 0.5) -> float:
    """Probability that the expert's action is executed in round ``round_index`` (round 0: 1)."""
    if schedule == "linear":
        return float(max(0.0, 1.0 - round_index / rampdown_rounds))
    if schedule == "exponential":
        return float(decay**round_index)
    raise ValueError(f"unknown beta schedule {schedule!r}")


@dataclass(frozen=True)
class DaggerResult:
    """What a (resumed) run has produced."""

    rows: list[dict[str, Any]]
    """Learning-curve rows of all completed rounds (columns: ``curves.CURVE_COLUMNS``)."""
    policy_path: Path
    """The selected controller (``policy.pt``: a copy of the best round's checkpoint, :func:`curves.best_round`)."""
    selected_round: int
    curve_csv: Path
    curve_png: Path


def check_demos(cfg: DaggerConfig) -> EpisodeDataset:
    """The demonstrations of ``cfg.demos`` if they can be the run's round 0 as they are: finished episodes of this
    package's episode schema, collected with the run's scene and camera (``collect --controller-scene`` with the
    same scene options) and its mask source (``--masks``, ``--vision``). Raises ValueError (or DatasetError)
    saying how to collect them otherwise."""
    demos = EpisodeDataset(cfg.demos)
    if len(demos) == 0:
        raise ValueError(f"--demos: {cfg.demos} holds no finished episode")
    missing = sorted(set(STEP_KEYS) - set(demos.meta.get("features", {})))
    if missing:
        raise ValueError(f"--demos {cfg.demos} were collected by an older grasp_s2r (no {', '.join(missing)}): "
                         f"'grasp-s2r upgrade {cfg.demos} --out NEW' writes them in the current layout")
    theirs = demos.meta.get("config", {})
    mine = to_json(cfg.env)
    if theirs.get("env") != mine:
        raise ValueError(f"--demos {cfg.demos} were collected with another scene or camera than this run's "
                         f"({'; '.join(differences(theirs.get('env'), mine))}); collect them with 'grasp-s2r collect "
                         "--controller-scene' and this run's scene options, or leave --demos out")
    want = mask_source_identity(cfg.masks, cfg.vision_checkpoint)
    if theirs.get("masks") != want:
        vision = f" --vision {cfg.vision_checkpoint}" if cfg.masks == "predicted" and cfg.vision_checkpoint else ""
        raise ValueError(f"--demos {cfg.demos} recorded other controller input masks than this run's "
                         f"({'; '.join(differences(theirs.get('masks'), want))}); collect them with --masks {cfg.masks}{vision}")
    return demos


class DaggerTrainer:
    """One DAgger run, a round at a time: ``round(r)`` = ``rollout`` + ``train_and_measure`` (+ the BC baseline)
    + the round's checkpoint. ``run_dagger`` drives it over the rounds not yet complete."""

    def __init__(self, cfg: DaggerConfig, runner: EpisodeRunner, masks: MaskSource, device: torch.device,
                 progress: bool = True):
        self.cfg, self.runner, self.masks, self.device, self.progress = cfg, runner, masks, device, progress
        self.store = RunStore(Path(cfg.out))
        self._fingers: dict[Path, np.ndarray] = {}
        self.episodes = TrainingEpisodes(cfg)
        # the training photos follow the run's visuals (--raw-sim); held-out photos stay held out
        self.eval_conditions = [
            dataclasses.replace(CONDITIONS[c], backgrounds=cfg.backgrounds)
            if CONDITIONS[c].backgrounds == "train" else CONDITIONS[c] for c in cfg.eval_conditions]

    def beta(self, r: int) -> float:
        cfg = self.cfg
        return beta_for_round(r, cfg.beta_schedule, cfg.beta_rampdown_rounds, cfg.beta_decay)

    # --- data -------------------------------------------------------------------------------
    def rollouts_to(self, root: Path, config: dict[str, Any], kind: str, todo: list[int],
                    requests: list[EpisodeRequest], policy: Policy | None, **run_kw: Any) -> list[EpisodeRecord]:
        """Run ``requests`` (dataset indices ``todo``) and write each finished episode into the dataset ``root``."""
        init_dataset(root, config, rollout_features(self.cfg.env), kind)
        remove_partial(root)
        with EpisodeWriter(root) as writer:
            return self.runner.run(requests, policy, self.masks, progress=self.progress, **run_kw,
                                   on_episode=lambda rec: writer.write(todo[rec.info["request_index"]], rec.arrays,
                                                                       rec.info))

    def rollout(self, r: int, policy: Policy | None) -> float:
        """Roll out the missing episodes of round r (the mixture of ``policy`` and the expert at the round's
        beta) into ``round-NNN/``; returns env steps per second."""
        beta = self.beta(r)
        root = self.store.round_dir(r)
        config = {"run": self.cfg.identity(), "round": r, "beta": beta}
        if r == 0 and self.cfg.demos:
            self.adopt_demos(root, {**config, "demos": self.cfg.demos})
            return float("nan")
        todo = sorted(set(range(self.cfg.episodes_per_round)) - set(finished_indices(root) if root.is_dir() else []))
        requests = [self.episodes.request(seeds.dagger_train_seed(r, i), beta) for i in todo]
        t0 = time.perf_counter()
        cutoff = self.cfg.blind_cutoff_steps if beta < 1 and self.cfg.blind_cutoff_steps > 0 else None
        recs = self.rollouts_to(root, config, ROUND_KIND, todo, requests, policy if beta < 1 else None,
                                desc=f"round {r} rollouts (beta {beta:.2f})", max_blind_steps=cutoff)
        return sum(rec.length for rec in recs) / max(time.perf_counter() - t0, 1e-9)

    def adopt_demos(self, root: Path, config: dict[str, Any]) -> None:
        """Round 0 = the first ``episodes_per_round`` demonstrations of ``cfg.demos`` (a ``collect`` dataset of the
        run's scene and mask source, :func:`check_demos`), copied as they are. Resumable."""
        demos = check_demos(self.cfg)
        init_dataset(root, config, rollout_features(self.cfg.env), ROUND_KIND)
        remove_partial(root)
        todo = sorted(set(range(min(len(demos), self.cfg.episodes_per_round))) - set(finished_indices(root)))
        with EpisodeWriter(root) as writer:
            for i in tqdm(todo, desc="round 0 from demos", unit="ep", disable=not self.progress, leave=False):
                ep = demos.episode(i)
                writer.write(i, {k: np.asarray(ep[k]) for k in STEP_KEYS}, {**ep.info, "condition": "demos"})

    # --- learning and measuring ---------------------------------------------------------------
    def success(self, policy: Policy, desc: str) -> tuple[int, int]:
        """Successes of ``policy`` alone (beta = 0) on the run's evaluation episodes, and their number."""
        conds = self.eval_conditions
        requests = [EpisodeRequest(seed=seeds.DAGGER_EVAL_BASE + i, condition=conds[i % len(conds)])
                    for i in range(self.cfg.eval_episodes)]
        recs = self.runner.run(requests, policy, self.masks, record=lambda i: False, progress=self.progress,
                               desc=desc)
        return sum(rec.success for rec in recs), len(recs)

    def load_or_new(self, path: Path | None) -> Policy:
        if path is not None and path.is_file():
            return Policy.load(path, self.device)[0]
        torch.manual_seed(self.cfg.seed)
        return Policy(self.cfg.policy, self.device)

    def predicted_gripper(self, ep: Episode) -> np.ndarray:
        """The fingers' masks the controller saw in a recorded episode with predicted masks: the segmenter's gripper
        head on its images (recorded episodes keep the ground truth), computed once per episode of the run."""
        if ep.path not in self._fingers:
            self._fingers[ep.path] = np.asarray(self.masks.gripper(np.asarray(ep["rgb"]), None), dtype=bool)
        return self._fingers[ep.path]

    def train_and_measure(self, policy: Policy, roots: list[Path], limit: int | None, rng_key: list[int],
                          name: str) -> dict[str, Any]:
        sees_predicted_fingers = self.cfg.policy.gripper and self.masks.kind == "predicted"
        labels = load_labels(roots, limit, self.predicted_gripper if sees_predicted_fingers else None)
        t0 = time.perf_counter()
        loss = fit(policy, labels, self.cfg.train, np.random.default_rng([self.cfg.seed, *rng_key]),
                   progress=self.progress, desc=f"train {name}")
        train_s = time.perf_counter() - t0
        t0 = time.perf_counter()
        k, n = self.success(policy, desc=f"evaluate {name}")
        lo, hi = wilson_interval(k, n)
        return {"labels": len(labels), "loss": loss, "successes": k, "success_rate": k / n, "ci_low": lo,
                "ci_high": hi, "train_s": train_s, "eval_s": time.perf_counter() - t0}

    def round(self, r: int) -> dict[str, Any]:
        """Round ``r`` whole; returns its learning-curve row (columns: ``curves.CURVE_COLUMNS``)."""
        cfg, store = self.cfg, self.store
        t_round = time.perf_counter()
        policy = self.load_or_new(store.ckpt(r - 1) if r > 0 else None)
        t0 = time.perf_counter()
        steps_per_s = self.rollout(r, policy)
        rollout_s = time.perf_counter() - t0
        dag = self.train_and_measure(policy, [store.round_dir(i) for i in range(r + 1)], None, [r, 0],
                                     f"DAgger round {r}")
        row: dict[str, Any] = {
            "round": r, "beta": self.beta(r), "labels": dag["labels"],
            "new_labels": EpisodeDataset(store.round_dir(r)).num_steps(), "dagger_loss": dag["loss"],
            "dagger_successes": dag["successes"], "dagger_success_rate": dag["success_rate"],
            "dagger_ci_low": dag["ci_low"], "dagger_ci_high": dag["ci_high"], "eval_episodes": cfg.eval_episodes,
            "rollout_s": rollout_s, "train_s": dag["train_s"], "eval_s": dag["eval_s"], "bc_s": 0.0,
            "rollout_env_steps_per_s": steps_per_s,
            "train_samples_per_s": cfg.train.steps * cfg.train.batch_size / max(dag["train_s"], 1e-9),
        }
        if cfg.bc_baseline:
            columns, bc_policy = bc_round(self, r, dag, policy)
            row.update(columns)
            bc_policy.save(store.ckpt(r, "bc"), {"config": cfg.to_dict(), "round": r, "kind": "bc", "metrics": row})
        row["round_s"] = time.perf_counter() - t_round
        policy.save(store.ckpt(r), {"config": cfg.to_dict(), "round": r, "kind": "dagger", "metrics": row})
        return row  # the checkpoint just written marks the round complete


def run_dagger(cfg: DaggerConfig, progress: bool = True, tensorboard: Path | None = None) -> DaggerResult:
    """Run (or resume) DAgger in ``cfg.out``; returns the learning curve of all completed rounds.
    ``tensorboard``: a folder for TensorBoard logs of each round (``tblog``)."""
    with ArtifactFolder(Path(cfg.out), "dagger-run"), TBLogger(tensorboard) as tb:
        return _run_dagger(cfg, progress, tb)


def _run_dagger(cfg: DaggerConfig, progress: bool = True, tb: TBLogger | None = None) -> DaggerResult:
    out = Path(cfg.out)
    store = RunStore(out)
    store.open(cfg.identity(), cfg.to_dict())
    for root in sorted([*out.glob("round-[0-9][0-9][0-9]"), store.bc_dir]):  # resuming: refuse a damaged episode
        if (root / "meta.json").is_file():                                   # before any new work (DatasetError)
            EpisodeDataset(root)
    torch.set_num_threads(cfg.torch_threads)
    device = torch.device(cfg.device) if cfg.device else default_device()
    masks = make_mask_source(cfg.masks, cfg.vision_checkpoint, device)
    rows = store.completed_rows()
    with open_runner(cfg.backend, cfg.env, cfg.workers, torch_threads=cfg.torch_threads,
                     observable_expert=cfg.observable_expert) as runner:
        trainer = DaggerTrainer(cfg, runner, masks, device, progress)
        for r in range(len(rows), cfg.rounds):
            rows.append(trainer.round(r))
            write_curve_csv(rows, out / "curve.csv")
            write_curve_json(rows, cfg.to_dict(), out / "curve.json")
            title = (f"{out.name}: masks={cfg.masks}, {cfg.episodes_per_round} episodes/round, {cfg.beta_schedule} "
                     f"beta, {cfg.eval_episodes} eval episodes ({', '.join(cfg.eval_conditions)})")
            plot_curve(rows, out / "curve.png", title=title, config=cfg.to_dict(), software=CURVE_SOFTWARE)
            tqdm.write(summary_line(rows[-1], cfg.rounds))
            if tb is not None:
                tb.dagger_round(rows[-1], store.round_dir(r))
    if not rows:
        raise RuntimeError("no round completed")
    best = best_round(rows)
    store.select(best)
    tqdm.write(f"policy.pt = round {best} (best of rounds 0-{rows[-1]['round']} on the evaluation episodes)")
    return DaggerResult(rows=rows, policy_path=out / "policy.pt", selected_round=best, curve_csv=out / "curve.csv",
                        curve_png=out / "curve.png")
