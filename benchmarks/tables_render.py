"""The renderers of ``tables.py``: one function per marked table, markdown from ``benchmarks/results/*.json`` only.

Each takes the results folder and returns the table (and its caption lines) without surrounding newlines.
Percentages are rates x 100 with one decimal; every success rate keeps its 95 % Wilson interval.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from typing import Any

from results_io import GRIPPER_HEAD, SEGMENTER, changed_weights, load_results, system_weights
from tables_commands import COMMANDS

from grasp_s2r.stats import format_rate


def load(name: str, d: Path) -> dict[str, Any] | None:
    """``d/<name>.json`` (``d``: normally ``benchmarks/results``) through :func:`results_io.load_results`, or None
    when it is missing."""
    path = d / f"{name}.json"
    return load_results(path) if path.is_file() else None


def command(name: str, res: dict[str, Any] | None) -> str:
    """The command a results file records, else the one that writes it; ``--save`` added to a recorded command that
    wrote its default file before a run needed ``--save`` (or ``--json``) to record it."""
    recorded = (res or {}).get("command")
    if recorded and "--save" not in recorded.split() and "--json" not in recorded.split():
        return f"{recorded} --save"
    return recorded or COMMANDS[name]


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


def pct(rate: float) -> str:
    return f"{100 * rate:.1f}"


def rate_ci(r: dict[str, Any]) -> str:
    """``98.0 % (95.0-99.2)`` from an eval condition's success_rate (or successes and episodes), ci_low, ci_high."""
    rate = r["success_rate"] if "success_rate" in r else r["successes"] / r["episodes"]
    return f"{pct(rate)} % ({pct(r['ci_low'])}-{pct(r['ci_high'])})"


def _eval_order(conditions: dict[str, Any]) -> list[str]:
    from bench_eval import TARGETS

    return [c for c in TARGETS if c in conditions] + [c for c in conditions if c not in TARGETS]


# --- README ---------------------------------------------------------------------------------------------------------

def _readme_rows(d: Path) -> list[tuple[str, str, str]]:
    """(figure, value, results file name) per row of the README's Results table."""
    rows = []
    if res := load("bench_expert", d):
        f = res["figures"]
        value = f"{format_rate(f['successes'], f['episodes'])}, {f['mean_length']:.1f} steps an episode"
    rows.append(("expert success", value if res else not_measured("bench_expert"), "bench_expert"))
    if res := load("bench_vision", d):
        m = res["figures"]["metrics"]
        n = next(iter(m.values()))["pooled"]["images"]
        value = ", ".join(f"{s} {m[s]['pooled']['precision']:.3f} / {m[s]['pooled']['recall']:.3f}"
                          for s in ("composites", "sim", "painted") if s in m)
        label = f"shipped segmenter, held-out suites, precision / recall ({n} images a suite)"
    rows.append((label if res else "shipped segmenter, held-out suites, precision / recall",
                 value if res else not_measured("bench_vision"), "bench_vision"))
    if res := load("eval_shipped", d):
        c = res["figures"]["conditions"]
        n = next(iter(c.values()))["episodes"]
        value = ", ".join(f"{k} {rate_ci(c[k])}" for k in _eval_order(c))
        label = f"shipped system end to end, {n} episodes a condition: success (95 % CI)"
    rows.append((label if res else "shipped system end to end", value if res else not_measured("eval_shipped"),
                 "eval_shipped"))
    if res := load("bench_pipeline", d):
        f = res["figures"]
        c = f["eval"]["conditions"]
        n = next(iter(c.values()))["episodes"]
        value = f"{f['minutes']:.1f} min; " + ", ".join(f"{k} {rate_ci(c[k])}" for k in c)
        label = (f"`grasp-s2r pipeline` ({res['machine']['cpu_count']} CPU cores): time; its controller's success, "
                 f"{n} episodes a condition (95 % CI)")
    rows.append((label if res else "`grasp-s2r pipeline`: time; its controller's success",
                 value if res else not_measured("bench_pipeline"), "bench_pipeline"))
    reports = [(name, res) for name in numbered_runs(d, "own_scene")
               if (res := load(name, d)) is not None and res["figures"]["episodes"] == 100]
    if reports:  # the latest report on the 100 episodes: adapt as it is now
        name, res = reports[-1]
        f = res["figures"]
        value = "; ".join(f"{name} {rate_ci(r['shipped']['table-photo'])} → {rate_ci(r['adapted']['table-photo'])} "
                          f"({sum(r['adapt']['seconds'].values()) / 60:.1f} min)" for name, r in f["rows"].items())
        label = (f"`grasp-s2r adapt` on your own scene: `table-photo` on held-out parts of its photos, untouched → "
                 f"adapted, {f['episodes']} episodes (95 % CI)")
        rows.append((label, value, name))
    for name, cpu in (("bench_train_vision", "with AMX"), ("bench_train_vision-noamx", "without AMX")):
        if res := load(name, d):
            e = res["figures"]["end_to_end"]
            rows.append(((f"`train-vision` speed, 2 CPU cores {cpu}: images/s (pixels/s) against the settings before "
                         "crop training"), (f"{e['speedup_images']:.1f}× ({e['speedup_pixels']:.1f}×): "
                         f"{e['new']['images_per_s']:.0f} against {e['old']['images_per_s']:.0f} images/s"), name))
    if res := load("bench_env", d):
        row = next(r for r in res["figures"]["rows"] if r["default"])
        value = (f"{row['env_steps_per_s']:.0f}, {row['ratio']:.2f}× a bare render loop (median of {row['runs']} "
                 "runs)")
        label = f"env-steps/s, one core, {row['resolution_px']} px"
    rows.append((label if res else "env-steps/s, one core", value if res else not_measured("bench_env"), "bench_env"))
    if res := load("bench_scaling", d):
        e = {k: v["episodes_per_s"] for k, v in res["figures"]["episodes"].items()}
        value = (f"{e['local 1']:.1f} / {e['local 2']:.1f}; {e['ray 1x1']:.1f} / {e['ray 2x1']:.1f} "
                 f"(Ray 2 / Ray 1 = {e['ray 2x1'] / e['ray 1x1']:.2f}×)")
    rows.append(("expert episodes/s: local 1 / 2 workers; Ray 1 / 2 actors of 1 worker",
                 value if res else not_measured("bench_scaling"), "bench_scaling"))
    if res := load("real_robot_loop", d):
        f = res["figures"]
        value = (f"{f['total_median_ms']:.1f} ms median, {f['total_p90_ms']:.1f} ms p90 (segmenter "
                 f"{f['segment_median_ms']:.1f}, "
                 + (f"filter {f['filter_median_ms']:.1f}, " if "filter_median_ms" in f else "")
                 + f"controller {f['control_median_ms']:.1f})")
        label = (f"`GraspAgent.act` latency, batch 1, one CPU thread, {f['input_width_px']}×{f['input_height_px']} "
                 "input")
    rows.append((label if res else "`GraspAgent.act` latency, batch 1, one CPU thread",
                 value if res else not_measured("real_robot_loop"), "real_robot_loop"))
    return rows


