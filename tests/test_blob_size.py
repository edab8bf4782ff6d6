"""benchmarks/blob_size.py: a blob's width against the sphere's at its distance, and the size check it tries."""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest

from grasp_s2r.control.look import LowLook
from grasp_s2r.control.parallax import SHIPPED, ParallaxFilter
from grasp_s2r.control.wrist_geometry import WristView
from grasp_s2r.sim.config import control_env_config
from grasp_s2r.sim.env import GraspEnv

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "benchmarks"))
from blob_size import SpeckStays, blob_ratios, filter_class, looks, size_checked
from masks import disc

import grasp_s2r.runtime.pool as pool_module

ENV = control_env_config()


def test_the_rendered_sphere_is_as_wide_as_the_pinhole_model_says_from_high_and_low():
    """Real renders (PyBullet, the controller's camera with its per-episode jitter): the ground-truth sphere's blob
    has a ratio near 1 from the start height and from the low look's 8 cm, wherever it lies in the image."""
    env = GraspEnv(ENV)
    ratios = []
    try:
        for seed in range(12):
            r = env.reset(seed)
            look = LowLook(ENV.scene, 0.08, at_start=True, after_spot=False)
            for lowered in (False, True):
                if lowered:
                    while (a := look.action(r.proprio, 0)) is not None:
                        r = env.step(a)
                gt = r.frame.sphere_mask.astype(bool)
                b = blob_ratios(gt, r.proprio, ENV.camera, ENV.scene)
                if len(b["ratio"]) == 1 and not b["edge"][0] and gt.sum() >= 4:
                    ratios.append((lowered, float(b["ratio"][0]), float(b["expected_px"][0])))
    finally:
        env.close()
    low = [q for lowered, q, _ in ratios if lowered]
    high = [q for lowered, q, _ in ratios if not lowered]
    assert len(low) >= 8 and len(high) >= 4, ratios
    assert 0.8 < np.median(low) < 1.2 and 0.75 < np.median(high) < 1.25, ratios
    assert max(e for lowered, _, e in ratios if lowered) > max(e for lowered, _, e in ratios if not lowered)


def test_the_size_check_drops_a_speck_and_a_slab_and_keeps_a_sphere_sized_blob():
    proprio = np.array([0.0, 0.0, 0.06, 0.04, 0.0])  # 6 cm up, fingers open
    blank = np.zeros((64, 64), bool)
    b = blob_ratios(blank, proprio, ENV.camera, ENV.scene)
    assert len(b["ratio"]) == 0
    one = blank.copy()
    one[30:31, 30:31] = True
    expected = blob_ratios(one, proprio, ENV.camera, ENV.scene)["expected_px"][0]
    side = round(expected * np.sqrt(np.pi) / 2)  # a square of the sphere's disc area
    mask = blank.copy()
    mask[20:20 + side, 20:20 + side] = True  # sphere-sized
    mask[45, 45] = True  # a speck
    mask[5:25, 40:60] = True  # a slab
    cls = size_checked("0.5/1.6")
    f = cls(ENV.scene, ENV.camera, SHIPPED)
    kept = f.filter(mask, proprio)
    assert kept[20:20 + side, 20:20 + side].all() and not kept[45, 45] and not kept[10, 50]
    assert len(f.small_spots) == 1
    closed = proprio.copy()
    closed[4] = 1.0
    assert cls(ENV.scene, ENV.camera, SHIPPED).filter(mask, closed)[45, 45]  # closed gripper: no check
    assert size_checked("0/1.6")(ENV.scene, ENV.camera, SHIPPED).filter(mask, proprio)[45, 45]  # no lower bound
    # with /look, the speck's spot starts the shipped filter's low look, through the action call the rollouts make
    action = np.array([0.1, -0.2, -0.5, -1.0])
    looking = size_checked("0.5/1.6/0/look")(ENV.scene, ENV.camera, SHIPPED)
    looking.filter(mask, proprio)
    assert looking.spots_given_up() == 1
    look = looking.action(proprio, action)
    assert look is not None and look[2] > 0  # up towards the look's 8 cm, not the controller's descent
    quiet = cls(ENV.scene, ENV.camera, SHIPPED)
    quiet.filter(mask, proprio)
    assert quiet.spots_given_up() == 0 and quiet.action(proprio, action) is None


def test_rows_parse_and_the_pool_builds_filters_from_the_class_only_inside_the_block_and_lists_them():
    assert size_checked("off") is ParallaxFilter
    cls = size_checked("0.5/99/6/look")
    assert (cls.lo, cls.hi, cls.min_px, cls.look_on_drop) == (0.5, 99.0, 6.0, True)
    for bad in ("0.5", "0.5/1/2/see", "a/b"):
        with pytest.raises(ValueError):
            size_checked(bad)
    with filter_class(cls) as built:
        assert issubclass(pool_module.ParallaxFilter, cls)
        f = pool_module.ParallaxFilter(ENV.scene, ENV.camera, SHIPPED)
        assert built == [f] and looks(built) == [0]
    assert pool_module.ParallaxFilter is ParallaxFilter


def test_a_low_stay_over_a_speck_is_given_up_sooner_and_one_over_a_sphere_sized_blob_is_not():
    """``stay+3``: each low step over a speck counts 4 hovered steps, so the shipped 16 are reached in 5 steps."""
    tcp = np.array([0.01, -0.02, 0.03])
    proprio = np.array([*tcp, 0.04, 0.0])
    view = WristView.at(tcp - [0.0, 0.0, ENV.scene.sphere_diameter_m / 2], ENV.camera)
    below = view.table_pixel(tcp[:2])  # the table point under the TCP: the stay's anchor
    speck = disc(below, 0.75, ENV.camera)  # two pixels
    expected = blob_ratios(speck, proprio, ENV.camera, ENV.scene)["expected_px"][0]
    sphere = disc(below, expected / 2, ENV.camera)
    cls = size_checked("stay+3")
    assert issubclass(cls, SpeckStays) and cls.extra == 3
    for mask, fast in ((speck, True), (sphere, False)):
        f, plain = cls(ENV.scene, ENV.camera, SHIPPED), ParallaxFilter(ENV.scene, ENV.camera, SHIPPED)
        for _ in range(5):  # the first low step sets the stay's anchor, each later one counts 1 + 3
            kept, _ = f.filter(mask, proprio), plain.filter(mask, proprio)
        assert len(f.hovered.spots) == int(fast) and len(plain.hovered.spots) == 0
        assert kept.sum() < mask.sum() if fast else kept.sum() == mask.sum()  # a given-up spot leaves the mask
