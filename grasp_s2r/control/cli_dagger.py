"""``grasp-s2r dagger``: train the closed-loop controller with DAgger (thin: parse, then ``run_dagger``)."""

from __future__ import annotations

import argparse
import dataclasses

from grasp_s2r.control.dagger import BETA_SCHEDULES, DaggerConfig
from grasp_s2r.control.policy import PolicyConfig
from grasp_s2r.control.train import TrainConfig
from grasp_s2r.runtime.backend import add_backend_arguments, backend_from_args
from grasp_s2r.sim.config import control_env_config
from grasp_s2r.tblog import add_tensorboard_argument


def add_arguments(p: argparse.ArgumentParser) -> None:
    from grasp_s2r.cli import non_negative_int, positive_int, torch_device
    from grasp_s2r.collect import add_env_arguments

    d, t = DaggerConfig, TrainConfig
    p.add_argument("--out", required=True, help="run folder (created, or resumed when it holds this same run)")
    p.add_argument("--rounds", type=positive_int, default=d.rounds,
                   help="rounds, round 0 included (default %(default)s)")
    p.add_argument("--episodes-per-round", type=positive_int, default=d.episodes_per_round,
                   help="episodes rolled out and labelled per round (default %(default)s)")
    p.add_argument("--eval-episodes", type=positive_int, default=d.eval_episodes,
                   help="episodes measuring the success rate after each round (default %(default)s)")
    p.add_argument("--eval-conditions", default=",".join(d.eval_conditions), metavar="C1,C2,...",
                   help="conditions of those episodes, in turn, e.g. nominal,dynamics-shift,perturbation "
                        "(default %(default)s)")
    p.add_argument("--beta-schedule", choices=BETA_SCHEDULES, default=d.beta_schedule,
                   help="linear: beta = max(0, 1 - round/R); exponential: beta = decay**round (default %(default)s)")
    p.add_argument("--beta-rampdown", type=positive_int, default=d.beta_rampdown_rounds, metavar="R",
                   help="linear schedule: rounds until beta reaches 0 (default %(default)s)")
    p.add_argument("--beta-decay", type=float, default=d.beta_decay, help="exponential schedule (default %(default)s)")
    p.add_argument("--masks", choices=("predicted", "gt"), default=d.masks,
                   help="controller input: the segmenter's masks or the ground truth (default %(default)s)")
    p.add_argument("--vision", default="", metavar="CKPT", help="segmenter checkpoint (default: the packaged one)")
    p.add_argument("--raw-sim", action="store_true",
                   help="roll out on raw sim renders instead of composites onto the training photos")
    p.add_argument("--blind-start-prob", type=float, default=d.blind_start_prob, metavar="P",
                   help="share of training episodes whose first 2-8 masks are blanked (default %(default)s; 0: off)")
    p.add_argument("--disturbance-prob", type=float, default=d.disturbance_prob, metavar="P",
                   help="share of training episodes (DAgger and BC alike) whose sphere is pushed once "
                        "(default %(default)s; 0: off)")
    p.add_argument("--blind-cutoff", type=non_negative_int, default=d.blind_cutoff_steps, metavar="STEPS",
                   help="end a learner rollout after this many consecutive empty-mask steps, 0: never "
                        "(default %(default)s)")
    p.add_argument("--demos", default="", metavar="DIR", help="a 'grasp-s2r collect' dataset to use as round 0")
    p.add_argument("--no-bc", action="store_true", help="skip the behavior-cloning baseline")
    add_backend_arguments(p, d.workers, "env processes")
    p.add_argument("--device", type=torch_device, default="",
                   help="torch device (default: cuda when present, else cpu)")
    p.add_argument("--threads", type=positive_int, default=d.torch_threads,
                   help="torch CPU threads (default %(default)s)")
    p.add_argument("--train-steps", type=positive_int, default=t.steps,
                   help="gradient steps per round (default %(default)s)")
    p.add_argument("--batch-size", type=positive_int, default=t.batch_size, help="default %(default)s")
    p.add_argument("--lr", type=float, default=t.lr, help="Adam learning rate (default %(default)s)")
    p.add_argument("--xyz-loss", choices=("l1", "mse"), default=t.xyz_loss, help="default %(default)s")
    p.add_argument("--cnn-channels", default="", metavar="C1,C2,...",
                   help="add a CNN branch over the pooled mask with these channels (default: mask moments only)")
    p.add_argument("--out-of-view-prob", type=float, default=d.out_of_view_prob, metavar="P",
                   help="share of training episodes whose sphere starts out of view (default %(default)s)")
    p.add_argument("--table-photo-prob", type=float, default=d.table_photo_prob, metavar="P",
                   help="share of training episodes with a training photo as the table texture (default %(default)s)")
    p.add_argument("--dropout-prob", type=float, default=d.dropout_prob, metavar="P",
                   help="share of training episodes with the mask blanked 3-10 steps mid-approach "
                        "(default %(default)s)")
    p.add_argument("--observable-expert", action="store_true",
                   help="label states where the controller does not see the sphere as return-then-search, not with "
                        "its hidden position")
    p.add_argument("--memory", action="store_true",
                   help="give the controller the episode's memory: where the sphere was last seen, motion since")
    p.add_argument("--seed", type=non_negative_int, default=d.seed,
                   help="network init and minibatches (default %(default)s)")
    p.add_argument("--camera-jitter-mm", type=float, default=None,
                   help="per-episode camera mount jitter (default: the controller's calibration tolerance, 1 mm)")
    p.add_argument("--camera-jitter-deg", type=float, default=None,
                   help="per-episode camera look-at jitter (default: the controller's calibration tolerance, 0.5)")
    p.add_argument("--quiet", action="store_true", help="no progress bars")
    add_tensorboard_argument(p)
    add_env_arguments(p)


