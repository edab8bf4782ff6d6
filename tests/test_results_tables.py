"""The figure tables of README.md and docs/*.md are what benchmarks/results/*.json give (benchmarks/tables.py)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
BENCH = REPO / "benchmarks"
sys.path.insert(0, str(BENCH))

import tables  # benchmarks/ is not a package: imported from its folder
from results_io import FORMAT, load_results

README_BLOCK = "# Results\n\n<!-- results:readme -->\nold\n<!-- /results:readme -->\n"


def test_every_table_in_readme_and_docs_is_current(capsys):
    # WHEN the check runs on this checkout
    rc = tables.main(["--check"])
    # THEN no table differs from what the JSON files give (else: run python benchmarks/tables.py)
    assert rc == 0, capsys.readouterr().out


def test_check_names_a_stale_table_and_rendering_fixes_it(tmp_path, capsys):
    # GIVEN a copy of the docs whose README table was edited by hand
    shutil.copy(REPO / "README.md", tmp_path / "README.md")
    shutil.copytree(REPO / "docs", tmp_path / "docs")
    readme = tmp_path / "README.md"
    readme.write_text(readme.read_text().replace("expert success", "expert success (typed by hand)", 1))
    # WHEN checked, THEN it fails naming the table; WHEN rendered, THEN the check passes again
    assert tables.main(["--check", "--root", str(tmp_path)]) == 1
    assert "README.md: table 'readme' is stale" in capsys.readouterr().out
    assert tables.main(["--root", str(tmp_path)]) == 0
    assert tables.main(["--check", "--root", str(tmp_path)]) == 0
    assert "(typed by hand)" not in readme.read_text()


def test_readme_row_renders_from_a_real_bench_expert_run(tmp_path):
    # GIVEN the JSON of a real bench_expert run of 4 episodes
    results = tmp_path / "results"
    out = results / "bench_expert.json"
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    subprocess.run([sys.executable, str(BENCH / "bench_expert.py"), "--episodes", "4", "--workers", "1",
                    "--json", str(out)], check=True, env=env, capture_output=True, timeout=300)
    res = load_results(out)
    f = res["figures"]
    assert res["format"] == FORMAT and res["benchmark"] == "bench_expert" and f["episodes"] == 4
    assert res["command"] == f"python benchmarks/bench_expert.py --episodes 4 --workers 1 --json {out}"
    assert res["machine"]["cpu_count"] == os.cpu_count() and res["date"]
    # WHEN the README's table is rendered from that folder alone
    (tmp_path / "README.md").write_text(README_BLOCK)
    text, stale = tables.render(README_BLOCK, tmp_path / "README.md", {}, results)
    # THEN the expert row holds the run's rate with its 95 % interval, its length and its command, writing the
    # file the row cites
    row = next(line for line in text.splitlines() if line.startswith("| expert success"))
    lo, hi = 100 * f["ci_low"], 100 * f["ci_high"]
    assert f"({f['successes']}/4, 95 % CI {lo:.1f}-{hi:.1f})" in row
    assert f"{f['mean_length']:.1f} steps an episode" in row
    assert ("`python benchmarks/bench_expert.py --episodes 4 --workers 1 --json benchmarks/results/bench_expert.json`"
            in row)
    # AND the figures that folder lacks are said to be not measured, with their command, never a number
    pipeline = next(line for line in text.splitlines() if "grasp-s2r pipeline" in line)
    assert "not measured yet: run `python benchmarks/bench_pipeline.py" in pipeline and stale == ["readme"]


def test_files_from_before_the_results_format_still_load(tmp_path):
    # GIVEN files written before results_io: an eval.json as bench_eval wrote it (the figures of today's
    # eval_shipped.json, unwrapped), and compare_memory's results.json
    old_eval = tmp_path / "eval_shipped.json"
    old_eval.write_text(json.dumps(load_results(BENCH / "results" / "eval_shipped.json")["figures"]))
    for path, key in ((old_eval, "conditions"), (BENCH / "results" / "compare_memory.json", "arms")):
        raw = json.loads(path.read_text())
        res = load_results(path)
        # THEN their figures are the whole file, and no command or date is made up for them
        assert res["figures"] == raw and key in res["figures"] and res["command"] is None and "date" not in res


def test_every_results_file_is_a_measured_one():
    # GIVEN the tracked results folder
    for path in sorted((BENCH / "results").glob("*.json")):
        res = load_results(path)
        # THEN each file is what a benchmark wrote (or its pre-format figures), never figures copied from a past
        # run: those cannot be re-measured here and live in CHANGELOG.md
        assert "source" not in res, path.name


def test_a_benchmark_records_in_benchmarks_results_only_with_save(tmp_path, monkeypatch, capsys):
    import argparse

    import results_io

    # GIVEN the tracked results folder and the ignored scratch folder (here: under tmp_path)
    monkeypatch.setattr(results_io, "RESULTS_DIR", tmp_path / "results")
    monkeypatch.setattr(results_io, "SCRATCH_DIR", tmp_path / "runs")
    parser = argparse.ArgumentParser()
    results_io.add_json_argument(parser, "bench_x")
    for argv, where in (([], "runs"), (["--save"], "results"),
                        (["--json", str(tmp_path / "results" / "bench_x.json")], "results")):
        args = parser.parse_args(argv)
        # WHEN a run writes its figures to its default file (or the one --json names)
        path = results_io.write_results(args.json, "bench_x", {"n": 1}, args, argv=["benchmarks/bench_x.py", *argv])
        # THEN benchmarks/results/ is written only with --save or a --json naming it; else runs/benchmarks/
        assert path == tmp_path / where / "bench_x.json" and path.is_file(), argv
        written = json.loads(path.read_text())
        assert "save" not in written["config"] and written["shipped_weights"] == results_io.shipped_weights()
        shutil.rmtree(path.parent)
    # AND a run given an explicit default path in benchmarks/results/ (bench_eval's) follows the same rule
    path = results_io.write_results(tmp_path / "results" / "eval_shipped.json", "bench_eval", {}, parser.parse_args([]))
    assert path == tmp_path / "runs" / "eval_shipped.json"


def test_readme_flags_figures_of_the_shipped_system_once_its_weights_change(tmp_path, monkeypatch):
    import results_io

    # GIVEN the tracked results and a copy of the shipped weights they were measured with
    weights = tmp_path / "weights"
    shutil.copytree(results_io.WEIGHTS_DIR, weights)
    monkeypatch.setattr(results_io, "WEIGHTS_DIR", weights)
    # the rows of the shipped system (own_scene's: its latest 100-episode report, own_scene-N.json)
    shipped_rows = ("`eval_shipped.json`", "`bench_vision.json`", "`own_scene", "`bench_pipeline.json`")

    def rows() -> list[str]:
        text, _ = tables.render(README_BLOCK, tmp_path / "README.md", {}, BENCH / "results")
        return [line for line in text.splitlines() if line.startswith("| ")]

    # WHEN the README table is rendered with those weights, THEN no row is flagged
    assert not [row for row in rows() if "other shipped weights" in row]
    # WHEN the segmenter changes (new weights shipped, figures not re-measured)
    with open(weights / "segmenter_64px.pt", "ab") as f:
        f.write(b"\0")
    flagged = [row for row in rows() if "other shipped weights" in row]
    # THEN exactly the rows that measured the shipped system say so, naming the file; the others do not
    assert len(flagged) == len(shipped_rows) and all("segmenter_64px.pt" in row for row in flagged)
    assert all(any(name in row for row in flagged) for name in shipped_rows)


def test_docs_tables_of_shipped_weights_are_flagged_by_the_files_they_read(tmp_path, monkeypatch):
    import results_io
    import tables_base

    # GIVEN the tracked results of benchmarks that measure shipped weights, and a copy of the weights they were
    # measured with
    weights = tmp_path / "weights"
    shutil.copytree(results_io.WEIGHTS_DIR, weights)
    monkeypatch.setattr(results_io, "WEIGHTS_DIR", weights)
    names = ("bench_camera_mount", "bench_gripper_head", "bench_pipeline", "eval_shipped")
    loaded = {name: load_results(BENCH / "results" / f"{name}.json") for name in names}

    def flagged() -> set[str]:
        return {name for name, res in loaded.items()
                if "other shipped weights" in tables_base.provenance(name, res)}

    assert flagged() == set()
    # WHEN the controller changes, THEN the tables of episodes of the shipped system say so, not the gripper head's
    # (it reads the segmenter's masks) nor the pipeline's (it trains its own controller)
    with open(weights / "controller.pt", "ab") as f:
        f.write(b"\0")
    assert flagged() == {"bench_camera_mount", "eval_shipped"}
    # WHEN the gripper head changes too, THEN its table joins them; the segmenter: every one
    (weights / results_io.GRIPPER_HEAD).write_bytes(b"another head")
    assert flagged() == {"bench_camera_mount", "eval_shipped", "bench_gripper_head"}
    with open(weights / results_io.SEGMENTER, "ab") as f:
        f.write(b"\0")
    assert flagged() == set(names)
    # a benchmark of candidates (its rows name their own weights) is never flagged
    other = load_results(BENCH / "results" / "unseen_tables-52.json")
    assert "other shipped weights" not in tables_base.provenance("unseen_tables-52", other)


def test_a_gripper_head_counts_for_the_shipped_system_only_when_its_controller_reads_the_fingers(tmp_path,
                                                                                               monkeypatch):
    import results_io

    from grasp_s2r.control.policy import Policy, PolicyConfig

    # GIVEN a copy of the shipped weights, whose controller reads no fingers' mask
    weights = tmp_path / "weights"
    shutil.copytree(results_io.WEIGHTS_DIR, weights)
    monkeypatch.setattr(results_io, "WEIGHTS_DIR", weights)
    recorded = {"shipped_weights": results_io.shipped_weights()}
    assert results_io.GRIPPER_HEAD not in results_io.system_weights()
    # WHEN only the gripper head changes, THEN the system's figures read nothing that changed
    (weights / results_io.GRIPPER_HEAD).write_bytes(b"another head")
    assert results_io.changed_weights(recorded) == [results_io.GRIPPER_HEAD]
    assert results_io.changed_weights(recorded, results_io.system_weights()) == []
    # WHEN the shipped controller is one that reads the fingers, THEN the head counts, and so does the controller
    Policy(PolicyConfig(gripper=True), device="cpu").save(weights / "controller.pt")
    assert results_io.GRIPPER_HEAD in results_io.system_weights()
    assert results_io.changed_weights(recorded, results_io.system_weights()) == ["controller.pt",
                                                                                 results_io.GRIPPER_HEAD]


def test_a_table_of_many_runs_folds_their_provenance_and_one_of_few_keeps_it_inline():
    import tables_base

    # GIVEN four tracked results files of one table
    names = [f"segmenter_recipe-{i}" for i in (2, 3, 4, 5)]
    runs = [(name, load_results(BENCH / "results" / f"{name}.json")) for name in names]
    # WHEN two of them are the table's runs, THEN each "Measured by" follows the caption inline
    few = tables_base.provenances(runs[:2])
    assert few.startswith(" Measured by") and "<details>" not in few and few.count("Measured by") == 2
    # WHEN four are, THEN they fold into one <details> block after a blank line, one item a run, each naming its file
    many = tables_base.provenances(runs)
    assert many.startswith("\n\n<details><summary>Measured by 4 runs")
    assert many.endswith("\n\n</details>")
    items = [line for line in many.splitlines() if line.startswith("- Measured by")]
    assert [name for name in names if any(f"results/{name}.json" in item for item in items)] == names
    assert len(items) == 4
    assert tables_base.provenances([]) == ""


def test_recorded_commands_run_from_any_checkout():
    import results_io
    import tables_base

    # GIVEN a run given paths inside the repository and beside it
    argv = [str(BENCH / "own_scene.py"), str(REPO / "runs" / "sets"), str(REPO.parent / "SETS" / "a"), "/tmp/x",
            "--out", str(REPO)]
    # WHEN its command is recorded, THEN those paths are relative to the repository's root; others stay
    assert results_io.command_line(argv) == "python benchmarks/own_scene.py runs/sets ../SETS/a /tmp/x --out ."
    # AND a command recorded before with absolute paths of the repository where it ran reads the same way, its
    # --json (which wrote elsewhere; the file was copied into benchmarks/results/) pointed at the file it cites
    old = "python benchmarks/own_scene.py /work/SETS/a /work/main/runs/b --out /work/runs/own --json /work/runs/o.json"
    res = {"command": old}
    assert results_io.portable_text(tables_base.command("own_scene-9", res)) == (
        "python benchmarks/own_scene.py ../SETS/a runs/b --out ../runs/own --json benchmarks/results/own_scene-9.json")
    # AND a path that only starts like the repository's is left alone
    assert results_io.portable_text("/work/mainline/x /workspace/y") == "../mainline/x /workspace/y"
