"""Issue 12's evaluation conditions: table-photo, start-out-of-view, camera-miscalibration (hooks on a real env)."""

from __future__ import annotations

import json

import cv2
import numpy as np
import pytest

from grasp_s2r.control.evaluate import ISSUE_CONDITIONS
from grasp_s2r.expert.fsm import Expert, ExpertConfig
from grasp_s2r.runtime.conditions import CONDITIONS, Condition, resolve_condition
from grasp_s2r.runtime.episode_hooks import EpisodeHooks, outside_view_deg
from grasp_s2r.sim.camera import camera_pose_world
from grasp_s2r.sim.config import EnvConfig, RandomizationConfig
from grasp_s2r.sim.env import GraspEnv
from grasp_s2r.sim.randomization import LOOK_JITTER_LEVER_M, EpisodeParams
from grasp_s2r.sim.robot import PALM_LINK
from grasp_s2r.sim.table_texture import crop_resize, photo_texture

NEW = ("table-photo", "start-out-of-view", "camera-miscalibration")


def _start(env: GraspEnv, cond: Condition, seed: int):
    """(env.reset's result, on_reset's result, hooks) of one episode, the hooks' stream as in the rollout worker."""
    first = env.reset(seed)
    hooks = EpisodeHooks(env, cond, np.random.default_rng([seed, 2]))
    return first, hooks.on_reset(), hooks


def test_the_new_conditions_are_named_data_evaluated_by_default_and_survive_the_worker_message():
    for name in NEW:
        cond = CONDITIONS[name]
        assert cond.name == name and cond.description and name in ISSUE_CONDITIONS
        assert Condition.from_dict(json.loads(json.dumps(cond.to_dict()))) == cond  # what the rollout worker receives
    assert CONDITIONS["table-photo"].backgrounds == ""  # rendered, never composited
    from grasp_s2r.pipeline import PipelineConfig

    assert "table-photo" in PipelineConfig().conditions


def test_table_texture_code_is_shared_and_crops_as_the_vision_backgrounds_do(rng):
    from grasp_s2r.vision.images import simviews
    from grasp_s2r.vision.images.backgrounds import random_crop

    assert simviews.photo_texture is photo_texture and random_crop is crop_resize  # one crop for both
    photo = rng.integers(0, 255, (120, 170, 3), dtype=np.uint8)
    for seed in range(5):
        a = crop_resize(photo, (32, 48), np.random.default_rng(seed), 0.15, 0.9)
        b = random_crop(photo, (32, 48), np.random.default_rng(seed), 0.15, 0.9)
        np.testing.assert_array_equal(a, b)
    tex = photo_texture(photo, np.random.default_rng(0))
    np.testing.assert_array_equal(tex, tex[::-1, ::-1])  # mirrored 2 x 2: seamless when tiled


def _green_photos(folder) -> None:
    r = np.random.default_rng(1)
    for i in range(3):
        bgr = np.zeros((90, 120, 3), np.uint8)
        bgr[:, :, 1] = r.integers(150, 256, (90, 120))
        cv2.imwrite(str(folder / f"photo{i}.png"), bgr)


def test_table_photo_renders_the_photo_on_the_table_and_keeps_the_exact_masks(env, tmp_path):
    _green_photos(tmp_path)
    cond = resolve_condition("table-photo", str(tmp_path))  # grasp-s2r eval --backgrounds DIR
    assert cond.table_photos == str(tmp_path) and cond.backgrounds == ""
    first, _, hooks = _start(env, cond, seed=3)
    hooks.observe(first.frame)
    # a few steps down towards the sphere: the fingers and the sphere are in view, over the photo
    expert = Expert(env.config.scene, ExpertConfig())
    for _ in range(6):
        env.step(hooks.before_step(expert.act(env.privileged())[0]))
    frame = env.render()
    rgb, mask = hooks.observe(frame)
    assert rgb is frame.rgb and mask is frame.sphere_mask  # the raw render, no compositing
    assert mask.any() and frame.gripper_mask.any()
    table = ~(frame.sphere_mask | frame.gripper_mask)
    px = frame.rgb[table].astype(int)
    assert np.mean((px[:, 1] > px[:, 0] + 40) & (px[:, 1] > px[:, 2] + 40)) > 0.95, "the table shows the photos"
    # the same state with the episode's own procedural table: the same ground truth, pixel for pixel
    state = env.get_state()
    env.reset(3)
    env.set_state(state)
    plain = env.render()
    np.testing.assert_array_equal(plain.sphere_mask, frame.sphere_mask)
    np.testing.assert_array_equal(plain.gripper_mask, frame.gripper_mask)
    assert np.abs(plain.rgb.astype(int) - frame.rgb)[table].mean() > 20
    assert [e["event"] for e in hooks.events] == ["table-photo"]


