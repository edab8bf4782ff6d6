"""Renderers of ``tables.py`` for figures the docs give in sentences (or example output), not tables.

Each takes the results folder and returns markdown without surrounding newlines, from ``benchmarks/results/*.json``
only, each with :func:`tables_base.provenance`.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from tables_base import load, loaded_runs, md_table, not_measured, provenance, provenances, versioned_rows

from grasp_s2r.stats import format_difference, format_rate
from grasp_s2r.vision.evaluation.metrics import format_suite_table, format_table

EVAL_VISION_TITLE = ("eval-vision: .../grasp_s2r/weights/segmenter_64px.pt (threshold {threshold:.3f}) on {n} images "
                     "of suite composites (held-out photos + pasted sim sphere, with the training augmentation), "
                     "heldout split, seed {seed}")
"""What ``grasp-s2r eval-vision`` prints above its table (the package path shortened)."""


# --- docs/vision.md -------------------------------------------------------------------------------------------------

def _seed_metrics(res: dict[str, Any], seed: str) -> dict[str, dict[str, Any]]:
    return {suite: m["per_seed"][seed] for suite, m in res["figures"]["metrics"].items() if seed in m["per_seed"]}


def eval_vision_example(d: Path) -> str:
    """``grasp-s2r eval-vision``'s output on the default suite: seed 1 of bench_vision (the same evaluation)."""
    res = load("bench_vision", d)
    if res is None:
        return not_measured("bench_vision")
    seed = str(res["figures"]["seeds"][0])
    m = _seed_metrics(res, seed)["composites"]
    title = EVAL_VISION_TITLE.format(threshold=res["figures"]["threshold"], n=m["images"], seed=seed)
    out = ["```", "$ grasp-s2r eval-vision --save-overlays", format_table(m, title),
           "eval-vision: wrote runs/eval-vision/metrics.json",
           "eval-vision: wrote runs/eval-vision/overlays.png (TP green, FP red, FN blue; images with errors first)",
           "```"]
    return "\n".join(out) + (f"\n\nThe figures are seed {seed} of the benchmark below (the same evaluation, "
                             "`evaluate_segmenter`). " + provenance("bench_vision", res))


def eval_vision_suites_example(d: Path) -> str:
    """``grasp-s2r eval-vision --suite all``'s table: seed 1 of bench_vision; latency left to *Measured figures*."""
    res = load("bench_vision", d)
    if res is None:
        return not_measured("bench_vision")
    seed = str(res["figures"]["seeds"][0])
    rows = _seed_metrics(res, seed)
    n = next(iter(rows.values()))["images"]
    title = (f"eval-vision: .../segmenter_64px.pt (threshold {res['figures']['threshold']:.3f}), {n} images per suite, "
             f"heldout split, seed {seed}; latency: batch 1, 1 CPU thread")
    table = re.sub(r" {8}-$", "      ...", format_suite_table(rows, title), flags=re.MULTILINE)
    return (f"```\n$ grasp-s2r eval-vision --suite all --n-images {n}\n{table}\n```\n\nSeed {seed} of "
            "`benchmarks/results/bench_vision.json`; the latency is in *Measured figures*.")


def vision_composition(d: Path) -> str:
    res = load("bench_vision", d)
    if res is None:
        return "Composition speed: " + not_measured("bench_vision") + "."
    c = res["figures"]["composition"]
    return (f"One training item (render amortized over 4 items, background, paste, augment) on one core: "
            f"{c['recipe_items_per_s']:.0f} items/s with the recipe, {c['photos_only_items_per_s']:.0f}/s photos "
            f"only. " + provenance("bench_vision", res))


def vision_false_detections(d: Path) -> str:
    """False detections on sphere-free held-out composites (bench_vision)."""
    res = load("bench_vision", d)
    if res is None:
        return "False detections on sphere-free held-out images: " + not_measured("bench_vision") + "."
    rate = res["figures"]["metrics"]["composites"]["pooled"]["false_detection_rate"]
    return (f"On sphere-free held-out composites the segmenter reports a sphere in {rate:.3f} of the images "
            "(`benchmarks/results/bench_vision.json`, the table above).")


# --- docs/control.md ------------------------------------------------------------------------------------------------

