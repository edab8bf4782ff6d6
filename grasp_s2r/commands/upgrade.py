"""``grasp-s2r upgrade``: the command over :mod:`grasp_s2r.data.upgrade`."""

from __future__ import annotations

import argparse
from pathlib import Path

from grasp_s2r.data.episodes import DatasetError, EpisodeDataset
from grasp_s2r.data.upgrade import upgrade_dataset
from grasp_s2r.options import UsageError


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("dataset", metavar="DATASET", help="a 'grasp-s2r collect' dataset written by an older grasp_s2r")
    p.add_argument("--out", required=True, help="the new dataset folder (created, or resumed)")


def run(args: argparse.Namespace) -> int:
    try:
        n = upgrade_dataset(Path(args.dataset), Path(args.out))
    except DatasetError as e:
        raise UsageError(str(e)) from None
    ds = EpisodeDataset(args.out, verify=False)  # just written
    print(f"upgrade: {len(ds)} episodes ({n} written this run) in the current layout -> {Path(args.out).resolve()}")
    return 0
