"""DAgger: aggregation across rounds, resume after ``kill -9``, a tiny CLI run that beats a random policy."""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest
import torch

from grasp_s2r.collect import CollectConfig, collect
from grasp_s2r.control import seeds
from grasp_s2r.control.curves import best_round
from grasp_s2r.control.dagger import DaggerConfig, beta_for_round, check_demos, run_dagger
from grasp_s2r.control.policy import Policy
from grasp_s2r.control.train import PolicyTrainConfig, load_labels
from grasp_s2r.data.episodes import EpisodeDataset, read_meta
from grasp_s2r.runtime.masks import GroundTruthMasks
from grasp_s2r.runtime.pool import RolloutPool
from grasp_s2r.runtime.records import EpisodeRequest
from grasp_s2r.sim.config import EnvConfig, SceneConfig, control_env_config


def _tiny(out: Path, **kw) -> DaggerConfig:
    env = control_env_config().replace(scene=SceneConfig(max_episode_steps=25))
    base = {"out": str(out), "rounds": 2, "episodes_per_round": 2, "eval_episodes": 2, "masks": "gt", "workers": 2,
            "disturbance_prob": 0.5, "train": PolicyTrainConfig(steps=30, batch_size=32), "env": env}
    return DaggerConfig(**{**base, **kw})


@pytest.fixture(scope="module")
def tiny_run(tmp_path_factory):
    torch.set_num_threads(1)
    cfg = _tiny(tmp_path_factory.mktemp("dagger") / "run")
    return cfg, run_dagger(cfg, progress=False)


def test_labels_of_all_rounds_are_aggregated(tiny_run):
    cfg, result = tiny_run
    out = Path(cfg.out)
    steps = [EpisodeDataset(out / f"round-{r:03d}").num_steps() for r in range(2)]
    assert [len(EpisodeDataset(out / f"round-{r:03d}")) for r in range(2)] == [2, 2]
    assert [row["labels"] for row in result.rows] == [steps[0], steps[0] + steps[1]]
    assert [row["beta"] for row in result.rows] == [1.0, beta_for_round(1, cfg.beta_schedule, cfg.beta_rampdown_rounds)]
    assert len(load_labels([out / "round-000", out / "round-001"])) == sum(steps)
    meta = read_meta(out / "round-001")
    assert meta["kind"] == "dagger-round" and meta["config"]["round"] == 1 and meta["config"]["run"]["masks"] == "gt"
    assert EpisodeDataset(out / "round-000").episode(0)["from_expert"][:].all()
    # the learner acted in round 1 (beta < 1), and the expert labelled its states
    r1 = [EpisodeDataset(out / "round-001").episode(i) for i in range(2)]
    assert not np.concatenate([e["from_expert"][:] for e in r1]).all()
    # the BC baseline had as many expert-only labels
    bc_steps = EpisodeDataset(out / "bc-expert").num_steps() + steps[0]
    assert bc_steps >= result.rows[1]["labels"] and result.rows[1]["bc_success_rate"] is not None


def test_artifacts_carry_their_config_and_version(tiny_run):
    cfg, result = tiny_run
    out = Path(cfg.out)
    _, blob = Policy.load(out / "checkpoints" / "round-001.pt", "cpu")
    assert blob["format_version"] == 1 and blob["config"]["episodes_per_round"] == 2 and blob["round"] == 1
    assert (out / "checkpoints" / "bc-001.pt").is_file() and result.policy_path.is_file()
    # policy.pt is the checkpoint of the round that succeeded most on the evaluation episodes
    best = max((row["dagger_successes"], row["round"]) for row in result.rows)[1]
    assert result.selected_round == best
    assert result.policy_path.read_bytes() == (out / "checkpoints" / f"round-{best:03d}.pt").read_bytes()
    lines = result.curve_csv.read_text().splitlines()
    assert len(lines) == 3 and lines[0].startswith("round,beta,labels")
    assert result.curve_png.stat().st_size > 10_000
    curve = json.loads((out / "curve.json").read_text())
    assert curve["format_version"] == 1 and curve["config"]["rounds"] == 2 and len(curve["rows"]) == 2
    from PIL import Image

    assert json.loads(Image.open(result.curve_png).info["Description"])["episodes_per_round"] == 2


