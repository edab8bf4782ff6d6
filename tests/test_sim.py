"""The scene: rendering, masks, actions, state capture, one client per env."""

from __future__ import annotations

import numpy as np
import pybullet as pb
import pytest

from grasp_s2r.sim.camera import decode_segmentation
from grasp_s2r.sim.config import CameraConfig, EnvConfig, SceneConfig
from grasp_s2r.sim.env import ACTION_DIM, PROPRIO_NAMES, STATE_NAMES, GraspEnv


def test_decode_segmentation_splits_object_and_link():
    # GIVEN a buffer with background, a base link (-1) and link 9 of object 3
    seg = np.array([[-1, 5, 3 + ((9 + 1) << 24)]])
    # WHEN decoded
    uid, link = decode_segmentation(seg)
    # THEN uids and links come apart, background is -1
    assert uid.tolist() == [[-1, 5, 3]]
    assert link.tolist()[0][1:] == [-1, 9]


def test_render_shapes_and_sphere_mask_when_gripper_is_above_sphere(env):
    env.reset(seed=1)
    sphere = env.sphere_pos_world_m()
    env.robot.teleport(sphere + [0, 0, 0.06], env.config.scene.finger_open_m)
    frame = env.render()
    h, w = env.config.camera.height_px, env.config.camera.width_px
    assert frame.rgb.shape == (h, w, 3) and frame.rgb.dtype == np.uint8
    assert frame.sphere_mask.shape == (h, w) and frame.sphere_mask.dtype == bool
    # the sphere, 6 cm below the TCP, covers a compact blob of pixels near the image centre column
    ys, xs = np.nonzero(frame.sphere_mask)
    assert 10 <= len(ys) <= 200
    assert abs(xs.mean() - w / 2) < w / 4
    # its pixels carry the sphere colour, not the table's
    sphere_rgb = np.array(env.params.sphere_rgb) * 255
    mean_in = frame.rgb[frame.sphere_mask].mean(0)
    mean_out = frame.rgb[~frame.sphere_mask & ~frame.gripper_mask].mean(0)
    assert np.linalg.norm(mean_in - sphere_rgb) < np.linalg.norm(mean_out - sphere_rgb)
    # the fingers are in view
    assert frame.gripper_mask.sum() > 0.02 * h * w


def test_sphere_out_of_view_gives_empty_mask(env):
    env.reset(seed=2)
    sphere = env.sphere_pos_world_m()
    env.robot.teleport(sphere + [0.0, 0.15, 0.03], env.config.scene.finger_open_m)
    assert not env.render().sphere_mask.any()


def test_step_moves_tcp_by_bounded_displacement(env):
    env.reset(seed=3)
    before = env.robot.tcp_pos_world_m()
    r = env.step(np.array([0.0, 0.0, -1.0, -1.0]))
    moved = env.robot.tcp_pos_world_m() - before
    assert -env.config.scene.max_action_step_m * 1.05 < moved[2] < -0.5 * env.config.scene.max_action_step_m
    assert np.abs(moved[:2]).max() < 0.003
    assert r.proprio.shape == (len(PROPRIO_NAMES),) and not r.success and not r.terminated


def test_bad_action_shape_is_rejected(env):
    env.reset(seed=0)
    with pytest.raises(ValueError, match="shape"):
        env.step(np.zeros(ACTION_DIM + 1))


def test_step_budget_truncates():
    with GraspEnv(EnvConfig(scene=SceneConfig(max_episode_steps=3))) as e:
        e.reset(0)
        flags = [e.step(np.zeros(ACTION_DIM)).truncated for _ in range(3)]
    assert flags == [False, False, True]


def test_state_restore_rerenders_the_same_image(env):
    env.reset(seed=5)
    for _ in range(4):
        env.step(np.array([0.3, -0.2, -0.8, -1.0]))
    state, rgb = env.get_state(), env.render().rgb
    assert state.shape == (len(STATE_NAMES),)
    env.step(np.array([1.0, 1.0, 1.0, 1.0]))
    assert not np.array_equal(env.render().rgb, rgb)
    env.set_state(state)
    np.testing.assert_array_equal(env.render().rgb, rgb)


def test_two_envs_in_one_process_are_independent():
    a, b = GraspEnv(), GraspEnv()
    try:
        assert a.client != b.client
        a.reset(seed=10)
        b.reset(seed=11)
        pos_b = b.sphere_pos_world_m()
        for _ in range(3):
            a.step(np.array([0.0, 0.0, -1.0, 1.0]))
        np.testing.assert_array_equal(b.sphere_pos_world_m(), pos_b)
        assert not pb.isConnected(-5)
    finally:
        a.close()
        b.close()
    assert not pb.isConnected(a.client)


def test_config_rejects_bad_values():
    with pytest.raises(ValueError):
        CameraConfig(width_px=2)
    with pytest.raises(ValueError):
        SceneConfig(sphere_diameter_m=0.2)
    cfg = EnvConfig()
    assert EnvConfig.from_dict(cfg.to_dict()) == cfg


def test_randomization_changes_visuals_between_seeds(env):
    env.reset(seed=20)
    p20, rgb20 = env.params, env.render().rgb
    env.reset(seed=21)
    assert env.params != p20
    assert not np.array_equal(env.render().rgb, rgb20)
