"""Rolling lead: a sphere rolling along the table is tracked from the mask, and its step added to the controller's."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest
from masks import disc

from grasp_s2r.control.lead import RollingLead
from grasp_s2r.control.parallax import SHIPPED, ParallaxConfig, ParallaxFilter
from grasp_s2r.control.wrist_geometry import WristView
from grasp_s2r.sim.config import CameraConfig, SceneConfig, control_env_config

CAMERA, SCENE = CameraConfig(), SceneConfig()
TCP = np.array([0.0, 0.0, 0.04])
"""The TCP of these tests: 4 cm above the table, still."""


def _proprio(tcp_xyz, closed=False):
    return np.array([*tcp_xyz, 0.0 if closed else 2 * SCENE.finger_open_m, float(closed)], dtype=np.float32)


def _seen(sphere_xy, tcp_xyz=TCP, radius_px=4.0):
    """The sphere's mask: a disc where the camera sees its centre (``radius_m`` above the table at ``sphere_xy``)."""
    view = WristView.at(np.asarray(tcp_xyz, dtype=float), CAMERA)
    d = np.array([*sphere_xy, SCENE.sphere_radius_m]) - view.eye
    depth = d @ view.forward
    tx = np.tan(np.radians(CAMERA.fov_deg) / 2) * CAMERA.width_px / CAMERA.height_px
    ty = np.tan(np.radians(CAMERA.fov_deg) / 2)
    col = ((d @ view.right) / depth / tx + 1) * CAMERA.width_px / 2 - 0.5
    row = (1 - (d @ view.up) / depth / ty) * CAMERA.height_px / 2 - 0.5
    return disc((col, row), radius_px, CAMERA)


def test_the_plane_of_the_sphere_centre_meets_the_ray_nearer_the_camera():
    view = WristView.at(TCP, CAMERA)
    pixel = np.array([20.0, 40.0])
    on_table, _ = view.table_xy(pixel)
    above, _ = view.table_xy(pixel, SCENE.sphere_radius_m)
    eye = view.eye[:2]
    # the same ray, cut higher: nearer the eye in x, y by the heights' ratio
    ratio = (view.eye[2] - SCENE.sphere_radius_m) / view.eye[2]
    np.testing.assert_allclose(above - eye, ratio * (on_table - eye), atol=1e-9)


def test_a_sphere_rolling_2_mm_a_step_is_tracked_and_led():
    lead = RollingLead(SCENE, CAMERA, frames=3)
    step = np.array([0.0015, -0.0015])  # 2.1 mm a step, as a slipped sphere rolls (about 2 cm/s)
    start = np.array([0.005, 0.002])
    action = np.array([0.1, 0.0, -1.0, -1.0])
    for k in range(3):
        assert lead.adjust(action) is None  # no track yet
        lead.update(_seen(start + k * step), _proprio(TCP))
    np.testing.assert_allclose(lead.step_m(), step, atol=3e-4)  # the discs' pixels blur it a little
    led = lead.adjust(action)
    np.testing.assert_allclose(led[:2], action[:2] + lead.step_m() / SCENE.max_action_step_m)
    assert (led[2:] == action[2:]).all() and lead.leads == 1


@pytest.mark.parametrize("case", ["still", "closed", "high", "lure", "gap", "reset"])
def test_no_lead_at_rest_closed_high_on_a_jump_after_a_gap_or_in_a_new_episode(case):
    lead = RollingLead(SCENE, CAMERA, frames=3)
    step = np.zeros(2) if case == "still" else np.array([0.002, 0.0])
    tcp = TCP + ([0, 0, 0.06] if case == "high" else 0)  # 10 cm up
    for k in range(3):
        xy = np.array([0.004, 0.0]) + k * step
        if case == "lure" and k == 1:
            xy = xy + [0.0, 0.02]  # a blob 2 cm off the track in between
        mask = _seen(xy, tcp)
        if case == "gap" and k == 1:
            mask = np.zeros_like(mask)
        lead.update(mask, _proprio(tcp, closed=case == "closed"))
    if case == "reset":
        assert lead.step_m() is not None
        lead.reset()
    assert lead.step_m() is None and lead.adjust(np.zeros(4)) is None


