"""Held sphere: while the closed gripper holds something, an empty mask (with ``disjoint``: or one off the last mask)
gets the last non-empty one back."""

from __future__ import annotations

import numpy as np
import pytest
from masks import disc

from grasp_s2r.control.held import HeldSphere
from grasp_s2r.control.parallax import ParallaxConfig, ParallaxFilter
from grasp_s2r.control.wrist_geometry import FINGER_GAP_INDEX, GRIPPER_CLOSED_INDEX
from grasp_s2r.sim.config import CameraConfig, SceneConfig

CAMERA, SCENE = CameraConfig(), SceneConfig()
EMPTY = np.zeros((CAMERA.height_px, CAMERA.width_px), bool)


def _proprio(gap_m, closed, z_m=0.01):
    return np.array([0.0, 0.0, z_m, gap_m, float(closed)], dtype=np.float32)


def _disc(col, row, radius_px=4.0):
    return disc((col, row), radius_px, CAMERA)


def test_a_held_sphere_keeps_its_last_mask_for_the_steps():
    held = HeldSphere(steps=3, min_gap_m=0.004)
    seen = _disc(32, 51)
    assert held.filter(seen, _proprio(0.04, False)) is not None
    holding = _proprio(0.011, True)
    masks = [held.filter(EMPTY, holding) for _ in range(4)]
    assert all((m == seen).all() for m in masks[:3]) and not masks[3].any()
    masks[0][:] = False  # a copy: the filter's last mask is not the caller's to change
    assert (held.filter(EMPTY, _proprio(0.011, True, 0.03)) == EMPTY).all()  # still the 4th empty frame in a row
    # seen again, then lost again: three more frames
    held.filter(_disc(33, 50), holding)
    assert (held.filter(EMPTY, holding) == _disc(33, 50)).all()


def test_nothing_comes_back_with_the_gripper_open_or_closed_on_nothing_or_after_reset():
    held = HeldSphere(steps=3, min_gap_m=0.004)
    seen = _disc(20, 30)
    held.filter(seen, _proprio(0.04, False))
    assert not held.filter(EMPTY, _proprio(0.04, False)).any()  # open: a lost sphere is lost
    held.filter(seen, _proprio(0.04, False))
    assert not held.filter(EMPTY, _proprio(0.001, True)).any()  # the fingers met: nothing between them
    held.filter(seen, _proprio(0.04, False))
    held.reset()
    assert not held.filter(EMPTY, _proprio(0.011, True)).any()  # a new episode: no last mask
    other = _disc(40, 40)
    assert (held.filter(other, _proprio(0.011, True)) == other).all()  # a non-empty mask passes as it is


def test_with_disjoint_a_mask_off_the_held_sphere_counts_as_lost():
    seen, lure = _disc(32, 51), _disc(10, 12, 2.0)
    holding = _proprio(0.011, True)
    plain, disjoint = HeldSphere(steps=2, min_gap_m=0.004), HeldSphere(steps=2, min_gap_m=0.004, disjoint=True)
    for held in (plain, disjoint):
        held.filter(seen, _proprio(0.04, False))
        held.filter(seen, holding)
    assert (plain.filter(lure, holding) == lure).all()  # without it a lure passes
    assert (disjoint.filter(lure, holding) == seen).all()
    assert (disjoint.filter(lure | seen, holding) == (lure | seen)).all()  # touching the held sphere: as it is
    other = _disc(56, 8, 2.0)
    assert (disjoint.filter(EMPTY, holding) == lure | seen).all()
    assert (disjoint.filter(other, holding) == lure | seen).all()  # the second lost frame
    assert (disjoint.filter(other, holding) == other).all()  # the third: past the steps, the mask as it is
    open_again = HeldSphere(steps=2, min_gap_m=0.004, disjoint=True)
    open_again.filter(seen, _proprio(0.04, False))
    assert (open_again.filter(lure, _proprio(0.04, False)) == lure).all()  # open: the rule does not act


def test_the_parallax_filter_runs_it_only_when_asked():
    assert ParallaxFilter(SCENE, CAMERA, ParallaxConfig()).held is None  # off by default
    f = ParallaxFilter(SCENE, CAMERA, ParallaxConfig(held_steps=2))
    seen = _disc(32, 51)
    f.filter(seen, _proprio(0.04, False))
    assert (f.filter(EMPTY, _proprio(0.011, True)) == seen).all()
    f.reset()
    assert not f.filter(EMPTY, _proprio(0.011, True)).any()
    assert not f.held.disjoint
    assert ParallaxFilter(SCENE, CAMERA, ParallaxConfig(held_steps=2, held_disjoint=True)).held.disjoint


@pytest.mark.parametrize("kwargs", [{"steps": 0}, {"min_gap_m": 0.0}])
def test_bad_settings_are_refused(kwargs):
    with pytest.raises(ValueError, match="a held sphere needs"):
        HeldSphere(**{"steps": 3, "min_gap_m": 0.004, **kwargs})
    with pytest.raises(ValueError, match="held_steps"):
        ParallaxConfig(held_steps=-1)


def test_a_held_sphere_stays_on_its_pixels_in_real_lifts(shipped_gt_episodes):
    """Real episodes (PyBullet, the shipped controller, ground-truth masks): where a segmenter loses the sphere once
    the gripper has closed on it, the filter's mask for those frames is the last one seen before, and the sphere is
    really there (it moves with the camera): it covers most of the sphere's true pixels in every such frame."""
    recs = shipped_gt_episodes
    lifts = 0
    for rec in recs:
        if not rec.success:
            continue
        masks, proprio = rec.arrays["input_mask"], rec.arrays["proprio"]
        truth = rec.arrays["sphere_mask"]
        lost = (proprio[:, GRIPPER_CLOSED_INDEX] >= 0.5) & (proprio[:, FINGER_GAP_INDEX] >= 0.004)  # a segmenter that loses the held sphere
        assert lost.any()
        lost_from = int(np.argmax(lost))
        lost_to = lost_from + (int(np.argmin(lost[lost_from:])) or len(lost) - lost_from)  # the first closed stretch
        assert masks[lost_from - 1].any()
        lure = _disc(6, 6, 2.0)  # a blob in the image's corner, off the held sphere
        for steps, disjoint in ((3, False), (0, False), (3, True)):
            f = ParallaxFilter(SCENE, CAMERA, ParallaxConfig(held_steps=steps, held_disjoint=disjoint))
            out = [f.filter((lure if disjoint else EMPTY) if lost[t] else masks[t], proprio[t]) for t in range(lost_to)]
            given = [t for t in range(lost_to) if lost[t] and out[t].any() and not (out[t] == lure).all()]
            assert given == list(range(lost_from, min(lost_from + steps, lost_to))), given
            for t in given:
                assert (out[t] == masks[lost_from - 1]).all()
                if truth[t].any():
                    assert (out[t] & truth[t]).sum() >= 0.5 * truth[t].sum(), t
        lifts += 1
    assert lifts >= 2
