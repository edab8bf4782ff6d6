"""Renderers of ``tables.py`` for perception on photos no segmenter trained on: the painted suite's misses, your own
scene (``own_scene``), the unseen tables and their failures (``unseen_tables``, ``table_photo_failures``,
``error_budget``), the sphere's context, the search recipe and the test-time remedies."""

from __future__ import annotations

from pathlib import Path

from results_io import changed_weights, system_weights
from tables_base import (
    camera_label,
    cpu_name,
    fixed,
    load,
    loaded_runs,
    md_table,
    not_measured,
    numbered_runs,
    provenance,
    provenances,
    rate_ci,
    versioned_rows,
)
from validation import UNSEEN_TABLE as UNSEEN

from grasp_s2r.stats import difference_interval


def painted_misses_table(d: Path) -> str:
    """Painted spheres found, grey against coloured and by position (``painted_misses``), and where the training
    recipe puts its spheres."""
    res = load("painted_misses", d)
    if res is None:
        return not_measured("painted_misses")
    f = res["figures"]
    groups = list(next(iter(f["checkpoints"].values())))
    rows = [(f"`{path}`", *(f"{r[g]['found_rate']:.3f}" for g in groups)) for path, r in f["checkpoints"].items()]
    n = {g: r[g]["images"] for r in f["checkpoints"].values() for g in groups}
    table = md_table(("segmenter", *(f"{g} (n={n[g]})" for g in groups)), rows)
    from painted_misses import middle_share

    cols = [f"{name} {100 * middle_share(cells):.0f} %" for name, cells in f["positions"].items()]
    return (table + f"\n\nShare of painted spheres found (val split, {f['n_images']} images; grey: mean HSV "
            f"saturation below {f['grey_saturation']} of 255; the middle: the middle half of the columns, the lower "
            "three quarters of the rows). Sphere centres in the middle: " + ", ".join(cols) + ". "
            + provenance("painted_misses", res))


OWN_SCENE_VALIDATION = ("own_scene-validation", "own_scene-validation-segmenter", "own_scene-validation-adapt",
                        "own_scene-validation-nodistractors", "own_scene-validation-recipe",
                        "own_scene-validation-rerun", "own_scene-validation-mined", "own_scene-validation-300")
"""The adaptation recipes compared on the validation photo set (``mate-backgrounds``), before the report sets."""


def own_scene_table(d: Path, names: tuple[str, ...] | None = None) -> str:
    """``own_scene`` (and ``own_scene-2``, ...; or the runs ``names``): the shipped system and the adapted one on the
    test parts of each photo set (one row a set, condition and ``grasp-s2r adapt`` option set)."""
    names = tuple(names or numbered_runs(d, "own_scene"))
    loaded = [(name, res) for name in names if (res := load(name, d)) is not None]
    if not loaded:
        return not_measured(names[0])
    rows, frames = [], []
    episodes = sorted({res["figures"]["episodes"] for _, res in loaded})
    for _, res in loaded:
        f = res["figures"]
        args = res.get("config", {}).get("adapt_args")
        for name, r in f["rows"].items():
            given = r["adapt"].get("config", {})
            steps = given.get("segmenter_steps")
            how = args or ("defaults" if steps is None else f"defaults: --segmenter-steps {steps}"
                           + (f" --segmenter-lr {given['segmenter_lr']:g} --rounds {given['rounds']}"
                              if "segmenter_lr" in given else "")
                           + (f" --segmenter-minutes {given['segmenter_minutes']:g}"
                              if given.get("segmenter_minutes") else ""))
            if r["adapt"].get("segmenter_steps_trained") not in (None, steps):  # cut to fit its minutes
                how += f" ({r['adapt']['segmenter_steps_trained']} steps trained)"
            minutes = sum(r["adapt"]["seconds"].values()) / 60
            for c in f["conditions"]:
                s, a = r["shipped"][c], r["adapted"][c]
                diff, lo, hi = difference_interval(a["successes"], a["episodes"], s["successes"], s["episodes"])
                rows.append((f"`{name}` ({r['n_photos']} photos)", f"`{how}`", c,
                             *((f["episodes"],) if len(episodes) > 1 else ()), rate_ci(s), rate_ci(a),
                             f"{100 * diff:+.1f} ({100 * lo:+.1f} to {100 * hi:+.1f})",
                             f"{minutes:.1f}"))
            frames += [f"`{name}`, {system}{f' (`{how}`)' if system.startswith('adapted') else ''}: found "
                       f"{fixed(m['found_below_6px'])} (< 6 px) / {fixed(m['found_6px_and_over'])} (>= 6 px), false "
                       f"detections {fixed(m['false_detection_rate'])} ({m['views']} views)"
                       for system, m in r.get("frames", {}).items()]
    f = loaded[0][1]["figures"]
    reads = system_weights()
    other = [f"`{name}` ({', '.join(changed)})" for name, res in loaded if (changed := changed_weights(res, reads))]
    older = (" Measured with other shipped weights than today's, its `shipped` column that system's: "
             + ", ".join(other) + ".") if other else ""
    return (md_table(("photo set", "adapt options", "condition", *(("episodes",) if len(episodes) > 1 else ()),
                      "shipped", "adapted", "difference, points", "adaptation, min"), rows)
            + f"\n\nSuccess in % (95 % CI), {', '.join(map(str, episodes))} episodes a condition on the test parts (the right "
            f"{100 * (1 - f['tune_share']):.0f} % of each photo; adapted on the left {100 * f['tune_share']:.0f} %), "
            "the same episodes for both systems. Adaptation: the minutes of `adapt`'s training stages (the "
            "segmenter's fine-tune, and the controller's rounds where asked), without its 10-second scene check. "
            "Segmenters per frame, on photo-table views of the test parts: "
            + "; ".join(dict.fromkeys(frames)) + "." + older
            + provenances(loaded))


