"""The painted-sphere test renderer: pinhole sizes, exact geometric masks, empty share, determinism, independence
from the training renderers (real numpy / cv2, no mocks, no PyBullet)."""

from __future__ import annotations

import ast
import dataclasses
import math
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from grasp_s2r.sim.config import CameraConfig, SceneConfig
from grasp_s2r.vision.testsets import painted, painted_sizes
from grasp_s2r.vision.testsets.painted import (
    PaintedConfig,
    PaintedSuite,
    diameter_range_px,
    disc_mask,
    draw_distance_m,
    make_painted,
    paint_sphere,
)
from grasp_s2r.vision.testsets.painted_sizes import (
    EPISODE_DISTANCE_QUANTILES_M,
    QUANTILE_LEVELS,
    distance_for_diameter_px,
    focal_px,
    sphere_diameter_px,
)

CLEAN = PaintedConfig(empty_prob=0.0, shadow_prob=0.0, defocus_prob=0.0, motion_blur_prob=0.0, noise_prob=0.0,
                      jpeg_prob=0.0)
"""No empty images, no shadow, no camera effects: painted pixels can be compared with the photo."""


@pytest.fixture(scope="module")
def photos() -> list[np.ndarray]:
    rng = np.random.default_rng(5)
    smooth = np.repeat(np.linspace(0, 255, 200, dtype=np.uint8)[None, :, None], 3, axis=2).repeat(150, axis=0)
    return [rng.integers(0, 256, size=(120, 160, 3), dtype=np.uint8), np.ascontiguousarray(smooth)]


def test_default_diameter_range_is_the_episodes_with_a_small_margin_by_the_pinhole_model():
    lo, hi = diameter_range_px(CameraConfig(), SceneConfig(), PaintedConfig())
    assert 1.9 <= lo <= 2.2 and 12.0 <= hi <= 13.0  # episodes: 2.3-11.5 px, 10 % margin
    f = 32.0 / math.tan(math.radians(30.0))
    assert focal_px(CameraConfig()) == pytest.approx(f)
    assert hi == pytest.approx(f * 0.0137 * 1.1 / EPISODE_DISTANCE_QUANTILES_M[0])
    assert distance_for_diameter_px(sphere_diameter_px(0.1, CameraConfig(), SceneConfig()), CameraConfig(),
                                    SceneConfig()) == pytest.approx(0.1)


def test_drawn_sizes_follow_the_episodes_quantiles(rng):
    cam, scene = CameraConfig(), SceneConfig()
    cfg = dataclasses.replace(PaintedConfig(), distance_jitter=0.0)
    widths = np.array([sphere_diameter_px(draw_distance_m(rng, cfg), cam, scene) for _ in range(4000)])
    stored = [sphere_diameter_px(d, cam, scene) for d in EPISODE_DISTANCE_QUANTILES_M[::-1]]
    for level in (0.05, 0.5, 0.95):
        k = QUANTILE_LEVELS.index(level)
        assert np.quantile(widths, level) == pytest.approx(stored[k], rel=0.06)
    lo, hi = diameter_range_px(cam, scene, cfg)
    assert lo - 1e-9 <= widths.min() and widths.max() <= hi + 1e-9


def test_size_halves_with_double_distance_and_shrinks_with_a_wider_fov():
    cam, scene = CameraConfig(), SceneConfig()
    d1 = sphere_diameter_px(0.1, cam, scene)
    assert sphere_diameter_px(0.2, cam, scene) == pytest.approx(d1 / 2)
    assert sphere_diameter_px(0.1, CameraConfig(fov_deg=90.0), scene) < d1
    assert sphere_diameter_px(0.1, cam, SceneConfig(sphere_diameter_m=0.0274)) == pytest.approx(2 * d1)
    # the image's own height sets the focal length: the same lens at twice the resolution
    assert sphere_diameter_px(0.1, cam, scene, height_px=128) == pytest.approx(2 * d1)
    wide_lo, wide_hi = diameter_range_px(CameraConfig(fov_deg=90.0))
    assert wide_hi < diameter_range_px()[1] and wide_lo < diameter_range_px()[0]


