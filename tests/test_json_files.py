"""The JSON reports the commands write are strict JSON, written whole: undefined figures (NaN, infinities) as null,
never the ``NaN`` token that ``json.dumps`` writes and strict readers (``jq``, JavaScript, ``json.loads`` with
``parse_constant``) refuse."""

from __future__ import annotations

import json
import math
import subprocess
import sys
from pathlib import Path

import pytest

from grasp_s2r.control.curves import CURVE_COLUMNS, write_curve_json
from grasp_s2r.files import json_safe, write_json


def strict_load(path):
    def refuse(token):
        raise ValueError(f"not strict JSON: {token}")

    return json.loads(path.read_text(), parse_constant=refuse)


def test_undefined_figures_are_written_as_null_at_any_depth(tmp_path):
    # GIVEN a report with NaN and infinities in dicts, lists and tuples
    report = {"rate": math.nan, "rows": [{"a": 1.5, "b": math.inf}, (-math.inf, 2)], "name": "x", "n": 3}
    # WHEN written
    write_json(tmp_path / "r.json", report, indent=2)
    # THEN a strict reader reads it, the undefined figures null and the rest as they were
    assert strict_load(tmp_path / "r.json") == {"rate": None, "rows": [{"a": 1.5, "b": None}, [None, 2]],
                                                "name": "x", "n": 3}
    # AND nothing else is left in the folder (the write went through a temp file)
    assert [p.name for p in tmp_path.iterdir()] == ["r.json"]


def test_a_dagger_curve_of_a_round_without_rollouts_is_strict_json(tmp_path):
    # GIVEN a curve whose round 0 came from --demos (no rollouts: its env-steps/s undefined)
    row = dict.fromkeys(CURVE_COLUMNS, 0.0) | {"rollout_env_steps_per_s": math.nan}
    # WHEN written, THEN a strict reader reads it, that figure null
    path = write_curve_json([row], {"rounds": 1}, tmp_path / "curve.json")
    assert strict_load(path)["rows"][0]["rollout_env_steps_per_s"] is None


def test_what_cannot_be_json_is_still_refused(tmp_path):
    with pytest.raises(TypeError):
        write_json(tmp_path / "r.json", {"x": object()})
    assert not list(tmp_path.iterdir())
    assert json_safe({"k": [math.nan]}) == {"k": [None]}


def test_every_tracked_json_file_is_strict_json():
    # GIVEN every JSON file the repository tracks (results, dataset metadata, manifests, weights' records)
    root = Path(__file__).resolve().parents[1]
    listed = subprocess.run(["git", "ls-files", "*.json"], check=False, cwd=root, capture_output=True, text=True)
    if listed.returncode != 0:
        pytest.skip("not a git checkout")
    paths = [root / p for p in listed.stdout.split()]
    assert paths
    # THEN each one reads with a strict reader: no NaN or Infinity token anywhere
    for path in paths:
        strict_load(path)


def test_a_benchmark_writes_an_undefined_figure_as_null(tmp_path, monkeypatch):
    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))
    import results_io

    # GIVEN a benchmark's figures with a figure of nothing measured (a share of no frames, an open bin edge)
    monkeypatch.setattr(results_io, "SCRATCH_DIR", tmp_path)
    figures = {"found_large": math.nan, "bins": [[2.5, math.inf]], "found_small": 0.5}
    # WHEN recorded
    path = results_io.write_results(tmp_path / "x.json", "bench_x", figures, {"n": 1}, argv=["bench_x.py"])
    # THEN a strict reader reads it, those figures null
    assert strict_load(path)["figures"] == {"found_large": None, "bins": [[2.5, None]], "found_small": 0.5}
