"""The pieces every renderer of ``tables.py`` is made of: a results file loaded, its provenance line (command,
machine, date; flagged when the shipped weights it measured have changed), markdown tables, rates with their
interval, and the numbered runs of one benchmark shown together."""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from typing import Any

from results_io import GRIPPER_HEAD, SEGMENTER, changed_weights, load_results, system_weights
from tables_commands import COMMANDS


def load(name: str, d: Path) -> dict[str, Any] | None:
    """``d/<name>.json`` (``d``: normally ``benchmarks/results``) through :func:`results_io.load_results`, or None
    when it is missing."""
    path = d / f"{name}.json"
    return load_results(path) if path.is_file() else None


def command(name: str, res: dict[str, Any] | None) -> str:
    """The command a results file records, else the one that writes it; ``--save`` added to a recorded command that
    wrote its default file before a run needed ``--save`` (or ``--json``) to record it, and a ``--json`` that wrote
    elsewhere (a copy was then put here) pointed at the file itself, ``benchmarks/results/<name>.json``."""
    recorded = (res or {}).get("command")
    if not recorded:
        return COMMANDS[name]
    words = recorded.split()
    if "--save" not in words and "--json" not in words:
        return f"{recorded} --save"
    return re.sub(r"(--json[ =])(\S+)", lambda m: m[1] + f"benchmarks/results/{name}.json", recorded)


def cpu_name(res: dict[str, Any]) -> str:
    """The processor a results file ran on, without its core count and flags ("AMD EPYC")."""
    return str(res.get("machine", {}).get("cpu", "an unrecorded CPU")).split(",")[0]


def machine(res: dict[str, Any]) -> str:
    """``2 CPU cores (AMD EPYC), cpu, torch 2.x`` from a measured file's machine."""
    m = res.get("machine")
    if not m:
        return "machine not recorded"
    busy = f", load {m['load_average_1min']:.1f}" if m.get("load_average_1min") is not None else ""
    cap = f" (oneDNN capped at {m['onednn_isa_cap']}: no AMX)" if m.get("onednn_isa_cap") else ""
    cpu = f" ({cpu_name(res)})" if m.get("cpu") else ""  # episodes differ across CPUs (float rounding)
    return f"{m['cpu_count']} CPU cores{cpu}{cap}{busy}, {m['device']}, torch {m['torch']}"


def measured_on(res: dict[str, Any]) -> str:
    """``2 CPU cores, cpu, torch 2.x; 2026-11-23``, or that the file predates the record of machine and date."""
    if not res.get("date"):
        return "machine and date not recorded: the file predates results_io"
    return f"{machine(res)}; {res['date'][:10]}"


def provenance(name: str, res: dict[str, Any]) -> str:
    """Where a table's figures come from: command, machine, date and file; flagged when they measure shipped weights
    that have changed since (:func:`weights_flag`)."""
    flag = weights_flag(res, name) if name in SHIPPED_READS else ""
    return f"Measured by `{command(name, res)}` ({measured_on(res)}{flag}; `benchmarks/results/{name}.json`)."


def provenances(runs: Iterable[tuple[str, dict[str, Any]]]) -> str:
    """:func:`provenance` of each (results file name, results) of a table: inline for one or two, else folded into
    a ``<details>`` list (GitHub shows its summary line and opens it on a click), so that a table of many runs is
    not followed by a wall of commands. Starts with a space or a blank line: it follows the caption's sentence."""
    lines = [provenance(name, res) for name, res in runs]
    if len(lines) <= 2:
        return " " + " ".join(lines) if lines else ""
    bullets = "\n".join(f"- {line}" for line in lines)
    return (f"\n\n<details><summary>Measured by {len(lines)} runs: their commands, machines and dates</summary>\n\n"
            f"{bullets}\n\n</details>")


def not_measured(name: str) -> str:
    """What a table says instead of a figure whose results file is missing."""
    return f"not measured yet: run `{COMMANDS[name]}` (writes `benchmarks/results/{name}.json`)"


def md_table(columns: Sequence[str], rows: Sequence[Sequence[Any]]) -> str:
    lines = ["| " + " | ".join(columns) + " |", "|" + "---|" * len(columns)]
    return "\n".join(lines + ["| " + " | ".join(str(c) for c in row) + " |" for row in rows])


