"""Renderers of ``tables.py`` for the scene's and the sphere's look: what a segmenter and the shipped controller make
of the scene drawn more as a camera sees it (``sphere_shadow.py``), and which spheres a segmenter finds by how much
they stand out of their surround (``sphere_contrast.py``)."""

from __future__ import annotations

from pathlib import Path

from tables_base import fixed, loaded_runs, md_table, not_measured, provenances, rate_ci


def sphere_shadow_table(d: Path) -> str:
    """``sphere_shadow`` (and its numbered runs): each segmenter per frame and end to end in the scene without and
    with the sphere's shadows."""
    loaded = loaded_runs(d, "sphere_shadow")
    if not loaded:
        return not_measured("sphere_shadow")
    rows, views, episodes, photos, near, condition = [], set(), set(), set(), set(), set()
    for _, res in loaded:
        f = res["figures"]
        views.add(f["views"]), episodes.add(f["episodes"]), photos.add(Path(f["photos"]).name)
        near.add(f["near_px"]), condition.add(f["condition"])
        for label, row in f["rows"].items():
            for scene, c in row.items():
                if not isinstance(c, dict):  # the row's checkpoint and sha256; the rest are its scenes
                    continue
                far, every = c["far"], c["all"]
                rows.append((f"`{label}`", scene, fixed(far["found_small"], 3),
                             f"{fixed(every['found_small'], 3)} / {fixed(every['found_large'], 3)}",
                             (f"{(far['false_near'] + every['false_near']) / 2:.3f} / "
                              f"{(far['false_elsewhere'] + every['false_elsewhere']) / 2:.3f}"),
                             rate_ci(c["episodes"])))
    cond = ", ".join(f"`{c}`" for c in sorted(condition))
    columns = ("segmenter", "scene", "found, far (< 6 px)", "found, all views: < 6 / >= 6 px",
               "false det. near the sphere / elsewhere, both sets", f"{cond} (shipped controller)")
    return (md_table(columns, rows)
            + f"\n\nPer frame: {', '.join(map(str, sorted(views)))} photo-table views of "
            f"{', '.join(f'`{p}`' for p in sorted(photos))} a view set and scene (`unseen_tables.py`'s far and all "
            "sets, the same seeds in both scenes), found = the mask touches the sphere; a false detection is 3 or more "
            f"mask pixels outside the sphere, near it when all lie within {', '.join(map(str, sorted(near)))} px of "
            "it (its shadow), the share of the views of both sets. End to end: "
            f"{', '.join(map(str, sorted(episodes)))} validation episodes (success in %, 95 % CI), the shipped "
            "controller and mask filter over each segmenter's masks." + provenances(loaded))


def _label(checkpoint: str) -> str:
    """A segmenter's name in a column: "shipped" for the package's weights, its run folder for a run's ``model.pt``,
    else its file name."""
    path = Path(checkpoint)
    if path.parent.name == "weights" and path.parent.parent.name == "grasp_s2r":
        return "shipped"
    return path.parent.name if path.name == "model.pt" else path.name


def _found(cell: dict | None) -> str:
    return "-" if cell is None else f"{fixed(cell['found'])} ({cell['spheres']})"


def sphere_contrast_table(d: Path) -> str:
    """``sphere_contrast`` (and its numbered runs): per suite and segmenter, the spheres found by width and by their
    signal-to-clutter ratio against the surround."""
    loaded = loaded_runs(d, "sphere_contrast")
    if not loaded:
        return not_measured("sphere_contrast")
    rows = []
    for _, res in loaded:
        for suite, s in res["figures"]["suites"].items():
            for ckpt, c in s["checkpoints"].items():
                cells = c["by_width_and_scr"]
                small, large = (" / ".join(_found(cells.get(f"{size}, ratio {side} 2")) for side in ("below", "from"))
                                for size in ("< 6 px", ">= 6 px"))
                rows.append((f"`{suite}`", f"`{_label(ckpt)}`", s["spheres"], f"{s['scr_below_1']:.2f}", small,
                             large))
    columns = ("suite (val)", "segmenter", "spheres", "ratio below 1", "found, < 6 px: ratio < 2 / >= 2",
               "found, >= 6 px: ratio < 2 / >= 2")
    return (md_table(columns, rows) + "\n\nFound: the share of the spheres with at least one pixel predicted, in "
            "brackets the spheres of each cell; the ratio: the sphere's mean Lab colour's distance from that of the "
            "pixels 2-5 px around it, over their own spread." + provenances(loaded))


def painted_factors_table(d: Path) -> str:
    """``painted_factors`` (and its numbered runs): per arm (an ingredient of the painted renderer taken out), the
    spheres each segmenter finds and its false detections; a column a segmenter of any run (by :func:`_label`), the
    latest run's figures where two measured it, "-" where none did."""
    loaded = loaded_runs(d, "painted_factors")
    if not loaded:
        return not_measured("painted_factors")
    cells: dict[str, dict[str, str]] = {}
    spheres: dict[str, int] = {}
    names: list[str] = []
    for _, res in loaded:
        for arm, a in res["figures"]["arms"].items():
            spheres[arm] = a["spheres"]
            for c in a["found"]:
                name = _label(c)
                if name not in names:
                    names.append(name)
                cells.setdefault(arm, {})[name] = f"{fixed(a['found'][c], 3)} / {fixed(a['false_detection'][c], 3)}"
    rows = [(arm, spheres[arm], *(cells[arm].get(n, "-") for n in names)) for arm in cells]
    columns = ("`painted` val images", "spheres", *(f"`{n}`: found / false det." for n in names))
    return (md_table(columns, rows) + f"\n\n{loaded[-1][1]['figures']['n_images']} images an arm, the same seeds "
            "in every arm; false detections on its sphere-free images." + provenances(loaded))
