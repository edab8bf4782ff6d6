"""``--backend ray`` on a local Ray runtime: same data as the local backend, a killed actor's episodes re-run
elsewhere (every episode once), an interrupted driver leaves no actor or env process, a clear line without Ray."""

from __future__ import annotations

import dataclasses
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

from grasp_s2r.cli import main
from grasp_s2r.collect import CollectConfig, collect
from grasp_s2r.data.episodes import EpisodeDataset, finished_indices
from grasp_s2r.runtime.backend import BackendConfig, open_runner
from grasp_s2r.runtime.masks import GroundTruthMasks
from grasp_s2r.runtime.pool import RolloutPool
from grasp_s2r.runtime.records import EXPERT, EpisodeRequest
from grasp_s2r.sim.config import EnvConfig, SceneConfig

ray = pytest.importorskip("ray")
SHORT = EnvConfig(scene=SceneConfig(max_episode_steps=30))


@pytest.fixture(scope="module")
def ray_runtime():
    """One local Ray runtime for the module (a runner joins it and leaves it running)."""
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False, logging_level="ERROR",
             _system_config={"worker_niceness": 0})
    yield
    ray.shutdown()


def _episode_bytes(root: Path) -> dict[str, bytes]:
    return {str(p.relative_to(root)): p.read_bytes() for p in sorted(root.glob("episode-*/*"))}


def test_collect_same_bytes_local_1_local_2_ray_2(tmp_path: Path, ray_runtime) -> None:
    base = CollectConfig(episodes=6, seed=11)
    runs = {"local-1": dataclasses.replace(base, workers=1),
            "local-2": dataclasses.replace(base, workers=2),
            "ray-2x1": dataclasses.replace(base, workers=1, backend=BackendConfig("ray", ray_actors=2))}
    data = {}
    for name, cfg in runs.items():
        out = tmp_path / name
        s = collect(dataclasses.replace(cfg, out=str(out)), progress=False)
        assert s.episodes == 6 and s.new_episodes == 6
        data[name] = _episode_bytes(out)
        assert (out / "meta.json").read_bytes() == (tmp_path / "local-1" / "meta.json").read_bytes()
    assert len(data["local-1"]) == 6 * 12  # 11 arrays (a DAgger round's schema) + info.json per episode
    assert data["local-1"] == data["local-2"] == data["ray-2x1"]


def test_killed_actor_reruns_its_episodes_elsewhere(ray_runtime) -> None:
    requests = [EpisodeRequest(seed=100 + i, actor=EXPERT) for i in range(16)]
    with RolloutPool(SHORT, 1) as pool:
        reference = pool.run(requests, None, GroundTruthMasks(), progress=False)
    seen: list[int] = []
    with open_runner(BackendConfig("ray", ray_actors=2), SHORT, workers=1) as runner:
        victim = runner.actor_pids()[0]

        def on_episode(rec) -> None:
            if not seen:
                os.kill(victim, signal.SIGKILL)  # mid-run: its shard in flight (or its next one) is lost
            seen.append(rec.info["request_index"])
            ref = reference[rec.info["request_index"]]
            for k, v in ref.arrays.items():
                np.testing.assert_array_equal(rec.arrays[k], v, err_msg=k)

        recs = runner.run(requests, None, GroundTruthMasks(), on_episode=on_episode, progress=False)
        assert runner.replaced >= 1
        assert victim not in runner.actor_pids()
    assert sorted(seen) == list(range(16)), "every episode exactly once"
    assert [r.request.seed for r in recs] == [r.seed for r in requests]
    assert [r.success for r in recs] == [r.success for r in reference]


def _ray_processes() -> set[int]:
    out = subprocess.run(["ps", "-e", "-o", "pid=,args="], capture_output=True, text=True, check=True).stdout
    return {int(line.split()[0]) for line in out.splitlines()
            if "ray::" in line or "raylet" in line or "gcs_server" in line or "grasp_s2r.runtime.pool" in line}


@pytest.mark.slow  # starts its own Ray runtime in a subprocess
def test_interrupted_ray_driver_leaves_nothing(tmp_path: Path) -> None:
    before = _ray_processes()
    out = tmp_path / "demos"
    proc = subprocess.Popen([sys.executable, "-m", "grasp_s2r.cli", "collect", "--episodes", "400", "--backend", "ray",
                             "--ray-actors", "2", "--out", str(out)], stdout=subprocess.DEVNULL,
                            stderr=subprocess.PIPE, text=True, start_new_session=True)
    try:
        deadline = time.monotonic() + 120
        while not (out.is_dir() and len(finished_indices(out)) >= 10):
            assert proc.poll() is None and time.monotonic() < deadline, proc.stderr.read() if proc.poll() else "slow"
            time.sleep(0.2)
        os.killpg(proc.pid, signal.SIGINT)
        t0 = time.monotonic()
        _, err = proc.communicate(timeout=30)
        took = time.monotonic() - t0
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
    assert proc.returncode == 130 and "Traceback" not in err, err[-2000:]
    assert took < 5.0, f"took {took:.1f} s"
    deadline = time.monotonic() + 10
    while _ray_processes() - before and time.monotonic() < deadline:
        time.sleep(0.2)
    assert not _ray_processes() - before, "Ray or env processes survived the interrupt"
    assert len(EpisodeDataset(out)) >= 10


