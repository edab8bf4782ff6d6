"""Renderer of ``tables.py`` for ``adapt``'s fine-tune with settings of its recipe changed
(``adapt_recipe.py``: each arm's segmenter with the shipped controller, on one photo set's test parts)."""

from __future__ import annotations

from pathlib import Path

from tables_base import load, md_table, not_measured, pct, provenances

ADAPT_RECIPE_ARMS = (
    ("default", "`adapt`'s fine-tune"),
    ("nodis", "without the recipe's distractors"),
    ("pt50", ("half the composites on your photos as the sim table (photos behind 0.25, textures and flat colours "
              "0.05)")),
    ("far50", "far views 50 %"),
    ("lr2e3", "peak learning rate 2e-3"),
    ("steps2400", "2400 steps"),
    ("budget15", "`adapt`'s fine-tune fitted to 15 minutes"),
    ("camo50", "half the pasted spheres camouflaged, in the mean colour of the photo around them"),
    ("halfdeg", "the recipe's sensor noise, blur and JPEG at half their shares"),
    ("clean", "none of them: the sim's clean renders"),
    ("empty40", "twice the sphere-free views"),
    ("dis60", "twice the distractors"),
)
"""The arms of the table in docs/own-scene.md (``adapt_recipe-<arm>.json``), in its order, and what each changes."""


def _options(f: dict) -> str:
    """The arm's options of ``adapt_recipe.py`` as it recorded them, and the steps it trained (where they do not
    say)."""
    parts = [f"--set {s}" for s in f["settings"]]
    parts += [f"--lr {f['lr']:g}"] if f["lr"] != 1e-3 else []
    parts += [f"--minutes {f['minutes_budget']:g}"] if f.get("minutes_budget") else []
    parts += [f"--steps {f['steps']}"] if f["steps"] != 3000 and not f.get("minutes_budget") else []
    shown = f"`{' '.join(parts)}`" if parts else "defaults"
    return shown if any(p.startswith("--steps") for p in parts) else f"{shown}, {f.get('steps_trained', f['steps'])} steps"


def adapt_recipe_table(d: Path) -> str:
    """One row an arm: what it changes, its options, the machine, and its grasps as the table and behind the sphere."""
    loaded = [(f"adapt_recipe-{arm}", res, what) for arm, what in ADAPT_RECIPE_ARMS
              if (res := load(f"adapt_recipe-{arm}", d)) is not None]
    if not loaded:
        return not_measured("adapt_recipe")
    rows = []
    for _, res, what in loaded:
        f, cpu = res["figures"], res["machine"].get("cpu", "")
        cells = [f"{c['successes']} ({pct(c['success_rate'])} %)"
                 for c in (f["conditions"]["table-photo"], f["conditions"]["heldout-backgrounds"])]
        rows.append((what, _options(f), cpu.split(",")[0], *cells))
    episodes = sorted({c["episodes"] for _, res, _ in loaded for c in res["figures"]["conditions"].values()})
    return (md_table(("segmenter, with the shipped controller", "options", "CPU", "`table-photo`",
                      "`heldout-backgrounds`"), rows)
            + f"\n\nSuccesses of {', '.join(map(str, episodes))} test-seed episodes a condition on the set's test "
            "parts (the same episodes for every arm), each arm's fine-tune of 3000 steps at 1e-3 unless its options "
            "say otherwise."
            + provenances([(name, res) for name, res, _ in loaded]))
