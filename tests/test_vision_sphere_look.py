"""The training renderers' wider sphere look: grey albedos, mirror-like spheres, hard shadows; options off = as before."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

import cv2
import numpy as np
import pytest

from grasp_s2r.sim.camera import Frame
from grasp_s2r.vision.images.augment import NO_AUGMENT
from grasp_s2r.vision.images.backgrounds import load_backgrounds
from grasp_s2r.vision.images.composite import CompositeConfig, composite_frame, mirror
from grasp_s2r.vision.images.dataset import CompositeDataset, DataConfig, env_config_for
from grasp_s2r.vision.images.reshade import ReshadeConfig, grey_albedo, reshade
from grasp_s2r.vision.images.simviews import SimViewSampler, ViewConfig


@pytest.fixture(scope="module")
def frame() -> Frame:
    s = SimViewSampler(env_config_for(64), ViewConfig(empty_prob=0.0, near_offset_prob=1.0))
    try:
        for k in range(30):
            f = s.render(k, np.random.default_rng(k))
            if f.sphere_mask.sum() >= 30:
                return f
    finally:
        s.close()
    raise AssertionError("no view with a sphere of >= 30 px in 30 near-offset draws")


def _circle(mask: np.ndarray) -> tuple[float, float, float]:
    """The circle (cx, cy, r) in px of a sphere's mask: its centroid and the radius of a disc of its area."""
    ys, xs = np.nonzero(mask)
    return float(xs.mean() + 0.5), float(ys.mean() + 0.5), float(np.sqrt(mask.sum() / np.pi))


def _saturation(rgb01: np.ndarray) -> float:
    hsv = cv2.cvtColor(np.uint8(np.clip(rgb01, 0, 1) * 255)[None, None], cv2.COLOR_RGB2HSV)
    return float(hsv[0, 0, 1]) / 255.0


def test_grey_albedos_are_grey_from_black_to_white(rng):
    colours = np.array([grey_albedo(rng) for _ in range(400)])
    value = colours.max(axis=1)
    assert max(_saturation(c) for c in colours[value > 0.25]) <= 0.16  # (dark ones: uint8 rounding)
    assert value.min() < 0.1 and value.max() > 0.9  # black to white


def test_mirror_shows_the_background_around_the_sphere_and_nothing_else(frame):
    m = frame.sphere_mask
    h, w = m.shape
    # a background with a left-right gradient: the reflection must carry it, curved, on the sphere
    bg = np.zeros((h, w, 3), np.float32)
    bg[:, :, 0] = np.linspace(0, 255, w)[None, :]
    sphere = frame.rgb.astype(np.float32)
    out = mirror(sphere, m, bg, strength=1.0, reach_radii=4.0, flip=False)
    assert np.array_equal(out[~m], sphere[~m])
    cols = np.nonzero(m)[1]
    left, right = cols < cols.mean(), cols > cols.mean()
    red = out[m][:, 0]
    assert red[right].mean() > red[left].mean() + 10  # the sphere's right half shows what lies right of it
    flipped = mirror(sphere, m, bg, strength=1.0, reach_radii=4.0, flip=True)[m][:, 0]
    assert flipped[left].mean() > flipped[right].mean() + 10
    half = mirror(sphere, m, bg, strength=0.5, reach_radii=4.0, flip=False)
    assert np.allclose(half[m], 0.5 * sphere[m] + 0.5 * out[m], atol=1e-3)


def test_a_hard_shadow_has_a_sharper_edge_than_a_soft_one(frame, rng):
    grey = np.full((*frame.sphere_mask.shape, 3), 200, np.uint8)

    def edge(sigma: float) -> float:
        cfg = CompositeConfig(shadow_prob=1.0, shadow_sigma_px=(sigma, sigma), shadow_strength=(0.5, 0.5),
                              shadow_offset_px=3.0, edge_sigma_px=(0.0, 0.0), paste_gripper=False)
        rgb, _ = composite_frame(frame, grey, np.random.default_rng(0), cfg)
        lum = rgb.astype(np.float32).mean(axis=2)
        lum[frame.sphere_mask] = np.nan
        return float(np.nanmax(np.abs(np.diff(lum, axis=1))))

    assert edge(0.1) > 1.5 * edge(3.0)


@pytest.fixture(scope="module")
def photos() -> list[np.ndarray]:
    return load_backgrounds("train")[:3]


