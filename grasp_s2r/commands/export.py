"""``grasp-s2r export``: the command over :mod:`grasp_s2r.export`."""

from __future__ import annotations

import argparse
from pathlib import Path

from grasp_s2r.artifacts import ArtifactError
from grasp_s2r.export import FORMATS, TASK, ExportError, export_robomimic, read_source
from grasp_s2r.options import UsageError

RESUME_HINT = "nothing half-made was left (the export appears whole or not at all): run the same command again"
"""What an interrupted ``grasp-s2r`` run of this command says (``cli.main``)."""


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("dataset", metavar="DATASET",
                   help="a 'grasp-s2r collect' dataset, a DAgger round (RUN/round-NNN) or a DAgger run folder")
    p.add_argument("--format", required=True, choices=FORMATS, help="lerobot (LeRobotDataset v3.0 folder) or "
                   "robomimic (one HDF5 file)")
    p.add_argument("--out", required=True, type=Path, help="the folder (lerobot) or .hdf5 file (robomimic) to write")
    p.add_argument("--overwrite", action="store_true", help="replace an earlier export at --out")
    p.add_argument("--next-obs", action=argparse.BooleanOptionalAction, default=True,
                   help="robomimic: write next_obs, which robomimic's SequenceDataset loads by default (default: on)")
    p.add_argument("--task", default=TASK, help="lerobot: the task text of every episode (default: %(default)r)")
    p.add_argument("--video", action="store_true", help="lerobot: the wrist images as an AV1 video, as lerobot "
                   "records (lossy; needs PyAV), instead of PNGs embedded in the parquet files (exact)")


def run(args: argparse.Namespace) -> int:
    from grasp_s2r.export_lerobot import export_lerobot

    try:
        src = read_source(Path(args.dataset))
        if args.format == "robomimic":
            res = export_robomimic(src, args.out, next_obs=args.next_obs, overwrite=args.overwrite, progress=True)
        else:
            res = export_lerobot(src, args.out, overwrite=args.overwrite, task=args.task, video=args.video,
                                 progress=True)
    except (ExportError, ArtifactError) as e:
        raise UsageError(str(e)) from None
    print(f"export: {res['episodes']} episodes, {res['frames']} frames from {src.path} ({src.kind}) -> {res['out']} "
          f"({args.format})")
    return 0
