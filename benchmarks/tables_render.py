"""The renderers of ``tables.py`` for the README and the core docs (the pieces they are made of: ``tables_base``): one
function per marked table, markdown from ``benchmarks/results/*.json`` only.

Each takes the results folder and returns the table (and its caption lines) without surrounding newlines.
Percentages are rates x 100 with one decimal; every success rate keeps its 95 % Wilson interval.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

from tables_base import (
    benchmark_of,
    command,
    load,
    md_table,
    measured_on,
    not_measured,
    numbered_runs,
    pct,
    provenance,
    rate_ci,
    weights_flag,
)

from grasp_s2r.stats import format_rate


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
                          f"({sum(r['adapt']['seconds'].values()) / 60:.1f} min of training)" for name, r in f["rows"].items())
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


SHIPPED_FIGURES = ("bench_vision", "eval_shipped", "own_scene", "bench_pipeline")
"""The README's rows that measure the shipped weights, flagged as their tables are (a numbered run, ``own_scene-5``, as
its benchmark's)."""


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


