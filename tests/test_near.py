"""Near sphere: while the open gripper is low, an empty mask gets the last large one back, moved with the table."""

from __future__ import annotations

import numpy as np
import pytest
from masks import disc

from grasp_s2r.control.near import NearSphere, shifted
from grasp_s2r.control.parallax import ParallaxConfig, ParallaxFilter
from grasp_s2r.control.wrist_geometry import GRIPPER_CLOSED_INDEX, TCP_INDEX, WristView
from grasp_s2r.sim.config import CameraConfig, SceneConfig

CAMERA, SCENE = CameraConfig(), SceneConfig()
EMPTY = np.zeros((CAMERA.height_px, CAMERA.width_px), bool)
SPHERE = np.array([0.012, -0.008])
"""Table (x, y) in metres of the sphere of these tests."""


def _proprio(tcp_xyz, closed=False):
    return np.array([*tcp_xyz, 0.0 if closed else 2 * SCENE.finger_open_m, float(closed)], dtype=np.float32)


def _disc_seen_from(tcp_xyz, radius_px=3.0):
    return disc(WristView.at(np.asarray(tcp_xyz, dtype=float), CAMERA).table_pixel(SPHERE), radius_px, CAMERA)


def _centre(mask):
    rows, cols = np.nonzero(mask)
    return np.array([cols.mean(), rows.mean()])


def test_shifted_moves_by_whole_pixels_and_drops_what_leaves():
    mask = np.zeros((6, 8), bool)
    mask[1, 1] = mask[4, 7] = True
    out = shifted(mask, 2, 1)
    assert out[2, 3] and out.sum() == 1  # (4, 7) went past the right edge
    assert (shifted(mask, 0, 0) == mask).all() and (shifted(out, -2, -1)[1, 1])
    assert not shifted(mask, 8, 0).any()


def test_a_near_sphere_comes_back_where_the_table_moved_it():
    near = NearSphere(CAMERA, steps=2, height_m=0.05, min_px=20)
    before, after = (0.0, 0.0, 0.03), (0.004, -0.002, 0.028)  # the TCP moved 4.5 mm, 2 mm down
    seen = _disc_seen_from(before)
    assert seen.sum() >= 20 and (near.filter(seen, _proprio(before)) == seen).all()
    back = near.filter(EMPTY, _proprio(after))
    assert back.sum() == seen.sum()  # the same pixels, moved
    np.testing.assert_allclose(_centre(back), _centre(_disc_seen_from(after)), atol=0.75)
    assert abs(_centre(back) - _centre(seen)).max() >= 2  # it did move
    assert near.filter(EMPTY, _proprio(after)).any() and not near.filter(EMPTY, _proprio(after)).any()  # 2 steps


@pytest.mark.parametrize("case", ["closed", "high", "small", "reset"])
def test_nothing_comes_back_closed_high_small_or_in_a_new_episode(case):
    near = NearSphere(CAMERA, steps=3, height_m=0.05, min_px=20)
    low = (0.0, 0.0, 0.03)
    seen = _disc_seen_from(low, radius_px=1.5 if case == "small" else 3.0)
    near.filter(seen, _proprio(low))
    if case == "reset":
        near.reset()
    now = (0.0, 0.0, 0.06) if case == "high" else low
    assert not near.filter(EMPTY, _proprio(now, closed=case == "closed")).any()


def test_the_parallax_filter_runs_it_only_when_asked():
    assert ParallaxFilter(SCENE, CAMERA, ParallaxConfig()).near is None
    f = ParallaxFilter(SCENE, CAMERA, ParallaxConfig(near_steps=1))
    low = (0.0, 0.0, 0.03)
    f.filter(_disc_seen_from(low), _proprio(low))
    assert f.filter(EMPTY, _proprio(low)).any()
    with pytest.raises(ValueError, match="a near sphere needs"):
        NearSphere(CAMERA, steps=0, height_m=0.05, min_px=20)
    with pytest.raises(ValueError, match="near_steps"):
        ParallaxConfig(near_steps=-1)


def test_a_near_sphere_lands_on_the_sphere_in_real_approaches(shipped_gt_episodes):
    """Real episodes (PyBullet, the shipped controller, ground-truth masks): where the open gripper is low and a
    segmenter loses the sphere for two frames, the mask given back lies on the sphere (its pixels are the sphere's,
    its centre within 2 px of the sphere's; it is smaller, since the sphere grows as the gripper descends)."""
    recs = shipped_gt_episodes
    given = 0
    for rec in recs:
        masks, proprio, truth = rec.arrays["input_mask"], rec.arrays["proprio"], rec.arrays["sphere_mask"]
        f = ParallaxFilter(SCENE, CAMERA, ParallaxConfig(near_steps=2))
        blanked = 0
        for t in range(len(masks)):
            low_open = proprio[t, TCP_INDEX[2]] < 0.05 and proprio[t, GRIPPER_CLOSED_INDEX] < 0.5
            lose = low_open and t % 4 in (1, 2) and masks[t - 1].sum() >= 20  # two frames lost of every four
            out = f.filter(EMPTY if lose else masks[t], proprio[t])
            if lose and truth[t].any():
                assert out.any(), t
                assert (out & truth[t]).sum() >= 0.9 * out.sum(), (rec.request.seed, t)
                assert np.hypot(*(_centre(out) - _centre(truth[t]))) <= 2.0, (rec.request.seed, t)
                blanked += 1
        given += blanked
    assert given >= 4