def test_rerun_is_a_no_op_and_another_config_is_refused(tiny_run):
    cfg, result = tiny_run
    ckpt = Path(cfg.out) / "checkpoints" / "round-001.pt"
    before = ckpt.stat().st_mtime_ns
    again = run_dagger(cfg, progress=False)
    assert again.rows == result.rows and ckpt.stat().st_mtime_ns == before
    with pytest.raises(ValueError, match="another config"):
        run_dagger(_tiny(Path(cfg.out), episodes_per_round=3), progress=False)


def _digest(folder: Path) -> dict[str, str]:
    return {str(p.relative_to(folder)): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(folder.rglob("*")) if p.is_file()}


class RandomPolicy:
    """Uniform random actions in [-1, 1]: the baseline a trained controller must beat."""

    def __init__(self, seed: int):
        self.rng = np.random.default_rng(seed)

    def act(self, masks: np.ndarray, proprio: np.ndarray) -> np.ndarray:
        return self.rng.uniform(-1, 1, (len(masks), 4))


def test_cli_run_resumes_after_kill_and_beats_a_random_policy(tmp_path):
    out = tmp_path / "run"
    cmd = [sys.executable, "-m", "grasp_s2r.cli", "dagger", "--out", str(out), "--rounds", "3",
           "--episodes-per-round", "6", "--eval-episodes", "6", "--masks", "gt", "--no-bc", "--train-steps", "300",
           "--max-steps", "40", "--quiet"]
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    proc = subprocess.Popen(cmd, start_new_session=True, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    deadline = time.monotonic() + 240
    while time.monotonic() < deadline and proc.poll() is None:  # kill inside round 1
        if any((out / "round-001").glob("episode-*")):
            break
        time.sleep(0.05)
    assert proc.poll() is None, f"the run ended before it could be killed: {proc.stderr.read().decode()[-500:]}"
    os.killpg(proc.pid, signal.SIGKILL)
    proc.wait()
    round0 = _digest(out / "round-000")
    ckpt0 = (out / "checkpoints" / "round-000.pt").read_bytes()
    done1 = {p.name: _digest(p) for p in (out / "round-001").glob("episode-*")}
    assert not (out / "checkpoints" / "round-001.pt").exists() and done1

    rc = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=300, check=False)
    assert rc.returncode == 0, rc.stderr[-1000:]
    assert (f"dagger: resuming {out}: rounds 0-0 complete; round 1 of 0-2 goes on, keeping its {len(done1)} "
            "finished episodes") in rc.stdout + rc.stderr
    assert _digest(out / "round-000") == round0 and (out / "checkpoints" / "round-000.pt").read_bytes() == ckpt0
    assert {name: _digest(out / "round-001" / name) for name in done1} == done1
    assert len(EpisodeDataset(out / "round-001")) == 6 and not list(out.rglob(".tmp-*"))
    assert len((out / "curve.csv").read_text().splitlines()) == 4
    chosen = torch.load(out / "policy.pt", weights_only=False, map_location="cpu")["round"]
    assert f"controller: {out / 'policy.pt'}  (round {chosen}," in rc.stdout, "the last line names policy.pt's round"

    policy, _ = Policy.load(out / "policy.pt", "cpu")
    requests = [EpisodeRequest(seed=seeds.TEST_BASE + i) for i in range(10)]
    with RolloutPool(control_env_config().replace(scene=SceneConfig(max_episode_steps=40)), 2) as pool:
        trained = sum(r.success for r in pool.run(requests, policy, GroundTruthMasks(), progress=False))
        random = sum(r.success for r in pool.run(requests, RandomPolicy(0), GroundTruthMasks(), progress=False))
    assert trained >= 5 and trained > random, (trained, random)


