"""``grasp-s2r adapt``: fit the shipped system to your own scene, from photos of it, in minutes on a CPU.

The shipped segmenter was trained on the embedded training photos. Your scene shows other textures, where it misses
the sphere or fires on them. ``adapt`` fine-tunes the shipped segmenter on composites over your photos
(``segmenter_steps`` at ``segmenter_lr``, as many as fit in ``segmenter_minutes``, by the recipe recorded in its
checkpoint) and, by default, keeps the shipped controller over its masks (``rounds`` 0). With ``rounds`` N >= 1 it
also trains the controller again by the shipped controller's recipe
(:data:`~grasp_s2r.control.dagger_config.LOST_SPHERE_RECIPE`, DAgger over the fine-tuned masks), with its training
episodes composited onto your photos and, in :attr:`AdaptConfig.table_photo_prob` of them, your photos as the
table's texture; ``segmenter_steps`` 0 keeps the shipped segmenter.

What it writes (``OUT``): ``segmenter/model.pt`` when the segmenter is fine-tuned, ``controller/policy.pt`` when the
controller is trained (their run folders, curves included), ``adapt.json`` (format version, config, the files to
load, stage seconds, the scene check) and ``run.json`` (the adaptation's identity: re-running resumes it, other
options are refused before any stage runs). After a fine-tune, the scene check
(:mod:`grasp_s2r.vision.evaluation.scene_check`) compares the shipped and the fine-tuned segmenter frame by frame on
``check_views`` sim views with your photos as the table (``check_photos``, by default the photos it trained on) and
draws the views where they differ (``scene_check.png``). Use them with ``grasp-s2r eval --vision
OUT/segmenter/model.pt [--policy OUT/controller/policy.pt] --backgrounds YOUR_TEST_PHOTOS`` or
``GraspAgent.load(segmenter=..., controller=...)``.
Re-running the same command resumes the stage it stopped in. What it buys is measured by
``benchmarks/own_scene.py`` (each photo of a set cut into a part to adapt on and a part to test on).
"""

from __future__ import annotations

import json
import time
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING

from grasp_s2r import __version__
from grasp_s2r.artifacts import ArtifactError, ArtifactFolder
from grasp_s2r.files import write_json
from grasp_s2r.run_record import RunRecord

if TYPE_CHECKING:  # torch only when the segmenter is fine-tuned
    from grasp_s2r.vision.training.train import SegmenterTrainConfig

ADAPT_FORMAT_VERSION = 1
ADAPT_RUN_FORMAT = "grasp_s2r.adapt-run"
RESUMABLE_FIELDS = ("out", "workers", "rounds", "photos", "check_views", "check_photos")
"""AdaptConfig fields outside an adaptation's identity (``run.json``): where it writes, how many processes, the
DAgger rounds (which may grow on resume, as ``dagger``'s), the photos as given (the identity holds their
resolved path), and the scene check, which trains nothing."""
IDENTITY_DEFAULTS = {"mined_crop_prob": 0.0, "segmenter_lr": 3e-4, "segmenter_minutes": 0.0}
"""Identity fields added since adaptations were first recorded, with the values those ran with."""
RESUME_HINT = "re-run it with the options that made it, or choose another --out"
SEGMENTER_LR = 1e-3
"""Default peak learning rate of the segmenter's fine-tuning; whole images, as every fine-tune from the shipped
weights (``SegmenterTrainConfig.crop_px``). Chosen on the validation set with the steps (docs/own-scene.md)."""


