"""The controller's optional second mask, the gripper fingers': it changes what the controller does, it is what
training replays, it is refused when missing, and older controllers (sphere mask only) load as they were."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import numpy as np
import pytest
import torch

from grasp_s2r.control.dagger import DaggerConfig
from grasp_s2r.control.mixing import Mixture
from grasp_s2r.control.policy import Policy, PolicyConfig
from grasp_s2r.learner import AgentError, SegmenterMasks, learner_step
from grasp_s2r.runtime.masks import GroundTruthMasks
from grasp_s2r.runtime.pool import RolloutPool
from grasp_s2r.runtime.records import EpisodeRequest
from grasp_s2r.sim.config import EnvConfig, SceneConfig


def _masks(n: int = 2) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    sphere = np.zeros((n, 64, 64), bool)
    sphere[:, 20:24, 30:34] = True
    fingers = np.zeros((n, 64, 64), bool)
    fingers[:, 50:64, 5:15] = True
    return sphere, fingers, np.tile(np.array([0.0, 0.0, 0.1, 0.04, 0.0], np.float32), (n, 1))


def test_the_gripper_mask_moves_the_action_and_is_required():
    torch.manual_seed(0)
    policy = Policy(PolicyConfig(gripper=True), device="cpu")
    sphere, fingers, proprio = _masks()
    with pytest.raises(ValueError, match="gripper"):
        policy.act(sphere, proprio)
    moved = np.roll(fingers, 6, axis=2)  # the fingers appear 6 px further right (a shifted camera mount)
    assert not np.allclose(policy.act(sphere, proprio, gripper_masks=fingers),
                           policy.act(sphere, proprio, gripper_masks=moved))


def test_a_gripper_controller_round_trips_and_an_older_one_loads_as_it_was(tmp_path: Path):
    policy = Policy(PolicyConfig(gripper=True, memory=True), device="cpu")
    policy.save(tmp_path / "p.pt")
    loaded, _ = Policy.load(tmp_path / "p.pt", "cpu")
    sphere, fingers, proprio = _masks()
    mem = np.zeros((2, 16), np.float32)
    assert loaded.cfg.gripper
    np.testing.assert_array_equal(loaded.act(sphere, proprio, mem, fingers), policy.act(sphere, proprio, mem, fingers))
    old = Policy(PolicyConfig(), device="cpu")
    blob = {"policy_config": {"mask_hw_px": 32, "channels": [], "hidden": 256, "memory": False}}  # before the field
    old.save(tmp_path / "old.pt", extra=blob)
    loaded_old, _ = Policy.load(tmp_path / "old.pt", "cpu")
    assert not loaded_old.cfg.gripper
    np.testing.assert_array_equal(loaded_old.act(sphere, proprio), old.act(sphere, proprio))


def test_a_run_without_the_gripper_input_keeps_its_identity():
    """Runs made before the option resume: the field is not part of their identity while it is off."""
    assert "gripper" not in DaggerConfig(out="x").identity()["policy"]
    assert DaggerConfig(out="x", policy=PolicyConfig(gripper=True)).identity()["policy"]["gripper"] is True


def test_the_runtime_feeds_the_gripper_mask_that_training_replays():
    """The runtime's actions are what the controller computes from the recorded sphere input mask and the recorded
    gripper mask (what ``train.load_labels`` reads), and the fingers are in view."""
    torch.manual_seed(0)
    policy = Policy(PolicyConfig(gripper=True), device="cpu")
    requests = [EpisodeRequest(seed=s, actor=Mixture(0.5)) for s in (3, 4)]
    with RolloutPool(EnvConfig(scene=SceneConfig(max_episode_steps=12)), 1) as pool:
        recs = pool.run(requests, policy, GroundTruthMasks(), progress=False)
    for rec in recs:
        a = rec.arrays
        assert a["gripper_mask"].any(axis=(1, 2)).all()
        replay = policy.act(a["input_mask"], a["proprio"], gripper_masks=a["gripper_mask"])
        np.testing.assert_allclose(replay, a["learner_action"], atol=1e-6)


def test_a_segmenter_without_a_gripper_output_is_refused_in_one_line():
    from grasp_s2r.vision.networks.segmenter import Segmenter, default_checkpoint_path

    policy = Policy(PolicyConfig(gripper=True), device="cpu")
    rgb = np.zeros((1, 64, 64, 3), np.uint8)
    with pytest.raises(AgentError, match="gripper fingers' mask"):
        learner_step(SegmenterMasks(Segmenter.load(default_checkpoint_path(), "cpu")), policy, rgb,
                     np.zeros((1, 5), np.float32))


def test_with_predicted_masks_training_reads_the_fingers_the_controller_saw(tmp_path: Path):
    """A --gripper-input run over the segmenter trains on the gripper head's masks of the recorded images (what the
    controller saw), not on the recorded ground truth."""
    from grasp_s2r.control.dagger import DaggerTrainer
    from grasp_s2r.control.train import load_labels
    from grasp_s2r.data.episodes import EpisodeDataset
    from grasp_s2r.runtime.masks import make_mask_source

    masks = make_mask_source("predicted", "", "cpu")
    cfg = DaggerConfig(out=str(tmp_path / "run"), rounds=1, episodes_per_round=2, eval_episodes=1, bc_baseline=False,
                       policy=PolicyConfig(gripper=True))
    cfg = dataclasses.replace(cfg, env=cfg.env.replace(scene=SceneConfig(max_episode_steps=8)))
    with RolloutPool(cfg.env, 1) as pool:
        trainer = DaggerTrainer(cfg, pool, masks, torch.device("cpu"), progress=False)
        trainer.rollout(0, None)
        root = tmp_path / "run" / "round-000"
        labels = load_labels([root], None, trainer.predicted_gripper)
    ep = next(iter(EpisodeDataset(root)))
    seen = masks.gripper(np.asarray(ep["rgb"]), None)
    np.testing.assert_array_equal(labels.gripper_masks[:len(seen)], seen)
    assert not np.array_equal(seen, np.asarray(ep["gripper_mask"])), "the head's masks differ from the ground truth"
    np.testing.assert_array_equal(load_labels([root]).gripper_masks[:len(seen)], np.asarray(ep["gripper_mask"]))
