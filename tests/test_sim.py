"""The scene: rendering, masks, actions, state capture, one client per env."""

from __future__ import annotations

import numpy as np
import pybullet as pb
import pytest

from grasp_s2r.expert.fsm import Expert
from grasp_s2r.sim.camera import decode_segmentation
from grasp_s2r.sim.config import CameraConfig, EnvConfig, SceneConfig
from grasp_s2r.sim.env import ACTION_DIM, PROPRIO_NAMES, STATE_NAMES, GraspEnv
from grasp_s2r.sim.robot import substep_gain


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
        client_a, client_b = a.client, b.client
        assert pb.isConnected(client_a) and pb.isConnected(client_b)
        a.close()  # closing one disconnects its own client only
        assert not pb.isConnected(client_a) and pb.isConnected(client_b)
    finally:
        a.close()
        b.close()
    assert not pb.isConnected(client_b)


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


def test_a_scene_saved_before_issue_16_loads_the_physics_it_was_made_with():
    # GIVEN a config dict as the code before issue 16 saved it: every scene field of then, 240 Hz physics
    old = EnvConfig().to_dict()
    for name in ("free_space_physics_hz", "constraint_solver", "contact_breaking_threshold",
                 "deterministic_overlapping_pairs", "ik_iterations"):
        del old["scene"][name]
    old["scene"]["physics_hz"] = 240.0
    # WHEN loaded, THEN it runs the physics of then; a partial dict gets today's defaults
    assert EnvConfig.from_dict(old).scene == SceneConfig().with_pre_issue_16_physics()
    assert EnvConfig.from_dict({"scene": {"physics_hz": 120.0}}).scene.constraint_solver == "dantzig"
    with pytest.raises(ValueError, match="constraint_solver"):
        SceneConfig(constraint_solver="lemke")


def test_motor_gains_close_the_same_share_of_the_error_in_one_control_step_at_any_rate():
    assert substep_gain(0.1, 24) == 0.1  # the reference rate keeps its gains exactly
    for substeps in (4, 6, 12):
        assert (1 - substep_gain(0.1, substeps)) ** substeps == pytest.approx(0.9**24)


def episode_arrays(env, seed, other=None):
    """States and images of an expert episode; ``other`` (an env) steps in between, as another env would."""
    expert = Expert(env.config.scene)
    r, out = env.reset(seed), []
    while not (r.terminated or r.truncated):
        r = env.step(expert.act(env.privileged())[0])
        out.append((env.get_state(), r.frame.rgb))
        if other is not None:
            other.step(np.array([0.0, 0.0, -1.0, 1.0]))
    return out


def test_same_seed_same_episode_even_next_to_an_env_with_other_physics():
    # Bullet's contact breaking threshold is one number per process: each env sets its own before it simulates
    with GraspEnv() as a, GraspEnv(EnvConfig(scene=SceneConfig().with_pre_issue_16_physics())) as b:
        first = episode_arrays(a, seed=30)
        b.reset(seed=31)
        second = episode_arrays(a, seed=30, other=b)
    assert len(first) == len(second)
    for (s1, rgb1), (s2, rgb2) in zip(first, second):
        np.testing.assert_array_equal(s1, s2)
        np.testing.assert_array_equal(rgb1, rgb2)


def test_free_space_steps_move_the_arm_as_contact_rate_steps_do():
    # GIVEN two envs, one simulating free space at 10 Hz (1 substep), one always at 40 Hz (4 substeps)
    with GraspEnv() as fast, GraspEnv(EnvConfig(scene=SceneConfig(free_space_physics_hz=40.0))) as full:
        for e in (fast, full):
            e.reset(seed=3)
        assert not fast.contact_possible()  # the start pose is 18 cm above the table
        # WHEN both take the same free-space steps, THEN the arm ends in the same place (exact velocity motors)
        for action in ([1.0, -0.5, -1.0, -1.0], [-0.3, 0.8, 0.2, 1.0], [0.0, 0.0, 1.0, -1.0]):
            for e in (fast, full):
                e.step(np.array(action))
            np.testing.assert_allclose(fast.robot.joint_state()[:7], full.robot.joint_state()[:7], atol=1e-9)
        # and over the sphere the step runs at the contact rate
        fast.robot.teleport(fast.sphere_pos_world_m() + [0.0, 0.0, 0.03], fast.config.scene.finger_open_m)
        assert fast.contact_possible()
