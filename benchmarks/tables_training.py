"""Renderers of ``tables.py`` for segmenter training: speed on the CPU (``bench_train_vision``) and the equal-budget
comparison (``train_vision_budget``), each for a CPU with AMX and one without (``-noamx``: a CPU without AMX, or
oneDNN capped below AMX by ``--no-amx``); the crop recipe, the sphere's look and the segmenter candidates'
validation episodes (``segmenter_recipe``). The tables of perception on photos never trained on are in
``tables_unseen``."""

from __future__ import annotations

from pathlib import Path

from tables_base import camera_label, load, md_table, not_measured, numbered_runs, provenance, provenances

VARIANTS = (("bench_train_vision", "AMX"), ("bench_train_vision-noamx", "no AMX"))
BUDGET_VARIANTS = (("train_vision_budget", "AMX"), ("train_vision_budget-noamx", "no AMX"))


def train_vision_speed_table(d: Path) -> str:
    """Composition, the step per thread and train-vision end to end, old and new settings, per CPU variant."""
    loaded = [(name, label, load(name, d)) for name, label in VARIANTS]
    loaded = [(name, label, res) for name, label, res in loaded if res is not None]
    if not loaded:
        return not_measured("bench_train_vision")
    figs = [res["figures"] for _, _, res in loaded]
    rows = [("composition, one core: composites/s (crops/s)",
             *(f"{f['composition_one_core']['composites_per_s']:.0f} ({f['composition_one_core']['crops_per_s']:.0f})"
               for f in figs))]
    rows += [(f"step, one thread: {setting}", *(f"{f['step_one_thread_images_per_s'][setting]:.0f} img/s" for f in figs))
             for setting in figs[0]["step_one_thread_images_per_s"]]
    rows += [(f"step, 2 cores, 32 px crops, channels_last: {setting}",
              *(f"{f['step_all_cores_images_per_s'][setting]:.0f} img/s" if "step_all_cores_images_per_s" in f
                else "–" for f in figs))
             for setting in figs[0].get("step_all_cores_images_per_s", {})]
    for key, what in (("old", "old: 64 px images, in-process, torch's threads"),
                      ("new", ("new: the defaults (crops, a data worker, one replica per core, channels_last, bf16 "
                              "where it pays)"))):
        rows.append((f"`train-vision` end to end, 2 cores, {what}",
                     *(f"{f['end_to_end'][key]['images_per_s']:.0f} img/s, {f['end_to_end'][key]['megapixels_per_s']:.2f} "
                       f"Mpx/s ({f['end_to_end'][key]['steps']} steps in {f['end_to_end'][key]['seconds']:.0f} s)"
                       for f in figs)))
    rows.append(("**end-to-end speedup**: images/s (pixels/s)",
                 *(f"**{f['end_to_end']['speedup_images']:.1f}×** ({f['end_to_end']['speedup_pixels']:.1f}×)"
                   for f in figs)))
    header = ("figure", *(f"{label}: {res['figures']['cpu']['name']}" for _, label, res in loaded))
    return md_table(header, rows) + "\n\n" + provenances((name, res) for name, _, res in loaded).lstrip()


def train_vision_budget_table(d: Path) -> str:
    """Val-split scores of the old and new settings trained from scratch for the same minutes."""
    loaded = [(name, label, load(name, d)) for name, label in BUDGET_VARIANTS]
    loaded = [(name, label, res) for name, label, res in loaded if res is not None]
    if not loaded:
        return not_measured("train_vision_budget")
    rows = []
    for _, label, res in loaded:
        f = res["figures"]
        for key in ("old", "new"):
            s = f["settings"][key]
            suites = ", ".join(f"{n} {m['precision']:.3f} / {m['recall']:.3f} / {m['false_detection_rate']:.3f}"
                               for n, m in s["suites"].items())
            rows.append((label, f"{f['budget_minutes']:g} min", key, s["steps"], f"{s['train_seconds'] / 60:.1f} min",
                         f"**{s['val_score']:.3f}**" if key == "new" else f"{s['val_score']:.3f}", suites))
    table = md_table(("CPU", "budget", "settings", "steps", "wall time", "val score",
                      "precision / recall / false detections per suite"), rows)
    return table + "\n\n" + provenances((name, res) for name, _, res in loaded).lstrip()


def crop_recipe_table(d: Path) -> str:
    """The pipeline's fine-tune with each crop candidate, on the val split, and the one the rule selects."""
    res = load("crop_recipe", d)
    if res is None:
        return not_measured("crop_recipe")
    f = res["figures"]
    rows = []
    for name, c in f["candidates"].items():
        suites = ", ".join(f"{n} {m['precision']:.3f} / {m['recall']:.3f} / {m['false_detection_rate']:.3f}"
                           for n, m in c["suites"].items())
        mark = " (selected)" if name == f["selected"] else ("" if name in f["eligible"] else " (too many false det.)")
        rows.append((f"`{name}`{mark}", f"{c['val_score']:.3f}", suites))
    return md_table(("candidate", "val score", "precision / recall / false detections per suite"), rows) + "\n\n" + \
        provenance("crop_recipe", res)


