"""The renderers of single figure tables (benchmarks/tables_*.py): what each row shows of the results files it reads,
run on results written by ``results_io`` as the benchmarks write them."""

from __future__ import annotations

import sys
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
BENCH = REPO / "benchmarks"
sys.path.insert(0, str(BENCH))

from results_io import load_results


def ten_episodes(k: int) -> dict:
    """A validation cell of ``k`` successes in 10 episodes, with a made-up interval of +-5 points."""
    return {"successes": k, "episodes": 10, "ci_low": 0.1 * k - 0.05, "ci_high": min(1.0, 0.1 * k + 0.05)}


def test_segmenter_recipe_rows_name_their_camera_and_leave_unrun_conditions_blank(tmp_path):
    import argparse

    import results_io
    import tables_training

    # GIVEN a first run on two conditions (the shipped system, 64 px) and a later one on one of them, whose
    # candidate runs through a 96 px camera (its controller was trained on one)
    shipped = {"camera_px": 64, "validation": {"nominal": ten_episodes(9), "start-out-of-view": ten_episodes(8)},
               "mean": 0.85}
    rows = {"shipped": shipped}
    ns = argparse.Namespace(json=None, save=True)
    results = tmp_path / "results"
    for name, figures in (
        ("segmenter_recipe", {"episodes": 10, "conditions": ["nominal", "start-out-of-view"], "rows": rows}),
        ("segmenter_recipe-2", {"episodes": 10, "conditions": ["nominal"],
                                "rows": {"shipped": shipped, "cand.pt + ctrl.pt": {
                                    "camera_px": 96, "validation": {"nominal": ten_episodes(10)}, "mean": 1.0}}}),
    ):
        results_io.write_results(results / f"{name}.json", name, figures, ns, save=True,
                                 argv=["benchmarks/segmenter_recipe.py"])
    # WHEN the table is rendered
    text = tables_training.segmenter_recipe_table(results)
    # THEN the shipped row is shown once, the candidate is labelled with its camera, its unrun condition is "-",
    # and each mean is over the row's own cells
    lines = [line for line in text.splitlines() if line.startswith("| `")]
    assert len(lines) == 2
    assert lines[0].startswith("| `shipped` | 90.0 (85.0-95.0) | 80.0 (75.0-85.0) | 85.0 |")
    assert lines[1] == "| `cand.pt + ctrl.pt (96 px camera)` | 100.0 (95.0-100.0) | - | **100.0** |"
    # WHEN a third run measures the shipped system longer on one condition and on an unseen-photo condition
    longer = {"successes": 27, "episodes": 30, "ci_low": 0.74, "ci_high": 0.97}
    unseen = {"camera_px": 64, "validation": {"start-out-of-view": longer, "backgrounds-unseen": ten_episodes(7)}}
    results_io.write_results(results / "segmenter_recipe-3.json", "segmenter_recipe",
                             {"episodes": 30, "conditions": ["backgrounds-unseen", "start-out-of-view"],
                              "unseen_photos": "VAL", "rows": {"shipped": unseen}}, ns, save=True,
                             argv=["benchmarks/segmenter_recipe.py"])
    text = tables_training.segmenter_recipe_table(results)
    # THEN the unseen condition is a column named with its photos, and the shipped cell of a condition measured
    # twice is the longer run's
    assert "| nominal | start-out-of-view | backgrounds-unseen on VAL | mean |" in text
    shipped_line = next(line for line in text.splitlines() if line.startswith("| `shipped`"))
    assert shipped_line.startswith("| `shipped` | 90.0 (85.0-95.0) | 90.0 (74.0-97.0) | 70.0 (65.0-75.0) |")
    # WHEN a fourth run measures the shipped system (since changed) on as many episodes of one condition
    again = {"successes": 29, "episodes": 30, "ci_low": 0.83, "ci_high": 0.99}
    results_io.write_results(results / "segmenter_recipe-4.json", "segmenter_recipe",
                             {"episodes": 30, "conditions": ["start-out-of-view"],
                              "rows": {"shipped": {"camera_px": 64, "validation": {"start-out-of-view": again}}}},
                             ns, save=True, argv=["benchmarks/segmenter_recipe.py"])
    text = tables_training.segmenter_recipe_table(results)
    # THEN that cell is the later run's: the shipped system as it is now
    shipped_line = next(line for line in text.splitlines() if line.startswith("| `shipped`"))
    assert shipped_line.startswith("| `shipped` | 90.0 (85.0-95.0) | 96.7 (83.0-99.0) | 70.0 (65.0-75.0) |")


