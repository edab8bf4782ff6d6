"""Evaluation conditions (hooks on a real env) and the ``grasp-s2r eval`` plumbing."""

from __future__ import annotations

import dataclasses
import json

import cv2
import numpy as np
import pybullet as pb
import pytest
import torch

from grasp_s2r.cli import main
from grasp_s2r.control.dagger import DaggerConfig
from grasp_s2r.control.policy import Policy, PolicyConfig
from grasp_s2r.runtime.conditions import CONDITIONS, Condition, load_photos, resolve_condition
from grasp_s2r.runtime.episode_hooks import EpisodeHooks


def _hooks(env, cond: Condition, seed: int = 7) -> EpisodeHooks:
    env.reset(seed)
    hooks = EpisodeHooks(env, cond, np.random.default_rng(seed))
    hooks.on_reset()
    return hooks


def test_dynamics_shift_changes_mass_friction_and_is_undone_by_the_next_condition(env):
    cond = CONDITIONS["dynamics-shift"]
    _hooks(env, cond)
    info = pb.getDynamicsInfo(env.sphere_uid, -1, physicsClientId=env.client)
    s = env.config.scene
    assert info[0] == pytest.approx(s.sphere_mass_kg * cond.sphere_mass_scale)
    assert info[1] == pytest.approx(s.sphere_friction * cond.sphere_friction_scale)
    _hooks(env, Condition())
    info = pb.getDynamicsInfo(env.sphere_uid, -1, physicsClientId=env.client)
    assert info[0] == pytest.approx(s.sphere_mass_kg) and info[1] == pytest.approx(s.sphere_friction)


def test_latency_executes_the_previous_action_and_noise_spares_the_gripper(env):
    hooks = _hooks(env, Condition(latency_steps=1, action_noise_std=0.1))
    a1, a2 = np.array([0.5, 0.0, -0.5, 1.0]), np.array([-0.5, 0.2, 0.0, -1.0])
    first = hooks.before_step(a1)
    np.testing.assert_array_equal(first, np.zeros(4))
    second = hooks.before_step(a2)
    assert second[3] == a1[3] and 0 < np.abs(second[:3] - a1[:3]).max() < 0.5


def test_moving_target_slides_the_sphere_at_its_speed_while_the_gripper_is_high(env):
    cond = CONDITIONS["moving-target"]
    hooks = _hooks(env, cond)
    start = env.sphere_pos_world_m()
    for _ in range(5):
        env.step(hooks.before_step(np.array([0.0, 0.0, 0.0, -1.0])))
    moved = np.linalg.norm(env.sphere_pos_world_m()[:2] - start[:2])
    expected = 5 * cond.target_speed_m_s / env.config.scene.control_hz
    assert moved == pytest.approx(expected, rel=0.3)


def test_perturbation_displaces_the_sphere_once_when_the_gripper_descends(env):
    cond = CONDITIONS["perturbation"]
    hooks = _hooks(env, cond)
    start = env.sphere_pos_world_m()
    hooks.before_step(np.zeros(4))
    assert np.allclose(env.sphere_pos_world_m(), start), "no displacement while the gripper is high"
    # put the TCP just above the sphere: the next step triggers the displacement, once
    env.robot.teleport(start + np.array([0.0, 0.0, 0.02]), env.config.scene.finger_open_m)
    hooks.before_step(np.zeros(4))
    after = env.sphere_pos_world_m()
    dist = np.linalg.norm(after[:2] - start[:2])
    assert cond.perturb_distance_m[0] - 1e-6 <= dist <= cond.perturb_distance_m[1] + 1e-6
    hooks.before_step(np.zeros(4))
    assert np.allclose(env.sphere_pos_world_m()[:2], after[:2])
    assert [e["event"] for e in hooks.events] == ["perturbation"]