def own_scene_screen_table(d: Path) -> str:
    """``own_scene_screen-SET``: the untouched shipped system on each photo set's test part (``unseen_tables.py``
    with the validation seeds), one row a set: which sets the adaptation could gain 5 points on."""
    stem = "own_scene_screen"
    loaded = [(path.stem.removeprefix(f"{stem}-"), res) for path in sorted(d.glob(f"{stem}-*.json"))
              if (res := load(path.stem, d)) is not None]  # (set, results)
    if not loaded:
        return not_measured(stem)
    rows = []
    for photo_set, res in loaded:
        shipped = res["figures"]["rows"]["shipped"]
        rows.append((f"`{photo_set}`", res["figures"]["n_photos"], f"{shipped['far']['found_rate']:.2f}",
                     f"{shipped['far']['false_detection_rate']:.2f}", rate_ci(shipped[UNSEEN])))
    f = loaded[0][1]["figures"]
    cpus = sorted({cpu_name(res) for _, res in loaded})
    reads = system_weights()
    other = [photo_set for photo_set, res in loaded if changed_weights(res, reads)]
    older = (" **Measured with other shipped weights** than today's: " + ", ".join(other) + ": re-measure.") \
        if other else ""
    return (md_table(("photo set (test parts)", "photos", "far views: found", "far views: false det.",
                      "table-photo-unseen"), rows)
            + f"\n\nThe shipped system untouched, on the test part of each photo (the right 40 %): {f['views']} "
            f"far views a set (the sphere 2-4 px wide) and {f['episodes']} validation episodes with the test parts as "
            f"the table (success in %, 95 % CI; validation seeds, not the episodes `own_scene.py` reports). "
            f"{len(loaded)} sets on {', '.join(cpus)}; each by `{loaded[0][1]['command']}` with its own "
            f"folder, `benchmarks/results/own_scene_screen-SET.json`." + older)


def table_photo_failures_table(d: Path) -> str:
    """``table_photo_failures``: per-episode means of successes and failures on ``table-photo``."""
    res = load("table_photo_failures", d)
    if res is None:
        return not_measured("table_photo_failures")
    f = res["figures"]
    rows = [(label, s["episodes"], f"{s['in_view']:.2f}", f"{s['found']:.2f}", f"{s['false_blob']:.2f}",
             f"{s['width0_px']:.1f}") for label, s in f["summary"].items() if s["episodes"]]
    return (md_table(("episodes", "n", "sphere in view (share of steps)", "found when in view", "mask fires elsewhere",
                      "sphere width at the start, px"), rows)
            + f"\n\n`table-photo` on {f['backgrounds']}. " + provenance("table_photo_failures", res))


def same_figures(a: dict, b: dict) -> bool:
    """Two runs of one row measured the same: their per-frame figures, and their episodes where both ran them (the
    time a frame is timed anew in each run and left out)."""
    return a["far"] == b["far"] and a["all"] == b["all"] and (UNSEEN not in a or UNSEEN not in b
                                                               or a[UNSEEN] == b[UNSEEN])