def test_val_suites_rows_show_the_shipped_segmenter_once_and_unmeasured_cells_blank(tmp_path):
    import argparse

    import results_io
    import tables_prose

    # GIVEN two val_suites runs, each with the shipped row, the second with a candidate measured without `sim`
    def cells(p: float) -> dict:
        return {"precision": p, "recall": p, "found_rate": p, "false_detection_rate": 1 - p}

    shipped = {"photos": {"training photos": {"composites": cells(0.9), "sim": cells(0.99)},
                          "validation photos": {"composites": cells(0.8)}}}
    cand = {"photos": {"training photos": {"composites": cells(0.7)}, "validation photos": {"composites": cells(0.85)}}}
    ns = argparse.Namespace(json=None, save=True)
    results = tmp_path / "results"
    for name, rows in (("val_suites", {"shipped": shipped}), ("val_suites-2", {"shipped": shipped, "c.pt": cand})):
        results_io.write_results(results / f"{name}.json", name, {"suites": ["composites", "sim"], "n_images": 10,
                                                                  "split": "val", "photos": "VAL", "rows": rows},
                                 ns, save=True, argv=["benchmarks/val_suites.py"])
    # WHEN the table is rendered
    text = tables_prose.val_suites_table(results)
    # THEN one column a (photos, suite) measured, the shipped row once, the candidate's unmeasured suite "-"
    lines = [line for line in text.splitlines() if line.startswith("| ")]
    assert lines[0] == ("| segmenter | composites, training photos | sim, training photos | "
                        "composites, validation photos |")
    assert [line.split(" | ")[0] for line in lines[1:]] == ["| `shipped`", "| `c.pt`"]
    assert lines[2] == "| `c.pt` | 0.700 / 0.700 / 0.700 / 0.300 | - | 0.850 / 0.850 / 0.850 / 0.150 |"
    assert "10 images a suite" in text and "`VAL`" in text


def test_error_budget_columns_name_their_photos_when_runs_differ(tmp_path):
    import argparse

    import results_io
    import tables_unseen

    # GIVEN two error-budget runs of the shipped segmenter, on two folders of validation photos
    height = {"height_cm": [0, 2], "failed": {"frames": 4, "in_view": 2, "found": 0.5, "false_blob": 0.25,
                                              "width_px": 9.0},
              "succeeded": {"frames": 6, "in_view": 6, "found": 1.0, "false_blob": 0.0, "width_px": 10.0}}
    vision = results_io.display_path(str(results_io.WEIGHTS_DIR / "segmenter_64px.pt"))
    ns = argparse.Namespace(json=None, save=True)
    results = tmp_path / "results"
    for name, photos, k in (("error_budget", "wallpapers", 8), ("error_budget-2", "VAL", 9)):
        rows = {m: ten_episodes(k) for m in ("segmenter", "no false blobs", "no misses", "ground truth")}
        results_io.write_results(results / f"{name}.json", "error_budget",
                                 {"photos": photos, "vision": vision, "camera_px": 64, "episodes": 10,
                                  "rows": rows, "by_height": [height]}, ns, save=True,
                                 argv=["benchmarks/error_budget.py"])
    # WHEN the table is rendered
    text = tables_unseen.error_budget_table(results)
    # THEN the weights are named as the repository holds them, each column and frames table says its photos, and
    # the caption names both folders
    assert vision == "grasp_s2r/weights/segmenter_64px.pt"
    assert ("| masks the shipped controller runs on | segmenter `grasp_s2r/weights/segmenter_64px.pt` on "
            "`wallpapers` | segmenter `grasp_s2r/weights/segmenter_64px.pt` on `VAL` |") in text
    assert "Segmenter `grasp_s2r/weights/segmenter_64px.pt` on `VAL`, its frames by TCP height:" in text
    assert "`VAL` or `wallpapers` as the table, 10 validation episodes a cell" in text
    # AND one run alone is labelled without its photos (the caption names them)
    (results / "error_budget-2.json").unlink()
    text = tables_unseen.error_budget_table(results)
    assert "segmenter `grasp_s2r/weights/segmenter_64px.pt` |" in text and "`wallpapers` as the table" in text


