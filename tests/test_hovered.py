"""Hovered spots: a table point the open gripper hovered low over for many steps leaves the mask."""

from __future__ import annotations

import numpy as np
import pytest

from grasp_s2r.control.hovered import HoveredSpots
from grasp_s2r.control.parallax import ParallaxConfig, ParallaxFilter
from grasp_s2r.control.wrist_geometry import WristView
from grasp_s2r.sim.config import CameraConfig, SceneConfig

CAMERA, SCENE = CameraConfig(), SceneConfig()
LURE, ELSEWHERE = np.array([0.03, -0.02]), np.array([-0.05, 0.04])


def _proprio(tcp_xyz, closed=False):
    return np.array([*tcp_xyz, 2 * SCENE.finger_open_m, float(closed)], dtype=np.float32)


def _mask(tcp_xyz, table_points):
    """Discs of 1.5 px at the pixels of ``table_points`` seen from ``tcp_xyz``."""
    view = WristView.at(np.asarray(tcp_xyz, dtype=float), CAMERA)
    rows, cols = np.mgrid[:CAMERA.height_px, :CAMERA.width_px]
    mask = np.zeros((CAMERA.height_px, CAMERA.width_px), bool)
    for point in table_points:
        col, row = view.table_pixel(np.asarray(point))
        mask |= np.hypot(cols - col, rows - row) <= 1.5
    return mask


def _hover(spots, tcp_xyz, steps, closed=False, points=(LURE,)):
    return [spots.filter(_mask(tcp_xyz, points), _proprio(tcp_xyz, closed)) for _ in range(steps)]


def _blob_at(mask, tcp_xyz, point):
    col, row = WristView.at(np.asarray(tcp_xyz, dtype=float), CAMERA).table_pixel(np.asarray(point))
    return bool(mask[round(row), round(col)])


def test_a_spot_hovered_over_leaves_the_mask_and_the_rest_stays():
    spots = HoveredSpots(CAMERA, height_m=0.03, radius_m=0.02, steps=4)
    low = (*(LURE + 0.005), 0.02)  # the TCP 7 mm beside the lure, 2 cm above the table
    masks = _hover(spots, low, 4)
    assert all(m.any() for m in masks[:3]) and not masks[3].any()  # the 4th low step makes it a spot
    np.testing.assert_allclose(spots.spots, [LURE + 0.005])
    # seen again from high up and elsewhere, as the camera moves: the lure stays out, another blob stays in
    high = (0.0, 0.0, 0.15)
    mask = spots.filter(_mask(high, [LURE, ELSEWHERE]), _proprio(high))
    assert not _blob_at(mask, high, LURE) and _blob_at(mask, high, ELSEWHERE)


def test_no_count_while_high_and_a_close_or_a_new_stay_starts_over():
    spots = HoveredSpots(CAMERA, height_m=0.03, radius_m=0.02, steps=3)
    _hover(spots, (*LURE, 0.05), 10)  # above the height
    _hover(spots, (*LURE, 0.01), 10, closed=True)  # the gripper closed (on a sphere, or on nothing)
    _hover(spots, (*LURE, 0.02), 2)
    _hover(spots, (*LURE, 0.01), 1, closed=True)  # closed again (a sphere that slipped): the stay ends
    _hover(spots, (*LURE, 0.02), 2)
    assert not len(spots.spots)
    _hover(spots, (*LURE, 0.02), 1)  # the third open step since the close
    np.testing.assert_allclose(spots.spots, [LURE])
    spots.reset()
    _hover(spots, (*LURE, 0.02), 2)
    _hover(spots, (*ELSEWHERE, 0.02), 2)  # 2 steps here, 2 there: neither stay is long enough
    assert not len(spots.spots)
    _hover(spots, (*ELSEWHERE, 0.02), 1)
    np.testing.assert_allclose(spots.spots, [ELSEWHERE])
    spots.reset()
    assert not len(spots.spots)


def test_the_parallax_filter_runs_hovered_spots_only_when_asked():
    assert ParallaxFilter(SCENE, CAMERA).hovered is None  # off by default
    f = ParallaxFilter(SCENE, CAMERA, ParallaxConfig(hover_steps=3))
    low = (*LURE, 0.02)
    masks = [f.filter(_mask(low, [LURE]), _proprio(low)) for _ in range(3)]
    assert masks[1].any() and not masks[2].any()
    f.reset()
    assert f.filter(_mask(low, [LURE]), _proprio(low)).any()  # a new episode: no spot


def _close(spots, tcp_xyz, open_steps=1, points=(LURE,)):
    """One close of one step over ``tcp_xyz``, then ``open_steps`` open: a tap at a lure. The mask of the close."""
    closed = _hover(spots, tcp_xyz, 1, closed=True, points=points)[0]
    _hover(spots, tcp_xyz, open_steps, points=points)
    return closed


def test_a_spot_closed_on_again_and_again_leaves_the_mask():
    spots = HoveredSpots(CAMERA, height_m=0.03, radius_m=0.02, steps=0, closes=3)
    low = (*(LURE + 0.004), 0.006)
    assert _close(spots, low).any() and _close(spots, low).any()
    assert not len(spots.spots)
    assert not _close(spots, low).any()  # the 3rd close at the spot makes it one, in the step it begins
    np.testing.assert_allclose(spots.spots, [LURE + 0.004])
    high = (0.0, 0.0, 0.15)
    mask = spots.filter(_mask(high, [LURE, ELSEWHERE]), _proprio(high))
    assert not _blob_at(mask, high, LURE) and _blob_at(mask, high, ELSEWHERE)
    spots.reset()
    assert not len(spots.spots)


def test_a_long_close_counts_once_and_closes_apart_do_not_add_up():
    spots = HoveredSpots(CAMERA, height_m=0.03, radius_m=0.02, steps=0, closes=2)
    low = (*LURE, 0.006)
    _hover(spots, low, 30, closed=True)  # one close held 30 steps (a held sphere): one close
    _hover(spots, low, 30)  # no hovered steps are counted (steps=0): open, low and long
    assert not len(spots.spots)
    spots.reset()
    _close(spots, low)
    _close(spots, (*ELSEWHERE, 0.006))  # one close here, one 9 cm away
    assert not len(spots.spots)
    _close(spots, (*(ELSEWHERE + 0.01), 0.006))  # a second 1.4 cm from the last: within 2 cm
    np.testing.assert_allclose(spots.spots, [ELSEWHERE + 0.01])


def test_the_parallax_filter_runs_re_closed_spots_when_asked():
    f = ParallaxFilter(SCENE, CAMERA, ParallaxConfig(hover_closes=2))
    low = (*LURE, 0.006)
    assert f.hovered is not None and f.hovered.steps == 0
    assert [bool(_close(f, low).any()) for _ in range(2)] == [True, False]


@pytest.mark.parametrize("kwargs", [{"height_m": 0.0}, {"radius_m": -0.01}, {"steps": 0}, {"steps": -1, "closes": 2},
                                    {"closes": -1}])
def test_bad_settings_are_refused(kwargs):
    with pytest.raises(ValueError, match="hovered spots need"):
        HoveredSpots(CAMERA, **{"height_m": 0.03, "radius_m": 0.02, "steps": 3, **kwargs})
    with pytest.raises(ValueError, match="hover_steps"):
        ParallaxConfig(hover_steps=-1)
    with pytest.raises(ValueError, match="hover_closes"):
        ParallaxConfig(hover_closes=-1)
