"""``grasp-s2r pipeline``: the whole job on a small default, each stage resumable.

train-vision (the shipped segmenter fine-tuned by the recipe that made it, on the user's photos with ``--backgrounds``;
from scratch with ``--vision-from-scratch``) -> eval-vision (every test suite, held-out split) -> collect (expert
demonstrations in the controller's scene, recording that segmenter's masks: DAgger's round 0 as they are) ->
dagger (controller over predicted masks) -> eval (end to end, named conditions: nominal, the held-out photos
composited behind the sphere, and the held-out photos as the sim table's texture).

Every stage calls the same library function as its own command and writes into ``OUT/<stage>``;
re-running the same command after an interruption skips what is finished. ``OUT/run.json`` records the run: a rerun
that asks for other training (``PipelineConfig.identity``) is refused, naming the field; one that asks for other
evaluations (``EVALUATION_FIELDS``) or more DAgger rounds redoes only what they change. An evaluation stage is
skipped where its report is of the same weights (sha256), settings and grasp_s2r version.
"""

from __future__ import annotations

import json
import time
from dataclasses import asdict, dataclass
from pathlib import Path

from grasp_s2r import __version__
from grasp_s2r.artifacts import ArtifactFolder
from grasp_s2r.cpu import cpu_info
from grasp_s2r.files import file_sha256, write_json
from grasp_s2r.run_record import RunRecord

PIPELINE_FORMAT = "grasp_s2r.pipeline-summary"
PIPELINE_FORMAT_VERSION = 5
RUN_FORMAT = "grasp_s2r.pipeline-run"
RUN_FORMAT_VERSION = 1
EVALUATION_FIELDS = ("out", "workers", "vision_eval_images", "eval_episodes", "conditions")
"""Fields a rerun may change: where the stages run (the folder, the processes: as ``dagger``'s resume allows) and
what the evaluations measure."""
RESUMABLE_FIELDS = ("dagger_rounds",)
"""Fields a rerun may change too: DAgger goes on from its last round, or selects among fewer (``dagger``'s resume)."""
TRAINED = ("vision/checkpoint-latest.pt", "vision/model.pt", "demos/meta.json", "dagger/run.json")
"""What a pipeline run has made once it has trained or collected anything: before, its options may still change."""
RERUN_HINT = "rerun it with the options it was made with (its run.json), or choose another --out"


@dataclass(frozen=True)
class PipelineConfig:
    """Sizes of the small default; every stage can be run bigger with its own command."""

    out: str = "runs/pipeline"
    """Root folder; stages write into sub-folders."""
    demo_episodes: int = 24
    """Expert episodes of ``collect`` (DAgger round 0)."""
    vision_steps: int = 300
    """Optimizer steps of the segmentation network."""
    vision_from_scratch: bool = False
    """Train the segmenter from random weights instead of fine-tuning the shipped one (far weaker at this size)."""
    vision_lr: float = 3e-4
    """Peak learning rate of the fine-tuning (from scratch: ``SegmenterTrainConfig``'s default)."""
    backgrounds: str = ""
    """Folder of the user's own photos for the segmenter and its held-out suites ("" = the embedded photos)."""
    vision_eval_images: int = 500
    """Images per test suite for ``eval-vision``."""
    dagger_rounds: int = 5
    """DAgger rounds, round 0 included."""
    dagger_table_photo_prob: float = 0.3
    """Share of DAgger's training episodes with a training photo as the sim table's texture (chosen on validation
    episodes of the training photos, ``benchmarks/pipeline_recipe.py``: docs/control.md)."""
    dagger_eval_episodes: int = 40
    """Episodes measuring each DAgger round (the best round is kept: ``grasp-s2r dagger --eval-episodes``)."""
    eval_episodes: int = 50
    """Episodes per condition of the end-to-end evaluation."""
    conditions: tuple[str, ...] = ("nominal", "heldout-backgrounds", "table-photo")
    """End-to-end conditions to evaluate (``table-photo``: the held-out photos as the sim table's texture, the main
    realism condition; the summary's last line gives each one's success)."""
    workers: int = 2
    """Worker processes for collection and rollouts."""
    seed: int = 0
    """Seed of every stage."""

    def __post_init__(self) -> None:
        if not 0.0 <= self.dagger_table_photo_prob <= 1.0:
            raise ValueError(f"dagger_table_photo_prob must be in [0, 1], got {self.dagger_table_photo_prob}")

    def identity(self) -> dict:
        """The fields that define what the pipeline trains (a rerun into its folder must ask the same)."""
        return {k: v for k, v in asdict(self).items() if k not in EVALUATION_FIELDS + RESUMABLE_FIELDS}