def test_sizes_come_from_the_drawn_distance_and_stay_in_range(photos):
    suite = PaintedSuite(photos, seed=3)
    lo, hi = diameter_range_px()
    diameters = []
    for i in range(200):
        _, _, info = suite.sample(i, return_info=True)
        if info["empty"]:
            continue
        expected = sphere_diameter_px(info["distance_m"], CameraConfig(), SceneConfig(), height_px=64)
        assert info["diameter_px"] == pytest.approx(expected)
        assert info["radius_px"] == pytest.approx(expected / 2)
        diameters.append(info["diameter_px"])
    diameters = np.array(diameters)
    assert diameters.min() >= lo - 1e-9 and diameters.max() <= hi + 1e-9
    assert (diameters < 4).mean() > 0.15 and (diameters > 10).mean() > 0.1  # log-uniform: small ones are common


def test_mask_is_exactly_the_pixel_centres_inside_the_disc(photos):
    suite = PaintedSuite(photos, seed=11)
    ys, xs = np.mgrid[0:64, 0:64] + 0.5
    checked = 0
    for i in range(60):
        rgb, mask, info = suite.sample(i, return_info=True)
        assert rgb.shape == (64, 64, 3) and rgb.dtype == np.uint8 and mask.dtype == bool
        if info["empty"]:
            continue
        (cx, cy), r = info["centre_px"], info["radius_px"]
        assert np.array_equal(mask, (xs - cx) ** 2 + (ys - cy) ** 2 < r * r)
        assert np.array_equal(mask, disc_mask((64, 64), cx, cy, r))
        assert mask.any(), "a disc of radius >= 1 centred in the image holds at least one pixel centre"
        checked += 1
    assert checked >= 40


def test_mask_area_of_large_spheres_is_pi_r_squared(rng):
    cfg = dataclasses.replace(CLEAN, distance_quantiles_m=(0.048,) * 22 + (0.06,), distance_jitter=0.0,
                              border_cut_prob=0.0)
    bg = np.full((64, 64, 3), 128, np.uint8)
    for _ in range(20):
        _, mask, info = paint_sphere(bg, rng, cfg, return_info=True)
        area = math.pi * info["radius_px"] ** 2
        assert info["radius_px"] > 6
        assert abs(mask.sum() - area) <= 0.08 * area


def test_empty_share_follows_empty_prob_and_empty_masks_are_all_false(photos):
    suite = PaintedSuite(photos, seed=2)
    empty = 0
    for i in range(500):
        _, mask, info = suite.sample(i, return_info=True)
        if info["empty"]:
            empty += 1
            assert not mask.any()
        else:
            assert mask.any()
    assert 30 <= empty <= 70  # 10 % of 500 = 50, binomial sd 6.7
    _, masks = make_painted(photos, 100, seed=2, cfg=PaintedConfig(empty_prob=1.0))
    assert not masks.any()


def test_same_seed_and_index_repeat_and_different_seeds_differ(photos):
    a = PaintedSuite(photos, seed=4)
    b = PaintedSuite(photos, seed=4)
    c = PaintedSuite(photos, seed=5)
    for i in (0, 7, 31):
        rgb_a, mask_a = a.sample(i)
        rgb_b, mask_b = b.sample(i)
        assert np.array_equal(rgb_a, rgb_b) and np.array_equal(mask_a, mask_b)
    images, masks = make_painted(photos, 8, seed=4)
    assert images.shape == (8, 64, 64, 3) and masks.shape == (8, 64, 64)
    assert np.array_equal(images[7], a.sample(7)[0]) and np.array_equal(masks[7], a.sample(7)[1])
    other, _ = make_painted(photos, 8, seed=5)
    assert np.array_equal(other[3], c.sample(3)[0])
    assert not np.array_equal(images, other)