def unseen_tables_table(d: Path) -> str:
    """``unseen_tables``: each segmenter on tables it never trained on, per frame (far / all heights) and end to end."""
    loaded = loaded_runs(d, "unseen_tables")
    if not loaded:
        return not_measured("unseen_tables")
    f = loaded[0][1]["figures"]
    def tables(res: dict) -> str:  # runs on other photos than the first's say so
        photos = res["figures"]["photos"]
        return "" if photos == f["photos"] else f" on the {photos} photos" if photos == "train" else f" on {photos}"

    cpus = [cpu_name(res) for _, res in loaded]
    usual_cpu = max(set(cpus), key=cpus.count)

    def machine(res: dict) -> str:  # episodes run on another CPU differ (float rounding): its rows say which
        return "" if cpu_name(res) == usual_cpu else f" ({cpu_name(res)})"

    rows_by_label = versioned_rows(loaded, lambda label, res: label + camera_label(res["figures"].get("camera_px", 64))
                                   + tables(res) + machine(res), same_figures)

    def cell(m: dict) -> str:
        return " / ".join(f"{m[k]:.3f}" for k in ("precision", "recall", "found_rate", "false_detection_rate"))

    def cost(r: dict) -> str:  # the row's time a frame against the shipped one at 64 px, timed side by side
        return f"{r['predict_ms'] / r['shipped_64px_ms']:.2f}x" if "predict_ms" in r else "-"

    rows = [(f"`{label}`", cell(r["far"]), cell(r["all"]),
             rate_ci(r[UNSEEN]) if UNSEEN in r
             else "-", cost(r)) for label, r in rows_by_label.items()]
    table = md_table(("segmenter (+ controller, where not the shipped one)",
                      "far views: P / R / found / false det.", "all heights", "table-photo-unseen",
                      "time a frame"), rows)
    return (table + f"\n\nThe validation photos `{Path(f['photos']).name}` ({f['n_photos']}, trained on by none) as the "
            f"sim table: {f['views']} views a set (far: an episode's start and search heights, the sphere 2-4 px "
            f"wide; all: the training views' heights), and {f['episodes']} validation episodes (success in %, "
            "95 % CI)." + provenances(loaded))


def sphere_context_table(d: Path) -> str:
    """``sphere_context``: the failed episodes' first frames with the table around the sphere changed."""
    res = load("sphere_context", d)
    if res is None:
        return not_measured("sphere_context")
    f = res["figures"]

    def cell(r: dict | None) -> str:
        return "-" if r is None else f"{r['found']:.2f} / {r['false_blob']:.2f}"

    rows = [(name, cell(r.get("failed")), cell(r.get("succeeded"))) for name, r in f["rows"].items()]
    table = md_table(("first frame", f"failed episodes ({f['failed']}): found / false blob",
                      "as many succeeded episodes: found / false blob"), rows)
    return (table + f"\n\nThe shipped segmenter on the first frames of `table-photo-unseen` episodes (`{f['photos']}` as "
            f"the table, {f['episodes']} validation episodes): found = the mask touches the sphere, false blob = 3 or "
            "more mask pixels elsewhere; the sphere's own pixels are never changed but in the rows that widen or "
            "repaint it (repainted: each pixel the colour times its brightness over the sphere's mean). "
            + _hue_text(f.get("hue_near_table", {}), f.get("near_hue_deg"))
            + _approach_text(f.get("approach_found_by_width_px", {})) + provenance("sphere_context", res))


def _hue_text(near: dict[str, float], degrees: float | None) -> str:
    if not near:
        return ""
    return (f"The sphere's hue within {degrees:g} degrees of the table's around it: failed episodes "
            f"{near.get('failed', float('nan')):.0%}, succeeded {near.get('succeeded', float('nan')):.0%}. ")


def _approach_text(found_by: dict[str, float]) -> str:
    if not found_by:
        return ""
    return ("Replayed with ground-truth masks (the arm approaches, the sphere grows), the failed episodes' spheres are "
            "first found by a width of " + ", ".join(f"{w} px in {v:.0%}" for w, v in found_by.items()) + ". ")