def _dataset(photos: list[np.ndarray], **changes) -> CompositeDataset:
    base = DataConfig(view=ViewConfig(empty_prob=0.0, near_offset_prob=1.0), augment=NO_AUGMENT)
    cfg = DataConfig(view=changes.get("view", base.view), augment=NO_AUGMENT,
                     composite=changes.get("composite", base.composite), reshade=changes.get("reshade", base.reshade))
    return CompositeDataset(env_config=env_config_for(32), data=cfg, backgrounds=photos, stream="train", seed=3,
                            length=8)


@contextlib.contextmanager
def _plain_and_changed(photos: list[np.ndarray], **changes) -> Iterator[tuple[CompositeDataset, CompositeDataset]]:
    """The recipe's dataset and one with ``changes`` (same seeds), both closed afterwards."""
    plain, changed = _dataset(photos), _dataset(photos, **changes)
    try:
        yield plain, changed
    finally:
        plain.close()
        changed.close()


def test_new_options_at_zero_leave_every_composite_as_it_was(photos):
    with _plain_and_changed(photos, view=ViewConfig(empty_prob=0.0, near_offset_prob=1.0, grey_color_prob=0.0),
                            composite=CompositeConfig(mirror_prob=0.0),
                            reshade=ReshadeConfig(grey_albedo_prob=0.0, texture_prob=0.0)) as (plain, zero):
        for i in range(8):
            (ra, ma), (rb, mb) = plain.sample(i), zero.sample(i)
            assert np.array_equal(ra, rb) and np.array_equal(ma, mb)