def fixed(value: float | None, digits: int = 2) -> str:
    """``value`` with ``digits`` decimals, or "-" for a figure of nothing measured (null in a results file: a
    share of no views, a rate of no images)."""
    return "-" if value is None else f"{value:.{digits}f}"


def pct(rate: float) -> str:
    return f"{100 * rate:.1f}"


def rate_ci(r: dict[str, Any]) -> str:
    """``98.0 % (95.0-99.2)`` from an eval condition's success_rate (or successes and episodes), ci_low, ci_high."""
    rate = r["success_rate"] if "success_rate" in r else r["successes"] / r["episodes"]
    return f"{pct(rate)} % ({pct(r['ci_low'])}-{pct(r['ci_high'])})"


SHIPPED_READS: dict[str, tuple[str, ...] | None] = {
    "bench_vision": (SEGMENTER,), "bench_gripper_head": (SEGMENTER, GRIPPER_HEAD), "bench_pipeline": (SEGMENTER,),
    "eval_shipped": None, "bench_camera_mount": None,
}
"""The results that measure shipped weights, and the files their figures read (None: episodes of the shipped
system, :func:`results_io.system_weights`; the pipeline fine-tunes the shipped segmenter): their tables are flagged
once those files change (:func:`weights_flag`). ``own_scene`` names its own runs (``tables_unseen``)."""


def figure_reads(name: str) -> tuple[str, ...]:
    """The shipped weights files the figures of results ``name`` read (:data:`SHIPPED_READS`; an episode of the
    shipped system when not listed)."""
    reads = SHIPPED_READS.get(name)
    return system_weights() if reads is None else reads


def weights_flag(res: dict[str, Any], name: str) -> str:
    """A warning naming the shipped weights files ``res`` (results ``name``) reads that changed since it was measured
    ('' when none did)."""
    changed = changed_weights(res, figure_reads(name))
    return f"; **measured with other shipped weights** ({', '.join(changed)}): re-measure" if changed else ""


def benchmark_of(name: str) -> str:
    """The benchmark whose run ``name`` is: ``own_scene-5`` -> ``own_scene`` (a numbered run of
    :func:`numbered_runs`); other names as they are."""
    stem, _, number = name.rpartition("-")
    return stem if stem and number.isdigit() else name


def numbered_runs(d: Path, stem: str) -> list[str]:
    """The runs of one benchmark shown together: ``STEM.json``, then ``STEM-2.json``, ``-3`` ... in order."""
    suffixes = sorted(int(f.stem.rsplit("-", 1)[1]) for f in d.glob(f"{stem}-*.json")
                      if f.stem.rsplit("-", 1)[1].isdigit())
    return [stem] + [f"{stem}-{k}" for k in suffixes]


def loaded_runs(d: Path, stem: str) -> list[tuple[str, dict[str, Any]]]:
    """(name, results) of each of :func:`numbered_runs` ``(d, stem)`` that was measured, in order."""
    return [(name, res) for name in numbered_runs(d, stem) if (res := load(name, d)) is not None]


def versioned_rows(loaded: list[tuple[str, dict]], key: Callable[[str, dict], str],
                   same: Callable[[dict, dict], bool]) -> dict[str, dict]:
    """The rows of several runs of one benchmark (``loaded``: (name, results) in order), each under ``key(label,
    results)``. A row measured again with the ``same`` figures is shown once, with the latest run's figures over an
    earlier one's (what it did not measure kept); measured again with others (the shipped system after a change of
    its weights or its filter), each version is shown, labelled with the first and the last run that measured it
    (``shipped, unseen_tables-59 to -62``)."""
    versions: dict[str, list[tuple[list[str], dict]]] = {}
    for name, res in loaded:
        for label, r in res["figures"]["rows"].items():
            seen = versions.setdefault(key(label, res), [])
            i = next((i for i, (_, earlier) in enumerate(seen) if same(earlier, r)), None)
            if i is None:
                seen.append(([name], r))
            else:
                files, earlier = seen[i]
                seen[i] = ([*files, name], {**earlier, **r})

    def files_label(names: list[str]) -> str:
        return names[0] + (f" to -{names[-1].rsplit('-', 1)[-1]}" if len(names) > 1 else "")

    return {label if len(seen) == 1 else f"{label}, {files_label(files)}": r
            for label, seen in versions.items() for files, r in seen}


def camera_label(px: int) -> str:
    """Rows of systems through another camera than the scene's 64 px one are labelled so."""
    return "" if px == 64 else f" ({px} px camera)"
