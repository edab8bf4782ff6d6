"""GraspAgent: the trained view, loading errors, the shared learner step, and grasps driven from a plain loop."""

from __future__ import annotations

import json
import math
import subprocess
import sys
import time
from pathlib import Path

import cv2
import numpy as np
import pytest
import torch

from grasp_s2r.agent import AgentError, GraspAgent, fit_to_trained_view
from grasp_s2r.control import seeds
from grasp_s2r.control.memory import episode_memory_features
from grasp_s2r.control.policy import Policy, PolicyConfig
from grasp_s2r.control.train import LabelSet, PolicyTrainConfig, fit
from grasp_s2r.expert.fsm import Expert
from grasp_s2r.learner import SegmenterMasks, learner_step
from grasp_s2r.sim.config import CameraConfig, control_env_config
from grasp_s2r.sim.env import GraspEnv
from grasp_s2r.vision.networks.segmenter import Segmenter, default_checkpoint_path

ROOT = Path(__file__).resolve().parents[1]


def _dot_image(h: int, w: int, vfov_deg: float, angle_x_deg: float, angle_y_deg: float) -> np.ndarray:
    """A black (h, w) image with a white dot (about one trained pixel wide) where a ray at these angles lands."""
    f = (h / 2) / math.tan(math.radians(vfov_deg) / 2)
    u = w / 2 + f * math.tan(math.radians(angle_x_deg))
    v = h / 2 + f * math.tan(math.radians(angle_y_deg))
    img = np.zeros((h, w, 3), np.uint8)
    r = max(1, h // 64)
    img[int(v) - r:int(v) + r + 1, int(u) - r:int(u) + r + 1] = 255
    return img


def _expected_px(angle_deg: float, size: int = 64, fov_deg: float = 60.0) -> float:
    return size / 2 + (size / 2) / math.tan(math.radians(fov_deg) / 2) * math.tan(math.radians(angle_deg))


def test_any_camera_is_brought_to_the_trained_field_of_view():
    cam = CameraConfig()
    for (h, w, vfov) in ((480, 640, 90.0), (300, 300, 75.0), (720, 1280, 60.0)):
        out = fit_to_trained_view(_dot_image(h, w, vfov, 12.0, -18.0), cam, vfov)
        assert out.shape == (64, 64, 3) and out.dtype == np.uint8
        ys, xs = np.nonzero(out[:, :, 0] > 0)
        centre = np.average(xs, weights=out[ys, xs, 0]) + 0.5, np.average(ys, weights=out[ys, xs, 0]) + 0.5
        assert centre[0] == pytest.approx(_expected_px(12.0), abs=1.0), (h, w, vfov)
        assert centre[1] == pytest.approx(_expected_px(-18.0), abs=1.0), (h, w, vfov)
    sim = np.random.default_rng(0).integers(0, 256, (64, 64, 3), dtype=np.uint8)
    np.testing.assert_array_equal(fit_to_trained_view(sim, cam), sim)  # the trained camera: untouched
    np.testing.assert_array_equal(fit_to_trained_view(sim / 255.0, cam), sim)  # float in [0, 1] accepted
    assert fit_to_trained_view(np.zeros((480, 640, 3), np.uint8), cam).shape == (64, 64, 3)  # no FOV: centre square
    with pytest.raises(AgentError, match="does not cover"):
        fit_to_trained_view(np.zeros((480, 640, 3), np.uint8), cam, camera_vfov_deg=40.0)
    with pytest.raises(AgentError, match="RGB"):
        fit_to_trained_view(np.zeros((64, 64), np.uint8), cam)


def test_load_errors_are_one_line_naming_the_file(tmp_path):
    with pytest.raises(AgentError, match="no controller checkpoint at"):
        GraspAgent.load(controller=tmp_path / "missing.pt", device="cpu")
    with pytest.raises(AgentError, match="not a controller checkpoint"):  # a segmenter is not a controller
        GraspAgent.load(controller=default_checkpoint_path(), device="cpu")


def _expert_labels(env: GraspEnv, segmenter: Segmenter, episodes: int) -> LabelSet:
    """Expert episodes (seeds 100..): the segmenter's masks of their images, proprio, the expert's actions."""
    expert = Expert(env.config.scene)
    masks, proprio, actions, memory = [], [], [], []
    for i in range(episodes):
        r, rgb, ep_proprio, ep_actions = env.reset(100 + i), [], [], []
        while not (r.terminated or r.truncated):
            a, _ = expert.act(env.privileged())
            rgb.append(r.frame.rgb)
            ep_proprio.append(r.proprio)
            ep_actions.append(a)
            r = env.step(a)
        masks.append(segmenter.predict(np.stack(rgb)))
        memory.append(episode_memory_features(masks[-1], np.stack(ep_proprio), np.stack(ep_actions)))
        proprio += ep_proprio
        actions += ep_actions
    return LabelSet(np.concatenate(masks), np.stack(proprio).astype(np.float32), np.stack(actions).astype(np.float32),
                    np.concatenate(memory))


@pytest.fixture(scope="module")
def controller(tmp_path_factory) -> Path:
    """A controller behaviour-cloned on 24 expert episodes over the shipped segmenter's masks (~10 s)."""
    torch.set_num_threads(1)
    env_config = control_env_config()
    segmenter = Segmenter.load(default_checkpoint_path(), device="cpu")
    with GraspEnv(env_config) as env:
        labels = _expert_labels(env, segmenter, 24)
    torch.manual_seed(0)
    policy = Policy(PolicyConfig(), "cpu")
    fit(policy, labels, PolicyTrainConfig(steps=800), np.random.default_rng(0), progress=False)
    path = tmp_path_factory.mktemp("agent") / "policy.pt"
    policy.save(path, {"config": {"env": env_config.to_dict()}, "round": 0, "kind": "bc"})
    return path


def test_act_is_the_shared_learner_step(controller):
    agent = GraspAgent.load(controller=controller, device="cpu")
    with GraspEnv(agent.env) as env:
        obs = [env.reset(7 + i) for i in range(3)]
    rgb = np.stack([o.frame.rgb for o in obs])
    proprio = np.stack([o.proprio for o in obs])
    agent.reset()
    step = agent.act(rgb[0], proprio[0])
    expected = agent.policy.act(agent.segmenter.predict(rgb[:1]), proprio[:1])[0]
    np.testing.assert_array_equal(step.action, expected)
    np.testing.assert_allclose(step.delta_m, expected[:3] * agent.scene.max_action_step_m)
    assert step.close_gripper == (expected[3] > 0) and step.mask.shape == (64, 64) and step.mask.dtype == bool
    assert set(step.timings_ms) == {"preprocess", "segment", "filter", "control", "total"} and agent.steps == 1
    batch = agent.act_batch(rgb, proprio)
    for i in range(3):
        np.testing.assert_allclose(batch[i].action, agent.act(rgb[i], proprio[i]).action, atol=1e-6)
    big = cv2.resize(rgb[0], (256, 256), interpolation=cv2.INTER_NEAREST)  # a camera 4x the resolution
    np.testing.assert_array_equal(agent.act(big, proprio[0]).image, rgb[0])
    with pytest.raises(AgentError, match="proprio"):
        agent.act(rgb[0], proprio[0][:3])


def test_learner_step_blanks_and_queries_rows():
    class Echo:
        def act(self, masks, proprio):
            return np.stack([np.full(4, m.sum(), float) for m in masks])

    gt = np.ones((3, 8, 8), bool)

    def source(rgb, gt_mask):
        return gt_mask

    out = learner_step(source, Echo(), np.zeros((3, 8, 8, 3), np.uint8), np.zeros((3, 5)), gt_mask=gt,
                       blank=np.array([False, True, False]), query=[0, 1])
    assert out.masks[1].sum() == 0 and gt.all(), "blanking copies; the source is untouched"
    assert out.actions[0, 0] == 64 and out.actions[1, 0] == 0 and np.isnan(out.actions[2]).all()
    none = learner_step(source, None, np.zeros((2, 8, 8, 3), np.uint8), np.zeros((2, 5)), gt_mask=gt[:2], query=[])
    assert np.isnan(none.actions).all() and none.control_ms == 0.0
    assert isinstance(SegmenterMasks(None).kind, str)


def test_agent_grasps_from_a_plain_loop_of_images_and_proprio(controller):
    """The loop passes only the camera image and proprio to the agent; the simulator plays the real world."""
    torch.set_num_threads(1)
    agent = GraspAgent.load(controller=controller, device="cpu")
    successes, latency = 0, []
    with GraspEnv(control_env_config()) as world:
        for i in range(10):
            r = world.reset(seeds.TEST_BASE + i)
            agent.reset()
            while not (r.terminated or r.truncated):
                t0 = time.perf_counter()
                step = agent.act(r.frame.rgb, r.proprio)
                latency.append(1e3 * (time.perf_counter() - t0))
                r = world.step(step.action)
            successes += r.success
    assert successes >= 9, f"{successes}/10 grasps"
    print(f"\nGraspAgent: {successes}/10 grasps, latency per call median {np.median(latency):.1f} ms "
          f"(p90 {np.percentile(latency, 90):.1f} ms, {len(latency)} calls, 1 CPU thread)")


def test_example_script_drives_the_agent_from_saved_frames(controller, tmp_path):
    frames = ROOT / "examples" / "wrist_frames.npz"
    latency = tmp_path / "latency.json"  # not the README's benchmarks/results/real_robot_loop.json
    cmd = [sys.executable, str(ROOT / "examples" / "real_robot_loop.py"), "--controller", str(controller),
           "--frames", str(frames), "--steps", "5", "--bench", "20", "--json", str(latency)]
    out = subprocess.run(cmd, check=False, capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout.count("command:") == 5 and "latency per call" in out.stdout
    figures = json.loads(latency.read_text())["figures"]
    assert figures["calls"] == 20 and 0 < figures["total_median_ms"] <= figures["total_p90_ms"]
    missing = subprocess.run([sys.executable, str(ROOT / "examples" / "real_robot_loop.py"), "--controller",
                              "/nonexistent/policy.pt"], check=False, capture_output=True, text=True, timeout=120)
    assert missing.returncode == 2 and len(missing.stderr.strip().splitlines()) == 1


def test_a_controller_is_run_through_the_camera_it_was_trained_on():
    from grasp_s2r.agent import default_controller_path
    from grasp_s2r.control.policy import Policy, trained_scene

    # GIVEN the shipped controller's checkpoint, and the same with its run's camera at 96 px
    _, blob = Policy.load(default_controller_path(), "cpu")
    assert trained_scene(blob).camera.height_px == GraspAgent.load().camera.height_px == 64
    wide = {**blob, "config": {**blob["config"], "env": {**blob["config"]["env"],
                                                        "camera": {**blob["config"]["env"]["camera"],
                                                                   "width_px": 96, "height_px": 96}}}}
    # WHEN its scene is read, THEN the camera is the run's; a checkpoint without its run's config: the default scene
    assert (trained_scene(wide).camera.width_px, trained_scene(wide).camera.height_px) == (96, 96)
    assert trained_scene({}).camera.height_px == CameraConfig().height_px


def test_the_controller_scene_through_a_wider_camera_keeps_its_field_of_view_and_tolerance():
    # GIVEN the controller's scene, and the same through a 96 px camera
    base, wide = control_env_config(), control_env_config(camera_px=96)
    # THEN only the camera's size differs: its field of view, mount and the calibration tolerance stay
    assert (wide.camera.width_px, wide.camera.height_px) == (96, 96) and base.camera.height_px == 64
    assert wide.camera.fov_deg == base.camera.fov_deg and wide.randomization == base.randomization
    assert wide.replace(camera=base.camera) == base