def test_round_zero_can_come_from_collected_demonstrations(tmp_path):
    """Demonstrations of the run's scene and mask source are round 0 as they are; others are refused, saying how to
    collect them."""
    demos = tmp_path / "demos"
    env = control_env_config(EnvConfig(scene=SceneConfig(max_episode_steps=25)))  # the scene of _tiny
    collect(CollectConfig(out=str(demos), episodes=3, workers=1, env=env), progress=False)
    cfg = _tiny(tmp_path / "run", rounds=1, demos=str(demos), bc_baseline=False)
    result = run_dagger(cfg, progress=False)
    r0 = EpisodeDataset(tmp_path / "run" / "round-000")
    source = EpisodeDataset(demos)
    assert len(r0) == 2 and result.rows[0]["labels"] == r0.num_steps()
    for key in ("rgb", "action", "input_mask", "executed_action", "state"):
        np.testing.assert_array_equal(r0.episode(1)[key][:], source.episode(1)[key][:])
    np.testing.assert_array_equal(r0.episode(1)["input_mask"][:], source.episode(1)["sphere_mask"][:])  # gt masks
    other_camera = tmp_path / "demos-scene-camera"
    collect(CollectConfig(out=str(other_camera), episodes=1, workers=1, env=EnvConfig(scene=env.scene)),
            progress=False)
    with pytest.raises(ValueError, match=r"another scene or camera .*camera_jitter_deg: stored 2.0, asked 0.5.*--controller-scene"):
        run_dagger(_tiny(tmp_path / "run2", rounds=1, demos=str(other_camera)), progress=False)
    with pytest.raises(ValueError, match="other controller input masks .*--masks predicted"):
        check_demos(_tiny(tmp_path / "run3", rounds=1, demos=str(demos), masks="predicted"))
    # a DAgger round is not demonstrations; nor are episodes of another proprio layout (another version's)
    with pytest.raises(ValueError, match="round-000 is a dagger-round dataset, not expert demonstrations"):
        check_demos(_tiny(tmp_path / "run4", rounds=1, demos=str(tmp_path / "run" / "round-000")))
    other_layout = tmp_path / "demos-other-proprio"
    shutil.copytree(demos, other_layout)
    meta = json.loads((other_layout / "meta.json").read_text())
    meta["features"]["proprio"]["names"][0] = "another_value"
    (other_layout / "meta.json").write_text(json.dumps(meta))
    with pytest.raises(ValueError, match=r"another layout of proprio .*another_value"):
        check_demos(_tiny(tmp_path / "run5", rounds=1, demos=str(other_layout)))


def test_best_round_takes_the_most_successes_and_the_later_round_on_ties():
    rows = [{"round": 0, "dagger_successes": 5, "bc_successes": 5}, {"round": 1, "dagger_successes": 9, "bc_successes": 7},
            {"round": 2, "dagger_successes": 9, "bc_successes": 8}, {"round": 3, "dagger_successes": 4, "bc_successes": ""}]
    assert best_round(rows) == 2 and best_round(rows, "bc") == 2
    with pytest.raises(ValueError):
        best_round([{"round": 0, "bc_successes": None}], "bc")


def test_cli_options_reach_the_config_and_bad_values_are_refused():
    import argparse

    from grasp_s2r.cli import UsageError
    from grasp_s2r.commands import dagger as cli_dagger

    parser = argparse.ArgumentParser()
    cli_dagger.add_arguments(parser)
    cfg = cli_dagger.config_from_args(parser.parse_args(["--out", "x", "--disturbance-prob", "0",
                                                         "--blind-start-prob", "0.5"]))
    assert cfg.disturbance_prob == 0.0 and cfg.blind_start_prob == 0.5
    assert cli_dagger.config_from_args(parser.parse_args(["--out", "x"])).disturbance_prob == DaggerConfig.disturbance_prob
    with pytest.raises(UsageError, match=r"--disturbance-prob must be in \[0, 1\]"):
        cli_dagger.config_from_args(parser.parse_args(["--out", "x", "--disturbance-prob", "1.5"]))


def test_every_round_episode_holds_every_declared_feature(tmp_path):
    """Rollout rounds and rounds imported from demos both hold every feature their meta.json declares."""
    demos = tmp_path / "demos"
    collect(CollectConfig(out=str(demos), episodes=2, workers=1,
                          env=control_env_config(EnvConfig(scene=SceneConfig(max_episode_steps=25)))), progress=False)
    run_dagger(_tiny(tmp_path / "run", rounds=2, demos=str(demos), bc_baseline=False), progress=False)
    for r in (0, 1):
        ds = EpisodeDataset(tmp_path / "run" / f"round-{r:03d}")
        for ep in ds:
            assert ep.features() == sorted(ds.meta["features"]), (r, ep.path)