SHIPPED_READS: dict[str, tuple[str, ...] | None] = {
    "bench_vision": (SEGMENTER,), "bench_gripper_head": (SEGMENTER, GRIPPER_HEAD), "bench_pipeline": (SEGMENTER,),
    "eval_shipped": None, "bench_camera_mount": None,
}
"""The results that measure shipped weights, and the files their figures read (None: episodes of the shipped
system, :func:`results_io.system_weights`; the pipeline fine-tunes the shipped segmenter): their tables are flagged
once those files change (:func:`weights_flag`). ``own_scene`` names its own runs (``tables_unseen``)."""
SHIPPED_FIGURES = ("bench_vision", "eval_shipped", "own_scene", "bench_pipeline")
"""The README's rows that measure the shipped weights, flagged as their tables are (a numbered run, ``own_scene-5``, as
its benchmark's)."""


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


def readme_table(d: Path) -> str:
    rows = []
    for figure, value, name in _readme_rows(d):
        res = load(name, d)
        shipped = benchmark_of(name) in SHIPPED_FIGURES
        where = measured_on(res) + (weights_flag(res, name) if shipped else "") if res else "–"
        rows.append((figure, value, f"`{command(name, res)}`", f"{where} (`{name}.json`)"))
    return md_table(("figure", "value", "command", "measured on (`benchmarks/results/`)"), rows)


# --- docs -----------------------------------------------------------------------------------------------------------

def eval_shipped_table(d: Path) -> str:
    from bench_eval import TARGETS, verdict

    res = load("eval_shipped", d)
    if res is None:
        return not_measured("eval_shipped")
    c = res["figures"]["conditions"]
    rows = []
    for k in _eval_order(c):
        r, target = c[k], TARGETS.get(k)
        rows.append((k, f"{pct(r['success_rate'])} % ({r['successes']}/{r['episodes']})",
                     f"{pct(r['ci_low'])}-{pct(r['ci_high'])}",
                     f"≥ {100 * target:.0f}: {verdict(r, target)}" if target is not None else "–"))
    return md_table(("condition", "success", "95 % CI", "target"), rows) + "\n\n" + provenance("eval_shipped", res)