def test_unseen_tables_shows_each_version_of_a_row_measured_again(tmp_path):
    import argparse

    import results_io
    import tables_unseen

    # GIVEN three runs on the same photos: the shipped row measured the same twice (each run times its frames anew,
    # the second runs no episodes), then with other episodes (the shipped system changed), beside a candidate
    def frames(found: float) -> dict:
        return {"precision": 0.9, "recall": 0.8, "found_rate": found, "false_detection_rate": 0.1}

    def row(found: float, k: int | None, ms: float) -> dict:
        r = {"far": frames(found), "all": frames(0.9), "predict_ms": ms, "shipped_64px_ms": 5.0}
        return r if k is None else {**r, "table-photo-unseen": ten_episodes(k)}

    ns = argparse.Namespace(json=None, save=True)
    results = tmp_path / "results"
    runs = (("unseen_tables", {"shipped": row(0.8, 8, 5.0)}),
            ("unseen_tables-2", {"shipped": row(0.8, None, 6.0), "cand": row(0.7, 6, 5.0)}),
            ("unseen_tables-3", {"shipped": row(0.8, 9, 5.0)}))
    for name, rows in runs:
        results_io.write_results(results / f"{name}.json", "unseen_tables",
                                 {"photos": "VAL", "n_photos": 3, "camera_px": 64, "views": 10, "episodes": 10,
                                  "rows": rows}, ns, save=True, argv=["benchmarks/unseen_tables.py"])
    # WHEN the table is rendered
    text = tables_unseen.unseen_tables_table(results)
    # THEN the shipped row's two versions are each shown once, named by the runs that measured them, the first with
    # its episodes and the latest time a frame of its runs; the candidate keeps its plain label
    assert "| `shipped, unseen_tables to -2` | " in text and "| 80.0 % (75.0-85.0) | 1.20x |" in text
    assert "| `shipped, unseen_tables-3` | " in text and "| 90.0 % (85.0-95.0) | 1.00x |" in text
    assert text.count("`shipped") == 2 and "| `cand` | " in text
    # AND a row measured once, or always the same, keeps its plain label
    (results / "unseen_tables-3.json").unlink()
    assert "| `shipped` | " in tables_unseen.unseen_tables_table(results)


def test_val_suites_rows_of_other_validation_photos_say_which(tmp_path):
    import argparse

    import results_io
    import tables_prose

    # GIVEN two val-suite runs of the shipped segmenter and a candidate, on two folders of validation photos
    def row(found: float) -> dict:
        m = {"precision": 0.9, "recall": 0.8, "found_rate": found, "false_detection_rate": 0.1}
        return {"photos": {"training photos": {"composites": m}, "validation photos": {"composites": m}}}

    ns = argparse.Namespace(json=None, save=True)
    results = tmp_path / "results"
    for name, photos, found in (("val_suites", "CORPUS/mate", 0.7), ("val_suites-2", "VAL", 0.6)):
        results_io.write_results(results / f"{name}.json", "val_suites",
                                 {"photos": photos, "n_images": 10, "rows": {"shipped": row(found),
                                                                             f"cand-{name}": row(0.5)}},
                                 ns, save=True, argv=["benchmarks/val_suites.py"])
    # WHEN the table is rendered
    text = tables_prose.val_suites_table(results)
    # THEN the second run's rows name their photos, so its shipped row stands beside the first's instead of under it
    assert "| `shipped` | 0.900 / 0.800 / 0.700 / 0.100 |" in text
    assert "| `shipped (validation photos: VAL)` | 0.900 / 0.800 / 0.600 / 0.100 |" in text
    assert "| `cand-val_suites-2 (validation photos: VAL)` |" in text and "| `cand-val_suites` |" in text