def _stage(name: str, index: int, total: int) -> float:
    print(f"\n=== [{index}/{total}] {name} ===", flush=True)
    return time.perf_counter()


def _current_report(path: Path, expected: dict) -> dict | None:
    """The JSON report at ``path`` where each of ``expected``'s keys (dotted: ``"model.sha256"``) holds the value
    given (same weights, same settings), else None (missing, unreadable, or of other inputs: the stage runs again)."""
    try:
        report = json.loads(path.read_text())
    except (OSError, ValueError):
        return None
    for key, value in json.loads(json.dumps(expected)).items():  # as JSON holds them (tuples as lists)
        found: object = report
        for part in key.split("."):
            found = found.get(part) if isinstance(found, dict) else None
        if found != value:
            return None
    return report


def run_pipeline(cfg: PipelineConfig) -> dict:
    """Run (or resume) every stage; returns the summary also written to ``OUT/summary.json``."""
    with ArtifactFolder(Path(cfg.out), "pipeline"):
        _open_record(cfg)
        return _run_pipeline(cfg)


def _open_record(cfg: PipelineConfig) -> None:
    """Write ``OUT/run.json``, or check this run's options against it (``RunRecordError`` naming each field that
    differs). A record of a run that made nothing yet (it stopped on a bad option) gives way to this one; a folder
    of a version before the record has its ``summary.json``'s options checked."""
    out = Path(cfg.out)
    record = RunRecord(out, RUN_FORMAT, RUN_FORMAT_VERSION, "a pipeline run")
    made = any((out / name).exists() for name in TRAINED)
    if record.exists() and not made:
        record.path.unlink()
    if not record.exists() and made:
        try:
            old = json.loads((out / "summary.json").read_text())["config"]
        except (OSError, ValueError, KeyError, TypeError):
            old = None  # an older run stopped before its summary: nothing says what it asked
        if isinstance(old, dict):
            record.open({k: old.get(k, v) for k, v in cfg.identity().items()}, old, hint=RERUN_HINT)
    record.open(cfg.identity(), asdict(cfg), hint=RERUN_HINT)