LOOK_ABLATIONS = ("ablate_vision-relocate-alone", "ablate_vision-look", "ablate_vision-randconv",
                  "ablate_vision-look3000", "ablate_vision-relocate")
"""The sphere-look ablations on the val split, in the table's order: the shipped checkpoint as it is and the
recipe with relocated spheres (3000 steps), the 600-step arms (the recipe again beside random convolutions), the
3000-step arms, the wider look with relocated spheres."""


def sphere_look_table(d: Path) -> str:
    """The wider-sphere-look ablations (``ablate_vision.py --json ...``): each arm on the val split, one row an arm,
    the steps it fine-tuned the shipped checkpoint."""
    loaded = [(name, res) for name in LOOK_ABLATIONS if (res := load(name, d)) is not None]
    if not loaded:
        return not_measured("ablate_vision-look")
    from ablate_vision import worst

    rows = []
    for _, res in loaded:
        f = res["figures"]
        for arm, suites in f["suites"].items():
            cells = [f"{suites[s]['precision']:.3f} / {suites[s]['recall']:.3f} / {suites[s]['found_rate']:.3f} / "
                     f"{suites[s]['false_detection_rate']:.3f}" for s in ("composites", "sim", "painted")]
            steps = "0" if f["arms"].get(arm) is None else str(f["steps"])
            rows.append((f"`{arm}`", steps, *cells, f"{worst(suites):.3f}"))
    head = ("arm", "steps", "composites P / R / found / false det.", "sim", "painted", "worst P or R")
    lr = {res["figures"]["lr"] for _, res in loaded if res["figures"]["steps"]}
    n = {res["figures"]["n_images"] for _, res in loaded}
    return (md_table(head, rows) + f"\n\nEach arm fine-tunes the shipped checkpoint for its steps (lr "
            f"{', '.join(f'{x:g}' for x in sorted(lr))}, batch 32) and is scored on the val split "
            f"({', '.join(str(x) for x in sorted(n))} images a suite)."
            + provenances(loaded))




def segmenter_recipe_runs(d: Path) -> list[str]:
    """Candidate segmenters end to end on validation episodes: with the shipped controller (``segmenter_recipe``),
    with their own (``segmenter_recipe-controller``), then ``segmenter_recipe-2``, ``-3`` ..."""
    return ["segmenter_recipe", "segmenter_recipe-controller", *numbered_runs(d, "segmenter_recipe")[1:]]


def segmenter_recipe_table(d: Path) -> str:
    """Each candidate segmenter (with the shipped controller or its own) on validation episodes
    (``segmenter_recipe``): a column a condition any run measured, in the order first run (an unseen-photo condition
    once per photo folder, by its name: ``backgrounds-unseen on DIR``); a row a candidate, the shipped one once with
    the cells of every run (validation seeds from the first: a cell measured twice shows its longest run, the later
    of two as long, as the shipped system's weights and mask filter change between runs); a cell its row was not run
    on: "-"; the mean over the row's cells."""
    loaded = [(name, res) for name in segmenter_recipe_runs(d) if (res := load(name, d)) is not None]
    if not loaded:
        return not_measured("segmenter_recipe")

    def column(res: dict, condition: str) -> str:
        photos = Path(res["figures"].get("unseen_photos", "")).name  # the set's folder, wherever a run had it
        return f"{condition} on {photos}" if condition.endswith("-unseen") and photos else condition

    conditions: list[str] = []
    seen: dict[str, dict] = {}
    for _, res in loaded:
        for label, r in res["figures"]["rows"].items():
            cells = seen.setdefault(label + camera_label(r.get("camera_px", 64)), {})
            for c, v in r["validation"].items():
                key = column(res, c)
                if key not in cells or v["episodes"] >= cells[key]["episodes"]:
                    cells[key] = v  # the same seeds from the first: the most episodes, the latest run, kept
                if key not in conditions:
                    conditions.append(key)

    def cell(v: dict | None) -> str:
        return "-" if v is None else (f"{100 * v['successes'] / v['episodes']:.1f} "
                                      f"({100 * v['ci_low']:.1f}-{100 * v['ci_high']:.1f})")

    def mean(cells: dict) -> float:
        return sum(v["successes"] / v["episodes"] for v in cells.values()) / max(1, len(cells))

    best = max(seen, key=lambda k: mean(seen[k]))
    rows = [(f"`{label}`", *(cell(cells.get(c)) for c in conditions),
             f"**{100 * mean(cells):.1f}**" if label == best else f"{100 * mean(cells):.1f}")
            for label, cells in seen.items()]
    episodes = {res["figures"]["episodes"] for _, res in loaded}
    return (md_table(("segmenter (+ controller, where not the shipped one)", *conditions, "mean"), rows)
            + f"\n\nSuccess in % (95 % CI), {', '.join(map(str, sorted(episodes)))} validation episodes a condition "
            "(training photos, or the photos of the folder named, seeds no other run uses)."
            + provenances(loaded))