def test_own_scene_table_says_which_runs_measured_other_shipped_weights(monkeypatch):
    import results_io
    import tables_unseen

    # GIVEN the tracked own-scene run and the shipped weights it recorded
    recorded = load_results(BENCH / "results" / "own_scene.json")["shipped_weights"]
    monkeypatch.setattr(results_io, "shipped_weights", lambda: recorded)
    # WHEN the table is rendered with those weights shipped, THEN it flags nothing
    assert "other shipped weights" not in tables_unseen.own_scene_table(BENCH / "results", ("own_scene",))
    # WHEN the segmenter changes
    monkeypatch.setattr(results_io, "shipped_weights", lambda: {**recorded, "segmenter_64px.pt": "0" * 64})
    text = tables_unseen.own_scene_table(BENCH / "results", ("own_scene",))
    # THEN the caption names the run and the file that changed, once
    assert text.count("Measured with other shipped weights") == 1
    assert "`own_scene` (segmenter_64px.pt)" in text


def test_own_scene_screen_table_has_a_row_a_set_and_flags_other_shipped_weights(monkeypatch):
    import results_io
    import tables_unseen

    # GIVEN the tracked screenings and the shipped weights they recorded
    files = sorted((BENCH / "results").glob("own_scene_screen-*.json"))
    recorded = load_results(files[0])["shipped_weights"]
    monkeypatch.setattr(results_io, "shipped_weights", lambda: recorded)
    # WHEN rendered, THEN one row a set, named without the file prefix, with its validation episodes' rate
    text = tables_unseen.own_scene_screen_table(BENCH / "results")
    assert len([line for line in text.splitlines() if line.startswith("| `")]) == len(files)
    temp = load_results(BENCH / "results" / "own_scene_screen-0ad-temp.json")["figures"]["rows"]["shipped"]
    rate = temp["table-photo-unseen"]["successes"] / temp["table-photo-unseen"]["episodes"]
    assert "| `0ad-temp` | 59 | " in text and f"{100 * rate:.1f} % (" in text
    assert "re-measure" not in text
    # WHEN the controller changes, THEN every set is flagged
    monkeypatch.setattr(results_io, "shipped_weights", lambda: {**recorded, "controller.pt": "0" * 64})
    text = tables_unseen.own_scene_screen_table(BENCH / "results")
    assert "Measured with other shipped weights" in text and "0ad-temp" in text.split("other shipped weights")[1]


def test_the_conditions_table_is_the_code_s_conditions(tmp_path, monkeypatch):
    import tables_code

    from grasp_s2r.runtime import conditions

    # GIVEN the conditions as the package defines them, and one more a user adds: their own photos as the table
    ours = conditions.Condition(name="my-table", table_photos="photos/kitchen", description="my kitchen's table")
    monkeypatch.setattr(tables_code, "CONDITIONS", {**conditions.CONDITIONS, ours.name: ours})
    # WHEN the docs' table is rendered
    rows = tables_code.conditions_table(tmp_path).splitlines()[2:]
    # THEN every condition has its row, in the code's order, with its description and where its photos go
    assert [r.split(" | ")[0] for r in rows] == [f"| `{n}`" for n in [*conditions.CONDITIONS, "my-table"]]
    assert rows[-1] == ("| `my-table` | photos/kitchen, as the sim table's texture | my kitchen's table | "
                        "no (`--conditions all`) |")
    sim = next(r for r in rows if r.startswith("| `sim-render`"))
    assert "none: the sim table" in sim and conditions.CONDITIONS["sim-render"].description in sim