@dataclass(frozen=True)
class AdaptConfig:
    """One adaptation to a scene; saved in ``adapt.json``."""

    photos: str
    """Folder of photos of your scene (png / jpg / ...): the table, the floor, the walls the camera will see."""
    out: str = "runs/adapt"
    """Output folder (stages in sub-folders; re-running resumes)."""
    table_photo_prob: float = 0.5
    """Share of the controller's training episodes with one of your photos as the sim table's texture (the rest:
    composited behind the sphere onto your photos)."""
    rounds: int = 0
    """DAgger rounds of the controller, round 0 included (the shipped controller's recipe); 0: keep the shipped
    controller, over the fine-tuned segmenter's masks."""
    episodes_per_round: int = 48
    """Training episodes per DAgger round."""
    eval_episodes: int = 40
    """Episodes per condition on which each round is measured (the best round is kept)."""
    segmenter_steps: int = 3000
    """Fine-tune the shipped segmenter at most this many steps on composites over your photos first (fewer where
    ``segmenter_minutes`` do not hold them; 0: keep it, the controller alone). What it buys: docs/own-scene.md."""
    segmenter_minutes: float = 15.0
    """Wall-time budget of the segmenter's fine-tune: it times its first steps and trains as many of
    ``segmenter_steps`` as fit (:mod:`grasp_s2r.vision.training.budget`; 3000 steps take 10-11 minutes on 2 cores of
    an Intel Xeon in fp32, 18-20 on an AMD EPYC with AVX2 only); 0: no budget, ``segmenter_steps`` steps."""
    segmenter_lr: float = SEGMENTER_LR
    """Peak learning rate of the segmenter's fine-tuning."""
    mined_crop_prob: float = 0.0
    """Share of the segmenter's photo backgrounds drawn from the crops of your photos the shipped segmenter fires on
    (``train-vision --mined-crop-prob``: its lures in your scene, shown as what they are)."""
    check_views: int = 300
    """Sim views with your photos as the table on which the shipped and the fine-tuned segmenter are compared after
    the fine-tune (found spheres, false detections; ``scene_check.png``); 0: no check."""
    check_photos: str = ""
    """Folder of photos for the scene check; "": ``photos``, which the fine-tune trained on (its figures flatter it:
    photos of the scene kept back from ``photos`` tell what it does on views it never saw)."""
    workers: int = 2
    """Environment processes."""
    seed: int = 0
    """Seed of every stage."""

    def __post_init__(self) -> None:
        if not 0.0 <= self.table_photo_prob <= 1.0:
            raise ValueError(f"table_photo_prob must be in [0, 1], got {self.table_photo_prob}")
        if min(self.episodes_per_round, self.eval_episodes, self.workers) < 1:
            raise ValueError("episodes_per_round, eval_episodes and workers must be >= 1")
        if self.rounds < 0 or self.segmenter_steps < 0:
            raise ValueError(f"rounds and segmenter_steps must be >= 0, got {self.rounds}, {self.segmenter_steps}")
        if self.rounds == 0 and self.segmenter_steps == 0:
            raise ValueError("rounds 0 and segmenter_steps 0 adapt nothing: give one of them")
        if self.segmenter_minutes < 0:
            raise ValueError(f"segmenter_minutes must be >= 0, got {self.segmenter_minutes}")
        if not self.segmenter_lr > 0:
            raise ValueError(f"segmenter_lr must be positive, got {self.segmenter_lr}")
        if not 0.0 <= self.mined_crop_prob <= 1.0:
            raise ValueError(f"mined_crop_prob must be in [0, 1], got {self.mined_crop_prob}")
        if self.check_views < 0:
            raise ValueError(f"check_views must be >= 0, got {self.check_views}")


def adapt(cfg: AdaptConfig, progress: bool = True) -> dict:
    """Run (or resume) the adaptation; returns the record also written to ``OUT/adapt.json``."""
    with ArtifactFolder(Path(cfg.out), "adapt"):
        return _adapt(cfg, progress)


