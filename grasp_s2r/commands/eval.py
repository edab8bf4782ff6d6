"""``grasp-s2r eval``: end-to-end success rate on named conditions (thin: parse, then ``evaluate_policy``)."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from grasp_s2r.agent import default_controller_path
from grasp_s2r.common_options import backend_options, check_backend, check_photo_folder, check_vision_read
from grasp_s2r.control.evaluate import PolicyEvalConfig, evaluate_policy, results_table
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
from grasp_s2r.runtime.backend import BackendUnavailable
from grasp_s2r.runtime.conditions import CONDITIONS, resolve_condition
from grasp_s2r.runtime.masks import VisionUnavailable

RESUME_HINT = "an evaluation keeps no partial results: run the same command again"

def _conditions(text: str) -> tuple[str, ...]:
    return tuple(CONDITIONS) if text.strip() == "all" else comma_list(text)


OPTIONS = (
    Option("--vision", "segmenter checkpoint (read with --masks predicted)", "vision", metavar="CKPT",
           show=lambda c: c or "the packaged one"),
    Option("--masks", "predicted: the whole pipeline; gt: ground-truth masks", "masks"),
    Option("--episodes", "per condition", "episodes", type=positive_int),
    Option("--conditions", f"comma-separated, from: {', '.join(CONDITIONS)}; or 'all'", "conditions",
           convert=_conditions, show=comma_text),
    Option("--backgrounds", "your own photos for heldout-backgrounds (behind the sphere) and table-photo (as the table)", "backgrounds", metavar="DIR",
           show=lambda d: d or "the embedded held-out photos"),
    Option("--out", "write eval.json, <condition>.png strips and .gif videos", "out", metavar="DIR",
           show=lambda d: d or "none: write nothing"),
    Option("--video", "episodes per condition drawn as PNG strip + GIF, with --out", "media_episodes",
           type=non_negative_int, metavar="N"),
    Option("--no-parallax", "the controller gets the segmenter's masks as they are (default: detections that stay put "
           "in the image as the camera moves are dropped, and those at a table point the gripper closed over 6 times; a "
           "sphere held in the closed gripper, or lost for a frame just under the open one, keeps its last mask; a "
           "rolling sphere's step is added to the controller's action; as GraspAgent does)", sets={"parallax": False}),
    Option("--sphere-shadow", "draw the sphere's cast and contact shadows on the table in every condition "
           "(TinyRenderer draws none for it; default: the scene the controller was trained in)",
           sets={"sphere_shadow": True}),
    *backend_options("env processes"),
    Option("--device", "torch device", "device", type=torch_device, show=lambda d: d or "cuda when present, else cpu"),
    Option("--threads", "torch CPU threads", "torch_threads", type=positive_int),
)


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--policy", default="", metavar="CKPT",
                   help="controller checkpoint, e.g. OUT/policy.pt of dagger (default: the shipped controller)")
    add_options(p, PolicyEvalConfig, OPTIONS)
    p.add_argument("--quiet", action="store_true", help="no progress bars")


def config_from_args(args: argparse.Namespace) -> PolicyEvalConfig:
    if not args.policy:
        args.policy = str(default_controller_path())
        if not Path(args.policy).is_file():
            raise UsageError("no controller ships with this install; pass --policy (train one with 'grasp-s2r "
                             "dagger --out DIR')")
    if Path(args.policy).is_dir() and (Path(args.policy) / "policy.pt").is_file():
        raise UsageError(f"--policy {args.policy} is a run folder; its controller is {Path(args.policy) / 'policy.pt'}")
    if not Path(args.policy).is_file():
        raise UsageError(f"no controller checkpoint at {args.policy}; train one with 'grasp-s2r dagger --out DIR'")
    if args.backgrounds and not Path(args.backgrounds).is_dir():
        raise UsageError(f"--backgrounds {args.backgrounds} is not a folder")
    cfg = config_from_options(PolicyEvalConfig, args, OPTIONS, policy=args.policy)
    check_backend(cfg.backend)
    check_vision_read(args, cfg.masks)
    _check_backgrounds(cfg)
    return cfg


def _check_backgrounds(cfg: PolicyEvalConfig) -> None:
    """Your photos, read here once when a condition shows them: the env workers read them again, and a folder
    without two readable photos would stop them mid-run."""
    if not cfg.backgrounds:
        return
    used = any(cfg.backgrounds in (c.backgrounds, c.table_photos)
               for c in (resolve_condition(name, cfg.backgrounds) for name in cfg.conditions))
    if used:
        check_photo_folder("--backgrounds", cfg.backgrounds)


def run(args: argparse.Namespace) -> int:
    cfg = config_from_args(args)
    if args.video and not args.out:  # asked for, and nowhere to go
        print(f"grasp-s2r eval: --video {args.video} draws nothing without --out DIR (where the strips and GIFs go)",
              file=sys.stderr)
    try:
        results = evaluate_policy(cfg, progress=not args.quiet)
    except FileNotFoundError as e:
        if e.filename is not None:
            raise  # a path that cannot be made (e.g. --out under /proc): the CLI's one line names it
        raise UsageError(str(e).splitlines()[0]) from None
    except (ValueError, VisionUnavailable, BackendUnavailable) as e:
        raise UsageError(str(e).splitlines()[0]) from None
    print(results_table(results))
    if args.out:
        print(f"results: {Path(args.out) / 'eval.json'}")
    return 0
