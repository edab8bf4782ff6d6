"""A rerun of ``grasp-s2r pipeline`` into its folder: what it skips, what it redoes, what it refuses (a tiny run, the
real stages: PyBullet renders, torch trains)."""

from __future__ import annotations

import dataclasses
import json
from dataclasses import replace

import pytest

from grasp_s2r.cli import main
from grasp_s2r.pipeline import PipelineConfig, run_pipeline
from grasp_s2r.run_record import RunRecordError
from grasp_s2r.runtime import conditions


def test_a_rerun_skips_what_it_made_redoes_what_changed_and_refuses_other_training(tmp_path, capsys, monkeypatch):
    out = tmp_path / "pipe"
    cfg = PipelineConfig(out=str(out), demo_episodes=2, vision_steps=2, dagger_rounds=1, dagger_eval_episodes=2,
                         vision_eval_images=32, eval_episodes=2, conditions=("nominal",), workers=1)
    run_pipeline(cfg)
    reports = {name: (out / name).read_bytes() for name in ("vision/eval.json", "eval/eval.json")}
    capsys.readouterr()

    # GIVEN the finished run WHEN it is run again: every stage is skipped, its reports kept byte for byte
    summary = run_pipeline(cfg)
    said = capsys.readouterr().out
    assert {name: (out / name).read_bytes() for name in reports} == reports
    assert "vision/eval.json is of this segmenter and these suites: skipped" in said
    assert "eval/eval.json is of this controller, this segmenter and these episodes: skipped" in said
    assert summary["eval"]["conditions"]["nominal"]["episodes"] == 2

    # WHEN more evaluation episodes are asked: only the end-to-end evaluation runs again
    summary = run_pipeline(replace(cfg, eval_episodes=3))
    assert (out / "vision/eval.json").read_bytes() == reports["vision/eval.json"]
    assert json.loads((out / "eval/eval.json").read_text())["conditions"]["nominal"]["episodes"] == 3
    assert summary["eval"]["conditions"]["nominal"]["episodes"] == 3

    # WHEN a condition's definition was edited since (same name): its evaluation runs again
    edited = dataclasses.replace(conditions.CONDITIONS["nominal"], action_noise_std=0.01)
    monkeypatch.setitem(conditions.CONDITIONS, "nominal", edited)
    before = (out / "eval/eval.json").read_bytes()
    run_pipeline(replace(cfg, eval_episodes=3))
    report = json.loads((out / "eval/eval.json").read_text())
    assert (out / "eval/eval.json").read_bytes() != before
    assert report["conditions"]["nominal"]["condition"]["action_noise_std"] == 0.01

    # WHEN other training is asked: refused, naming the field, nothing written
    capsys.readouterr()
    with pytest.raises(RunRecordError, match="vision_steps: stored 2, asked 3"):
        run_pipeline(replace(cfg, vision_steps=3))
    assert main(["pipeline", "--out", str(out), "--vision-steps", "3", "--workers", "1"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("grasp-s2r pipeline: error: ") and "vision_steps: stored 2, asked 3" in err
    assert "choose another --out" in err and len(err.strip().splitlines()) == 1
    assert json.loads((out / "run.json").read_text())["config"]["eval_episodes"] == 3


def test_a_run_that_made_nothing_gives_way_and_a_folder_older_than_the_record_is_checked(tmp_path):
    """A pipeline stopped on a bad option before it trained anything may be rerun with corrected options; a folder
    made before ``run.json`` existed is checked against the options its ``summary.json`` records."""
    from grasp_s2r.pipeline import _open_record
    from grasp_s2r.vision.images.backgrounds import BackgroundError

    out = tmp_path / "pipe"
    bad = PipelineConfig(out=str(out), backgrounds=str(tmp_path / "no-such-photos"), workers=1)
    with pytest.raises(BackgroundError):
        run_pipeline(bad)
    assert json.loads((out / "run.json").read_text())["identity"]["backgrounds"] == bad.backgrounds
    _open_record(replace(bad, backgrounds=""))  # nothing was made: the corrected options are the run's now
    assert json.loads((out / "run.json").read_text())["identity"]["backgrounds"] == ""

    old = tmp_path / "old-pipe"  # as a version before run.json left a finished run
    (old / "vision").mkdir(parents=True)
    (old / "vision" / "model.pt").write_bytes(b"weights")
    made_with = PipelineConfig(out=str(old), vision_steps=300)
    (old / "summary.json").write_text(json.dumps({"config": {**dataclasses.asdict(made_with), "conditions": []}}))
    with pytest.raises(RunRecordError, match="vision_steps: stored 300, asked 3000"):
        _open_record(replace(made_with, vision_steps=3000))
    _open_record(made_with)
    assert json.loads((old / "run.json").read_text())["identity"]["vision_steps"] == 300
