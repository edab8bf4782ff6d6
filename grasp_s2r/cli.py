"""``grasp-s2r`` command line: thin parsers that call library functions.

Each sub-command is one module of :mod:`grasp_s2r.commands` (named after it) and exposes ``add_arguments(parser)`` (its options,
generated from its config dataclass by :mod:`grasp_s2r.options`) and ``run(args) -> int``; modules are imported
only when their command runs (``collect`` does not pay for importing torch).
"""

from __future__ import annotations

import argparse
import importlib
import signal
import sys

from grasp_s2r import __version__, bounds
from grasp_s2r.artifacts import ArtifactError
from grasp_s2r.files import disk_error, full_disk, user_path
from grasp_s2r.options import (  # noqa: F401 - re-exported: the command modules' names
    Parser,
    UsageError,
    non_negative_int,
    positive_int,
    torch_device,
)

COMMANDS: dict[str, tuple[str, str]] = {
    "collect": ("grasp_s2r.commands.collect", "run the FSM expert and write a dataset of episodes"),
    "backgrounds": ("grasp_s2r.commands.backgrounds", "build a corpus of real photos and textures from packages"),
    "train-vision": ("grasp_s2r.commands.train_vision", "train the segmentation network on sim-real composites"),
    "eval-vision": ("grasp_s2r.commands.eval_vision", "pixel precision / recall of a segmentation checkpoint"),
    "calibrate-vision": ("grasp_s2r.commands.calibrate_vision", "set a segmenter's threshold where precision = recall"),
    "train-gripper": ("grasp_s2r.commands.train_gripper", "train a gripper head (the fingers' mask) on a frozen segmenter"),
    "dagger": ("grasp_s2r.commands.dagger", "train the closed-loop controller with DAgger"),
    "eval": ("grasp_s2r.commands.eval", "end-to-end success (RGB -> mask -> action) on named conditions"),
    "adapt": ("grasp_s2r.commands.adapt", "fit the shipped system to your own scene from photos of it"),
    "pipeline": ("grasp_s2r.commands.pipeline", "train-vision -> eval-vision -> collect -> dagger -> eval on the small default"),
    "export": ("grasp_s2r.commands.export", "write a dataset or DAgger run as a LeRobotDataset or robomimic HDF5 file"),
    "upgrade": ("grasp_s2r.commands.upgrade", "write a dataset of an older grasp_s2r in the current layout"),
}


RESUME_HINT = "finished work is kept: run the same command again to resume"
"""What an interrupted command says; a command module may define its own ``RESUME_HINT``."""


def _terminate(signum: int, frame: object) -> None:
    """SIGTERM ends a command the way Ctrl-C does: the same cleanup (workers stopped, partial files removed)."""
    raise KeyboardInterrupt


def build_parser(only: str | None = None) -> argparse.ArgumentParser:
    parser = Parser(prog="grasp-s2r", description=__doc__.splitlines()[0])
    parser.add_argument("--version", action="version", version=f"grasp_s2r {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", required=True, parser_class=Parser)
    parser.command_parsers = {}  # type: ignore[attr-defined]
    for name, (module, help_text) in COMMANDS.items():
        p = sub.add_parser(name, help=help_text, description=help_text)
        parser.command_parsers[name] = p  # type: ignore[attr-defined]
        if only is None or only == name:
            importlib.import_module(module).add_arguments(p)
    return parser


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    command = next((a for a in argv if a in COMMANDS), None)
    parser = build_parser(only=command)
    args, unknown = parser.parse_known_args(argv)
    if unknown:  # reported by the command's own parser, so that the line names the command
        parser.command_parsers[args.command].error(f"unrecognized arguments: {' '.join(unknown)}")
    module = importlib.import_module(COMMANDS[args.command][0])
    previous = signal.signal(signal.SIGTERM, _terminate)
    try:
        bounds.check(args.command, args, argv)  # every size bounded before the command's own code runs
        return int(module.run(args) or 0)
    except (UsageError, ArtifactError) as e:
        print(f"grasp-s2r {args.command}: error: {e}", file=sys.stderr)
        return 2
    except OSError as e:
        if e.filename is None and full_disk(e):  # a library's write that names no file (pyarrow, h5py)
            e = disk_error(e, getattr(args, "out", None) or ".")
        if e.filename is None:
            raise  # not about a path the user gave or a full disk: a bug, keep its traceback
        print(f"grasp-s2r {args.command}: error: cannot use {user_path(e.filename)}: {e.strerror or e}",
              file=sys.stderr)  # the path as given, never our temp file's
        return 2
    except KeyboardInterrupt:
        hint = getattr(module, "RESUME_HINT", RESUME_HINT)
        print(f"grasp-s2r {args.command}: interrupted; {hint}", file=sys.stderr)
        return 130
    finally:
        signal.signal(signal.SIGTERM, previous)


if __name__ == "__main__":  # run as `python -m grasp_s2r.cli`: use the package's module, not __main__'s copy
    from grasp_s2r.cli import main as package_main

    sys.exit(package_main())