def compare_memory_reading(d: Path) -> str:
    """The differences the reading of the memory comparison rests on, with Newcombe's 95 % intervals."""
    res = load("compare_memory", d)
    if res is None:
        return not_measured("compare_memory")
    arms = res["figures"]["arms"]

    def diff(arm1: str, key1: str, arm2: str, key2: str) -> str:
        a, b = arms[arm1]["success"][key1], arms[arm2]["success"][key2]
        return format_difference(a["successes"], a["episodes"], b["successes"], b["episodes"])

    conditions = list(dict.fromkeys(k.split("/", 1)[1] for k in arms["memory"]["success"]))
    memory = "; ".join(f"`{c}` {diff('memory', f'dagger/{c}', 'memoryless', f'dagger/{c}')}" for c in conditions)
    learner = "; ".join(f"`{c}` {diff(arm, f'dagger/{c}', arm, f'bc/{c}')} ({arm})" for c in conditions
                        for arm in arms)
    return (f"- Memory − memoryless, DAgger: {memory}.\n- DAgger − BC at the same labels: {learner}.\n\n"
            f"Computed from `benchmarks/results/compare_memory.json` (the table above).")


SEARCH_SCENARIOS = {"nominal": "`nominal`", "teleport": "`teleport`: sphere moved out of view mid-approach",
                    "start-out-of-view": "`start-out-of-view`"}
"""``bench_expert_search.py --scenario`` -> its row's label."""


def expert_search_table(d: Path) -> str:
    """The observable expert's success per scenario and what its searches cost (``bench_expert_search-*.json``)."""
    runs = {s: load(f"bench_expert_search-{s}", d) for s in SEARCH_SCENARIOS}
    if not all(runs.values()):
        missing = ", ".join(f"--scenario {s}" for s, res in runs.items() if res is None)
        return f"Not measured yet: run `python benchmarks/bench_expert_search.py` with {missing}."
    rows, searched, first = [], 0, 0
    for scenario, res in runs.items():
        f = res["figures"]
        steps = f"{f['mean_length']:.1f} steps an episode (max {f['max_length']})"
        lost = f["out_of_view_steps"]
        if scenario != "nominal" and lost:
            steps += (f"; the sphere out of view in {f['moved']} of {f['episodes']}, for {sum(lost) / len(lost):.1f} "
                      f"steps on average until seen again (max {max(lost)})")
        rows.append((SEARCH_SCENARIOS[scenario], format_rate(f["successes"], f["episodes"]), steps))
        searched, first = searched + f["searched"], first + f["found_at_first_waypoint"]
    share = f"{first}/{searched} ({100 * first / searched:.0f} %)" if searched else "–"
    rows.append(("searches that found the sphere while rising or heading for the spiral's first point", share, "–"))
    table = md_table(("scenario (`--scenario`)", "success (95 % CI)", "steps"), rows)
    return table + "\n\n" + provenances((f"bench_expert_search-{s}", res) for s, res in runs.items()).lstrip()


def pipeline_recipe_table(d: Path) -> str:
    """The pipeline's DAgger recipe candidates on validation episodes of the training photos."""
    res = load("pipeline_recipe", d)
    if res is None:
        return not_measured("pipeline_recipe")
    rows = []
    for name, r in res["figures"].items():
        fields = ", ".join(f"`{k}={v}`" for k, v in r["fields"].items()) or "the pipeline's default"
        rows.append((f"`{name}`: {fields}", *(format_rate(v["successes"], v["episodes"])
                                               for v in r["validation"].values()), f"{r['dagger_minutes']:.1f} min"))
    columns = ("recipe", *(f"`{c}` (validation)" for c in next(iter(res["figures"].values()))["validation"]),
               "DAgger time")
    return md_table(columns, rows) + "\n\n" + provenance("pipeline_recipe", res)


# --- the shipped controller and the camera mount (docs/control.md) ---------------------------------------------------

def controller_recipe_table(d: Path) -> str:
    """The shipped controller's candidates on validation episodes of the training photos, and the one chosen."""
    res = load("controller_recipe", d)
    if res is None:
        return not_measured("controller_recipe")
    f = res["figures"]
    conditions = f["validation_conditions"]
    rows = []
    for name, c in f["candidates"].items():
        mark = " (chosen)" if name == f["chosen"] else ""
        rows.append((f"`{name}`{mark}", *(_count(c["validation"][k]) for k in conditions),
                     f"{100 * c['mean_success']:.1f} %", c["selected_round"], f"{c['dagger_minutes']:.1f} min"))
    columns = ("candidate", *(f"`{k}`" for k in conditions), "mean", "`policy.pt` round", "DAgger time")
    return (md_table(columns, rows) + f"\n\nEach cell: successes of {_episodes(f)} validation episodes. "
            f"The chosen one, `{f['chosen']}`: `{f['candidates'][f['chosen']]['command']}`. "
            + provenance("controller_recipe", res))


def _count(v: dict[str, Any]) -> str:
    return f"{v['successes']}/{v['episodes']}"


def _episodes(f: dict[str, Any]) -> int:
    first = next(iter(f["candidates"].values()))
    return next(iter(first["validation"].values()))["episodes"]