def error_budget_table(d: Path) -> str:
    """``error_budget`` (and ``error_budget-2``, ...): per segmenter, the same episodes on its masks, on them without
    one kind of error, on the ground truth; then its frames by TCP height, failed against succeeded episodes."""
    loaded = loaded_runs(d, "error_budget")
    if not loaded:
        return not_measured("error_budget")
    runs = [res["figures"] for _, res in loaded]
    photos = sorted({f["photos"] for f in runs})
    labels = [f"`{f['vision']}`{camera_label(f['camera_px'])}"
              + (f" on `{f['photos']}`" if len(photos) > 1 else "") for f in runs]
    masks = list(runs[0]["rows"])
    rows = [(f"`{m}`", *(rate_ci(f["rows"][m]) for f in runs)) for m in masks]
    parts = [md_table(("masks the shipped controller runs on", *(f"segmenter {label}" for label in labels)), rows)]

    def cell(r: dict) -> str:
        if not r["in_view"]:
            return "-"
        return f"{r['in_view']}: {r['found']:.2f} / {r['false_blob']:.2f} / {r['width_px']:.1f}"

    for label, f in zip(labels, runs):
        parts.append(f"Segmenter {label}, its frames by TCP height:\n\n" + md_table(
            ("TCP height", "failed: in view: found / false blob / width px",
             "succeeded: in view: found / false blob / width px"),
            [(f"{h['height_cm'][0]}-{h['height_cm'][1]} cm", cell(h["failed"]), cell(h["succeeded"]))
             for h in f["by_height"]]))
        if f.get("misses"):  # measured since the peak probability of missed spheres was recorded
            parts[-1] += "\n\n" + _misses_text(f["misses"])
    episodes = {f["episodes"] for f in runs}
    return ("\n\n".join(parts) + f"\n\n{' or '.join(f'`{p}`' for p in photos)} as the table, "
            f"{', '.join(map(str, sorted(episodes)))} validation episodes a cell (success in %, 95 % CI). The frames "
            "of a segmenter's own masks: in view = frames showing the sphere, found = share where the mask touches "
            "it, false blob = share of all frames with 3 or more mask pixels elsewhere, width = the sphere's median "
            "width." + provenances(loaded))


def _misses_text(misses: dict[str, dict]) -> str:
    prob = next(iter(misses.values()))["signal_prob"]
    return "Frames whose sphere is in view but missed: " + "; ".join(
        f"{label} episodes {m['missed']}, the sphere's most probable pixel at {prob} or more in {m['signal']:.2f} "
        f"of them and the frame's most probable pixel in {m['top']:.2f}"
        for label, m in misses.items() if m["missed"]) + "."


def search_recipe_table(d: Path) -> str:
    """``search_recipe`` (and ``search_recipe-2``, ... with ``--vision``): the observable expert acting on a
    segmenter's masks with each search, then the shipped controller and controllers trained to imitate a search, on
    the same validation episodes; a table a segmenter."""
    loaded = loaded_runs(d, "search_recipe")
    if not loaded:
        return not_measured("search_recipe")
    parts = []
    for name, res in loaded:
        f = res["figures"]
        rows = [(f"expert: {r['name']}" if r["agent"] == "expert" else f"controller: `{r['name']}`",
                 *(rate_ci(v) for v in r["conditions"].values()))
                for r in f["rows"]]
        masks = f"`{f['vision']}`'s masks" if f.get("vision") else "the shipped segmenter's masks"
        parts.append(md_table(("agent", *(f"`{c}`" for c in f["conditions"])), rows)
                     + f"\n\nSuccess in % (95 % CI), {f['episodes']} validation episodes a condition (`{f['photos']}` "
                     f"as the table of `{UNSEEN}`, the training photos elsewhere), {masks}. The expert counts the "
                     "sphere as seen where the mask touches it. " + provenance(name, res))
    return "\n\n".join(parts)


def test_time_remedies_table(d: Path) -> str:
    """``test_time_remedies`` (and ``-2``, ...): the shipped segmenter changed at test time, per frame and end to end,
    one table a run."""
    loaded = loaded_runs(d, "test_time_remedies")
    if not loaded:
        return not_measured("test_time_remedies")

    def cell(m: dict) -> str:
        return f"{m['found_rate']:.3f} / {m['false_detection_rate']:.3f}"

    def folder(path: str) -> str:  # own_scene.py's parts by their set: mate-backgrounds/test
        p = Path(path)
        return f"{p.parent.name}/{p.name}" if p.name in ("tune", "test") else p.name

    parts = []
    for name, res in loaded:
        f = res["figures"]
        stats = "the same photos' other views" if f["stats_photos"] == f["photos"] else f"`{folder(f['stats_photos'])}`"
        rows = [(label, cell(r["far"]), cell(r["all"]), rate_ci(r[UNSEEN]) if UNSEEN in r else "-")
                for label, r in f["rows"].items()]
        parts.append(md_table((f"the shipped segmenter, `{folder(f['photos'])}` as the table", "far: found / false det.",
                               "all heights: found / false det.", f"{UNSEEN}, {f['episodes']} episodes"), rows)
                     + f"\n\n{f['views']} views a set; AdaBN's statistics from {f['bn_views']} views of {stats}. "
                     + provenance(name, res))
    return "\n\n".join(parts)