def test_perturbation_never_drops_the_sphere_where_a_finger_comes_down(env):
    """The displaced sphere lands clear of the fingers: descending onto the table next to it leaves it in place
    (a sphere put under a finger's edge is flicked away and rolls out of the workspace: a kick, not a displacement).
    Displacements of 2.5-3 cm along the fingers' axis would land under a finger; many draws here do."""
    cond = Condition(perturb_distance_m=(0.025, 0.03))
    for seed in range(12):
        hooks = _hooks(env, cond, seed)
        start = env.sphere_pos_world_m()
        env.robot.teleport(start + np.array([0.0, 0.0, 0.02]), env.config.scene.finger_open_m)
        down = np.array([0.0, 0.0, -1.0, -1.0])
        env.step(hooks.before_step(down))
        placed = env.sphere_pos_world_m()
        assert np.linalg.norm(placed[:2] - start[:2]) >= 0.025 - 1e-6
        for _ in range(2):
            env.step(hooks.before_step(down))
        assert np.linalg.norm(env.sphere_pos_world_m()[:2] - placed[:2]) < 0.002, f"seed {seed}: the sphere was hit"


def test_composited_conditions_show_photos_and_keep_the_ground_truth(env):
    for name in ("nominal", "heldout-backgrounds"):
        hooks = _hooks(env, CONDITIONS[name])
        frame = env.render()
        rgb, mask = hooks.observe(frame)
        np.testing.assert_array_equal(mask, frame.sphere_mask)
        background = ~(frame.sphere_mask | frame.gripper_mask)
        assert np.abs(rgb[background].astype(int) - frame.rgb[background]).mean() > 5


def test_user_backgrounds_replace_the_heldout_photos(tmp_path, rng):
    for i in range(3):
        cv2.imwrite(str(tmp_path / f"photo{i}.png"), rng.integers(0, 255, (80, 90, 3), dtype=np.uint8))
    cond = resolve_condition("heldout-backgrounds", str(tmp_path))
    assert cond.backgrounds == str(tmp_path)
    assert len(load_photos(cond.backgrounds)) == 3
    assert resolve_condition("dynamics-shift", str(tmp_path)).backgrounds == "train"
    with pytest.raises(KeyError):
        resolve_condition("rainy-day")


@pytest.fixture(scope="module")
def untrained_policy(tmp_path_factory):
    path = tmp_path_factory.mktemp("policy") / "policy.pt"
    torch.manual_seed(0)
    cfg = DaggerConfig(out="unused")
    Policy(PolicyConfig(), "cpu").save(path, {"config": dataclasses.asdict(cfg), "round": 0})
    return path


def test_eval_cli_reports_each_condition_with_a_confidence_interval(untrained_policy, tmp_path, capsys):
    out = tmp_path / "eval"
    rc = main(["eval", "--policy", str(untrained_policy), "--masks", "gt", "--episodes", "2", "--conditions",
               "nominal,perturbation", "--out", str(out), "--video", "1", "--quiet", "--workers", "2"])
    assert rc == 0
    res = json.loads((out / "eval.json").read_text())
    assert res["format"] == "grasp_s2r.eval" and res["format_version"] == 1
    assert res["config"]["masks"] == "gt" and res["env"]["randomization"]["camera_jitter_deg"] == 0.5
    assert list(res["conditions"]) == ["nominal", "perturbation"]
    for r in res["conditions"].values():
        assert r["episodes"] == 2 and 0 <= r["ci_low"] <= r["success_rate"] <= r["ci_high"] <= 1
    assert (out / "nominal.png").is_file() and (out / "perturbation.gif").is_file()
    table = capsys.readouterr().out
    assert "perturbation" in table and "95 % CI" in table


def test_eval_again_into_its_folder_leaves_no_picture_of_the_earlier_run(untrained_policy, tmp_path):
    out = tmp_path / "eval"
    base = ["eval", "--policy", str(untrained_policy), "--masks", "gt", "--episodes", "1", "--out", str(out),
            "--quiet", "--workers", "1"]
    assert main([*base, "--conditions", "nominal,perturbation", "--video", "1"]) == 0
    (out / "notes.txt").write_text("mine")
    assert main([*base, "--conditions", "nominal", "--video", "1"]) == 0
    assert sorted(p.name for p in out.iterdir() if not p.name.startswith(".")) == [
        "eval.json", "nominal.gif", "nominal.png", "notes.txt"]  # the user's own file stays
    assert main([*base, "--conditions", "nominal", "--video", "0"]) == 0
    assert not (out / "nominal.png").exists() and not (out / "nominal.gif").exists()