def _run_pipeline(cfg: PipelineConfig) -> dict:
    import torch

    from grasp_s2r.collect import CollectConfig, collect
    from grasp_s2r.control.dagger import DaggerConfig, run_dagger
    from grasp_s2r.control.evaluate import PolicyEvalConfig, evaluate_policy, results_table
    from grasp_s2r.runtime.conditions import resolve_condition
    from grasp_s2r.runtime.masks import mask_source_identity
    from grasp_s2r.sim.config import control_env_config
    from grasp_s2r.stats import format_rate
    from grasp_s2r.vision.evaluation.evaluate import VisionEvalConfig, evaluate_suites
    from grasp_s2r.vision.evaluation.metrics import format_suite_table
    from grasp_s2r.vision.networks.segmenter import default_checkpoint_path
    from grasp_s2r.vision.testsets.suites import SUITES
    from grasp_s2r.vision.training.sessions import runtime_sessions
    from grasp_s2r.vision.training.train import SegmenterTrainConfig, train
    from grasp_s2r.vision.training.train_config import margin_of, recipe_of

    torch.set_num_threads(max(1, cfg.workers))
    out = Path(cfg.out)
    out.mkdir(parents=True, exist_ok=True)
    seconds: dict[str, float] = {}
    total = 5

    how = ("from scratch, the training recipe" if cfg.vision_from_scratch else
           "fine-tuning the shipped segmenter by the recipe that made it")
    t = _stage(f"train the segmentation network ({how})", 1, total)
    vision_dir = out / "vision"
    model = vision_dir / "model.pt"
    backgrounds = Path(cfg.backgrounds) if cfg.backgrounds else None
    if not model.exists():
        resume = (vision_dir / "checkpoint-latest.pt").exists()
        shipped = default_checkpoint_path()
        train_cfg = (SegmenterTrainConfig(steps=cfg.vision_steps, seed=cfg.seed) if cfg.vision_from_scratch else
                     SegmenterTrainConfig(steps=cfg.vision_steps, seed=cfg.seed, lr=cfg.vision_lr,
                                          init_checkpoint=str(shipped), data=recipe_of(shipped),
                                          margin_px=margin_of(shipped)))
        model = train(train_cfg, vision_dir, resume=resume, backgrounds_dir=backgrounds)
    else:
        print(f"{model} exists: skipped")
    seconds["train-vision"] = time.perf_counter() - t

    t = _stage("evaluate the segmentation network on every test suite (held-out split)", 2, total)
    vision_cfg = VisionEvalConfig(n_images=cfg.vision_eval_images, seed=cfg.seed + 1)
    vision_report = _current_report(vision_dir / "eval.json", {"config": {**vision_cfg.to_dict(), "suite": list(SUITES)},
                                                               "model.sha256": file_sha256(model),
                                                               "package_version": __version__})
    if vision_report is None:
        vision_report, _ = evaluate_suites(model, list(SUITES), backgrounds_dir=backgrounds, latency_frames=0,
                                           cfg=vision_cfg)
        write_json(vision_dir / "eval.json", vision_report, indent=2)
    else:
        print(f"{vision_dir / 'eval.json'} is of this segmenter and these suites: skipped")
    print(format_suite_table(vision_report["suites"],
                             f"eval-vision: {model}, {cfg.vision_eval_images} images per suite"))
    seconds["eval-vision"] = time.perf_counter() - t

    t = _stage("collect expert demonstrations (the controller's scene, its segmenter's masks)", 3, total)
    demos = out / "demos"
    c = collect(CollectConfig(out=str(demos), episodes=cfg.demo_episodes, workers=cfg.workers, seed=cfg.seed,
                              env=control_env_config(), masks="predicted", vision_checkpoint=str(model)))
    print(f"expert success {format_rate(c.successes, c.episodes)}")
    seconds["collect"] = time.perf_counter() - t

    t = _stage("train the controller with DAgger over predicted masks", 4, total)
    d = run_dagger(DaggerConfig(out=str(out / "dagger"), rounds=cfg.dagger_rounds, demos=str(demos),
                                vision_checkpoint=str(model), workers=cfg.workers, seed=cfg.seed,
                                table_photo_prob=cfg.dagger_table_photo_prob,
                                eval_episodes=cfg.dagger_eval_episodes))
    seconds["dagger"] = time.perf_counter() - t

    t = _stage("evaluate end to end: wrist RGB -> mask -> controller -> action", 5, total)
    eval_cfg = PolicyEvalConfig(policy=str(d.policy_path), vision=str(model), episodes=cfg.eval_episodes,
                                conditions=cfg.conditions, workers=cfg.workers, out=str(out / "eval"))
    weights = {"policy_sha256": file_sha256(d.policy_path), "masks": mask_source_identity("predicted", str(model))}
    definitions = {f"conditions.{name}.condition": resolve_condition(name, None).to_dict() for name in cfg.conditions}
    results = _current_report(out / "eval" / "eval.json", {"config": eval_cfg.to_dict(), "weights": weights,
                                                           "package_version": __version__,
                                                           **definitions})  # a condition edited since: run again
    if results is None:
        results = evaluate_policy(eval_cfg)
    else:
        print(f"{out / 'eval' / 'eval.json'} is of this controller, this segmenter and these episodes: skipped")
    print(results_table(results))
    seconds["eval"] = time.perf_counter() - t

    vision_sessions = runtime_sessions(vision_dir)
    summary = {
        "format": PIPELINE_FORMAT, "format_version": PIPELINE_FORMAT_VERSION, "package_version": __version__,
        "config": asdict(cfg),
        "machine": {"cpu": cpu_info().describe(), "torch": torch.__version__},
        "train_vision_sessions": vision_sessions,
        "seconds": seconds, "expert_success": c.successes / max(c.episodes, 1),
        "vision": {suite: {k: m[k] for k in ("precision", "recall", "iou", "found_rate", "false_detection_rate")}
                   for suite, m in vision_report["suites"].items()},
        "dagger_last_round": d.rows[-1], "eval": results,
    }
    write_json(out / "summary.json", summary, indent=2, default=str)
    print(f"\npipeline finished in {sum(seconds.values()) / 60:.1f} min on {cpu_info().describe()}; summary in "
          f"{out / 'summary.json'}")
    if vision_sessions:
        last = vision_sessions[-1]
        print(f"segmenter trained in {last['precision']} ({last['precision_reason']}) on {last['device']}")
    print("end to end: " + "; ".join(f"{name} {format_rate(r['successes'], r['episodes'])}"
                                     for name, r in results["conditions"].items()))
    return summary