def _channels(text: str) -> tuple[int, ...]:
    """``--cnn-channels "16,32"`` -> (16, 32); anything but positive integers -> ValueError (one line)."""
    parts = [c.strip() for c in text.split(",") if c.strip()]
    if not all(c.isdigit() and int(c) > 0 for c in parts):
        raise ValueError(f"--cnn-channels: expected positive integers C1,C2,..., got {text!r}")
    return tuple(int(c) for c in parts)


def check_inputs(cfg: DaggerConfig) -> None:
    """The segmenter (--masks predicted) and --demos, checked before the run folder is made or written (run_dagger
    would refuse them only after writing its run.json). Raises UsageError."""
    from grasp_s2r.cli import UsageError
    from grasp_s2r.control.dagger import check_demos
    from grasp_s2r.data.episodes import DatasetError
    from grasp_s2r.runtime.masks import VisionUnavailable, make_mask_source

    if cfg.masks == "predicted":
        try:
            make_mask_source(cfg.masks, cfg.vision_checkpoint, "cpu")
        except VisionUnavailable as e:
            raise UsageError(str(e)) from None
    if cfg.demos:
        try:
            check_demos(cfg)
        except (DatasetError, ValueError) as e:
            msg = str(e)
            raise UsageError(msg if msg.startswith("--demos") else f"--demos: {msg}") from None


def config_from_args(args: argparse.Namespace) -> DaggerConfig:
    from grasp_s2r.cli import UsageError
    from grasp_s2r.collect import env_config_from_args

    try:
        env = control_env_config(env_config_from_args(args), args.camera_jitter_mm, args.camera_jitter_deg)
        channels = _channels(args.cnn_channels)
        return DaggerConfig(
            out=args.out, rounds=args.rounds, episodes_per_round=args.episodes_per_round,
            eval_episodes=args.eval_episodes,
            eval_conditions=tuple(c.strip() for c in args.eval_conditions.split(",") if c.strip()),
            beta_schedule=args.beta_schedule,
            beta_rampdown_rounds=args.beta_rampdown, beta_decay=args.beta_decay, masks=args.masks,
            vision_checkpoint=args.vision, backgrounds="" if args.raw_sim else "train", demos=args.demos,
            blind_cutoff_steps=args.blind_cutoff, blind_start_prob=args.blind_start_prob,
            disturbance_prob=args.disturbance_prob, observable_expert=args.observable_expert,
            out_of_view_prob=args.out_of_view_prob, table_photo_prob=args.table_photo_prob,
            dropout_prob=args.dropout_prob,
            bc_baseline=not args.no_bc, workers=args.workers, backend=backend_from_args(args), device=args.device,
            torch_threads=args.threads,
            seed=args.seed,
            train=TrainConfig(steps=args.train_steps, batch_size=args.batch_size, lr=args.lr, xyz_loss=args.xyz_loss),
            policy=dataclasses.replace(PolicyConfig(), channels=channels, memory=args.memory), env=env,
        )
    except ValueError as e:
        raise UsageError(str(e)) from None


def run(args: argparse.Namespace) -> int:
    from grasp_s2r.cli import UsageError
    from grasp_s2r.control.dagger import run_dagger
    from grasp_s2r.data.episodes import DatasetError
    from grasp_s2r.runtime.backend import BackendUnavailable
    from grasp_s2r.runtime.masks import VisionUnavailable
    from grasp_s2r.tblog import TensorBoardUnavailable, resolve_logdir

    cfg = config_from_args(args)
    check_inputs(cfg)
    try:
        result = run_dagger(cfg, progress=not args.quiet, tensorboard=resolve_logdir(args.tensorboard, cfg.out))
    except FileNotFoundError as e:
        if e.filename is not None:
            raise  # a path that cannot be made (e.g. --out under /proc): the CLI's one line names it
        raise UsageError(str(e)) from None
    except (VisionUnavailable, DatasetError, BackendUnavailable, TensorBoardUnavailable) as e:
        raise UsageError(str(e)) from None
    except ValueError as e:
        if "another config" in str(e) or "format" in str(e) or "controller checkpoint" in str(e):
            raise UsageError(str(e)) from None
        raise
    last = result.rows[-1]
    print(f"controller: {result.policy_path}  (round {last['round']}, success "
          f"{100 * last['dagger_success_rate']:.1f} % over {last['eval_episodes']} episodes)")
    print(f"learning curve: {result.curve_csv}, {result.curve_png}")
    return 0