def test_table_photo_draws_from_every_photo_of_a_folder_of_more_than_32(env, tmp_path):
    # GIVEN a folder of 40 photos (more than the 32 crops a smaller set gives), each a flat shade of its own
    for i in range(40):
        cv2.imwrite(str(tmp_path / f"photo{i:02d}.png"), np.full((40, 40, 3), 5 * i, np.uint8))
    cond = resolve_condition("table-photo", str(tmp_path))
    # WHEN 30 episodes start on it
    drawn = {_start(env, cond, seed=s)[2].events[0]["texture"] for s in range(30)}
    # THEN textures past the 32nd are drawn too: texture k is photo k, and none of the 40 is left out
    assert max(drawn) >= 32 and max(drawn) < 40


def test_table_photo_uses_the_heldout_photos_by_default_and_the_first_frame_shows_them(env):
    cond = CONDITIONS["table-photo"]
    assert cond.table_photos == "heldout"
    first, result, hooks = _start(env, cond, seed=5)
    assert result is not None
    rgb, mask = hooks.observe(first.frame)  # the rollout passes env.reset's (procedural) frame: the photo one is shown
    np.testing.assert_array_equal(rgb, result.frame.rgb)
    np.testing.assert_array_equal(rgb, env.render().rgb)
    np.testing.assert_array_equal(mask, first.frame.sphere_mask)
    assert np.abs(rgb.astype(int) - first.frame.rgb).mean() > 10
    k = hooks.events[0]["texture"]
    _, _, again = _start(env, cond, seed=5)
    assert again.events[0]["texture"] == k  # deterministic per episode seed


@pytest.mark.parametrize("seed", [0, 1, 2, 3, 4, 5, 6, 7])
def test_start_out_of_view_hides_the_sphere_on_the_table_within_reach(env, seed):
    s = env.config.scene
    cond = CONDITIONS["start-out-of-view"]
    first, result, hooks = _start(env, cond, seed)
    assert not result.frame.sphere_mask.any() and not env.render().sphere_mask.any(), "the camera does not see it"
    _, mask = hooks.observe(first.frame)
    assert not mask.any()
    pos = env.sphere_pos_world_m()
    assert pos[2] == pytest.approx(s.table_height_m + s.sphere_radius_m)  # resting on the table
    assert np.abs(pos[:2] - s.spawn_center_world_m).max() <= s.workspace_half_extent_m - 0.02 + 1e-9
    assert outside_view_deg(env, pos)[0] >= cond.start_out_of_view_deg
    # recorded in the episode's params: env.reset(seed, params) starts the same episode
    assert env.params.sphere_xy_world_m == pytest.approx(pos[:2])
    (event,) = hooks.events
    assert event["event"] == "start-out-of-view" and not event["in_view"]
    again = env.reset(seed, EpisodeParams.from_dict(json.loads(json.dumps(env.params.to_dict()))))
    np.testing.assert_array_equal(again.frame.rgb, result.frame.rgb)
    _, _, hooks2 = _start(env, cond, seed)
    assert hooks2.events == hooks.events  # deterministic per episode seed


@pytest.mark.parametrize("seed", [0, 2, 4])
def test_start_out_of_view_sphere_is_grasped_by_the_expert(env, seed):
    """Within the arm's reach: the privileged expert grasps it (the wrist-joint limit corner is avoided)."""
    _, _, hooks = _start(env, CONDITIONS["start-out-of-view"], seed)
    expert = Expert(env.config.scene, ExpertConfig())
    for _ in range(env.config.scene.max_episode_steps):
        r = env.step(hooks.before_step(expert.act(env.privileged())[0]))
        if r.terminated or r.truncated:
            break
    assert r.success


def _camera(env: GraspEnv, params: EpisodeParams | None):
    palm_pos, palm_quat = env.robot.link_pose_world(PALM_LINK)
    mount = np.zeros(3) if params is None else np.asarray(params.camera_mount_jitter_m)
    look = np.zeros(3) if params is None else np.asarray(params.camera_look_jitter_m)
    eye, target, _ = camera_pose_world(palm_pos, palm_quat, env.config.camera, mount, look)
    return eye, (target - eye) / np.linalg.norm(target - eye)


