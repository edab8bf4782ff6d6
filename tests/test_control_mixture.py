"""DAgger's mixture policy: beta arithmetic, schedules, and that labels are always the expert's."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from grasp_s2r.control.dagger import beta_for_round
from grasp_s2r.control.mixing import Mixture, mix_actions
from grasp_s2r.control.policy import Policy, PolicyConfig
from grasp_s2r.expert.fsm import Expert
from grasp_s2r.runtime.masks import GroundTruthMasks
from grasp_s2r.runtime.pool import RolloutPool
from grasp_s2r.runtime.records import EXPERT, EpisodeRequest
from grasp_s2r.sim.config import EnvConfig, SceneConfig
from grasp_s2r.sim.env import GraspEnv

SHORT = EnvConfig(scene=SceneConfig(max_episode_steps=20))


def test_beta_one_executes_only_the_expert(rng):
    expert, learner = rng.uniform(-1, 1, (500, 4)), rng.uniform(-1, 1, (500, 4))
    executed, from_expert = mix_actions(expert, learner, 1.0, rng)
    assert from_expert.all()
    np.testing.assert_array_equal(executed, expert)


def test_beta_zero_executes_only_the_learner(rng):
    expert, learner = rng.uniform(-1, 1, (500, 4)), rng.uniform(-1, 1, (500, 4))
    executed, from_expert = mix_actions(expert, learner, 0.0, rng)
    assert not from_expert.any()
    np.testing.assert_array_equal(executed, learner)


def test_intermediate_beta_mixes_rows_in_proportion(rng):
    expert, learner = np.zeros((20_000, 4)), np.ones((20_000, 4))
    executed, from_expert = mix_actions(expert, learner, 0.3, rng)
    assert abs(from_expert.mean() - 0.3) < 0.02
    np.testing.assert_array_equal(executed[from_expert], expert[from_expert])
    np.testing.assert_array_equal(executed[~from_expert], learner[~from_expert])


def test_learner_is_required_below_beta_one(rng):
    with pytest.raises(ValueError, match="learner"):
        mix_actions(np.zeros((3, 4)), None, 0.5, rng)


def test_beta_schedules():
    assert [beta_for_round(r, "linear", 4) for r in range(6)] == [1.0, 0.75, 0.5, 0.25, 0.0, 0.0]
    assert [beta_for_round(r, "exponential", decay=0.5) for r in range(4)] == [1.0, 0.5, 0.25, 0.125]
    with pytest.raises(ValueError):
        beta_for_round(1, "cosine")


@pytest.fixture(scope="module")
def rollouts():
    """GIVEN an untrained learner and the expert, WHEN episodes run at beta 0, 1 and 0.5 in worker processes."""
    torch.manual_seed(0)
    policy = Policy(PolicyConfig(), "cpu")
    with RolloutPool(SHORT, 2) as pool:
        out = {beta: pool.run([EpisodeRequest(seed=s, actor=Mixture(beta)) for s in (3, 4, 5)], policy, GroundTruthMasks(),
                              progress=False) for beta in (0.0, 1.0, 0.5)}
    return out


def test_labels_are_the_experts_on_the_learners_states(rollouts):
    # THEN at beta 0 the learner's actions were executed, and every stored label is what the expert
    # says in the stored simulator state (re-created here in another env)
    env = GraspEnv(SHORT)
    expert = Expert(SHORT.scene)
    try:
        for rec in rollouts[0.0]:
            a = rec.arrays
            assert not a["from_expert"].any()
            np.testing.assert_allclose(a["executed_action"], a["learner_action"], atol=1e-6)
            env.reset(rec.request.seed)
            for t in range(rec.length):
                env.set_state(a["state"][t])
                label, phase = expert.act(env.privileged())
                np.testing.assert_allclose(a["action"][t], label, atol=1e-4)
                assert a["phase"][t] == phase
            # the learner's actions are not the expert's: otherwise this test could not fail
            assert np.abs(a["learner_action"][:, :3] - a["action"][:, :3]).max() > 0.05
    finally:
        env.close()


def test_beta_one_rollouts_are_expert_demonstrations(rollouts):
    for rec in rollouts[1.0]:
        a = rec.arrays
        assert a["from_expert"].all() and rec.success
        np.testing.assert_array_equal(a["executed_action"], a["action"])


def test_mixed_rollouts_record_both_sources(rollouts):
    flags = np.concatenate([rec.arrays["from_expert"] for rec in rollouts[0.5]])
    assert 0 < flags.mean() < 1
    for rec in rollouts[0.5]:
        a = rec.arrays
        np.testing.assert_allclose(a["executed_action"][a["from_expert"]], a["action"][a["from_expert"]], atol=1e-6)
        learner = ~a["from_expert"]
        np.testing.assert_allclose(a["executed_action"][learner], a["learner_action"][learner], atol=1e-6)


class ConstantPolicy:
    """Always the same action: drives the gripper down into a workspace corner, away from the sphere."""

    def act(self, masks: np.ndarray, proprio: np.ndarray) -> np.ndarray:
        return np.tile([1.0, 1.0, -1.0, -1.0], (len(masks), 1))


def test_learner_rollouts_stop_after_the_allowed_blind_steps():
    requests = [EpisodeRequest(seed=s) for s in (1, 2)]
    env = EnvConfig(scene=SceneConfig(max_episode_steps=40))
    with RolloutPool(env, 2) as pool:
        full = pool.run(requests, ConstantPolicy(), GroundTruthMasks(), progress=False)
        cut = pool.run(requests, ConstantPolicy(), GroundTruthMasks(), progress=False, max_blind_steps=3)
    for f, c in zip(full, cut):
        assert f.length == 40 and not f.info["stopped_blind"]
        assert c.info["stopped_blind"] and not c.success and c.length < f.length
        visible = c.arrays["input_mask"].any(axis=(1, 2))
        assert visible[0] and not visible[-3:].any() and visible[-4]  # exactly 3 blind steps were labelled
        np.testing.assert_array_equal(c.arrays["action"], f.arrays["action"][: c.length])


class RecordingPolicy(ConstantPolicy):
    """ConstantPolicy that remembers which input masks it was shown."""

    def __init__(self) -> None:
        self.seen_pixels: list[int] = []

    def act(self, masks: np.ndarray, proprio: np.ndarray) -> np.ndarray:
        self.seen_pixels.extend(int(m.sum()) for m in masks)
        return super().act(masks, proprio)


def test_blind_start_blanks_only_the_controllers_first_masks():
    # GIVEN the same episodes with and without 4 blind first steps, WHEN the expert drives them (beta 0.5)
    policy = RecordingPolicy()
    with RolloutPool(SHORT, 1) as pool:
        plain = pool.run([EpisodeRequest(seed=7, actor=Mixture(0.5))], policy, GroundTruthMasks(), progress=False)[0]
        blind = pool.run([EpisodeRequest(seed=7, actor=Mixture(0.5, blind_start_prob=1.0, blind_start_steps=(4, 4)))],
                         policy, GroundTruthMasks(), progress=False)[0]
    # THEN the controller saw (and the dataset stores) empty masks for exactly the first 4 steps; the camera's
    # ground truth, the expert's labels and what was executed are unchanged
    gt = blind.arrays["sphere_mask"]
    assert gt[:4].any(axis=(1, 2)).all(), "the sphere is in view at the start: blanking it must show"
    assert not blind.arrays["input_mask"][:4].any()
    np.testing.assert_array_equal(blind.arrays["input_mask"][4:], gt[4:])
    np.testing.assert_array_equal(plain.arrays["input_mask"], plain.arrays["sphere_mask"])
    assert policy.seen_pixels[plain.length:plain.length + 4] == [0, 0, 0, 0]
    for key in ("sphere_mask", "action", "executed_action"):
        np.testing.assert_array_equal(blind.arrays[key], plain.arrays[key])


def test_a_failing_worker_raises_its_own_exception_in_the_main_process(tmp_path):
    """A worker's exception (here: a photo folder that does not exist) is raised by RolloutPool.run as itself,
    chained to the worker's traceback; the pool stays closable and nothing hangs."""
    from grasp_s2r.runtime.conditions import Condition
    from grasp_s2r.runtime.worker import WorkerError

    bad = Condition(name="bad", backgrounds=str(tmp_path / "no-such-photos"))
    with RolloutPool(SHORT, 1) as pool, pytest.raises(FileNotFoundError, match="no-such-photos") as e:
        pool.run([EpisodeRequest(seed=1, actor=EXPERT, condition=bad)], None, GroundTruthMasks(), progress=False)
    assert isinstance(e.value.__cause__, WorkerError) and "Traceback" in str(e.value.__cause__)