def _adapt(cfg: AdaptConfig, progress: bool) -> dict:
    from grasp_s2r.control.dagger import run_dagger
    from grasp_s2r.control.dagger_config import LOST_SPHERE_RECIPE, SHIPPED_EVAL_CONDITIONS, DaggerConfig

    out = Path(cfg.out)  # made by adapt's ArtifactFolder
    photos = str(Path(cfg.photos).resolve())
    _open_run(cfg, out, photos)
    earlier = _earlier_seconds(out)
    seconds: dict[str, float] = {}
    vision = ""
    if cfg.segmenter_steps:
        t = time.perf_counter()
        vision = str(_fine_tune_segmenter(cfg, Path(photos), out / "segmenter", progress))
        seconds["segmenter"] = time.perf_counter() - t
    (out / "scene_check.png").unlink(missing_ok=True)  # a picture of an earlier check is not this run's
    check = _scene_check(cfg, photos, vision, out, progress) if vision and cfg.check_views else None
    if cfg.rounds:
        t = time.perf_counter()
        print(f"adapt: training the controller over {'the fine-tuned' if vision else 'the shipped'} segmenter's "
              f"masks, episodes composited onto {photos} ({cfg.table_photo_prob:.0%} with them as the table)",
              flush=True)
        d = run_dagger(DaggerConfig(**{**LOST_SPHERE_RECIPE, "table_photo_prob": cfg.table_photo_prob},
                                    out=str(out / "controller"), rounds=cfg.rounds,
                                    episodes_per_round=cfg.episodes_per_round, eval_episodes=cfg.eval_episodes,
                                    eval_conditions=SHIPPED_EVAL_CONDITIONS, vision_checkpoint=vision,
                                    backgrounds=photos, bc_baseline=False, workers=cfg.workers, seed=cfg.seed),
                       progress=progress)
        seconds["controller"] = time.perf_counter() - t
        controller, selected_round = str(d.policy_path), d.selected_round
    else:
        controller, selected_round = "shipped", None
    this_run = sum(seconds.values())
    seconds = {stage: earlier.get(stage, 0.0) + seconds.get(stage, 0.0) for stage in seconds}
    record = {"format": "grasp_s2r.adapt", "format_version": ADAPT_FORMAT_VERSION, "package_version": __version__,
              "config": asdict(cfg), "photos": photos, "controller": controller,
              "segmenter": vision or "shipped", "segmenter_steps_trained": _steps_trained(out / "segmenter"),
              "selected_round": selected_round, "seconds": seconds, "scene_check": check}
    write_json(out / "adapt.json", record, indent=2)
    how = (f" --vision {vision}" if vision else "") + (f" --policy {controller}" if cfg.rounds else "")
    took = f"{sum(seconds.values()) / 60:.1f} min" + (f" in all, {this_run / 60:.1f} min this run" if earlier else "")
    print(f"adapt: finished in {took}; segmenter {vision or 'shipped'}, controller "
          f"{controller}\n  grasp-s2r eval{how} --backgrounds YOUR_TEST_PHOTOS --conditions "
          "table-photo,heldout-backgrounds", flush=True)
    return record


def _earlier_seconds(out: Path) -> dict[str, float]:
    """The stage seconds a finished earlier run of this adaptation recorded in ``OUT/adapt.json`` ({} when none): a
    re-run resumes its finished stages in no time, and adds its own seconds to theirs instead of replacing them."""
    try:
        return {k: float(v) for k, v in json.loads((out / "adapt.json").read_text())["seconds"].items()}
    except (OSError, ValueError, KeyError, TypeError, AttributeError):
        return {}


def _scene_check(cfg: AdaptConfig, trained: str, vision: str, out: Path, progress: bool) -> dict:
    """The shipped and the fine-tuned segmenter on the same views of your scene (``trained``: the resolved folder the
    fine-tune trained on): printed, drawn, returned."""
    from grasp_s2r.runtime.conditions import load_photos
    from grasp_s2r.vision.evaluation import scene_check as sc

    photos = str(Path(cfg.check_photos).resolve()) if cfg.check_photos else trained
    trained_on = photos == trained
    rgb, gt = sc.photo_table_views(load_photos(photos), cfg.check_views, progress=progress)
    preds = sc.predict_views({"shipped": "", "adapted": vision}, rgb)
    figures = {name: sc.frame_figures(pred, gt) for name, pred in preds.items()}
    whose = "the photos it trained on: flattering" if trained_on else "photos it never trained on"
    picture = sc.save_scene_picture(rgb, gt, preds, out / "scene_check.png",
                                    title=f"{cfg.check_views} views with {Path(photos).name} as the table ({whose})")
    print(f"adapt: scene check, {cfg.check_views} views with {photos} as the table ({whose}):\n"
          f"{sc.format_scene_table(figures)}\n  views where they differ: {picture or 'none'}", flush=True)
    return {"photos": photos, "trained_on": trained_on, "views": cfg.check_views, "seed": sc.SCENE_VIEW_SEED,
            "segmenters": figures, "picture": str(picture) if picture else None}