def test_ray_missing_is_one_line(tmp_path: Path, monkeypatch, capsys) -> None:
    monkeypatch.setitem(sys.modules, "ray", None)  # as if Ray were not installed: `import ray` raises ImportError
    rc = main(["collect", "--episodes", "1", "--backend", "ray", "--out", str(tmp_path / "d")])
    err = capsys.readouterr().err.strip()
    assert rc == 2 and len(err.splitlines()) == 1
    assert 'pip install -e ".[ray]"' in err
    assert not (tmp_path / "d").exists()


def test_ray_options_need_ray_backend(tmp_path: Path, capsys) -> None:
    rc = main(["collect", "--episodes", "1", "--ray-actors", "2", "--out", str(tmp_path / "d")])
    assert rc == 2 and "--backend ray" in capsys.readouterr().err
    assert not (tmp_path / "d").exists()


def test_dagger_on_ray_ships_segmenter_and_controller(tmp_path: Path, ray_runtime) -> None:
    """Two rounds on 2 actors with predicted masks: the actors load the shipped segmenter and round 0's controller;
    every episode lands once in the run folder, and the run resumes as a local one (the backend is not identity)."""
    from grasp_s2r.control.dagger import DaggerConfig, run_dagger
    from grasp_s2r.control.train import PolicyTrainConfig
    from grasp_s2r.sim.config import control_env_config

    env = control_env_config().replace(scene=SceneConfig(max_episode_steps=25))
    cfg = DaggerConfig(out=str(tmp_path / "run"), rounds=2, episodes_per_round=4, eval_episodes=4, bc_baseline=False,
                       workers=1, train=PolicyTrainConfig(steps=20, batch_size=32), env=env,
                       backend=BackendConfig("ray", ray_actors=2))
    result = run_dagger(cfg, progress=False)
    assert [r["round"] for r in result.rows] == [0, 1]
    for r in range(2):
        assert finished_indices(tmp_path / "run" / f"round-{r:03d}") == [0, 1, 2, 3]
    assert result.rows[1]["beta"] < 1  # round 1's rollouts ran the shipped controller on the actors
    again = run_dagger(dataclasses.replace(cfg, rounds=3, backend=BackendConfig()), progress=False)
    assert [r["round"] for r in again.rows] == [0, 1, 2]


def test_parallax_filter_runs_the_same_on_ray(ray_runtime) -> None:
    """The shipped system with its parallax filter: Ray actors give the episodes the local pool gives."""
    import torch

    from grasp_s2r.agent import default_controller_path
    from grasp_s2r.control.parallax import SHIPPED
    from grasp_s2r.control.policy import Policy
    from grasp_s2r.runtime.conditions import CONDITIONS
    from grasp_s2r.runtime.masks import make_mask_source
    from grasp_s2r.sim.config import control_env_config

    torch.set_num_threads(1)
    env = control_env_config()
    policy = Policy.load(default_controller_path(), "cpu")[0]
    masks = make_mask_source("predicted", "", "cpu")
    # episodes whose backdrop photo makes the segmenter fire on a spot that stays put (found by benchmarks/parallax_filter.py)
    requests = [EpisodeRequest(seed=s, condition=CONDITIONS["start-out-of-view"]) for s in (950022, 950028, 950030)]
    with RolloutPool(env, 1) as pool:  # one episode a segmenter batch, as in each actor: the same float sums
        local = pool.run(requests, policy, masks, progress=False, parallax=SHIPPED)
        unfiltered = pool.run(requests, policy, masks, progress=False)
    with open_runner(BackendConfig("ray", ray_actors=2), env, workers=1) as runner:
        remote = runner.run(requests, policy, masks, progress=False, parallax=SHIPPED)
    for a, b in zip(local, remote, strict=True):
        np.testing.assert_array_equal(a.arrays["input_mask"], b.arrays["input_mask"])
    assert any(a.arrays["input_mask"].sum() != u.arrays["input_mask"].sum() for a, u in zip(local, unfiltered))
