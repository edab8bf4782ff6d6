"""benchmarks/target_colour.py: the target's colour told to the agent, and the colour check it tries."""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest

from grasp_s2r.control.parallax import SHIPPED
from grasp_s2r.sim.config import control_env_config
from grasp_s2r.sim.env import GraspEnv

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "benchmarks"))
from target_colour import FrameTap, albedo_hue_deg, blob_hues, hue_checked, hue_distance_deg, targeted

ENV = control_env_config()


def test_hues_of_the_primaries_and_their_circular_distance():
    assert albedo_hue_deg((1, 0, 0)) == pytest.approx(0, abs=1.5)
    assert albedo_hue_deg((0, 1, 0)) == pytest.approx(120, abs=1.5)
    assert albedo_hue_deg((0, 0, 1)) == pytest.approx(240, abs=1.5)
    assert hue_distance_deg(350.0, 10.0) == pytest.approx(20.0)
    assert hue_distance_deg(0.0, 180.0) == pytest.approx(180.0)


def test_the_rendered_sphere_keeps_its_albedos_hue():
    """Real renders (PyBullet, the controller's camera, each seed's light): the ground-truth sphere's pixels have
    their albedo's hue, the premise of a check by the target's colour."""
    env = GraspEnv(ENV)
    distances = []
    try:
        for seed in range(16):
            r = env.reset(seed)
            gt = r.frame.sphere_mask.astype(bool)
            if gt.sum() < 3:
                continue
            _, hue, _ = blob_hues(gt, r.frame.rgb)
            distances.append(float(hue_distance_deg(hue[0], albedo_hue_deg(env.params.sphere_rgb))))
    finally:
        env.close()
    assert len(distances) >= 8, distances
    assert np.median(distances) < 10 and np.mean(np.array(distances) < 20) >= 0.9, distances


def test_the_colour_check_drops_a_blob_of_another_hue_and_keeps_the_targets():
    rgb = np.full((64, 64, 3), 128, np.uint8)
    rgb[10:14, 10:14] = (220, 30, 30)  # red
    rgb[40:44, 40:44] = (30, 200, 40)  # green
    mask = np.zeros((64, 64), bool)
    mask[10:14, 10:14] = mask[40:44, 40:44] = True
    tap = FrameTap(lambda rgb, gt, **kw: np.zeros(rgb.shape[:3], bool))
    tap(rgb[None], None)
    built = targeted(hue_checked("30", 0.0), [albedo_hue_deg((0.1, 0.8, 0.15))], tap)(ENV.scene, ENV.camera, SHIPPED)
    open_high = np.array([0.0, 0.0, 0.2, 0.04, 0.0])
    out = built.filter(mask, open_high)
    assert not out[10:14, 10:14].any() and out[40:44, 40:44].all()
    assert hue_checked("off", 0.0) is not built.__class__
    with pytest.raises(ValueError, match="hue tolerance"):
        hue_checked("wide", 0.0)
    with pytest.raises(ValueError, match=r"\(0, 180\]"):
        hue_checked("200", 0.0)