def test_training_episode_mixture_draws_each_kind_at_its_share(tmp_path):
    from grasp_s2r.control.training_episodes import TrainingEpisodes

    cfg = _tiny(tmp_path / "r", out_of_view_prob=0.5, table_photo_prob=0.25, dropout_prob=1.0, disturbance_prob=0.0,
                blind_start_prob=0.0)
    episodes = TrainingEpisodes(cfg)
    reqs = [episodes.request(seed, beta=0.5) for seed in range(400)]
    assert all(r.condition.dropout_steps == (3, 10) for r in reqs)
    out_of_view = np.mean([r.condition.start_out_of_view_deg > 0 for r in reqs])
    table = np.mean([r.condition.table_photos == "train" and r.condition.backgrounds == "" for r in reqs])
    assert 0.42 < out_of_view < 0.58 and 0.18 < table < 0.32
    assert reqs == [episodes.request(seed, beta=0.5) for seed in range(400)]  # drawn from the seed alone
    assert "out_of_view_prob" in cfg.identity() and "out_of_view_prob" not in _tiny(tmp_path / "r").identity()


def test_own_photos_are_the_backdrop_and_the_table_of_training_episodes(tmp_path):
    """``dagger --photos DIR`` (``adapt``): training episodes composited onto DIR's photos, and DIR's photos as the
    table's texture in ``table_photo_prob`` of them; never the training photos."""
    from grasp_s2r.control.training_episodes import TrainingEpisodes

    photos = str(tmp_path / "scene")
    cfg = _tiny(tmp_path / "r", backgrounds=photos, table_photo_prob=0.5, disturbance_prob=0.3)
    reqs = [TrainingEpisodes(cfg).request(seed, beta=0.5) for seed in range(200)]
    table = [r for r in reqs if r.condition.table_photos]
    assert 0.35 < len(table) / len(reqs) < 0.65
    assert all(r.condition.table_photos == photos and r.condition.backgrounds == "" for r in table)
    assert all(r.condition.backgrounds == photos for r in reqs if not r.condition.table_photos)
    assert cfg.identity()["backgrounds"] == photos  # another scene is another run


def test_round_zero_trains_on_from_an_init_controller_and_another_architecture_is_refused(tmp_path):
    """--init: round 0 starts from the given controller's weights (a fine-tune), not new ones; a checkpoint of
    another architecture is refused before the run folder is written, and the init is part of the run's identity."""
    from grasp_s2r.agent import default_controller_path
    from grasp_s2r.control.policy import PolicyConfig

    shipped = default_controller_path()
    init, _ = Policy.load(shipped)
    cfg = _tiny(tmp_path / "run", rounds=1, init_policy=str(shipped), policy=PolicyConfig(memory=True),
                bc_baseline=False, train=PolicyTrainConfig(steps=2, batch_size=32, lr=1e-7))
    run_dagger(cfg, progress=False)
    tuned, blob = Policy.load(tmp_path / "run" / "checkpoints" / "round-000.pt")
    assert blob["config"]["init_policy"] == str(shipped)
    for name, w in init.net.state_dict().items():  # two steps at 1e-7 move no weight by more than ~1e-6
        assert torch.allclose(tuned.net.state_dict()[name], w, atol=1e-5), name
    fresh = Policy(PolicyConfig(memory=True))
    assert any(not torch.allclose(fresh.net.state_dict()[k], w, atol=1e-3) for k, w in init.net.state_dict().items())
    assert cfg.identity()["init_policy"] == str(shipped) and "init_policy" not in _tiny(tmp_path / "x").identity()
    with pytest.raises(ValueError, match="architecture .*memory.*--memory"):
        run_dagger(_tiny(tmp_path / "run2", rounds=1, init_policy=str(shipped)), progress=False)
    assert not (tmp_path / "run2").exists()
    with pytest.raises(ValueError, match="^--init: no controller checkpoint at"):
        run_dagger(_tiny(tmp_path / "run3", rounds=1, init_policy=str(tmp_path / "none.pt")), progress=False)
    assert not (tmp_path / "run3").exists()
