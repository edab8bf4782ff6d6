"""DAgger (Ross, Gordon, Bagnell 2011) for the mask-based controller, resumable, with a BC baseline.

On-disk layout of a run folder ``OUT/``::

    OUT/run.json                    format + version, the DaggerConfig of the run
    OUT/round-000/ ... round-NNN/   episode datasets (grasp_s2r.data.episodes, kind "dagger-round"):
                                    every visited state with the expert's label (``action``), the
                                    controller's input mask, what was executed, the sim state
    OUT/bc-expert/                  extra expert-only episodes for the behavior-cloning baseline
    OUT/checkpoints/round-NNN.pt    controller after round NNN (+ config, metrics); its presence
                                    marks the round complete
    OUT/checkpoints/bc-NNN.pt       BC baseline trained on as many expert labels as DAgger had
    OUT/policy.pt                   the best round's controller on the evaluation episodes (what ``grasp-s2r eval`` takes)
    OUT/curve.csv, OUT/curve.png    learning curve: success and loss per round, DAgger vs BC
    OUT/curve.json                  the same rows + format version + the run's config

Round r: (1) roll out the mixture policy (β_r; round 0 is β = 1, the expert) and label every
visited state with the expert; (2) train the controller on the labels of rounds 0..r, warm-started
from round r-1; (3) measure its success (β = 0) on the same evaluation episodes every round;
(4) train BC on the same number of expert-only labels and measure it on the same episodes.
Every episode and checkpoint is written atomically, so after ``kill -9`` the same command resumes
from the last completed round and keeps the finished episodes of an interrupted one.
"""

from __future__ import annotations

import dataclasses
import json
import math
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import torch
from tqdm import tqdm

from grasp_s2r import __version__
from grasp_s2r.control import seeds
from grasp_s2r.control.backend import BackendConfig, EpisodeRunner, open_runner
from grasp_s2r.control.conditions import CONDITIONS, Condition
from grasp_s2r.control.curves import (
    CURVE_SOFTWARE,
    best_round,
    summary_line,
    write_curve_csv,
    write_curve_json,
)
from grasp_s2r.control.demos import import_demos
from grasp_s2r.control.policy import Policy, PolicyConfig, default_device, read_policy_blob
from grasp_s2r.control.rollout import (
    EpisodeRecord,
    EpisodeRequest,
    MaskSource,
    make_mask_source,
    rollout_features,
)
from grasp_s2r.control.train import TrainConfig, fit, load_labels
from grasp_s2r.data.episodes import EpisodeDataset, EpisodeWriter, finished_indices, init_dataset, remove_partial
from grasp_s2r.drawing import plot_curve
from grasp_s2r.files import ArtifactFolder, atomic_write
from grasp_s2r.sim.config import EnvConfig
from grasp_s2r.stats import wilson_interval
from grasp_s2r.tblog import TBLogger

RUN_FORMAT = "grasp_s2r.dagger-run"
RUN_FORMAT_VERSION = 1
ROUND_KIND = "dagger-round"
BC_KIND = "bc-expert"
BETA_SCHEDULES = ("linear", "exponential")
CONTROL_CAMERA_JITTER_M = 0.001
"""Per-episode camera mount jitter of the controller's scene: a calibration tolerance."""
CONTROL_CAMERA_JITTER_DEG = 0.5
"""Per-episode camera look-at jitter of the controller's scene.

The scene default (4 mm, 2 deg, chosen for vision robustness) shifts where the TCP axis appears in
the image by up to ~8 mm per episode, more than the expert's 3.5 mm closing tolerance; a controller
that sees only the mask cannot tell, so it learns on a camera calibrated to these tolerances."""
_RESUMABLE_FIELDS = ("rounds", "workers", "backend", "device", "torch_threads")
_LEGACY_VALUES = {"observable_expert": False, "out_of_view_prob": 0.0, "table_photo_prob": 0.0, "dropout_prob": 0.0}
"""Fields added later, left out of a run's identity at the value that reproduces runs made before they existed
(so those runs still resume)."""
"""Config fields that may differ when a run is resumed (e.g. ask for more rounds)."""