def camera_mount_table(d: Path) -> str:
    """The shipped system's success against the camera mount's error."""
    res = load("bench_camera_mount", d)
    if res is None:
        return not_measured("bench_camera_mount")
    rows = [(f"±{r['mount_jitter_mm']:g} mm, ±{r['look_jitter_deg']:g}°", format_rate(r["successes"], r["episodes"]))
            for r in res["figures"]["rows"]]
    return md_table(("camera mount error (per axis)", "success (95 % CI)"), rows) + "\n\n" + provenance(
        "bench_camera_mount", res)


def gripper_input_table(d: Path) -> str:
    """Calibrated vs full-jitter vs full-jitter + the fingers' mask, against the camera mount's error (ground-truth
    masks: the controller question alone)."""
    name = "compare_gripper_input-gt"
    res = load(name, d)
    if res is None:
        return not_measured(name)
    arms = res["figures"]["arms"]
    levels = [r["mount_jitter_mm"] for r in next(iter(arms.values()))["rows"]]
    rows = [(f"`{arm}`", *(format_rate(r["successes"], r["episodes"]) for r in a["rows"])) for arm, a in arms.items()]
    columns = ("arm (ground-truth masks)", *(f"±{mm:g} mm / ±{mm / 2:g}°" for mm in levels))
    return md_table(columns, rows) + "\n\n" + provenance(name, res)


def gripper_head_table(d: Path) -> str:
    """The shipped gripper head's fingers' masks on validation and held-out composites."""
    res = load("bench_gripper_head", d)
    if res is None:
        return not_measured("bench_gripper_head")
    m = res["figures"]["metrics"]
    names = {"val": "val (training photos, other episodes)", "heldout": "heldout (held-out photos and episodes)"}
    rows = [(names.get(k, k), v["images"], f"{v['precision']:.3f}", f"{v['recall']:.3f}", f"{v['iou']:.3f}")
            for k, v in m.items()]
    return md_table(("set", "images", "precision", "recall", "IoU"), rows) + "\n\n" + provenance(
        "bench_gripper_head", res)


def interop_table(d: Path) -> str:
    """Each export loaded by each library in its own environment (benchmarks/check_interop.py)."""
    name = "check_interop"
    res = load(name, d)
    if res is None:
        return not_measured(name)
    rows, envs = [], []
    for reader, f in res["figures"]["readers"].items():
        env = f["environment"]
        envs.append(f"{reader}: {'cached' if env.get('cached') else 'built'} ({', '.join(env['pins'])})"
                    if "error" not in env else f"{reader}: did not install ({env['error']})")
        if not f["exports"]:
            rows.append((reader, "every export", "-", "NOT CHECKED"))
        for export, r in f["exports"].items():
            rows.append((f"{reader} {f.get('version', '')}".strip(), export, r["checks"],
                         ("loads, equal to the source" if r.get("exact", True) else "loads; images within the video "
                          "codec's loss, the rest equal to the source") if r["passed"] else f"FAILED: {r['error']}"))
    return (md_table(("library", "export", "checks", "result"), rows) + "\n\nEnvironments: " + "; ".join(envs)
            + f"; the whole check {res['figures']['seconds']:.0f} s. " + provenance(name, res))


def val_suites_table(d: Path) -> str:
    """Each segmenter's val-split suites on the training photos and on validation photos (``val_suites``, every run:
    a row measured again the same once, each version of one measured again otherwise; rows of runs on other validation
    photos than the first run's say which)."""
    loaded = loaded_runs(d, "val_suites")
    if not loaded:
        return not_measured("val_suites")
    first = loaded[0][1]["figures"]["photos"]
    seen = versioned_rows(loaded, lambda label, res: label + ("" if res["figures"]["photos"] == first
                                                              else f" (validation photos: {res['figures']['photos']})"),
                          lambda a, b: a == b)
    columns = [(photos, suite) for r in seen.values() for photos, suites in r["photos"].items() for suite in suites]
    columns = list(dict.fromkeys(columns))

    def cell(r: dict, photos: str, suite: str) -> str:
        m = r["photos"].get(photos, {}).get(suite)
        return "-" if m is None else " / ".join(f"{m[k]:.3f}" for k in
                                                ("precision", "recall", "found_rate", "false_detection_rate"))

    rows = [(f"`{label}`", *(cell(r, p, s) for p, s in columns)) for label, r in seen.items()]
    n = sorted({res["figures"]["n_images"] for _, res in loaded})
    photos = sorted({res["figures"]["photos"] for _, res in loaded})
    return (md_table(("segmenter", *(f"{s}, {p}" for p, s in columns)), rows)
            + f"\n\nPrecision / recall / found / false detection, val split (validation seeds), "
            f"{', '.join(map(str, n))} images a suite; validation photos: {', '.join(f'`{p}`' for p in photos)} "
            "(no candidate trained on them)." + provenances(loaded))