def compare_memory_table(d: Path) -> str:
    res = load("compare_memory", d)
    if res is None:
        return not_measured("compare_memory")
    arms = res["figures"]["arms"]
    conditions = list(dict.fromkeys(k.split("/", 1)[1] for a in arms.values() for k in a["success"]))
    rows = []
    for arm, a in arms.items():
        for learner, shown in (("dagger", "DAgger"), ("bc", "BC")):
            cells = []
            for c in conditions:
                s = a["success"][f"{learner}/{c}"]
                cells.append(f"{pct(s['rate'])} % [{pct(s['ci'][0])}-{pct(s['ci'][1])}] ({s['successes']}/"
                             f"{s['episodes']})")
            rows.append((arm, shown, *cells))
    return md_table(("arm", "learner", *conditions), rows) + "\n\n" + provenance("compare_memory", res)


def scaling_table(d: Path) -> str:
    res = load("bench_scaling", d)
    if res is None:
        return not_measured("bench_scaling")
    f = res["figures"]
    e = f["episodes"]
    names = {"local 1": "local, 1 worker", "local 2": "local, 2 workers", "ray 1x1": "Ray, 1 actor × 1 worker",
             "ray 2x1": "Ray, 2 actors × 1 worker"}
    n = res["config"]["episodes"]
    table = md_table(("setup", f"episodes/s (expert, {n} episodes)", "env-steps/s", "start-up"),
                     [(names.get(k, k), f"{v['episodes_per_s']:.1f}", f"{v['env_steps_per_s']:.0f}",
                       f"{v['start_up_s']:.1f} s") for k, v in e.items()])
    rate = {k: v["episodes_per_s"] for k, v in e.items()}
    d = f["dagger_round_1"]
    loc, ray = d["local 2"], d["ray 2x1"]
    fwd = f["forward_cpu_1_thread"]
    per_frame = [x["segmenter_ms"] / x["batch"] for x in fwd]
    driver_eps = 1000 / f["driver_ms_per_episode"]
    bullets = [
        (f"- Ray 2 × 1 / Ray 1 × 1 = **{rate['ray 2x1'] / rate['ray 1x1']:.2f}×** (target ≥ 1.7); Ray 2 × 1 / local 2 "
        f"= **{rate['ray 2x1'] / rate['local 2']:.2f}×** (target ≥ 0.9); local 2 / local 1 = "
        f"{rate['local 2'] / rate['local 1']:.2f}×."),
        (f"- A DAgger round (predicted masks, {res['config']['dagger_episodes']} episodes, round 1: rollouts, training, "
        f"evaluation): local 2 workers {loc['round_s']:.1f} s, Ray 2 × 1 {ray['round_s']:.1f} s, ratio "
        f"**{ray['round_s'] / loc['round_s']:.2f}×** (target ≤ 1.10); rollouts + evaluation alone "
        f"{(ray['rollout_s'] + ray['eval_s']) / (loc['rollout_s'] + loc['eval_s']):.2f}×."),
        (f"- The driver's cost per episode (receive a record from an actor, write it): "
        f"**{f['driver_ms_per_episode']:.1f} ms**, so one driver takes at most ≈ {driver_eps:.0f} episodes/s."),
        "- Forward passes on one CPU thread (what an actor pays per control step for its K envs): segmenter "
        + ", ".join(f"{x['segmenter_ms']:.0f} ms at batch {x['batch']}" for x in fwd)
        + f" (≈ {min(per_frame):.1f}-{max(per_frame):.1f} ms a frame); controller "
        + " / ".join(f"{x['controller_ms']:.1f}" for x in fwd) + " ms.",
    ]
    return f"{table}\n\n" + "\n".join(bullets) + "\n\n" + provenance("bench_scaling", res) + "\n\n" + _projection(
        rate["local 1"], e["local 1"]["env_steps_per_s"], driver_eps, min(per_frame))