def _steps_trained(run: Path) -> int | None:
    """The steps the segmenter's fine-tune trained (None without one)."""
    from grasp_s2r.vision.training.budget import steps_of_run

    return steps_of_run(json.loads((run / "run.json").read_text())["config"]) if (run / "run.json").is_file() \
        else None


def _open_run(cfg: AdaptConfig, out: Path, photos: str) -> None:
    """Write ``OUT/run.json``, or check that the folder holds this adaptation (refused before any stage runs).

    A folder made before ``run.json`` existed is checked by its stages: a controller stage trained over the shipped
    segmenter's masks (no ``segmenter`` folder) resumes only without a fine-tune, and the other way round. A folder
    with a controller stage is not one that keeps the shipped controller (``rounds`` 0)."""
    identity = {**{k: v for k, v in asdict(cfg).items() if k not in RESUMABLE_FIELDS}, "photos": photos}
    record = RunRecord(out, ADAPT_RUN_FORMAT, ADAPT_FORMAT_VERSION, "an adaptation", error=ArtifactError)
    if not record.exists() and (out / "controller").is_dir():
        fine_tuned = (out / "segmenter").is_dir()
        if fine_tuned != bool(cfg.segmenter_steps):
            made = "a fine-tuned segmenter's" if fine_tuned else "the shipped segmenter's"
            raise ArtifactError(f"{out} holds a controller trained over {made} masks, not an adaptation with "
                                f"--segmenter-steps {cfg.segmenter_steps}; {RESUME_HINT}")
    if cfg.rounds == 0 and (out / "controller").is_dir():  # its record would name the shipped controller instead
        raise ArtifactError(f"{out} holds a controller trained by --rounds N, not an adaptation that keeps the "
                            f"shipped controller (--rounds 0); {RESUME_HINT}")
    record.open(identity, asdict(cfg), hint=RESUME_HINT, defaults=IDENTITY_DEFAULTS)


def segmenter_train_config(cfg: AdaptConfig) -> SegmenterTrainConfig:
    """The segmenter's fine-tuning: the shipped weights, ``segmenter_steps`` steps at ``segmenter_lr`` (as many of
    them as fit in ``segmenter_minutes``), whole images, on every one of your photos (none held out), by the recipe
    the shipped weights were trained with (:func:`~grasp_s2r.vision.training.train_config.recipe_of`: their far
    views and distractors kept; and their margin beyond the view, ``margin_of``)."""
    from grasp_s2r.vision.networks.segmenter import default_checkpoint_path
    from grasp_s2r.vision.training.train import SegmenterTrainConfig
    from grasp_s2r.vision.training.train_config import margin_of, recipe_of

    every = max(1, min(500, cfg.segmenter_steps))
    shipped = default_checkpoint_path()
    return SegmenterTrainConfig(steps=cfg.segmenter_steps, lr=cfg.segmenter_lr, seed=cfg.seed, val_every=every,
                                checkpoint_every=every, init_checkpoint=str(shipped), hold_out_photos=False,
                                time_budget_s=cfg.segmenter_minutes * 60.0,
                                data=replace(recipe_of(shipped), mined_crop_prob=cfg.mined_crop_prob),
                                margin_px=margin_of(shipped))


def _fine_tune_segmenter(cfg: AdaptConfig, photos: Path, out: Path, progress: bool) -> Path:
    from grasp_s2r.vision.training.train import TrainError, check_run, train

    model = out / "model.pt"
    train_cfg = segmenter_train_config(cfg)
    try:  # a refusal names the folder and what differs: one line, as the folder's other refusals
        if model.is_file():  # finished: the controller's run names these bytes, so they are checked, not rewritten
            check_run(train_cfg, out, backgrounds_dir=photos)
            return model
        within = f" (as many as fit in {cfg.segmenter_minutes:g} min)" if cfg.segmenter_minutes else ""
        print(f"adapt: fine-tuning the shipped segmenter {cfg.segmenter_steps} steps{within} on composites over "
              f"{photos}", flush=True)
        return train(train_cfg, out, resume=(out / "checkpoint-latest.pt").is_file(), backgrounds_dir=photos,
                     progress=progress)
    except TrainError as e:
        raise ArtifactError(str(e)) from None