def control_env_config(
    base: EnvConfig | None = None, camera_jitter_mm: float | None = None, camera_jitter_deg: float | None = None,
) -> EnvConfig:
    """``base`` (default scene) with the controller's camera calibration tolerance (or the given jitter)."""
    base = base or EnvConfig()
    jitter_m = CONTROL_CAMERA_JITTER_M if camera_jitter_mm is None else camera_jitter_mm / 1000.0
    jitter_deg = CONTROL_CAMERA_JITTER_DEG if camera_jitter_deg is None else camera_jitter_deg
    rand = dataclasses.replace(base.randomization, camera_jitter_m=jitter_m, camera_jitter_deg=jitter_deg)
    return base.replace(randomization=rand)


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
    beta_schedule: str = "linear"
    """"linear": beta_r = max(0, 1 - r / beta_rampdown_rounds); "exponential": beta_r = beta_decay ** r."""
    beta_rampdown_rounds: int = 3
    """Linear schedule: rounds until the expert is no longer executed at all."""
    beta_decay: float = 0.5
    """Exponential schedule: factor per round."""
    masks: str = "predicted"
    """Controller input: "predicted" (segmenter on the camera image) or "gt" (ground-truth mask)."""
    vision_checkpoint: str = ""
    """Segmenter checkpoint for predicted masks ("" = the one packaged with grasp_s2r)."""
    backgrounds: str = "train"
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
    train: TrainConfig = field(default_factory=TrainConfig)
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
        return dataclasses.asdict(self)

    def identity(self) -> dict[str, Any]:
        """The fields that define the run's results (not how many rounds, nor where it computes)."""
        identity = {k: v for k, v in self.to_dict().items()
                    if k not in _RESUMABLE_FIELDS and not (k in _LEGACY_VALUES and v == _LEGACY_VALUES[k])}
        if not identity["policy"].get("memory"):  # a memoryless controller: as before memory existed
            identity["policy"].pop("memory", None)
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


def _check_run_folder(out: Path, cfg: DaggerConfig) -> None:
    path = out / "run.json"
    if path.is_file():
        old = json.loads(path.read_text())
        if old.get("format") != RUN_FORMAT or old.get("format_version") != RUN_FORMAT_VERSION:
            raise ValueError(f"{out} holds a run of format {old.get('format')} v{old.get('format_version')}, "
                             f"this grasp_s2r writes {RUN_FORMAT} v{RUN_FORMAT_VERSION}; use a new --out folder")
        if old["identity"] != cfg.identity():
            diff = sorted(k for k in cfg.identity() if old["identity"].get(k) != cfg.identity()[k])
            raise ValueError(f"{out} holds a DAgger run with another config (differs in {', '.join(diff)}); "
                             "use a new --out folder or the same options")
        return
    blob = {"format": RUN_FORMAT, "format_version": RUN_FORMAT_VERSION, "package_version": __version__,
            "identity": cfg.identity(), "config": cfg.to_dict()}
    atomic_write(path, json.dumps(blob, indent=2, sort_keys=True).encode())


