"""The notebooks run top to bottom in a real Jupyter kernel, and are committed without outputs.

GIVEN each ``notebooks/*.ipynb`` as committed, WHEN it is executed by nbclient (kernel ``python3``) in
a fresh temporary working directory, THEN no cell raises; and the committed file holds no outputs
and no execution counts (strip them with ``python tests/test_notebooks.py --strip``).

Set ``GRASP_S2R_NOTEBOOK_IMAGES=DIR`` to also write every figure of the executed notebooks to
``DIR/<notebook>-<cell>-<k>.png`` (to look at them without opening Jupyter).
"""

from __future__ import annotations

import base64
import os
import sys
import time
from pathlib import Path

import pytest

nbformat = pytest.importorskip("nbformat")
nbclient = pytest.importorskip("nbclient")
pytest.importorskip("ipykernel")

NOTEBOOK_DIR = Path(__file__).resolve().parent.parent / "notebooks"
NOTEBOOKS = sorted(NOTEBOOK_DIR.glob("*.ipynb"))
CELL_TIMEOUT_S = 600
"""Longest a single cell may run (SMALL notebooks take a few minutes in all on a 2-core CPU)."""


def outputs_left(nb: nbformat.NotebookNode) -> list[str]:
    """Code cells (by index) that hold outputs or an execution count."""
    return [f"cell {i}" for i, c in enumerate(nb.cells)
            if c.cell_type == "code" and (c.get("outputs") or c.get("execution_count") is not None)]


def strip(path: Path) -> bool:
    """Remove outputs and execution counts from a notebook file in place; returns whether it changed."""
    nb = nbformat.read(path, as_version=4)
    if not outputs_left(nb):
        return False
    for c in nb.cells:
        if c.cell_type == "code":
            c.outputs = []
            c.execution_count = None
    nbformat.write(nb, path)
    return True


def execute(path: Path, workdir: Path) -> nbformat.NotebookNode:
    """Run ``path`` in a ``python3`` kernel whose working directory is ``workdir``; raises on any cell error."""
    nb = nbformat.read(path, as_version=4)
    client = nbclient.NotebookClient(nb, kernel_name="python3", timeout=CELL_TIMEOUT_S,
                                     resources={"metadata": {"path": str(workdir)}})
    client.execute()
    return nb


def save_images(nb: nbformat.NotebookNode, prefix: str, directory: Path) -> list[Path]:
    directory.mkdir(parents=True, exist_ok=True)
    paths = []
    for i, cell in enumerate(nb.cells):
        for k, out in enumerate(cell.get("outputs", [])):
            png = out.get("data", {}).get("image/png")
            if png:
                p = directory / f"{prefix}-{i:02d}-{k}.png"
                p.write_bytes(base64.b64decode(png))
                paths.append(p)
    return paths


def test_notebooks_exist():
    assert [p.name for p in NOTEBOOKS] == ["01_scene_and_expert.ipynb", "02_vision.ipynb", "03_dagger.ipynb"]


@pytest.mark.parametrize("path", NOTEBOOKS, ids=[p.stem for p in NOTEBOOKS])
def test_committed_without_outputs(path: Path):
    nb = nbformat.read(path, as_version=4)
    left = outputs_left(nb)
    assert not left, f"{path.name} holds outputs ({', '.join(left)}): run `python tests/test_notebooks.py --strip`"


@pytest.mark.slow  # a minute or more each; CI runs them (.ci/run runs every test)
@pytest.mark.parametrize("path", NOTEBOOKS, ids=[p.stem for p in NOTEBOOKS])
def test_notebook_runs(path: Path, tmp_path: Path):
    nb = nbformat.read(path, as_version=4)
    first = next(c for c in nb.cells if c.cell_type == "code")
    assert first.source.lstrip().startswith("SMALL = True"), "the first code cell must set SMALL = True"
    t0 = time.perf_counter()
    executed = execute(path, tmp_path)  # nbclient raises CellExecutionError on the first failing cell
    print(f"{path.name}: executed in {time.perf_counter() - t0:.0f} s")
    errors = [o for c in executed.cells for o in c.get("outputs", []) if o.get("output_type") == "error"]
    assert not errors
    assert any("image/png" in o.get("data", {}) for c in executed.cells for o in c.get("outputs", [])), \
        f"{path.name} drew no figure"
    if images := os.environ.get("GRASP_S2R_NOTEBOOK_IMAGES"):
        save_images(executed, path.stem, Path(images))


if __name__ == "__main__":  # python tests/test_notebooks.py --strip [NOTEBOOK ...]
    if sys.argv[1:2] != ["--strip"]:
        sys.exit("usage: python tests/test_notebooks.py --strip [NOTEBOOK ...]")
    for p in [Path(a) for a in sys.argv[2:]] or NOTEBOOKS:
        print(f"{p}: {'stripped' if strip(p) else 'already clean'}")