def seen_tables_table(d: Path) -> str:
    """``seen_tables`` (and its numbered runs): fine-tunes on the very photos that are then the tables, against the
    shipped segmenter, end to end and per frame."""
    loaded = loaded_runs(d, "seen_tables")
    if not loaded:
        return not_measured("seen_tables")
    parts = []
    for name, res in loaded:
        f = res["figures"]
        rows = []
        for arm, r in f["rows"].items():
            val = r.get("validation", {})
            fr = r.get("frames")
            frames = (" / ".join(fixed(fr[k]) for k in ("found_below_6px", "found_6px_and_over", "false_detection_rate"))
                      if fr else "-")
            rows.append((f"`{arm}`", *(rate_ci(val[c]) if c in val else "-" for c in (UNSEEN, "backgrounds-unseen")),
                         frames))
        parts.append(md_table(("segmenter", f"`{UNSEEN}`", "`backgrounds-unseen`",
                               "per frame: found < 6 px / >= 6 px / false det."), rows)
                     + f"\n\n`{Path(f['photos']).name}` as the table (and behind the sphere), {f['episodes']} "
                     f"validation episodes a condition (success in %, 95 % CI), the shipped controller and mask filter; every arm "
                     f"fine-tuned {f['steps']} steps from the shipped weights on these photos themselves; per frame "
                     f"{f['views']} photo-table views, one table texture a photo. " + provenance(name, res))
    return "\n\n".join(parts)


def border_spheres_table(d: Path) -> str:
    """``border_spheres`` (and its numbered runs): spheres found at the image's border and inside it, per frame and
    in the validation episodes' frames."""
    loaded = loaded_runs(d, "border_spheres")
    if not loaded:
        return not_measured("border_spheres")
    parts = []
    for name, res in loaded:
        f = res["figures"]
        first = next(iter(f["rows"].values()))["frames"]
        kinds = [k for k in first if k != "false detections"]
        rows = []
        for seg, r in f["rows"].items():
            fr, ep = r["frames"], r.get("episodes")
            episodes = (f"{rate_ci(ep[UNSEEN])}; failed: {ep['failed']['border_share']:.2f} at the border, found "
                        f"{ep['failed']['border']['found']:.2f} / {ep['failed']['inside']['found']:.2f}; succeeded: "
                        f"{ep['succeeded']['border_share']:.2f}, {ep['succeeded']['border']['found']:.2f} / "
                        f"{ep['succeeded']['inside']['found']:.2f}" if ep else "-")
            rows.append((f"`{seg}`", *(f"{fr[k]['found']:.2f}" for k in kinds),
                         f"{fr['false detections']['found']:.3f}", episodes))
        counts = ", ".join(f"{k} {first[k]['n']}" for k in kinds)
        columns = ["segmenter", *(f"per frame: {k}" for k in kinds), "false det."]
        if f["episodes"]:
            columns.append(f"`{UNSEEN}` of {f['episodes']}; frames in view at the border, found there / inside")
        else:
            rows = [row[:-1] for row in rows]
        parts.append(md_table(columns, rows)
                     + f"\n\nPer frame: {f['views']} photo-table views of `{Path(f['photos']).name}` (spheres: "
                     f"{counts}; at the border: the sphere's mask within {f['border_px']} px of the image's edge), the share "
                     "found (the mask touches the sphere). Episodes: the shipped controller and mask filter over each "
                     "segmenter's masks, validation seeds; the frames that show the sphere in the failed and the "
                     "succeeded episodes. " + provenance(name, res))
    return "\n\n".join(parts)


def parallax_filter_table(d: Path) -> str:
    """``parallax_filter`` (and its numbered runs): the shipped system with and without the parallax filter (other
    vote counts, other hovered spots), on the same validation episodes."""
    loaded = loaded_runs(d, "parallax_filter")
    if not loaded:
        return not_measured("parallax_filter")
    parts = []
    for name, res in loaded:
        f = res["figures"]
        rows = [(r["name"], *(rate_ci(v) for v in r["conditions"].values())) for r in f["rows"]]
        parts.append(md_table(("the shipped segmenter and controller", *(f"`{c}`" for c in f["conditions"])), rows)
                     + f"\n\nSuccess in % (95 % CI), {f['episodes']} validation episodes a condition (`{f['photos']}` "
                     f"as the table of `{UNSEEN}` and behind the sphere in `backgrounds-unseen`, the training photos "
                     "elsewhere). " + provenance(name, res))
    return "\n\n".join(parts)