def test_painted_pixels_differ_inside_the_mask_and_the_photo_is_untouched_far_away(rng):
    cfg = dataclasses.replace(CLEAN, dull_albedo_prob=0.0)
    bg = rng.integers(60, 200, size=(64, 64, 3), dtype=np.uint8)
    ys, xs = np.mgrid[0:64, 0:64] + 0.5
    for _ in range(30):
        rgb, mask, info = paint_sphere(bg, rng, cfg, return_info=True)
        diff = np.abs(rgb.astype(int) - bg.astype(int)).max(axis=2)
        assert diff[mask].mean() > 10
        (cx, cy), r = info["centre_px"], info["radius_px"]
        far = (xs - cx) ** 2 + (ys - cy) ** 2 > (r + 1.5) ** 2
        assert np.array_equal(rgb[far], bg[far])


def test_camera_effects_come_after_painting_and_leave_the_mask_alone():
    bg = np.full((64, 64, 3), 128, np.uint8)
    heavy = dataclasses.replace(CLEAN, defocus_prob=0.5, motion_blur_prob=0.5, noise_prob=1.0, noise_std=(0.03, 0.05),
                                jpeg_prob=1.0)
    for seed in range(10):
        rgb0, mask0, info0 = paint_sphere(bg, np.random.default_rng(seed), CLEAN, return_info=True)
        rgb1, mask1, info1 = paint_sphere(bg, np.random.default_rng(seed), heavy, return_info=True)
        assert info0["centre_px"] == info1["centre_px"] and info0["radius_px"] == info1["radius_px"]
        assert np.array_equal(mask0, mask1)
        assert not np.array_equal(rgb0, rgb1)
        assert not np.array_equal(rgb1[~mask1], bg[~mask1])  # the whole image is degraded, not just the sphere


@pytest.mark.parametrize("bad", [
    {"distance_quantiles_m": (0.0,) * 23}, {"distance_quantiles_m": (0.3,) + (0.1,) * 22},
    {"distance_quantiles_m": (0.1, 0.2)}, {"distance_jitter": 1.0}, {"empty_prob": 1.5},
    {"shadow_prob": -0.1}, {"ambient": (0.6, 0.1)}, {"specular_exponent": (0.5, 10.0)},
    {"jpeg_quality": (30, 120)}, {"noise_std": (0.0, 2.0)}, {"defocus_prob": 0.7, "motion_blur_prob": 0.5},
    {"supersample": 0}, {"light_elevation_deg": (-10.0, 90.0)}, {"edge_margin_px": -1.0},
])
def test_bad_config_values_raise(bad):
    with pytest.raises(ValueError):
        PaintedConfig(**bad)


def test_bad_inputs_raise(photos, rng):
    with pytest.raises(ValueError):
        PaintedSuite([])
    with pytest.raises(ValueError):
        paint_sphere(np.zeros((64, 64), np.uint8), rng)
    with pytest.raises(ValueError):
        PaintedSuite([np.zeros((64, 64, 3), np.float32)])


def test_painted_shares_no_code_with_the_training_renderers():
    imported = set()
    for module in (painted, painted_sizes):  # the renderer and the sizes it draws
        source = Path(module.__file__).read_text()
        assert "pybullet" not in source  # (the docstring says "PyBullet": case matters)
        for node in ast.walk(ast.parse(source)):
            if isinstance(node, ast.Import):
                imported |= {a.name for a in node.names}
            elif isinstance(node, ast.ImportFrom):
                imported.add(node.module)
    assert imported <= {"__future__", "itertools", "math", "dataclasses", "typing", "cv2", "numpy", "tqdm",
                        "grasp_s2r.sim.config", "grasp_s2r.vision.testsets.painted_sizes"}
    # in a fresh interpreter, importing painted loads none of the training renderer modules
    forbidden = ["grasp_s2r.vision.images.composite", "grasp_s2r.vision.images.simviews", "grasp_s2r.vision.images.dataset",
                 "grasp_s2r.vision.images.augment", "grasp_s2r.sim.env", "grasp_s2r.sim.randomization",
                 "grasp_s2r.sim.camera", "grasp_s2r.sim.robot"]
    code = f"import sys, grasp_s2r.vision.testsets.painted; print([m for m in {forbidden!r} if m in sys.modules])"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]", out.stdout
