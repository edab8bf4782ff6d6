"""What this CPU can do for training: its name, whether it multiplies bf16 in hardware, and how a training run
splits its cores between making data and the network's step.

bf16 autocast pays on a CPU with AVX-512 BF16 (AMD Zen 4/5, Intel Cooper Lake and newer) or AMX (Intel Sapphire
Rapids and newer); elsewhere it is emulated and slower than fp32. oneDNN, which runs torch's convolutions, can be
capped below the CPU's best instruction set with ``ONEDNN_MAX_CPU_ISA`` (e.g. ``AVX512_CORE_BF16`` leaves AMX
unused): the cap is honoured here, so a capped run sees the CPU oneDNN uses.
"""

from __future__ import annotations

import os
import platform
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

ISA_ENV = ("ONEDNN_MAX_CPU_ISA", "DNNL_MAX_CPU_ISA")
"""Environment variables through which oneDNN's instruction set is capped (the first one set wins)."""
_ISA_ORDER = ("SSE41", "AVX", "AVX2", "AVX2_VNNI", "AVX2_VNNI_2", "AVX512_CORE", "AVX512_CORE_VNNI",
              "AVX512_CORE_BF16", "AVX10_1_512", "AVX512_CORE_FP16", "AVX10_1_512_AMX", "AVX512_CORE_AMX",
              "AVX10_1_512_AMX_FP16", "AVX512_CORE_AMX_FP16", "AVX10_2_512", "AVX10_2_512_AMX_2", "ALL")
"""oneDNN's ISA names, weakest first (from its documentation of ``ONEDNN_MAX_CPU_ISA``)."""


@dataclass(frozen=True)
class CpuInfo:
    """The features of this CPU that training cares about, as oneDNN may use them."""

    name: str
    """Model name as the kernel reports it."""
    cores: int
    """Cores this process may run on."""
    avx512_bf16: bool
    """AVX-512 BF16 instructions (bf16 dot products), usable by oneDNN."""
    amx_bf16: bool
    """Intel AMX bf16 tiles, usable by oneDNN."""
    isa_cap: str
    """``ONEDNN_MAX_CPU_ISA`` (or its older name) when set, else ""."""

    @property
    def bf16(self) -> bool:
        """Whether bf16 matrix products run in hardware here (AVX-512 BF16 or AMX)."""
        return self.avx512_bf16 or self.amx_bf16

    def describe(self) -> str:
        """One line for logs and summaries, e.g. ``AMD EPYC 9B14, 2 cores, avx512_bf16 yes, AMX no``."""
        cap = f" (oneDNN capped at {self.isa_cap})" if self.isa_cap else ""
        yes = {True: "yes", False: "no"}
        return f"{self.name}, {self.cores} cores, avx512_bf16 {yes[self.avx512_bf16]}, AMX {yes[self.amx_bf16]}{cap}"


def _isa_allows(cap: str, isa: str) -> bool:
    """Whether oneDNN capped at ``cap`` may use ``isa`` (an unknown cap is taken as no cap, as oneDNN warns)."""
    cap = cap.upper()
    if cap not in _ISA_ORDER:
        return True
    return _ISA_ORDER.index(isa) <= _ISA_ORDER.index(cap)


def parse_cpuinfo(text: str, cores: int, isa_cap: str = "") -> CpuInfo:
    """A :class:`CpuInfo` from the text of ``/proc/cpuinfo`` (its first processor's ``flags`` and model name)."""
    flags: set[str] = set()
    name = platform.processor() or "unknown CPU"
    for line in text.splitlines():
        key, _, value = line.partition(":")
        key = key.strip()
        if key == "flags" and not flags:
            flags = set(value.split())
        elif key == "model name" and value.strip():
            name = value.strip()
    return CpuInfo(
        name=name, cores=cores, isa_cap=isa_cap,
        avx512_bf16="avx512_bf16" in flags and _isa_allows(isa_cap, "AVX512_CORE_BF16"),
        amx_bf16="amx_bf16" in flags and "amx_tile" in flags and _isa_allows(isa_cap, "AVX512_CORE_AMX"),
    )


def available_cores() -> int:
    """Cores this process may run on (its affinity mask where the OS has one)."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not Linux
        return os.cpu_count() or 1


@lru_cache(maxsize=1)
def cpu_info() -> CpuInfo:
    """This machine's :class:`CpuInfo` (read once; no ``/proc/cpuinfo``: no bf16 assumed)."""
    cap = next((os.environ[k] for k in ISA_ENV if os.environ.get(k)), "")
    try:
        text = Path("/proc/cpuinfo").read_text()
    except OSError:
        text = ""
    return parse_cpuinfo(text, available_cores(), cap)


def split_cores(cores: int, workers: int | None) -> tuple[int, int]:
    """(data worker processes, torch threads of the training step) for a CPU run on ``cores``.

    ``workers`` None = automatic: one process makes data while the step runs on the other cores (the step of these
    small networks gains little from a second thread, measured in ``benchmarks/bench_train_vision.py``); on one
    core, data is made in-process. Given ``workers`` are kept; the step gets the cores they leave (at least one).
    """
    cores = max(1, cores)
    if workers is None:
        workers = 1 if cores >= 2 else 0
    return workers, max(1, cores - workers)
