"""GraspAgent's inputs from a robot, with the shipped weights: what a driver gets wrong is one line (AgentError), and
a refused step leaves the episode as it was."""

from __future__ import annotations

import re

import numpy as np
import pytest
import torch

from grasp_s2r.agent import AgentError, GraspAgent
from grasp_s2r.agent_inputs import proprio_rows
from grasp_s2r.sim.env import PROPRIO_NAMES, PROPRIO_RANGES, GraspEnv


@pytest.fixture(scope="module")
def agent() -> GraspAgent:
    return GraspAgent.load(device="cpu")


@pytest.fixture(scope="module")
def frame(agent):
    """A wrist image (uint8 64x64) and its proprio from a real episode start."""
    with GraspEnv(agent.env) as env:
        r = env.reset(3)
    return r.frame.rgb, np.asarray(r.proprio, np.float64)


def test_the_ranges_cover_every_proprio_field():
    assert set(PROPRIO_RANGES) == set(PROPRIO_NAMES)


@pytest.mark.parametrize("change, message", [
    (lambda p: np.r_[p[:2], np.nan, p[3:]], "tcp_z_above_table_m = nan is not finite"),
    (lambda p: np.r_[p[:3], np.inf, p[4:]], "finger_gap_m = inf is not finite"),
    (lambda p: p * np.array([1000, 1000, 1000, 1000, 1]), "(metres: millimetres given?)"),
    (lambda p: np.r_[p[:4], 5.0], "gripper_closed = 5 is outside [0, 1]"),
    (lambda p: np.r_[p[:2], -0.5, p[3:]], "tcp_z_above_table_m = -0.5 is outside"),
    (lambda p: p[:4], "got shape (1, 4)"),
    (lambda p: p[None], "act takes one proprio reading of shape (5,), got shape (1, 5): act_batch takes batches"),
    (lambda p: [str(v) for v in p], "proprio must be numbers"),
    (lambda p: None, "proprio is None"),
    (lambda p: {"z": 0.1}, "got a dict"),
])
def test_bad_proprio_is_one_line_and_leaves_the_episode_as_it_was(agent, frame, change, message):
    rgb, p = frame
    agent.reset()
    expected = agent.act(rgb, p).action
    agent.reset()
    with pytest.raises(AgentError, match=re.escape(message)):
        agent.act(rgb, change(p.copy()))
    assert agent.steps == 0 and agent.blind_steps == 0
    np.testing.assert_array_equal(agent.act(rgb, p).action, expected)  # nothing of the refused step stayed


@pytest.mark.parametrize("image, message", [
    (lambda im: im.astype(np.float32), "a float image must be in [0, 1], got values in"),
    (lambda im: np.where(im > 128, np.nan, im / 255.0), "NaN or infinite pixels"),
    (lambda im: im[None], "act takes one RGB image (H, W, 3), got a batch"),
    (lambda im: np.ascontiguousarray(im.transpose(2, 0, 1)), "channels first? transpose it"),
    (lambda im: im[:0], "the image has no pixels"),
    (lambda im: im[:8, :8], "under a quarter of the 64x64 px"),
    (lambda im: None, "the image is None"),
    (lambda im: torch.tensor(im / 255.0, requires_grad=True), ".detach().cpu().numpy()"),
])
def test_bad_images_are_one_line(agent, frame, image, message):
    rgb, p = frame
    agent.reset()
    with pytest.raises(AgentError, match=re.escape(message)):
        agent.act(image(rgb), p)


def test_images_a_driver_gives_in_other_forms_act_as_the_uint8_one(agent, frame):
    rgb, p = frame
    agent.reset()
    expected = agent.act(rgb, p).action
    for other in (rgb / 255.0, (rgb / 255.0).astype(np.float16), torch.from_numpy(rgb), rgb[:, ::-1][:, ::-1]):
        agent.reset()
        np.testing.assert_array_equal(agent.act(other, torch.from_numpy(p)).action, expected)


def test_the_camera_and_device_are_checked_when_the_agent_is_made(tmp_path):
    for vfov, message in ((50.0, "sees less than the trained 60°"), (1.3, "degrees, not radians"),
                          (0.0, r"in \(0, 180\)"), (float("nan"), r"in \(0, 180\)"), ("wide", "a number of degrees")):
        with pytest.raises(AgentError, match=message):
            GraspAgent.load(device="cpu", camera_vfov_deg=vfov)
    with pytest.raises(AgentError, match="'gpu' is not a torch device"):
        GraspAgent.load(device="gpu")
    if not torch.cuda.is_available():
        with pytest.raises(AgentError, match="no CUDA GPU is usable here"):
            GraspAgent.load(device="cuda")
    run = tmp_path / "dagger"
    run.mkdir()
    (run / "policy.pt").write_bytes(b"")
    with pytest.raises(AgentError, match=r"is a folder, not a checkpoint file \(a DAgger run's is DIR/policy.pt\)"):
        GraspAgent.load(controller=run, device="cpu")


def test_act_batch_refuses_memory_and_filters_that_do_not_fit_its_streams(agent, frame):
    rgb, p = frame
    images, proprio = np.stack([rgb, rgb]), np.stack([p, p])
    with pytest.raises(AgentError, match=r"memory must be \(N, \d+\)"):
        agent.act_batch(images, proprio, memory=np.zeros((2, 3), np.float32))
    memory = np.stack([agent.memory.features()] * 2)
    with pytest.raises(AgentError, match="1 mask_filters for 2 streams"):
        agent.act_batch(images, proprio, memory=memory, mask_filters=[None])
    with pytest.raises(AgentError, match=r"proprio\[1\] tcp_x_world_m = nan"):
        agent.act_batch(images, np.stack([p, np.r_[np.nan, p[1:]]]), memory=memory)
    assert len(agent.act_batch(images, proprio, memory=memory)) == 2


def test_proprio_at_the_edges_of_its_ranges_passes():
    lo = np.array([PROPRIO_RANGES[n][0] for n in PROPRIO_NAMES])
    hi = np.array([PROPRIO_RANGES[n][1] for n in PROPRIO_NAMES])
    assert proprio_rows(np.stack([lo, hi])).dtype == np.float32
