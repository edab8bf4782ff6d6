"""``grasp-s2r dagger``: train the closed-loop controller with DAgger (thin: parse, then ``run_dagger``)."""

from __future__ import annotations

import argparse

from grasp_s2r.common_options import backend_options, check_backend, check_photo_folder, check_vision_read, env_options
from grasp_s2r.control.dagger import DaggerConfig, check_demos, run_dagger
from grasp_s2r.control.policy import ControllerCheckpointError
from grasp_s2r.data.episodes import DatasetError
from grasp_s2r.options import (
    Option,
    UsageError,
    add_options,
    comma_list,
    comma_text,
    config_from_options,
    non_negative_int,
    positive_int,
    torch_device,
)
from grasp_s2r.run_record import RunRecordError
from grasp_s2r.runtime.backend import BackendUnavailable
from grasp_s2r.runtime.masks import VisionUnavailable, make_mask_source
from grasp_s2r.tblog import TensorBoardUnavailable, add_tensorboard_argument, resolve_logdir


def _mm(m: float) -> str:
    return f"{m * 1000:g}"


OPTIONS = (
    Option("--out", "run folder (created, or resumed when it holds this same run)", "out", required=True),
    Option("--rounds", "rounds, round 0 included", "rounds", type=positive_int),
    Option("--episodes-per-round", "episodes rolled out and labelled per round", "episodes_per_round",
           type=positive_int),
    Option("--eval-episodes", "episodes measuring the success rate after each round", "eval_episodes",
           type=positive_int),
    Option("--eval-conditions", "conditions of those episodes, in turn, e.g. nominal,dynamics-shift,perturbation",
           "eval_conditions", convert=comma_list, show=comma_text, metavar="C1,C2,..."),
    Option("--beta-schedule", "linear: beta = max(0, 1 - round/R); exponential: beta = decay**round",
           "beta_schedule"),
    Option("--beta-rampdown", "linear schedule: rounds until beta reaches 0", "beta_rampdown_rounds",
           type=positive_int, metavar="R"),
    Option("--beta-decay", "exponential schedule", "beta_decay", type=float),
    Option("--masks", "controller input: the segmenter's masks or the ground truth", "masks"),
    Option("--vision", "segmenter checkpoint (read with --masks predicted)", "vision_checkpoint", metavar="CKPT",
           show=lambda c: c or "the packaged one"),
    Option("--raw-sim", "roll out on raw sim renders instead of composites onto the training photos",
           sets={"backgrounds": ""}),
    Option("--photos", "your own scene's photos: training episodes composited onto them, and the table's texture "
           "with --table-photo-prob (instead of the training photos)", "backgrounds", metavar="DIR",
           show=lambda d: d if d not in ("", "train") else "the training photos"),
    Option("--blind-start-prob", "share of training episodes whose first 2-8 masks are blanked (0: off)",
           "blind_start_prob", type=float, metavar="P"),
    Option("--disturbance-prob", "share of training episodes (DAgger and BC alike) whose sphere is pushed once "
           "(0: off)", "disturbance_prob", type=float, metavar="P"),
    Option("--blind-cutoff", "end a learner rollout after this many consecutive empty-mask steps, 0: never",
           "blind_cutoff_steps", type=non_negative_int, metavar="STEPS"),
    Option("--demos", "a 'grasp-s2r collect --controller-scene' dataset of this run's --masks/--vision as round 0",
           "demos", metavar="DIR",
           show=lambda d: d or "none"),
    Option("--init", "a controller checkpoint round 0 trains on from (a fine-tune, e.g. of the shipped controller on "
           "your --photos); its architecture must be this run's", "init_policy", metavar="CKPT",
           show=lambda c: c or "new weights"),
    Option("--no-bc", "skip the behavior-cloning baseline", sets={"bc_baseline": False}),
    *backend_options("env processes"),
    Option("--device", "torch device", "device", type=torch_device,
           show=lambda d: d or "cuda when present, else cpu"),
    Option("--threads", "torch CPU threads", "torch_threads", type=positive_int),
    Option("--train-steps", "gradient steps per round", "train.steps", type=positive_int),
    Option("--batch-size", "labels per gradient step", "train.batch_size", type=positive_int),
    Option("--lr", "Adam learning rate", "train.lr", type=float),
    Option("--xyz-loss", "loss of the x, y, z action", "train.xyz_loss"),
    Option("--lr-schedule", "learning rate over a round's steps: constant, or cosine down to nothing by its last "
           "step", "train.lr_schedule"),
    Option("--cnn-channels", "add a CNN branch over the pooled mask with these channels", "policy.channels",
           convert=lambda text: _channels(text), show=lambda c: comma_text(c) or "none: mask moments only",
           metavar="C1,C2,..."),
    Option("--hidden", "width of the controller's MLP head (its two hidden layers)", "policy.hidden",
           type=positive_int),
    Option("--out-of-view-prob", "share of training episodes whose sphere starts out of view", "out_of_view_prob",
           type=float, metavar="P"),
    Option("--table-photo-prob", "share of training episodes with a training photo as the table texture",
           "table_photo_prob", type=float, metavar="P"),
    Option("--dropout-prob", "share of training episodes with the mask blanked 3-10 steps mid-approach",
           "dropout_prob", type=float, metavar="P"),
    Option("--observable-expert", "label states where the controller does not see the sphere as "
           "return-then-search, not with its hidden position", sets={"observable_expert": True}),
    Option("--search-height", "with --observable-expert: the TCP's height above the table (m) while the expert "
           "searches for a sphere the controller does not see (lower: less table in view, a wider sphere)",
           "search_height_m", type=float, metavar="M"),
    Option("--first-look-height", "with --observable-expert: a sphere not seen yet is first looked for from this "
           "height (m) above the middle of where spheres spawn, then the search (0: no first look)",
           "first_look_height_m", type=float, metavar="M"),
    Option("--learner-sees", "with --observable-expert: when the controller counts as seeing the sphere: 'mask' (any "
           "pixel of its mask) or 'sphere' (its mask touches the sphere; a false detection alone is nothing seen)",
           "learner_sees"),
    Option("--memory", "give the controller the episode's memory: where the sphere was last seen, motion since",
           sets={"policy.memory": True}),
    Option("--gripper-input", "give the controller the gripper fingers' mask too (where the fingers are in the "
           "image): ground truth with --masks gt, else the segmenter's gripper head", sets={"policy.gripper": True}),
    Option("--tcp-xy", "give the controller the TCP's x, y over the table (from the spawn centre): where the camera "
           "is over the workspace, for a search that sweeps it", sets={"policy.tcp_xy": True}),
    Option("--seed", "network init and minibatches", "seed", type=non_negative_int),
    Option("--camera-jitter-mm", "per-episode camera mount jitter (the controller's calibration tolerance)",
           "env.randomization.camera_jitter_m", type=float, convert=lambda mm: mm / 1000.0, show=_mm),
    Option("--camera-jitter-deg", "per-episode camera look-at jitter (the controller's calibration tolerance)",
           "env.randomization.camera_jitter_deg", type=float, show=lambda d: f"{d:g}"),
    *env_options(keep_camera_jitter=True),
)


