"""``grasp-s2r collect``: the real CLI as a subprocess, the dataset read back, crash safety."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

from grasp_s2r.collect import CollectConfig, collect
from grasp_s2r.data.episodes import FORMAT_VERSION, EpisodeDataset, finished_indices
from grasp_s2r.expert.fsm import Phase
from grasp_s2r.sim.env import PROPRIO_NAMES, STATE_NAMES

CLI = [sys.executable, "-m", "grasp_s2r"]


def cli(*args: str, **kw) -> subprocess.CompletedProcess:
    return subprocess.run([*CLI, *args], capture_output=True, text=True, timeout=300, check=False, **kw)


def assert_same_episodes(a: Path, b: Path, indices) -> None:
    da, db = EpisodeDataset(a), EpisodeDataset(b)
    ea = {e.info["index"]: e for e in da}
    eb = {e.info["index"]: e for e in db}
    for i in indices:
        assert ea[i].info == eb[i].info
        for feature in ea[i].features():
            np.testing.assert_array_equal(ea[i][feature], eb[i][feature], err_msg=f"episode {i} {feature}")


def test_cli_collects_two_episodes_and_reads_them_back(tmp_path):
    out = tmp_path / "demos"
    r = cli("collect", "--episodes", "2", "--out", str(out), "--seed", "3")
    assert r.returncode == 0, r.stderr
    assert "success" in r.stdout and "2 new" in r.stdout
    ds = EpisodeDataset(out)
    assert ds.meta["format_version"] == FORMAT_VERSION and ds.meta["kind"] == "expert-demonstrations"
    assert ds.meta["config"]["seed"] == 3
    assert len(ds) == 2
    for i, ep in enumerate(ds):
        assert ep.info["seed"] == 3 + i and ep.info["success"]
        T = len(ep)
        assert ep["rgb"].shape == (T, 64, 64, 3) and ep["rgb"].dtype == np.uint8
        assert ep["sphere_mask"].shape == (T, 64, 64) and ep["sphere_mask"].any()
        assert ep["proprio"].shape == (T, len(PROPRIO_NAMES))
        assert ep["action"].shape == (T, 4) and np.abs(ep["action"]).max() <= 1.0
        assert ep["state"].shape == (T, len(STATE_NAMES))
        # a successful grasp descends, closes and lifts (APPROACH is skipped when it starts above the sphere)
        assert set(ep["phase"].tolist()) >= {Phase.DESCEND, Phase.CLOSE, Phase.LIFT}
        assert isinstance(ep["rgb"], np.memmap)  # lazily loaded


def test_same_seed_gives_the_same_episodes_whatever_the_workers(tmp_path):
    collect(CollectConfig(out=str(tmp_path / "a"), episodes=4, workers=1, seed=50), progress=False)
    collect(CollectConfig(out=str(tmp_path / "b"), episodes=4, workers=2, seed=50), progress=False)
    assert_same_episodes(tmp_path / "a", tmp_path / "b", range(4))
    # byte for byte: every file of every episode (each feature's .npy and info.json) and the dataset's meta.json
    a, b = tmp_path / "a", tmp_path / "b"
    episodes = sorted(p.name for p in a.glob("episode-*"))
    assert episodes == sorted(p.name for p in b.glob("episode-*")) and len(episodes) == 4
    for name in episodes:
        files = sorted(p.name for p in (a / name).iterdir())
        assert files == sorted(p.name for p in (b / name).iterdir())
        assert {f"{k}.npy" for k in EpisodeDataset(a).meta["features"]} <= set(files)
        for f in files:
            assert (a / name / f).read_bytes() == (b / name / f).read_bytes(), f"{name}/{f} differs"
    assert (a / "meta.json").read_bytes() == (b / "meta.json").read_bytes()


def test_kill_9_then_rerun_resumes_and_loses_nothing(tmp_path):
    out = tmp_path / "demos"
    args = [*CLI, "collect", "--episodes", "40", "--workers", "2", "--out", str(out), "--seed", "7"]
    proc = subprocess.Popen(args, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline and (not out.exists() or len(finished_indices(out)) < 4):
        time.sleep(0.01)
    os.killpg(proc.pid, signal.SIGKILL)
    proc.wait()
    n_before = len(finished_indices(out))
    assert 4 <= n_before < 40, "the run must be killed mid-way for this test to mean anything"
    ds = EpisodeDataset(out)  # readable as is: nothing half-written is listed
    for ep in ds:
        assert len(ep["action"]) == len(ep)
    r = subprocess.run(args, capture_output=True, text=True, timeout=300, check=False)
    assert r.returncode == 0, r.stderr
    assert f"{40 - n_before} new" in r.stdout
    assert finished_indices(out) == list(range(40))
    assert not list(out.glob(".tmp-*"))
    # the resumed episodes are the ones an uninterrupted run makes
    ref = tmp_path / "ref"
    collect(CollectConfig(out=str(ref), episodes=2, seed=7 + 38), progress=False)
    a, b = EpisodeDataset(out), EpisodeDataset(ref)
    np.testing.assert_array_equal(a.episode(38)["rgb"], b.episode(0)["rgb"])


@pytest.mark.parametrize("args, message", [
    (["--episodes", "0"], "positive integer"),
    (["--episodes", "-3"], "positive integer"),
    (["--workers", "0"], "positive integer"),
    (["--frobnicate"], "unrecognized arguments"),
    (["--resolution", "4"], "--resolution must be in [8, 1024], got 4"),
])
def test_bad_arguments_give_one_error_line_and_write_nothing(tmp_path, args, message):
    out = tmp_path / "never"
    r = cli("collect", "--out", str(out), *args)
    assert r.returncode == 2
    assert message in r.stderr and len(r.stderr.strip().splitlines()) == 1
    assert not out.exists()


def test_folder_of_another_config_or_format_is_refused_untouched(tmp_path):
    out = tmp_path / "demos"
    assert cli("collect", "--episodes", "1", "--out", str(out), "--seed", "1").returncode == 0
    before = sorted(p.name for p in out.iterdir())
    r = cli("collect", "--episodes", "1", "--out", str(out), "--seed", "2")
    assert r.returncode == 2 and "another config" in r.stderr
    assert sorted(p.name for p in out.iterdir()) == before
    other = tmp_path / "other"
    other.mkdir()
    (other / "notes.txt").write_text("my thesis")
    r = cli("collect", "--episodes", "1", "--out", str(other))
    assert r.returncode == 2 and "holds files no grasp_s2r command wrote (notes.txt)" in r.stderr
    assert [p.name for p in other.iterdir()] == ["notes.txt"]
    meta = json.loads((out / "meta.json").read_text())
    meta["format_version"] = 999
    (out / "meta.json").write_text(json.dumps(meta))
    r = cli("collect", "--episodes", "1", "--out", str(out), "--seed", "1")
    assert r.returncode == 2 and "grasp-s2r collect" in r.stderr


def test_demonstrations_have_the_schema_of_a_dagger_round_and_record_the_mask_source(tmp_path):
    """collect is a beta = 1 run of the runtime: every step's executed action is the expert's label, and the
    controller input mask of the mask source asked for is recorded (the shipped segmenter's with "predicted")."""
    from grasp_s2r.runtime.masks import mask_source_identity
    from grasp_s2r.runtime.records import STEP_KEYS, rollout_features
    from grasp_s2r.sim.config import EnvConfig, SceneConfig

    env = EnvConfig(scene=SceneConfig(max_episode_steps=30))
    gt, predicted = tmp_path / "gt", tmp_path / "predicted"
    collect(CollectConfig(out=str(gt), episodes=2, env=env), progress=False)
    collect(CollectConfig(out=str(predicted), episodes=2, env=env, masks="predicted"), progress=False)
    for root in (gt, predicted):
        ds = EpisodeDataset(root)
        assert ds.meta["features"] == json.loads(json.dumps(rollout_features(env)))
        ep = ds.episode(0)
        assert sorted(ep.features()) == sorted(STEP_KEYS)
        assert ep["from_expert"][:].all() and np.isnan(ep["learner_action"][:]).all()
        np.testing.assert_array_equal(ep["executed_action"][:], ep["action"][:])
    a, b = EpisodeDataset(gt).episode(1), EpisodeDataset(predicted).episode(1)
    np.testing.assert_array_equal(a["rgb"][:], b["rgb"][:])  # the mask source never changes the episode
    np.testing.assert_array_equal(a["input_mask"][:], a["sphere_mask"][:])
    assert not np.array_equal(b["input_mask"][:], b["sphere_mask"][:])  # the segmenter's, not the ground truth
    assert EpisodeDataset(predicted).meta["config"]["masks"] == mask_source_identity("predicted")


def test_a_dataset_of_another_layout_is_refused_not_extended(tmp_path):
    root = tmp_path / "old"
    collect(CollectConfig(out=str(root), episodes=1), progress=False)
    meta = json.loads((root / "meta.json").read_text())
    del meta["features"]["input_mask"]  # as written by an older grasp_s2r
    (root / "meta.json").write_text(json.dumps(meta))
    r = cli("collect", "--episodes", "2", "--out", str(root))
    assert r.returncode == 2 and "another layout" in r.stderr and "input_mask" in r.stderr
    assert finished_indices(root) == [0]


def test_an_old_layout_dataset_is_upgraded_to_what_collect_writes_today(tmp_path):
    """GIVEN demonstrations as an older grasp_s2r wrote them (no input_mask, learner / executed actions) WHEN
    `grasp-s2r upgrade` converts them THEN the result is byte for byte what `collect` writes today, the old folder is
    untouched, and the refusals name the command."""
    import shutil

    from grasp_s2r.data.upgrade import ADDED

    today, old, new = tmp_path / "today", tmp_path / "old", tmp_path / "new"
    collect(CollectConfig(out=str(today), episodes=3, workers=2), progress=False)
    shutil.copytree(today, old)
    meta = json.loads((old / "meta.json").read_text())
    meta["config"].pop("masks")
    meta["features"] = {k: v for k, v in meta["features"].items() if k not in ADDED}
    (old / "meta.json").write_text(json.dumps(meta))
    for ep in old.glob("episode-*"):
        for name in ADDED:
            (ep / f"{name}.npy").unlink()
        info = json.loads((ep / "info.json").read_text())
        (ep / "info.json").write_text(json.dumps({k: v for k, v in info.items() if k not in ("beta", "condition")}))
    before = {p.relative_to(old): p.read_bytes() for p in old.rglob("*") if p.is_file()}

    refused = cli("collect", "--episodes", "3", "--out", str(old))
    assert refused.returncode == 2 and f"grasp-s2r upgrade {old} --out NEW" in refused.stderr
    r = cli("upgrade", str(old), "--out", str(new))
    assert r.returncode == 0, r.stderr
    assert {p.relative_to(old): p.read_bytes() for p in old.rglob("*") if p.is_file()} == before
    for ep in EpisodeDataset(today):
        name = ep.path.name
        for f in sorted((today / name).iterdir()):
            assert (new / name / f.name).read_bytes() == f.read_bytes(), (name, f.name)
    assert EpisodeDataset(new).meta["config"] == EpisodeDataset(today).meta["config"]
    again = cli("upgrade", str(new), "--out", str(tmp_path / "x"))
    assert again.returncode == 2 and "already has the current layout" in again.stderr