def test_the_shipped_filter_leads_through_its_action_and_a_config_without_it_does_not():
    assert ParallaxConfig().lead_frames == 0 and SHIPPED.lead_frames == 3
    with pytest.raises(ValueError, match="lead_frames"):
        ParallaxConfig(lead_frames=1)
    f = ParallaxFilter(SCENE, CAMERA, SHIPPED)
    step = np.array([0.0, 0.002])
    action = np.array([0.0, 0.0, -0.5, -1.0])
    for k in range(3):
        assert f.action(_proprio(TCP), action) is None
        f.filter(_seen(np.array([0.0, 0.004]) + k * step), _proprio(TCP))
    assert f.action(_proprio(TCP), action)[1] == pytest.approx(0.1, abs=0.02)  # 2 mm of a 20 mm full step
    assert f.action(_proprio(TCP)) is None  # no controller action given: nothing to lead
    off = ParallaxFilter(SCENE, CAMERA, dataclasses.replace(SHIPPED, lead_frames=0))
    for k in range(3):
        off.filter(_seen(np.array([0.0, 0.004]) + k * step), _proprio(TCP))
    assert off.action(_proprio(TCP), action) is None


def test_a_sphere_rolling_in_pybullet_is_tracked_from_its_rendered_mask():
    """The env's own renders and states: the arm held 5 cm above a sphere set rolling at 2 cm/s; the lead's step
    from the true masks is the sphere's own step on the table."""
    import pybullet as pb

    from grasp_s2r.expert.fsm import action_towards
    from grasp_s2r.sim.env import GraspEnv

    cfg = control_env_config()
    scene = cfg.scene
    lead = RollingLead(scene, cfg.camera, frames=4)
    with GraspEnv(cfg) as env:
        env.reset(seed=0)
        for _ in range(15):  # down to 5 cm above the sphere, fingers open
            tcp = env.proprio()[:3]
            target = np.array([*env.sphere_pos_world_m()[:2], 0.05])
            env.step(action_towards(tcp, target, False, 0.9, scene.max_action_step_m))
        spin = 0.02 / scene.sphere_radius_m
        pb.resetBaseVelocity(env.sphere_uid, [0.0, 0.02, 0.0], [-spin, 0.0, 0.0], physicsClientId=env.client)
        hold = np.array([0.0, 0.0, 0.0, -1.0])
        xy = []
        for _ in range(4):
            result = env.step(hold)
            lead.update(result.frame.sphere_mask, result.proprio)
            xy.append(env.sphere_pos_world_m()[:2])
    true_step = np.diff(np.array(xy), axis=0).mean(0)
    assert np.hypot(*true_step) > 0.001  # it rolls
    np.testing.assert_allclose(lead.step_m(), true_step, atol=5e-4)


def test_the_agent_adds_the_rolling_spheres_step_to_its_controllers_action():
    """``GraspAgent.act`` on PyBullet's renders of a rolling sphere, shipped (with the lead) and without the lead: the
    same actions until the lead has 3 frames, then the led one's x, y ahead by the sphere's step."""
    import pybullet as pb
    import torch

    from grasp_s2r.agent import GraspAgent
    from grasp_s2r.expert.fsm import action_towards
    from grasp_s2r.sim.env import GraspEnv

    torch.set_num_threads(1)
    led = GraspAgent.load(device="cpu")
    plain = GraspAgent.load(device="cpu", parallax=dataclasses.replace(SHIPPED, lead_frames=0))
    cfg = control_env_config()
    with GraspEnv(cfg) as env:
        env.reset(seed=0)
        for _ in range(15):
            target = np.array([*env.sphere_pos_world_m()[:2], 0.05])
            env.step(action_towards(env.proprio()[:3], target, False, 0.9, cfg.scene.max_action_step_m))
        spin = 0.02 / cfg.scene.sphere_radius_m
        pb.resetBaseVelocity(env.sphere_uid, [0.0, 0.02, 0.0], [-spin, 0.0, 0.0], physicsClientId=env.client)
        led.reset()
        plain.reset()
        hold = np.array([0.0, 0.0, 0.0, -1.0])
        before = env.sphere_pos_world_m()[:2]
        for k in range(3):
            r = env.step(hold)
            a_led, a_plain = led.act(r.frame.rgb, r.proprio), plain.act(r.frame.rgb, r.proprio)
            now = env.sphere_pos_world_m()[:2]
            step, before = now - before, now
            assert a_led.mask.any()  # the segmenter sees it
            if k < 2:
                np.testing.assert_array_equal(a_led.action, a_plain.action)
    ahead = (a_led.action[:2] - a_plain.action[:2]) * cfg.scene.max_action_step_m
    np.testing.assert_allclose(ahead, step, atol=6e-4)
    assert a_led.action[2:] == pytest.approx(a_plain.action[2:])
