"""The controller's episode memory: one definition of the moments, the same features when training and when
acting, reset per episode, stored in checkpoints."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import numpy as np
import pytest
import torch

from grasp_s2r.control.memory import N_MEMORY, EpisodeMemory, episode_memory_features, mask_moments_np
from grasp_s2r.control.mixing import Mixture
from grasp_s2r.control.policy import Policy, PolicyConfig, mask_moments
from grasp_s2r.runtime.masks import GroundTruthMasks
from grasp_s2r.runtime.pool import RolloutPool
from grasp_s2r.runtime.records import EXPERT, EpisodeRequest
from grasp_s2r.sim.config import EnvConfig, SceneConfig


def test_numpy_moments_equal_the_networks(rng) -> None:
    masks = rng.random((8, 64, 64)) < rng.random((8, 1, 1)) * 0.05
    masks[0] = False
    torch_m = mask_moments(torch.from_numpy(masks[:, None].astype(np.float32))).numpy()
    np.testing.assert_allclose(mask_moments_np(masks), torch_m, atol=1e-5)
    assert not mask_moments_np(masks[0]).any()


def test_memory_keeps_the_last_sighting_and_the_motion_since() -> None:
    seen = np.zeros((64, 64), bool)
    seen[10:14, 40:44] = True
    proprio = np.array([0.0, 0.0, 0.12, 0.02, 0.0], np.float32)
    m = EpisodeMemory()
    assert not m.features()[:6].any() and m.features()[-5] == 0.0  # nothing seen yet
    m.update(seen, proprio, np.array([0.5, -0.5, 0.0, -1.0]))
    m.update(np.zeros((64, 64), bool), proprio, np.array([0.5, 0.0, 1.0, -1.0]))
    f = m.features()
    np.testing.assert_allclose(f[:6], mask_moments_np(seen))
    np.testing.assert_allclose(f[7:10], 0.1 * np.array([1.0, -0.5, 1.0]))  # both actions since the sighting
    assert f[10] == pytest.approx(0.05) and f[11] == 1.0  # one step unseen; seen this episode
    m.reset()
    np.testing.assert_array_equal(m.features(), EpisodeMemory().features())


def test_a_memory_controller_checkpoint_round_trips(tmp_path: Path) -> None:
    policy = Policy(PolicyConfig(memory=True), device="cpu")
    policy.save(tmp_path / "p.pt")
    loaded, _ = Policy.load(tmp_path / "p.pt", "cpu")
    assert loaded.cfg.memory
    masks, proprio = np.zeros((2, 64, 64), bool), np.zeros((2, 5), np.float32)
    with pytest.raises(ValueError, match="memory"):
        loaded.act(masks, proprio)
    mem = np.random.default_rng(0).normal(size=(2, N_MEMORY)).astype(np.float32)
    np.testing.assert_array_equal(loaded.act(masks, proprio, mem), policy.act(masks, proprio, mem))


def test_runtime_memory_is_the_training_memory_and_starts_fresh_each_episode() -> None:
    """Replaying a recorded episode's arrays through episode_memory_features (what training reads) and the
    controller gives exactly the actions it took in the runtime: same memory, reset at every episode."""
    torch.manual_seed(0)
    policy = Policy(PolicyConfig(memory=True), device="cpu")
    env = EnvConfig(scene=SceneConfig(max_episode_steps=20))
    requests = [EpisodeRequest(seed=s, actor=Mixture(0.5)) for s in (3, 4, 5)]
    with RolloutPool(env, 1) as pool:  # one worker: the episodes run one after the other in the same slot
        recs = pool.run(requests, policy, GroundTruthMasks(), progress=False)
    for rec in recs:
        a = rec.arrays
        memory = episode_memory_features(a["input_mask"], a["proprio"], a["executed_action"])
        replay = policy.act(a["input_mask"], a["proprio"], memory)
        np.testing.assert_allclose(replay, a["learner_action"], atol=1e-6)


def test_dropout_blanks_the_drawn_steps_and_the_observable_expert_labels_them_unseen() -> None:
    from grasp_s2r.expert.fsm import Phase
    from grasp_s2r.runtime.conditions import CONDITIONS
    from grasp_s2r.runtime.pool import dropout_steps

    cond = dataclasses.replace(CONDITIONS["dropout"], backgrounds="")
    requests = [EpisodeRequest(seed=s, actor=EXPERT, condition=cond) for s in (7, 8, 9)]
    for observable in (False, True):
        with RolloutPool(EnvConfig(), 1, observable_expert=observable) as pool:
            recs = pool.run(requests, None, GroundTruthMasks(), progress=False)
        for req, rec in zip(requests, recs, strict=True):
            a, blanked = rec.arrays, dropout_steps(req)
            assert 3 <= len(blanked) <= 10 and min(blanked) in range(2, 6)
            for t in range(rec.length):
                if t in blanked:
                    assert not a["input_mask"][t].any()
                else:
                    np.testing.assert_array_equal(a["input_mask"][t], a["sphere_mask"][t])
            phases = {Phase(p) for t, p in enumerate(a["phase"]) if t in blanked and a["sphere_mask"][t].any()}
            if observable:  # the sphere is in the image but not in the learner's mask: no privileged approach
                assert not phases & {Phase.APPROACH, Phase.DESCEND}, phases
            assert rec.success, (observable, req.seed)