def add_arguments(p: argparse.ArgumentParser) -> None:
    add_options(p, DaggerConfig, OPTIONS)
    p.add_argument("--quiet", action="store_true", help="no progress bars")
    add_tensorboard_argument(p)


def _channels(text: str) -> tuple[int, ...]:
    """``--cnn-channels "16,32"`` -> (16, 32); anything but positive integers -> ValueError (one line)."""
    parts = [c.strip() for c in text.split(",") if c.strip()]
    if not all(c.isdigit() and int(c) > 0 for c in parts):
        raise ValueError(f"--cnn-channels: expected positive integers C1,C2,..., got {text!r}")
    return tuple(int(c) for c in parts)


def check_inputs(cfg: DaggerConfig) -> None:
    """The segmenter (--masks predicted), --photos and --demos, checked before the run folder is made or written (run_dagger
    would refuse them only after writing its run.json; --init it refuses before). Raises UsageError."""
    if cfg.masks == "predicted":
        try:
            source = make_mask_source(cfg.masks, cfg.vision_checkpoint, "cpu")
        except VisionUnavailable as e:
            raise UsageError(str(e)) from None
        if cfg.policy.gripper and not source.segmenter.has_gripper_head:
            raise UsageError("--gripper-input with predicted masks needs a segmenter that predicts the fingers' mask: "
                             "the packaged gripper head was not trained on this --vision (train one with "
                             "'grasp-s2r train-gripper --vision CKPT'), or use --masks gt")
    if cfg.backgrounds not in ("", "train"):  # your photos
        check_photo_folder("--photos", cfg.backgrounds)
    if cfg.demos:
        try:
            check_demos(cfg)
        except (DatasetError, ValueError) as e:
            msg = str(e)
            raise UsageError(msg if msg.startswith("--demos") else f"--demos: {msg}") from None


def config_from_args(args: argparse.Namespace) -> DaggerConfig:
    cfg = config_from_options(DaggerConfig, args, OPTIONS, out=args.out)
    check_backend(cfg.backend)
    check_vision_read(args, cfg.masks)
    return cfg


def run(args: argparse.Namespace) -> int:
    cfg = config_from_args(args)
    check_inputs(cfg)
    try:
        result = run_dagger(cfg, progress=not args.quiet, tensorboard=resolve_logdir(args.tensorboard, cfg.out))
    except FileNotFoundError as e:
        if e.filename is not None:
            raise  # a path that cannot be made (e.g. --out under /proc): the CLI's one line names it
        raise UsageError(str(e)) from None
    except (VisionUnavailable, DatasetError, BackendUnavailable, TensorBoardUnavailable, RunRecordError,
            ControllerCheckpointError) as e:
        raise UsageError(str(e)) from None
    chosen = next(r for r in result.rows if r["round"] == result.selected_round)
    print(f"controller: {result.policy_path}  (round {chosen['round']}, success "
          f"{100 * chosen['dagger_success_rate']:.1f} % over {chosen['eval_episodes']} evaluation episodes)")
    print(f"learning curve: {result.curve_csv}, {result.curve_png}")
    return 0