def test_mirrors_change_only_the_sphere_and_keep_the_label(photos):
    with _plain_and_changed(photos, composite=CompositeConfig(mirror_prob=1.0)) as (plain, shiny):
        changed = 0
        for i in range(8):
            (rp, mp), (rs, ms) = plain.sample(i), shiny.sample(i)
            frame = shiny.frame(i // shiny.data.renders_per_view)
            assert np.array_equal(ms, frame.sphere_mask) and np.array_equal(mp, ms)
            photo = ~(frame.sphere_mask | frame.gripper_mask)
            assert np.array_equal(rp[photo], rs[photo])
            changed += int(ms.any() and np.abs(rp[ms].astype(int) - rs[ms]).max() > 10)
        assert changed >= 2, "no sphere became mirror-like"


def test_grey_sphere_colours_in_the_sim_keep_the_label(photos):
    grey = _dataset(photos, view=ViewConfig(empty_prob=0.0, near_offset_prob=1.0, grey_color_prob=1.0))
    try:
        sats = []
        for i in range(0, 8, 4):
            _, mask = grey.sample(i)
            frame = grey.frame(i // grey.data.renders_per_view)
            assert np.array_equal(mask, frame.sphere_mask)
            if frame.sphere_mask.sum() >= 4:
                sats.append(_saturation(np.median(frame.rgb[frame.sphere_mask], axis=0) / 255.0))
        assert sats and max(sats) < 0.3  # TinyRenderer's white light keeps a grey sphere grey
    finally:
        grey.close()


def test_a_relocated_sphere_moves_whole_with_its_label_and_clear_of_the_fingers(frame):
    from grasp_s2r.vision.images.composite import relocate_sphere

    m = frame.sphere_mask
    ys, xs = np.nonzero(m)
    moved_any, places = 0, set()
    for seed in range(40):
        out = relocate_sphere(frame, np.random.default_rng(seed))
        assert out.sphere_mask.sum() == m.sum() and np.array_equal(out.gripper_mask, frame.gripper_mask)
        assert not (out.sphere_mask & frame.gripper_mask).any()
        if out is frame:
            continue
        moved_any += 1
        ny, nx = np.nonzero(out.sphere_mask)
        dy, dx = int(ny.min() - ys.min()), int(nx.min() - xs.min())
        assert np.array_equal(np.roll(m, (dy, dx), axis=(0, 1)), out.sphere_mask)  # the same shape, shifted
        assert np.array_equal(out.rgb[out.sphere_mask], frame.rgb[m])  # its own pixels, in the same order
        places.add((int(ny.mean()) * 4 // m.shape[0], int(nx.mean()) * 4 // m.shape[1]))
    if (cv2.dilate(m.astype(np.uint8), np.ones((3, 3), np.uint8)).astype(bool) & frame.gripper_mask).any():
        assert moved_any == 0  # a sphere touching a finger stays (its pixels hide part of the finger)
    else:
        assert moved_any >= 30 and len(places) >= 8  # anywhere in the image: most of its 16 quarter cells


def test_relocated_spheres_in_composites_keep_image_and_label_together(photos):
    with _plain_and_changed(photos, composite=CompositeConfig(relocate_prob=1.0)) as (plain, moved):
        shifted = 0
        for i in range(8):
            (rp, mp), (rm, mm) = plain.sample(i), moved.sample(i)
            assert mp.sum() == mm.sum()
            if mm.any() and not np.array_equal(mp, mm):
                shifted += 1
                # the sphere's pixels moved with the label: the sphere was pasted where the label now is
                assert np.abs(rm[mm].astype(int).mean(0) - rp[mp].astype(int).mean(0)).max() < 40
        assert shifted >= 2


def test_a_sphere_moved_onto_the_border_is_cut_by_it_keeps_its_pixels_and_clears_the_fingers(frame):
    from grasp_s2r.vision.images.composite import border_sphere

    m = frame.sphere_mask
    touches_finger = (cv2.dilate(m.astype(np.uint8), np.ones((3, 3), np.uint8)).astype(bool) & frame.gripper_mask).any()
    sides, cut = set(), 0
    for seed in range(40):
        out = border_sphere(frame, np.random.default_rng(seed))
        assert np.array_equal(out.gripper_mask, frame.gripper_mask) and not (out.sphere_mask & frame.gripper_mask).any()
        if out is frame:
            continue
        ny, nx = np.nonzero(out.sphere_mask)
        assert 0 < len(ny) <= m.sum()
        on = {s for s, hit in (("top", ny.min() <= 1), ("bottom", ny.max() >= m.shape[0] - 2),
                              ("left", nx.min() <= 1), ("right", nx.max() >= m.shape[1] - 2)) if hit}
        assert on, "the moved sphere is cut by a border or within a pixel of it"
        sides |= on
        cut += len(ny) < m.sum()
        # the pixels kept are the sphere's own (its colours), elsewhere
        assert np.abs(out.rgb[out.sphere_mask].astype(int).mean(0) - frame.rgb[m].astype(int).mean(0)).max() < 60
        assert not np.array_equal(out.sphere_mask, m)
    if touches_finger:
        assert sides == set()  # a sphere touching a finger stays
    else:
        assert len(sides) >= 3 and cut >= 10  # onto most sides (the bottom one is mostly fingers), often cut


def test_border_spheres_are_drawn_only_when_asked():
    assert CompositeConfig().border_prob == 0.0
    with pytest.raises(ValueError, match="border_prob"):
        CompositeConfig(border_prob=1.5)


def test_a_textured_sphere_carries_its_crop_s_pattern_under_the_same_light(frame):
    # GIVEN a rendered sphere, a two-colour crop (left half red, right half blue) and one light for both
    circle = _circle(frame.sphere_mask)
    crop = np.zeros((16, 16, 3), np.uint8)
    crop[:, :8], crop[:, 8:] = (200, 20, 20), (20, 20, 200)
    cfg = ReshadeConfig(prob=1.0, new_albedo_prob=0.0, specular=(0.0, 0.0), texture_prob=1.0)
    plain = reshade(frame.rgb, frame.sphere_mask, circle, np.random.default_rng(0), cfg)
    patterned = reshade(frame.rgb, frame.sphere_mask, circle, np.random.default_rng(0), cfg, texture=crop)
    # THEN only the sphere's pixels change, and its left half is red, its right half blue: the crop's pattern
    m = frame.sphere_mask
    assert np.array_equal(patterned[~m], frame.rgb[~m]) and np.array_equal(plain[~m], frame.rgb[~m])
    left, right = m & (np.arange(m.shape[1])[None] < circle[0] - 1), m & (np.arange(m.shape[1])[None] > circle[0] + 1)
    assert left.any() and right.any()
    assert patterned[left][:, 0].mean() > patterned[left][:, 2].mean() + 20
    assert patterned[right][:, 2].mean() > patterned[right][:, 0].mean() + 20


def test_textured_spheres_in_composites_keep_the_label_and_the_photo(photos):
    with _plain_and_changed(photos, reshade=ReshadeConfig(prob=1.0, texture_prob=0.0)) as (plain, _), \
            _plain_and_changed(photos, reshade=ReshadeConfig(prob=1.0, texture_prob=1.0)) as (_, textured):
        changed = 0
        for i in range(8):
            (rp, mp), (rt, mt) = plain.sample(i)[:2], textured.sample(i)[:2]
            frame = textured.frame(i // textured.data.renders_per_view)
            assert np.array_equal(mp, mt)
            photo = ~(frame.sphere_mask | frame.gripper_mask)
            assert np.array_equal(rp[photo], rt[photo])
            changed += int(mt.sum() >= 9 and np.abs(rp[mt].astype(int) - rt[mt]).max() > 10)
        assert changed >= 2, "no sphere got a pattern"