def _projection(actor_eps: float, actor_steps_per_s: float, driver_eps: float, seg_ms_frame: float) -> str:
    """The cluster projection from the scaling run: which of driver, env and segmenter limits N actors."""
    steps_per_episode = actor_steps_per_s / actor_eps
    node_eps = 1000 / seg_ms_frame / steps_per_episode
    limit = math.ceil(driver_eps / actor_eps)
    return (
        f"**Projection to a cluster** (one learner, N CPU actors, from the figures above). Expert collection (no "
        f"network): an actor runs ≈ {actor_eps:.0f} episodes/s per env worker, so 16 actors of one worker would make "
        f"≈ {16 * actor_eps:.0f} episodes/s against one driver's ≈ {driver_eps:.0f}: from about {limit} actors on, the "
        f"driver's receive-and-write is the limit. DAgger rollouts and `eval` (predicted masks): an actor's own "
        f"segmenter on one CPU thread takes ≈ {seg_ms_frame:.1f} ms a frame against ≈ {1000 / actor_steps_per_s:.1f} ms "
        f"for an env step, so a node runs at most ≈ {1000 / seg_ms_frame:.0f} env-steps/s (≈ {node_eps:.0f} "
        f"episodes/s of {steps_per_episode:.0f} steps) whatever its number of env workers, unless the actor's torch "
        f"gets more threads or a GPU; 16 nodes would give ≈ {16 * node_eps:.0f} episodes/s, "
        f"{'above' if 16 * node_eps > driver_eps else 'below'} the driver's ≈ {driver_eps:.0f}. The learner's own "
        "batched inference is not in this path at all (the actors infer; the learner only trains between rounds), "
        "so past the driver's limit the next step is to let the actors write their episodes to shared storage (not "
        "built: today every record travels to the driver).")


def deploy_latency_table(d: Path) -> str:
    """``GraspAgent.act``'s latency per call and its parts (``examples/real_robot_loop.py --bench``)."""
    res = load("real_robot_loop", d)
    if res is None:
        return "`agent.act` latency: " + not_measured("real_robot_loop") + "."
    f = res["figures"]
    return (f"`agent.act` total {f['total_median_ms']:.2f} ms median, {f['total_p90_ms']:.2f} ms p90; crop + resize "
            f"{f['preprocess_median_ms']:.2f} ms, segmenter {f['segment_median_ms']:.2f} ms, "
            + (f"parallax filter {f['filter_median_ms']:.2f} ms, " if "filter_median_ms" in f else "")
            + f"controller {f['control_median_ms']:.2f} ms (medians of {f['calls']} calls). "
            + provenance("real_robot_loop", res))


def vision_suites_table(d: Path) -> str:
    from bench_vision import TARGET_SUITES, verdict

    res = load("bench_vision", d)
    if res is None:
        return not_measured("bench_vision")
    rows = []
    for suite, m in res["figures"]["metrics"].items():
        p = m["pooled"]
        seeds = ", ".join(f"{s['precision']:.3f}/{s['recall']:.3f}" for s in m["per_seed"].values())
        rows.append((f"{suite} ({p['images']} images)", *(f"{p[k]:.3f}" for k in (
            "precision", "recall", "iou", "found_rate", "false_detection_rate")), seeds,
            verdict(p, m.get("by_width", [])) if suite in TARGET_SUITES else "–"))
    widths = [(suite, r["width_px"], r["images"], f"{r['found_rate']:.3f}", f"{r['recall']:.3f}")
              for suite, m in res["figures"]["metrics"].items() if suite in TARGET_SUITES
              for r in m.get("by_width", [])]
    width_table = ("\n\nBy sphere width (the diameter of a disc of the mask's area), pooled:\n\n"
                   + md_table(("suite", "width px", "images", "found", "pixel recall"), widths)) if widths else ""
    lat = res["figures"]["latency"]
    return (md_table(("suite", "precision", "recall", "IoU", "found", "false det.", "per seed P / R", "targets"), rows)
            + width_table + f"\n\nLatency, `Segmenter.predict` at batch 1 on one thread: {lat['predict_median_ms']:.2f} ms median, "
            f"{lat['predict_p90_ms']:.2f} ms p90. " + provenance("bench_vision", res))


def pipeline_table(d: Path) -> str:
    """``grasp-s2r pipeline`` on the small default: stage times, its segmenter on every suite, its controller end to
    end."""
    res = load("bench_pipeline", d)
    if res is None:
        return not_measured("bench_pipeline")
    f = res["figures"]
    stages = ", ".join(f"{stage} {s / 60:.1f} min" for stage, s in f["seconds"].items())
    rows = [("time (2 CPU cores)", f"{f['minutes']:.1f} min: {stages}")]
    size = f["config"]["vision_eval_images"]
    rows += [(f"segmenter, `{suite}` suite ({size} images): precision / recall / found / false det.",
              " / ".join(f"{m[k]:.3f}" for k in ("precision", "recall", "found_rate", "false_detection_rate")))
             for suite, m in f["vision"].items()]
    rows += [(f"controller end to end, `{name}` ({c['episodes']} episodes)",
              f"{rate_ci(c)} ({c['successes']}/{c['episodes']})") for name, c in f["eval"]["conditions"].items()]
    return md_table(("figure", "value"), rows) + "\n\n" + provenance("bench_pipeline", res)


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