class _Run:
    """One DAgger run's state and steps; ``run_dagger`` is the public entry point."""

    def __init__(self, cfg: DaggerConfig, pool: EpisodeRunner, masks: MaskSource, device: torch.device,
                 progress: bool):
        self.cfg, self.pool, self.masks, self.device, self.progress = cfg, pool, masks, device, progress
        self.out = Path(cfg.out)
        self.condition = Condition(name="dagger-train", backgrounds=cfg.backgrounds, description="training episode")
        # the training photos follow the run's visuals (--raw-sim); held-out photos stay held out
        self.eval_conditions = [
            dataclasses.replace(CONDITIONS[c], backgrounds=cfg.backgrounds)
            if CONDITIONS[c].backgrounds == "train" else CONDITIONS[c] for c in cfg.eval_conditions]

    def train_request(self, seed: int, beta: float) -> EpisodeRequest:
        """A training episode: disturbed (the sphere pushed once) with probability ``disturbance_prob``, starting
        blind (empty input masks) with probability ``blind_start_prob``, and each of ``out_of_view_prob``,
        ``table_photo_prob``, ``dropout_prob`` (independent draws, each from its own stream of the seed)."""
        rng = np.random.default_rng([seed, 3])
        condition = self.condition
        if rng.random() < self.cfg.disturbance_prob:
            condition = Condition(name="dagger-push", backgrounds=self.cfg.backgrounds,
                                  perturb_distance_m=self.cfg.disturbance_distance_m,
                                  perturb_below_m=float(rng.uniform(*self.cfg.disturbance_below_m)),
                                  description="training episode with a push")
        extra: dict[str, Any] = {}
        if self.cfg.out_of_view_prob and np.random.default_rng([seed, 6]).random() < self.cfg.out_of_view_prob:
            extra["start_out_of_view_deg"] = CONDITIONS["start-out-of-view"].start_out_of_view_deg
        if self.cfg.table_photo_prob and np.random.default_rng([seed, 7]).random() < self.cfg.table_photo_prob:
            extra.update(backgrounds="", table_photos="train")
        if self.cfg.dropout_prob and np.random.default_rng([seed, 8]).random() < self.cfg.dropout_prob:
            extra["dropout_steps"] = CONDITIONS["dropout"].dropout_steps
        if extra:
            condition = dataclasses.replace(condition, **extra)
        blind = np.random.default_rng([seed, 4])
        lo, hi = self.cfg.blind_start_steps
        n_blind = int(blind.integers(lo, hi + 1)) if blind.random() < self.cfg.blind_start_prob else 0
        return EpisodeRequest(seed=seed, beta=beta, condition=condition, blind_start_steps=n_blind)

    def round_dir(self, r: int) -> Path:
        return self.out / f"round-{r:03d}"

    def ckpt(self, r: int, kind: str = "round") -> Path:
        return self.out / "checkpoints" / f"{kind}-{r:03d}.pt"

    # --- data -------------------------------------------------------------------------------
    def _rollouts_to(self, root: Path, config: dict[str, Any], kind: str, todo: list[int],
                     requests: list[EpisodeRequest], policy: Policy | None, **run_kw: Any) -> list[EpisodeRecord]:
        """Run ``requests`` (dataset indices ``todo``) and write each finished episode into the dataset ``root``."""
        init_dataset(root, config, rollout_features(self.cfg.env), kind)
        remove_partial(root)
        with EpisodeWriter(root) as writer:
            return self.pool.run(requests, policy, self.masks, progress=self.progress, **run_kw,
                                 on_episode=lambda rec: writer.write(todo[rec.info["request_index"]], rec.arrays,
                                                                     rec.info))

    def collect_round(self, r: int, beta: float, policy: Policy | None) -> float:
        """Roll out the missing episodes of round r into ``round-NNN/``; returns env steps per second."""
        root = self.round_dir(r)
        config = {"run": self.cfg.identity(), "round": r, "beta": beta}
        if r == 0 and self.cfg.demos:
            import_demos(Path(self.cfg.demos), root, {**config, "demos": self.cfg.demos}, self.cfg.env, self.masks,
                         self.cfg.episodes_per_round, ROUND_KIND, self.progress)
            return float("nan")
        todo = sorted(set(range(self.cfg.episodes_per_round)) - set(finished_indices(root) if root.is_dir() else []))
        requests = [self.train_request(seeds.dagger_train_seed(r, i), beta) for i in todo]
        t0 = time.perf_counter()
        cutoff = self.cfg.blind_cutoff_steps if beta < 1 and self.cfg.blind_cutoff_steps > 0 else None
        recs = self._rollouts_to(root, config, ROUND_KIND, todo, requests, policy,
                                 desc=f"round {r} rollouts (beta {beta:.2f})", max_blind_steps=cutoff)
        return sum(rec.length for rec in recs) / max(time.perf_counter() - t0, 1e-9)


    def ensure_bc_labels(self, n_labels: int) -> list[Path]:
        """Expert-only datasets holding at least ``n_labels`` labels: round 0, then ``bc-expert/``."""
        root = self.out / "bc-expert"
        have = EpisodeDataset(self.round_dir(0)).num_steps()
        done: set[int] = set()
        if root.is_dir() and finished_indices(root):
            have += EpisodeDataset(root).num_steps()
            done = set(finished_indices(root))
        while have < n_labels:
            n_eps = int(np.ceil((n_labels - have) / 12.0)) + 1  # an expert episode is ~14 steps
            todo = [i for i in range(len(done) + n_eps) if i not in done][:n_eps]  # fills gaps left by a kill
            requests = [self.train_request(seeds.BC_EXPERT_BASE + i, 1.0) for i in todo]
            recs = self._rollouts_to(root, {"run": self.cfg.identity()}, BC_KIND, todo, requests, None,
                                     desc="BC expert episodes")
            have += sum(rec.length for rec in recs)
            done |= set(todo)
        return [self.round_dir(0), root]

    # --- learning and measuring ---------------------------------------------------------------
    def success(self, policy: Policy, desc: str) -> tuple[int, int]:
        conds = self.eval_conditions
        requests = [EpisodeRequest(seed=seeds.DAGGER_EVAL_BASE + i, beta=0.0, condition=conds[i % len(conds)])
                    for i in range(self.cfg.eval_episodes)]
        recs = self.pool.run(requests, policy, self.masks, record=lambda i: False, progress=self.progress, desc=desc)
        return sum(rec.success for rec in recs), len(recs)

    def load_or_new(self, path: Path | None) -> Policy:
        if path is not None and path.is_file():
            return Policy.load(path, self.device)[0]
        torch.manual_seed(self.cfg.seed)
        return Policy(self.cfg.policy, self.device)

    def train_and_measure(self, policy: Policy, roots: list[Path], limit: int | None, rng_key: list[int],
                          name: str) -> dict[str, Any]:
        labels = load_labels(roots, limit)
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
        cfg = self.cfg
        t_round = time.perf_counter()
        beta = beta_for_round(r, cfg.beta_schedule, cfg.beta_rampdown_rounds, cfg.beta_decay)
        policy = self.load_or_new(self.ckpt(r - 1) if r > 0 else None)
        t0 = time.perf_counter()
        steps_per_s = self.collect_round(r, beta, policy if beta < 1 else None)
        rollout_s = time.perf_counter() - t0
        roots = [self.round_dir(i) for i in range(r + 1)]
        dag = self.train_and_measure(policy, roots, None, [r, 0], f"DAgger round {r}")
        row: dict[str, Any] = {
            "round": r, "beta": beta, "labels": dag["labels"],
            "new_labels": EpisodeDataset(self.round_dir(r)).num_steps(), "dagger_loss": dag["loss"],
            "dagger_successes": dag["successes"], "dagger_success_rate": dag["success_rate"],
            "dagger_ci_low": dag["ci_low"], "dagger_ci_high": dag["ci_high"], "eval_episodes": cfg.eval_episodes,
            "rollout_s": rollout_s, "train_s": dag["train_s"], "eval_s": dag["eval_s"], "bc_s": 0.0,
            "rollout_env_steps_per_s": steps_per_s,
            "train_samples_per_s": cfg.train.steps * cfg.train.batch_size / max(dag["train_s"], 1e-9),
        }
        if cfg.bc_baseline:
            t0 = time.perf_counter()
            if r == 0:  # round 0 is behavior cloning: same labels, same network
                bc, bc_policy = dag, policy
            else:
                bc_policy = self.load_or_new(self.ckpt(r - 1, "bc"))
                bc = self.train_and_measure(bc_policy, self.ensure_bc_labels(dag["labels"]), dag["labels"], [r, 1],
                                            f"BC at {dag['labels']} labels")
            row.update({f"bc_{k}": bc[k] for k in ("loss", "successes", "success_rate", "ci_low", "ci_high")})
            row["bc_s"] = time.perf_counter() - t0
            bc_policy.save(self.ckpt(r, "bc"), {"config": cfg.to_dict(), "round": r, "kind": "bc", "metrics": row})
        row["round_s"] = time.perf_counter() - t_round
        extra = {"config": cfg.to_dict(), "round": r, "kind": "dagger", "metrics": row}
        policy.save(self.ckpt(r), extra)  # marks the round complete
        return row


