"""The sphere's shadows (``CameraConfig.sphere_shadow``, ``grasp_s2r/sim/shadow.py``), in the real PyBullet scene."""

from __future__ import annotations

import numpy as np
import pybullet as pb
import pytest

from grasp_s2r.sim.camera import Lighting
from grasp_s2r.sim.config import EnvConfig
from grasp_s2r.sim.env import GraspEnv
from grasp_s2r.sim.shadow import sphere_shadow_gain, world_points_m

RADIUS_M = 0.00685


def _scene(shadow: bool) -> EnvConfig:
    return EnvConfig().with_sphere_shadow(shadow)


def _close_view(env: GraspEnv, light: Lighting):
    """A frame from 8 cm above the sphere, looking straight down, under ``light``."""
    centre = np.asarray(pb.getBasePositionAndOrientation(env.sphere_uid, physicsClientId=env.client)[0])
    eye = centre + np.array([0.0, 0.0, 0.08])
    return env.camera.render(eye, centre, np.array([1.0, 0.0, 0.0]), light, env.sphere_uid, env.robot.uid, (),
                             env.config.scene.sphere_radius_m)


@pytest.fixture(scope="module")
def frames():
    """The same close view rendered without and with the sphere's shadows, a low light from +x."""
    light = Lighting(direction=(1.0, 0.0, 0.6), ambient=0.5, diffuse=0.5, specular=0.0)
    out = {}
    for shadow in (False, True):
        env = GraspEnv(_scene(shadow))
        try:
            env.reset(3)
            out[shadow] = _close_view(env, light)
        finally:
            env.close()
    return out


def test_the_shadow_darkens_the_table_beside_the_sphere_away_from_the_light_and_nothing_else(frames):
    off, on = frames[False], frames[True]
    # the masks and the sphere's own pixels are the renderer's, untouched
    assert np.array_equal(off.sphere_mask, on.sphere_mask) and off.sphere_mask.sum() > 50
    assert np.array_equal(off.rgb[off.sphere_mask], on.rgb[on.sphere_mask])
    darker = on.rgb.astype(int).sum(-1) < off.rgb.astype(int).sum(-1) - 6
    assert not (on.rgb.astype(int) > off.rgb.astype(int)).any()  # a shadow only takes light away
    ys, xs = np.nonzero(darker)
    sy, sx = np.nonzero(off.sphere_mask)
    assert darker.sum() > 20
    # the cast shadow lies on the side away from the light: the light is at +x, the image's up (row 0) is +x
    assert ys.mean() > sy.mean() + 2
    # and near the sphere: no pixel more than 3 radii of the sphere's image away from its centre is darkened
    radius_px = np.sqrt(off.sphere_mask.sum() / np.pi)
    assert np.hypot(ys - sy.mean(), xs - sx.mean()).max() < 4 * radius_px


def test_the_contact_shadow_is_darkest_at_the_point_of_contact_and_fades_with_distance():
    centre = np.array([0.0, 0.0, RADIUS_M])
    # table points at growing distance from the contact point, on the side towards the light (no cast shadow)
    points = np.array([[[-x, 0.0, 0.0] for x in (0.0, 0.5, 1.0, 2.0, 4.0, 10.0)]]) * RADIUS_M
    gain = sphere_shadow_gain(points, centre, RADIUS_M, np.array([-1.0, 0.0, 1.0]), ambient=0.5, diffuse=0.5)[0]
    assert np.all(np.diff(gain) > 0) and gain[0] < 0.75 and gain[-1] > 0.99
    # straight under a light from above: ambient and diffuse both gone at the contact point
    overhead = sphere_shadow_gain(points[:, :1], centre, RADIUS_M, np.array([0.0, 0.0, 1.0]), 0.5, 0.5)
    assert overhead[0, 0] == pytest.approx(0.0, abs=1e-9)


def test_world_points_invert_the_camera_the_frame_was_rendered_with():
    # a pixel's reconstructed point projects back onto that pixel, at the depth the buffer holds
    view = pb.computeViewMatrix([0.1, 0.2, 0.5], [0.1, 0.2, 0.0], [1.0, 0.0, 0.0])
    proj = pb.computeProjectionMatrixFOV(60.0, 1.0, 0.01, 1.5)
    depth = np.full((16, 16), 0.97)
    pts = world_points_m(depth, view, proj)
    m = np.asarray(proj).reshape(4, 4).T @ np.asarray(view).reshape(4, 4).T
    clip = np.concatenate([pts, np.ones((16, 16, 1))], -1) @ m.T
    ndc = clip[..., :3] / clip[..., 3:]
    assert np.allclose(ndc[..., 2], 2 * 0.97 - 1, atol=1e-6)
    assert np.allclose(ndc[0, :, 0], (2 * (np.arange(16) + 0.5) / 16 - 1), atol=1e-6)
    assert np.allclose(ndc[:, 0, 1], 1 - 2 * (np.arange(16) + 0.5) / 16, atol=1e-6)


def test_a_scene_without_the_option_renders_as_before_and_the_radius_is_required_with_it():
    env = GraspEnv(_scene(True))
    try:
        env.reset(0)
        light = Lighting()
        eye = np.array([0.5, 0.0, 0.3])
        with pytest.raises(ValueError, match="sphere_radius_m"):
            env.camera.render(eye, eye - [0, 0, 0.3], np.array([1.0, 0, 0]), light, env.sphere_uid, env.robot.uid, ())
    finally:
        env.close()
    assert EnvConfig().camera.sphere_shadow is False


def test_a_record_made_before_the_option_is_the_same_scene_and_one_with_shadows_is_another():
    from grasp_s2r.configs import differences, to_json

    # GIVEN the scene's record as written before the field existed (today's, without the key)
    scene = EnvConfig()
    old = to_json(scene)
    assert "sphere_shadow" not in old["camera"]
    # THEN it reads back as the scene without shadows, and compares equal to it; with shadows it differs by the field
    assert EnvConfig.from_dict(old) == scene
    shadowed = to_json(_scene(True))
    assert shadowed["camera"]["sphere_shadow"] is True and EnvConfig.from_dict(shadowed) == _scene(True)
    assert differences(old, shadowed) == ['camera.sphere_shadow: stored "(none)", asked true']
