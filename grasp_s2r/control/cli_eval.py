"""``grasp-s2r eval``: end-to-end success rate on named conditions (thin: parse, then ``evaluate``)."""

from __future__ import annotations

import argparse

from grasp_s2r.control.evaluate import ISSUE_CONDITIONS, EvalConfig
from grasp_s2r.runtime.backend import add_backend_arguments, backend_from_args
from grasp_s2r.runtime.conditions import CONDITIONS

RESUME_HINT = "an evaluation keeps no partial results: run the same command again"

def add_arguments(p: argparse.ArgumentParser) -> None:
    from grasp_s2r.cli import non_negative_int, positive_int, torch_device

    e = EvalConfig
    p.add_argument("--policy", default="", metavar="CKPT",
                   help="controller checkpoint, e.g. OUT/policy.pt of dagger (default: the shipped controller)")
    p.add_argument("--vision", default="", metavar="CKPT", help="segmenter checkpoint (default: the packaged one)")
    p.add_argument("--masks", choices=("predicted", "gt"), default=e.masks,
                   help="predicted: the whole pipeline; gt: ground-truth masks (default %(default)s)")
    p.add_argument("--episodes", type=positive_int, default=e.episodes, help="per condition (default %(default)s)")
    p.add_argument("--conditions", default=",".join(ISSUE_CONDITIONS),
                   help=f"comma-separated, from: {', '.join(CONDITIONS)}; or 'all' (default: %(default)s)")
    p.add_argument("--backgrounds", default="", metavar="DIR",
                   help="your own photos for heldout-backgrounds (default: the embedded held-out photos)")
    p.add_argument("--out", default="", metavar="DIR", help="write eval.json, <condition>.png strips and .gif videos")
    p.add_argument("--video", type=non_negative_int, default=e.media_episodes, metavar="N",
                   help="episodes per condition drawn as PNG strip + GIF, with --out (default %(default)s)")
    add_backend_arguments(p, e.workers, "env processes")
    p.add_argument("--device", type=torch_device, default="",
                   help="torch device (default: cuda when present, else cpu)")
    p.add_argument("--threads", type=positive_int, default=e.torch_threads,
                   help="torch CPU threads (default %(default)s)")
    p.add_argument("--quiet", action="store_true", help="no progress bars")


def config_from_args(args: argparse.Namespace) -> EvalConfig:
    from pathlib import Path

    from grasp_s2r.agent import default_controller_path
    from grasp_s2r.cli import UsageError

    if not args.policy:
        args.policy = str(default_controller_path())
        if not Path(args.policy).is_file():
            raise UsageError("no controller ships with this install; pass --policy (train one with 'grasp-s2r "
                             "dagger --out DIR')")
    if not Path(args.policy).is_file():
        raise UsageError(f"no controller checkpoint at {args.policy}; train one with 'grasp-s2r dagger --out DIR'")
    if args.backgrounds and not Path(args.backgrounds).is_dir():
        raise UsageError(f"--backgrounds {args.backgrounds} is not a folder")
    try:
        cfg = EvalConfig(
            policy=args.policy, vision=args.vision, masks=args.masks, episodes=args.episodes,
            conditions=tuple(CONDITIONS) if args.conditions.strip() == "all" else
            tuple(c.strip() for c in args.conditions.split(",") if c.strip()),
            backgrounds=args.backgrounds, out=args.out, media_episodes=args.video, workers=args.workers,
            device=args.device, torch_threads=args.threads, backend=backend_from_args(args),
        )
    except ValueError as e:
        raise UsageError(str(e).splitlines()[0]) from None
    _check_backgrounds(cfg)
    return cfg


def _check_backgrounds(cfg: EvalConfig) -> None:
    """Your photos, read here once when a condition shows them: the env workers read them again, and a folder
    without two readable photos would stop them mid-run."""
    from grasp_s2r.cli import UsageError
    from grasp_s2r.runtime.conditions import load_photos, resolve_condition

    if not cfg.backgrounds:
        return
    used = any(cfg.backgrounds in (c.backgrounds, c.table_photos)
               for c in (resolve_condition(name, cfg.backgrounds) for name in cfg.conditions))
    if used:
        try:
            load_photos(cfg.backgrounds)
        except (ValueError, FileNotFoundError) as e:  # vision's BackgroundError is a ValueError
            raise UsageError(f"--backgrounds: {e}") from None


def run(args: argparse.Namespace) -> int:
    from pathlib import Path

    from grasp_s2r.cli import UsageError
    from grasp_s2r.control.evaluate import evaluate, results_table
    from grasp_s2r.runtime.backend import BackendUnavailable
    from grasp_s2r.runtime.masks import VisionUnavailable

    cfg = config_from_args(args)
    try:
        results = evaluate(cfg, progress=not args.quiet)
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