def test_camera_miscalibration_jitters_the_mount_by_the_full_range_deterministically():
    # the controller's own env: 1 mm / 0.5 deg (control_env_config); the condition redraws with 4 mm / 2 deg
    env = GraspEnv(EnvConfig(randomization=RandomizationConfig(camera_jitter_m=0.001, camera_jitter_deg=0.5)))
    try:
        cond = CONDITIONS["camera-miscalibration"]
        full = RandomizationConfig()
        assert (cond.camera_jitter_m, cond.camera_jitter_deg) == (full.camera_jitter_m, full.camera_jitter_deg)
        look_max = np.tan(np.deg2rad(full.camera_jitter_deg)) * LOOK_JITTER_LEVER_M
        mounts, looks, shifts, angles = [], [], [], []
        for seed in range(12):
            first, result, hooks = _start(env, cond, seed)
            p = env.params
            mounts.append(np.abs(p.camera_mount_jitter_m).max())
            looks.append(np.abs(p.camera_look_jitter_m).max())
            eye, axis = _camera(env, p)
            eye0, axis0 = _camera(env, None)
            shifts.append(np.linalg.norm(eye - eye0))
            angles.append(np.rad2deg(np.arccos(np.clip(axis @ axis0, -1, 1))))
            now = env.render()
            np.testing.assert_array_equal(result.frame.rgb, now.rgb)  # the re-mounted camera's first frame ...
            _, mask = hooks.observe(first.frame)  # ... is what the hooks show (composited on a training photo)
            np.testing.assert_array_equal(mask, now.sphere_mask)
            if seed == 0:
                p0, rgb0 = p, now.rgb
        assert max(mounts) <= full.camera_jitter_m + 1e-12 and max(looks) <= look_max + 1e-12
        assert max(mounts) > 0.003 and max(looks) > 0.75 * look_max  # far beyond the env's own 1 mm / 0.5 deg
        assert max(shifts) <= np.sqrt(3) * full.camera_jitter_m + 1e-9 and max(shifts) > 0.003
        assert 1.0 < max(angles) < 5.0
        _start(env, cond, 0)
        assert env.params == p0  # deterministic per episode seed ...
        np.testing.assert_array_equal(env.render().rgb, rgb0)
        _, result, _ = _start(env, Condition(), 0)  # ... and only this condition re-mounts the camera
        assert result is None and np.abs(env.params.camera_mount_jitter_m).max() <= 0.001
    finally:
        env.close()


_WORKER_ENV = EnvConfig(randomization=RandomizationConfig(camera_jitter_m=0.001, camera_jitter_deg=0.5))


@pytest.fixture(scope="module")
def worker_records():
    """One expert episode (seed 11) per new condition, played and recorded by a rollout worker process."""
    from grasp_s2r.runtime.backend import BackendConfig, open_runner
    from grasp_s2r.runtime.masks import GroundTruthMasks
    from grasp_s2r.runtime.records import EXPERT, EpisodeRequest

    requests = [EpisodeRequest(seed=11, actor=EXPERT, condition=CONDITIONS[n]) for n in NEW]
    with open_runner(BackendConfig(), _WORKER_ENV, 1) as pool:
        recs = pool.run(requests, None, GroundTruthMasks(), record=lambda i: True, progress=False)
    return {r.info["condition"]: r for r in recs}


def test_the_new_conditions_run_in_the_rollout_workers_and_their_params_are_recorded(worker_records):
    by = worker_records
    assert all(r.success for r in by.values()) and set(by) == set(NEW)
    assert [e["event"] for e in by["table-photo"].info["events"]] == ["table-photo"]
    oov = by["start-out-of-view"]
    assert not oov.arrays["sphere_mask"][0].any() and oov.arrays["sphere_mask"].any()
    assert list(oov.info["params"]["sphere_xy_world_m"]) == oov.info["events"][0]["sphere_xy_world_m"]
    jitter = by["camera-miscalibration"].info["params"]["camera_mount_jitter_m"]
    assert np.abs(jitter).max() > 0.001  # the condition's jitter, not the env's own
    env = GraspEnv(_WORKER_ENV)
    try:
        # replaying the recorded params gives the recorded first frame's ground truth
        for rec in by.values():
            frame = env.reset(11, EpisodeParams.from_dict(rec.info["params"])).frame
            np.testing.assert_array_equal(frame.sphere_mask, rec.arrays["sphere_mask"][0])
    finally:
        env.close()


def test_the_first_recorded_step_is_the_conditions_own_frame(worker_records):
    env = GraspEnv(_WORKER_ENV)
    try:
        rec = worker_records["camera-miscalibration"]
        frame = env.reset(11, EpisodeParams.from_dict(rec.info["params"])).frame
        np.testing.assert_array_equal(frame.gripper_mask, rec.arrays["gripper_mask"][0])
    finally:
        env.close()
