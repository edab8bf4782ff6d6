"""Render every figure table of README.md and docs/*.md from the benchmarks' JSON files (benchmarks/results/).

    python benchmarks/tables.py           # rewrite each table between <!-- results:NAME --> and <!-- /results:NAME -->
    python benchmarks/tables.py --check   # exit 1, naming each stale table, when the markdown differs from the JSON

A table of :data:`TABLES` renders from its JSON file(s) only: measured tables through the functions of
``tables_render.py`` and its kin (``tables_prose``, ``_training``, ``_unseen``, ``_scene``), built of the pieces of
``tables_base.py`` (each row or caption names the command that measures it, success rates keep their 95 % interval). A table whose JSON is missing says so and names the command. Figures of past runs that cannot be
re-measured here are not rendered: they are history, in CHANGELOG.md.
"""

from __future__ import annotations

import argparse
import re
import sys
from collections.abc import Callable
from pathlib import Path

import tables_adapt as adapt
import tables_code as code
import tables_prose as prose
import tables_render as r
import tables_scene as scene
import tables_training as training
import tables_unseen as unseen
from results_io import REPO, RESULTS_DIR, portable_text

TABLES: dict[str, Callable[[Path], str]] = {
    "readme": r.readme_table,
    "eval_shipped": r.eval_shipped_table,
    "compare_memory": r.compare_memory_table,
    "scaling": r.scaling_table,
    "deploy_latency": r.deploy_latency_table,
    "vision_suites": r.vision_suites_table,
    "pipeline": r.pipeline_table,
    "eval_vision_example": prose.eval_vision_example,
    "eval_vision_suites_example": prose.eval_vision_suites_example,
    "vision_composition": prose.vision_composition,
    "vision_false_detections": prose.vision_false_detections,
    "compare_memory_reading": prose.compare_memory_reading,
    "expert_search": prose.expert_search_table,
    "pipeline_recipe": prose.pipeline_recipe_table,
    "controller_recipe": prose.controller_recipe_table,
    "camera_mount": prose.camera_mount_table,
    "gripper_input": prose.gripper_input_table,
    "gripper_head": prose.gripper_head_table,
    "interop": prose.interop_table,
    "train_vision_speed": training.train_vision_speed_table,
    "train_vision_budget": training.train_vision_budget_table,
    "crop_recipe": training.crop_recipe_table,
    "sphere_look": training.sphere_look_table,
    "segmenter_recipe": training.segmenter_recipe_table,
    "painted_misses": unseen.painted_misses_table,
    "own_scene": unseen.own_scene_table,
    "own_scene_validation": lambda d: unseen.own_scene_table(d, unseen.OWN_SCENE_VALIDATION),
    "own_scene_screen": unseen.own_scene_screen_table,
    "table_photo_failures": unseen.table_photo_failures_table,
    "unseen_tables": unseen.unseen_tables_table,
    "sphere_context": unseen.sphere_context_table,
    "error_budget": unseen.error_budget_table,
    "search_recipe": unseen.search_recipe_table,
    "test_time_remedies": unseen.test_time_remedies_table,
    "seen_tables": unseen.seen_tables_table,
    "border_spheres": unseen.border_spheres_table,
    "parallax_filter": unseen.parallax_filter_table,
    "val_suites": prose.val_suites_table,
    "sphere_shadow": scene.sphere_shadow_table,
    "sphere_contrast": scene.sphere_contrast_table,
    "painted_factors": scene.painted_factors_table,
    "adapt_recipe": adapt.adapt_recipe_table,
    "conditions": code.conditions_table,
}
"""Marker name -> renderer (results folder -> the markdown between the markers, no surrounding newlines)."""
DOCUMENTS = ("README.md", "docs/*.md", "docs/*/*.md")
MARKER = re.compile(r"(<!-- results:(?P<name>[\w-]+) -->\n)(?P<body>.*?)(\n<!-- /results:(?P=name) -->)", re.DOTALL)


def documents(root: Path = REPO) -> list[Path]:
    """The markdown files that may hold tables."""
    return sorted({p for pattern in DOCUMENTS for p in root.glob(pattern)})


def render(text: str, path: Path, rendered: dict[str, str], results: Path = RESULTS_DIR) -> tuple[str, list[str]]:
    """``text`` with every marked table replaced by its rendering from the JSON files in ``results``, and the names
    of the tables that changed. ``rendered`` caches renderings across documents."""
    stale: list[str] = []

    def replace(m: re.Match[str]) -> str:
        name = m["name"]
        if name not in TABLES:
            raise SystemExit(f"tables: {path}: unknown table <!-- results:{name} -->; known: {', '.join(TABLES)}")
        if name not in rendered:  # recorded absolute paths read from the repository's root (results_io)
            rendered[name] = portable_text(TABLES[name](results))
        if m["body"] != rendered[name]:
            stale.append(name)
        return m[1] + rendered[name] + m[4]

    return MARKER.sub(replace, text), stale


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--check", action="store_true", help="change nothing; exit 1 naming each stale table")
    p.add_argument("--root", type=Path, default=REPO, help="folder of README.md and docs/ (default: this checkout)")
    p.add_argument("--results", type=Path, default=RESULTS_DIR, help="folder of the JSON files (default: "
                   "benchmarks/results)")
    args = p.parse_args(argv)
    rendered: dict[str, str] = {}
    seen: set[str] = set()
    stale_any = False
    for path in documents(args.root):
        text = path.read_text()
        new, stale = render(text, path, rendered, args.results)
        seen |= {m["name"] for m in MARKER.finditer(text)}
        rel = path.relative_to(args.root)
        for name in stale:
            stale_any = True
            print(f"{rel}: table '{name}' is stale" if args.check else f"{rel}: table '{name}' rewritten")
        if stale and not args.check:
            path.write_text(new)
    if missing := [n for n in TABLES if n not in seen]:
        print(f"tables: no markers for {', '.join(missing)} in {', '.join(DOCUMENTS)}")
        return 1
    if args.check and stale_any:
        print("run: python benchmarks/tables.py")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
