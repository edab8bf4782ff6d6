"""Renderers of ``tables.py`` for the scene's own fidelity: what a segmenter and the shipped controller make of the
scene drawn more as a camera sees it (``sphere_shadow.py``)."""

from __future__ import annotations

from pathlib import Path

from tables_base import loaded_runs, md_table, not_measured, provenances, rate_ci


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
                rows.append((f"`{label}`", scene, f"{far['found_small']:.3f}",
                             f"{every['found_small']:.3f} / {every['found_large']:.3f}",
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
