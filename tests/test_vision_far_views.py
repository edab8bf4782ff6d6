"""Far training views: the sim views at an episode's start and search heights, and more table textures."""

from __future__ import annotations

import numpy as np
import pytest

from grasp_s2r.sim.robot import PALM_LINK
from grasp_s2r.vision.images.backgrounds import load_backgrounds
from grasp_s2r.vision.images.dataset import env_config_for
from grasp_s2r.vision.images.simviews import SimViewSampler, ViewConfig


def _sphere_width_px(mask: np.ndarray) -> int:
    cols = np.nonzero(mask.any(axis=0))[0]
    return 0 if len(cols) == 0 else int(cols[-1] - cols[0] + 1)


def _views(view: ViewConfig, n: int) -> tuple[list[float], list[int]]:
    """TCP heights above the table (m) and sphere widths (px) of ``n`` views."""
    s = SimViewSampler(env_config_for(64), view)
    heights, widths = [], []
    try:
        for k in range(n):
            f = s.render(k, np.random.default_rng(k))
            palm_z = s.env.robot.link_pose_world(PALM_LINK)[0][2]
            heights.append(palm_z)
            widths.append(_sphere_width_px(f.sphere_mask))
    finally:
        s.close()
    return heights, widths


def test_far_views_are_at_start_and_search_heights_with_a_sphere_a_few_px_wide():
    _, far_widths = _views(ViewConfig(empty_prob=0.0, far_view_prob=1.0), 24)
    _, recipe_widths = _views(ViewConfig(empty_prob=0.0), 24)
    seen = [w for w in far_widths if w > 0]
    assert len(seen) >= 20  # the sphere stays in view from there
    assert max(seen) <= 5 and np.median(seen) <= 4  # 2-4 px: what an episode starts with
    assert np.median([w for w in recipe_widths if w > 0]) > np.median(seen) + 2  # the recipe's views: mostly close


def test_far_view_heights_follow_the_configured_range():
    low, _ = _views(ViewConfig(empty_prob=0.0, far_view_prob=1.0, far_view_height_m=(0.1, 0.1)), 6)
    high, _ = _views(ViewConfig(empty_prob=0.0, far_view_prob=1.0, far_view_height_m=(0.24, 0.24)), 6)
    assert np.ptp(low) < 3e-3 and np.ptp(high) < 3e-3  # (the arm's IK lands within a few mm)
    assert np.mean(high) - np.mean(low) == pytest.approx(0.14, abs=2e-3)


def test_without_far_views_the_recipe_views_are_unchanged():
    # the far-view draw happens only when asked for: old runs' composites stay bit-identical
    a = SimViewSampler(env_config_for(32), ViewConfig(empty_prob=0.2))
    b = SimViewSampler(env_config_for(32), ViewConfig(empty_prob=0.2, far_view_prob=0.0, far_view_height_m=(0.2, 0.3)))
    try:
        for k in range(4):
            assert np.array_equal(a.render(k, np.random.default_rng(k)).rgb, b.render(k, np.random.default_rng(k)).rgb)
    finally:
        a.close()
        b.close()


def test_every_photo_can_become_a_table_with_enough_textures():
    photos = load_backgrounds("train")
    few = SimViewSampler(env_config_for(32), ViewConfig(photo_textures=4), table_photos=photos)
    many = SimViewSampler(env_config_for(32), ViewConfig(photo_textures=len(photos)), table_photos=photos)
    try:
        assert len(few._photo_texture_ids()) == 4
        assert len(many._photo_texture_ids()) == len(photos)
    finally:
        few.close()
        many.close()


def test_recolouring_changes_a_share_of_the_photo_table_textures_and_keeps_their_crops():
    # GIVEN the same photo-table textures without recolouring, with half of them and with all of them recoloured
    photos = load_backgrounds("train")
    view = ViewConfig(photo_textures=16)
    samplers = [SimViewSampler(env_config_for(32), view, table_photos=photos, texture_seed=3, recolor_prob=p)
                for p in (0.0, 0.5, 1.0)]
    try:
        for s in samplers:
            s._photo_texture_ids()  # loads the textures
        plain, half, every = (s._photo_texture_rgb for s in samplers)
        changed = [[not np.array_equal(a, b) for a, b in zip(plain, other)] for other in (half, every)]
        # THEN recolouring changes about its share of the textures; a recoloured one keeps its crop's edges
        assert all(changed[1]) and 3 <= sum(changed[0]) <= 13
        assert [a.shape for a in plain] == [b.shape for b in every]
        grey = [np.asarray(t, np.float32).mean(axis=2) for t in (plain[0], every[0])]
        edges = [np.abs(np.diff(g, axis=1)).ravel() for g in grey]
        assert abs(np.corrcoef(*edges)[0, 1]) > 0.3
    finally:
        for s in samplers:
            s.close()


@pytest.mark.parametrize("bad", [{"far_view_prob": 1.5}, {"far_view_height_m": (0.2, 0.1)}, {"photo_textures": 0}])
def test_bad_far_view_settings_are_refused(bad):
    with pytest.raises(ValueError):
        ViewConfig(**bad)


def _sphere_vs_table_colour(view: ViewConfig, photos: list[np.ndarray], n: int) -> float:
    """Median over ``n`` photo-table views of the RGB distance between the sphere's mean colour and the ring of
    table around it."""
    import cv2

    s = SimViewSampler(env_config_for(64), view, table_photos=photos)
    dists = []
    try:
        for k in range(n):
            f = s.render(k, np.random.default_rng(k), photo_table=np.random.default_rng([k, 1]))
            m = f.sphere_mask
            if m.sum() < 6:
                continue
            ring = cv2.dilate(m.astype(np.uint8), np.ones((7, 7), np.uint8)).astype(bool) & ~m & ~f.gripper_mask
            dists.append(np.linalg.norm(f.rgb[m].mean(0) - f.rgb[ring].mean(0)))
    finally:
        s.close()
    assert len(dists) >= n // 2
    return float(np.median(dists))


def test_table_coloured_spheres_look_like_the_table_around_them():
    photos = load_backgrounds("train")
    base = {"empty_prob": 0.0, "near_offset_prob": 1.0, "max_tcp_height_m": 0.06}
    plain = _sphere_vs_table_colour(ViewConfig(**base), photos, 16)
    camouflaged = _sphere_vs_table_colour(ViewConfig(**base, table_colour_prob=1.0), photos, 16)
    assert camouflaged < 0.6 * plain
