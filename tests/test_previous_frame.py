"""A segmenter that reads the previous frame warped onto the image: the network, the per-episode warper, and the
runtime that hands it the frames (batched rollouts and GraspAgent)."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from grasp_s2r.agent import AgentError, GraspAgent, default_controller_path
from grasp_s2r.control.policy import Policy
from grasp_s2r.control.wrist_geometry import PreviousFrame
from grasp_s2r.runtime.conditions import CONDITIONS
from grasp_s2r.runtime.masks import PredictedMasks
from grasp_s2r.runtime.pool import RolloutPool
from grasp_s2r.runtime.records import EpisodeRequest
from grasp_s2r.sim.config import CameraConfig, control_env_config
from grasp_s2r.vision.networks.model import UNet, two_frame_input
from grasp_s2r.vision.networks.segmenter import Segmenter, default_checkpoint_path, read_checkpoint
from grasp_s2r.vision.networks.widen import load_widened


def _two_frame(shipped: dict, previous: str = "frame") -> Segmenter:
    """The shipped segmenter widened to read the previous frame (its weights for it zero: the same function)."""
    kwargs = {**shipped["arch_kwargs"], "previous": previous}
    plain = Segmenter.from_checkpoint(shipped, "cpu").model
    wide = UNet(**kwargs)
    load_widened(wide, plain.state_dict())
    return Segmenter.from_checkpoint({**shipped, "arch_kwargs": kwargs, "state_dict": wide.state_dict()}, "cpu")


@pytest.fixture(scope="module")
def shipped() -> dict:
    return read_checkpoint(default_checkpoint_path())


def test_unet_reads_six_channels_and_refuses_both_extras():
    net = UNet(width=4, depth=2, previous=True).eval()
    assert net.previous == "frame" and UNet(width=4, depth=2).previous == ""
    assert net(torch.zeros(2, 6, 32, 32)).shape == (2, 1, 32, 32)
    with pytest.raises(RuntimeError):
        net(torch.zeros(2, 3, 32, 32))
    with pytest.raises(ValueError, match="not both"):
        UNet(previous=True, anomaly=1)
    with pytest.raises(ValueError, match="previous must be"):
        UNet(previous="motion")


def test_two_frame_input_is_the_frame_or_the_difference():
    now, before = torch.rand(2, 3, 8, 8), torch.rand(2, 3, 8, 8)
    torch.testing.assert_close(two_frame_input(now, before, "frame"), torch.cat([now, before], 1))
    diff = two_frame_input(now, now, "difference")
    torch.testing.assert_close(diff[:, :3], now)
    assert diff[:, 3:].abs().max() == 0  # lined up: nothing to read
    with pytest.raises(ValueError):
        two_frame_input(now, before, "")


def test_widened_segmenter_starts_as_the_plain_one_whatever_the_previous_frame(shipped):
    plain, two = Segmenter.from_checkpoint(shipped, "cpu"), _two_frame(shipped)
    assert two.reads_previous and not plain.reads_previous
    rng = np.random.default_rng(0)
    rgb = rng.integers(0, 256, (3, 64, 64, 3), dtype=np.uint8)
    other = rng.integers(0, 256, (3, 64, 64, 3), dtype=np.uint8)
    expected = plain.predict_proba(rgb)
    np.testing.assert_allclose(two.predict_proba(rgb), expected, atol=1e-5)
    np.testing.assert_allclose(two.predict_proba(rgb, other), expected, atol=1e-5)
    # once trained, the previous frame counts: a network that reads only it
    with torch.no_grad():
        first = two.model.down[0][0].weight
        first[:, 3:] = first[:, :3].clone()
        first[:, :3] = 0.0
    assert not np.allclose(two.predict_proba(rgb, other), two.predict_proba(rgb), atol=1e-3)
    with pytest.raises(ValueError, match="previous frames"):
        two.predict(rgb, other[:2])
    assert two.predict(rgb[0], other[0]).shape == (64, 64)


def test_previous_frame_warps_the_last_image_and_forgets_on_reset():
    camera = CameraConfig()
    warper = PreviousFrame(camera)
    first = np.full((64, 64, 3), 10, np.uint8)
    second = np.full((64, 64, 3), 200, np.uint8)
    proprio = np.array([0.0, 0.0, 0.12, 0.04, 0.0], np.float32)
    np.testing.assert_array_equal(warper.warped(first, proprio), first)  # the first frame: itself
    still = warper.warped(second, proprio)  # not moved: the last frame as it was, where the view meets the table
    assert (still == 10).all(-1).mean() > 0.9 and ((still == 10) | (still == 200)).all()
    moved = proprio + np.array([0.02, 0.0, 0.0, 0.0, 0.0], np.float32)
    out = warper.warped(first, moved)  # 2 cm on: part of the view was outside the last frame, filled by this one
    assert 0.5 < (out == 200).all(-1).mean() < 0.98 and (out == 10).all(-1).any()
    warper.reset()
    np.testing.assert_array_equal(warper.warped(second, proprio), second)


def test_rollouts_hand_a_two_frame_segmenter_the_warped_frames(shipped):
    """With the zero-initialised widening the episodes are those of the plain segmenter: the runtime hands the
    network its previous frames without changing anything else."""
    cond = CONDITIONS["table-photo"]
    requests = [EpisodeRequest(seed=950_000 + i, condition=cond) for i in range(2)]
    policy = Policy.load(default_controller_path(), "cpu")[0]
    runs = []
    with RolloutPool(control_env_config(), 1) as pool:
        for seg in (Segmenter.from_checkpoint(shipped, "cpu"), _two_frame(shipped, "difference")):
            recs = pool.run(requests, policy, PredictedMasks(seg), record=lambda i: True)
            runs.append([(r.success, np.asarray(r.arrays["input_mask"])) for r in recs])
    for (ok_a, masks_a), (ok_b, masks_b) in zip(*runs):
        assert ok_a == ok_b
        assert masks_a.shape == masks_b.shape and (masks_a != masks_b).mean() < 1e-3


def test_grasp_agent_keeps_the_previous_frame(shipped):
    base = GraspAgent.load()
    agent = GraspAgent(segmenter=_two_frame(shipped), policy=base.policy, env=base.env)
    rgb = np.random.default_rng(1).integers(0, 256, (64, 64, 3), dtype=np.uint8)
    proprio = np.array([0.0, 0.0, 0.12, 0.04, 0.0], np.float32)
    assert agent.act(rgb, proprio).mask.shape == (64, 64)
    assert agent.act(rgb, proprio).action.shape == (4,)
    with pytest.raises(AgentError, match="previous_frames"):
        agent.act_batch(rgb[None], proprio[None], memory=agent.memory.features()[None])
