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
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch
from tqdm import tqdm

from grasp_s2r.collect import DATASET_KIND
from grasp_s2r.configs import differences, to_dict, to_json
from grasp_s2r.control import seeds
from grasp_s2r.control.bc_baseline import bc_round
from grasp_s2r.control.curves import CURVE_SOFTWARE, best_round, summary_line, write_curve_csv, write_curve_json
from grasp_s2r.control.dagger_config import (  # noqa: F401 - re-exported: the public names
    BETA_SCHEDULES,
    LOST_SPHERE_RECIPE,
    BetaSchedule,
    DaggerConfig,
    beta_for_round,
)
from grasp_s2r.control.policy import ControllerCheckpointError, Policy
from grasp_s2r.control.run_store import ROUND_KIND, RunStore
from grasp_s2r.control.train import fit, load_labels
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
from grasp_s2r.expert.fsm import SearchConfig
from grasp_s2r.runtime.backend import EpisodeRunner, claimed, open_runner
from grasp_s2r.runtime.conditions import CONDITIONS
from grasp_s2r.runtime.masks import MaskSource, make_mask_source, mask_source_identity
from grasp_s2r.runtime.records import STEP_KEYS, EpisodeRecord, EpisodeRequest, rollout_features
from grasp_s2r.stats import wilson_interval
from grasp_s2r.tblog import TBLogger


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
    if demos.meta.get("kind") != DATASET_KIND:
        raise ValueError(f"--demos {cfg.demos} is a {demos.meta.get('kind')} dataset, not expert demonstrations: "
                         "pass a 'grasp-s2r collect --controller-scene' dataset (a DAgger round holds the learner's "
                         "episodes), or leave --demos out")
    features = demos.meta.get("features", {})
    missing = sorted(set(STEP_KEYS) - set(features))
    if missing:
        raise ValueError(f"--demos {cfg.demos} were collected by an older grasp_s2r (no {', '.join(missing)}): "
                         f"'grasp-s2r upgrade {cfg.demos} --out NEW' writes them in the current layout")
    theirs = demos.meta.get("config", {})
    mine = to_json(cfg.env)
    if theirs.get("env") != mine:
        raise ValueError(f"--demos {cfg.demos} were collected with another scene or camera than this run's "
                         f"({'; '.join(differences(theirs.get('env'), mine))}); collect them with 'grasp-s2r collect "
                         "--controller-scene' and this run's scene options, or leave --demos out")
    schema = rollout_features(cfg.env)
    other = [k for k in STEP_KEYS if features[k].get("shape") != schema[k]["shape"]  # names: where recorded
             or features[k].get("names", schema[k].get("names")) != schema[k].get("names")]
    if other:
        k = other[0]
        raise ValueError(f"--demos {cfg.demos} were recorded with another layout of {', '.join(other)} than this "
                         f"grasp_s2r's ({k}: shape {features[k].get('shape')}, names {features[k].get('names')}; "
                         f"here shape {schema[k]['shape']}, names {schema[k].get('names')}): collect them again with "
                         "this version, or leave --demos out")
    want = mask_source_identity(cfg.masks, cfg.vision_checkpoint)
    if theirs.get("masks") != want:
        vision = f" --vision {cfg.vision_checkpoint}" if cfg.masks == "predicted" and cfg.vision_checkpoint else ""
        raise ValueError(f"--demos {cfg.demos} recorded other controller input masks than this run's "
                         f"({'; '.join(differences(theirs.get('masks'), want))}); collect them with --masks {cfg.masks}{vision}")
    return demos


def load_init_policy(cfg: DaggerConfig, device: torch.device | str | None = None) -> Policy:
    """The controller of ``cfg.init_policy``, which round 0 trains on from; :class:`ControllerCheckpointError`
    (starting "--init") when it is missing or unreadable, or its architecture is not the run's ``policy`` (its
    features would not match)."""
    try:
        policy, _ = Policy.load(Path(cfg.init_policy), device)
    except (FileNotFoundError, ControllerCheckpointError) as e:
        raise ControllerCheckpointError(f"--init: {e}") from None
    if policy.cfg != cfg.policy:
        raise ControllerCheckpointError(f"--init {cfg.init_policy}: a controller of architecture "
                                        f"{to_dict(policy.cfg)}, not this run's {to_dict(cfg.policy)} (give the "
                                        "options it was trained with, e.g. --memory)")
    return policy


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
        if self.cfg.init_policy:
            return load_init_policy(self.cfg, self.device)
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


def resume_line(store: RunStore, completed: int, rounds: int) -> str:
    """What a resumed run continues from: its complete rounds, and the episodes kept of the one it stopped in."""
    if completed >= rounds:
        return f"dagger: resuming {store.out}: all {rounds} rounds are complete; selecting the controller"
    done = f"rounds 0-{completed - 1} complete" if completed else "no round complete"
    kept = len(finished_indices(store.round_dir(completed)))
    return (f"dagger: resuming {store.out}: {done}; round {completed} of 0-{rounds - 1} goes on"
            + (f", keeping its {kept} finished episodes" if kept else ""))


def run_dagger(cfg: DaggerConfig, progress: bool = True, tensorboard: Path | None = None) -> DaggerResult:
    """Run (or resume) DAgger in ``cfg.out``; returns the learning curve of all completed rounds.
    ``tensorboard``: a folder for TensorBoard logs of each round (``tblog``)."""
    with claimed(cfg.out, "dagger-run", cfg.backend), TBLogger(tensorboard) as tb:  # Ray reached before writing
        return _run_dagger(cfg, progress, tb)


def _run_dagger(cfg: DaggerConfig, progress: bool = True, tb: TBLogger | None = None) -> DaggerResult:
    out = Path(cfg.out)
    if cfg.init_policy:  # refused before the run folder is written
        load_init_policy(cfg, "cpu")
    store = RunStore(out)
    store.open(cfg.identity(), cfg.to_dict())
    for root in sorted([*out.glob("round-[0-9][0-9][0-9]"), store.bc_dir]):  # resuming: refuse a damaged episode
        if (root / "meta.json").is_file():                                   # before any new work (DatasetError)
            EpisodeDataset(root)
    torch.set_num_threads(cfg.torch_threads)
    device = torch.device(cfg.device) if cfg.device else default_device()
    masks = make_mask_source(cfg.masks, cfg.vision_checkpoint, device)
    rows = store.completed_rows()
    if rows or store.round_dir(0).is_dir():
        tqdm.write(resume_line(store, len(rows), cfg.rounds))
    with open_runner(cfg.backend, cfg.env, cfg.workers, torch_threads=cfg.torch_threads,
                     observable_expert=cfg.observable_expert,
                     search=SearchConfig(search_height_m=cfg.search_height_m,
                                         first_look_height_m=cfg.first_look_height_m,
                                         learner_sees=cfg.learner_sees)) as runner:
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
