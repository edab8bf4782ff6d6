"""``--no-amx`` for the benchmarks: oneDNN capped below Intel AMX, so that a CPU with AMX runs as one without.

oneDNN reads ``ONEDNN_MAX_CPU_ISA`` when torch loads it, so :func:`cap_if_asked` runs before ``import torch``; the
spawned DataLoader workers inherit the variable. ``grasp_s2r.cpu.cpu_info`` honours the cap (AMX reported absent).
"""

from __future__ import annotations

import argparse
import os
import sys

NO_AMX_ISA = "AVX512_CORE_BF16"
FLAG = "--no-amx"


def cap_if_asked(argv: list[str] | None = None) -> bool:
    """Set ``ONEDNN_MAX_CPU_ISA`` to :data:`NO_AMX_ISA` when ``--no-amx`` is among the arguments; whether it was."""
    if FLAG in (sys.argv[1:] if argv is None else argv):
        os.environ["ONEDNN_MAX_CPU_ISA"] = NO_AMX_ISA
        return True
    return False


def add_argument(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(FLAG, action="store_true",
                        help=f"cap oneDNN at {NO_AMX_ISA} (set before torch loads): a CPU without AMX")