def completed_rows(out: Path) -> list[dict[str, Any]]:
    """Learning-curve rows stored in the checkpoints of the completed rounds of a run folder."""
    rows = []
    for path in sorted((Path(out) / "checkpoints").glob("round-*.pt")):
        rows.append(read_policy_blob(path)["metrics"])
    return rows


def run_dagger(cfg: DaggerConfig, progress: bool = True, tensorboard: Path | None = None) -> DaggerResult:
    """Run (or resume) DAgger in ``cfg.out``; returns the learning curve of all completed rounds.
    ``tensorboard``: a folder for TensorBoard logs of each round (``tblog``)."""
    with ArtifactFolder(Path(cfg.out), "dagger-run"), TBLogger(tensorboard) as tb:
        return _run_dagger(cfg, progress, tb)


def _run_dagger(cfg: DaggerConfig, progress: bool = True, tb: TBLogger | None = None) -> DaggerResult:
    out = Path(cfg.out)
    _check_run_folder(out, cfg)
    torch.set_num_threads(cfg.torch_threads)
    device = torch.device(cfg.device) if cfg.device else default_device()
    masks = make_mask_source(cfg.masks, cfg.vision_checkpoint, device)
    rows = completed_rows(out)
    with open_runner(cfg.backend, cfg.env, cfg.workers, torch_threads=cfg.torch_threads,
                     observable_expert=cfg.observable_expert) as pool:
        run = _Run(cfg, pool, masks, device, progress)
        for r in range(len(rows), cfg.rounds):
            rows.append(run.round(r))
            write_curve_csv(rows, out / "curve.csv")
            write_curve_json(rows, cfg.to_dict(), out / "curve.json")
            title = (f"{out.name}: masks={cfg.masks}, {cfg.episodes_per_round} episodes/round, {cfg.beta_schedule} "
                     f"beta, {cfg.eval_episodes} eval episodes ({', '.join(cfg.eval_conditions)})")
            plot_curve(rows, out / "curve.png", title=title, config=cfg.to_dict(), software=CURVE_SOFTWARE)
            tqdm.write(summary_line(rows[-1], cfg.rounds))
            if tb is not None:
                tb.dagger_round(rows[-1], run.round_dir(r))
    if not rows:
        raise RuntimeError("no round completed")
    best = best_round(rows)
    atomic_write(out / "policy.pt", run.ckpt(best).read_bytes())
    tqdm.write(f"policy.pt = round {best} (best of rounds 0-{rows[-1]['round']} on the evaluation episodes)")
    return DaggerResult(rows=rows, policy_path=out / "policy.pt", selected_round=best, curve_csv=out / "curve.csv",
                        curve_png=out / "curve.png")