def test_an_interrupted_eval_leaves_the_last_report_and_its_pictures_whole(untrained_policy, tmp_path, monkeypatch):
    from grasp_s2r.control import evaluate

    out = tmp_path / "eval"
    base = ["eval", "--policy", str(untrained_policy), "--masks", "gt", "--out", str(out), "--quiet", "--workers", "1",
            "--conditions", "nominal"]
    assert main([*base, "--episodes", "1", "--video", "1"]) == 0
    before = {p.name: p.read_bytes() for p in out.iterdir() if p.is_file()}

    def interrupted(path, obj, **dumps):
        raise KeyboardInterrupt

    monkeypatch.setattr(evaluate, "write_json", interrupted)  # stopped as it would write its eval.json
    assert main([*base, "--episodes", "2", "--video", "2"]) == 130  # the CLI's "interrupted"
    assert {p.name: p.read_bytes() for p in out.iterdir() if p.is_file()} == before
    monkeypatch.undo()
    assert main([*base, "--episodes", "2", "--video", "2"]) == 0  # run again: the new report, no staging left
    assert json.loads((out / "eval.json").read_text())["conditions"]["nominal"]["episodes"] == 2
    assert not (out / evaluate.PICTURES_STAGING).exists() and (out / "nominal.png").read_bytes() != before["nominal.png"]


def test_eval_says_a_video_asked_without_out_is_drawn_nowhere(untrained_policy, tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    assert main(["eval", "--policy", str(untrained_policy), "--masks", "gt", "--episodes", "1", "--conditions",
                 "nominal", "--video", "2", "--quiet", "--workers", "1"]) == 0
    assert "--video 2 draws nothing without --out DIR" in capsys.readouterr().err
    assert list(tmp_path.iterdir()) == []


def test_eval_cli_rejects_bad_input_in_one_line(untrained_policy, tmp_path, capsys):
    assert main(["eval", "--policy", str(tmp_path / "missing.pt"), "--episodes", "1"]) == 2
    assert main(["eval", "--policy", str(untrained_policy), "--masks", "gt", "--conditions", "rainy-day"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 2 and "rainy-day" in err[1]


class CountingSegmenter:
    """Wraps a real (untrained) segmenter and records the batch size of every call."""

    def __init__(self, segmenter):
        self.segmenter, self.batches = segmenter, []

    def predict(self, rgb):
        self.batches.append(len(rgb))
        return self.segmenter.predict(rgb)


def test_predicted_masks_come_from_one_batched_segmenter_call_per_step(tmp_path):
    from grasp_s2r.runtime.masks import PredictedMasks, make_mask_source
    from grasp_s2r.runtime.pool import RolloutPool
    from grasp_s2r.runtime.records import EXPERT, EpisodeRequest
    from grasp_s2r.sim.config import EnvConfig, SceneConfig
    from grasp_s2r.vision.images.backgrounds import split_names
    from grasp_s2r.vision.networks.model import build_model
    from grasp_s2r.vision.networks.segmenter import Segmenter, make_checkpoint

    torch.manual_seed(0)
    kwargs = {"width": 4, "depth": 1}
    path = tmp_path / "seg.pt"
    torch.save(make_checkpoint(build_model("unet", **kwargs), architecture="unet", arch_kwargs=kwargs,
                               input_hw=(64, 64), background_split=split_names(), config={}, step=0, history=[]), path)
    source = make_mask_source("predicted", str(path), "cpu")
    assert isinstance(source, PredictedMasks)
    counting = CountingSegmenter(Segmenter.load(path, "cpu"))
    env = EnvConfig(scene=SceneConfig(max_episode_steps=6))
    with RolloutPool(env, 2) as pool:
        recs = pool.run([EpisodeRequest(seed=s, actor=EXPERT) for s in range(2)], None, PredictedMasks(counting),
                        progress=False)
    assert [r.length for r in recs] == [6, 6]
    assert counting.batches == [2] * 6  # both workers' images in each call, one call per step
    expected = counting.segmenter.predict(recs[0].arrays["rgb"])
    np.testing.assert_array_equal(recs[0].arrays["input_mask"], expected)


def test_a_missing_segmenter_is_reported_in_one_line(untrained_policy, tmp_path, capsys):
    rc = main(["eval", "--policy", str(untrained_policy), "--vision", str(tmp_path / "nope.pt"), "--episodes", "1"])
    assert rc == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "nope.pt" in err[0] and "--masks gt" in err[0]
