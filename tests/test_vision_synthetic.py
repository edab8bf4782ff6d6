"""Synthetic backgrounds and distractors: shapes, determinism, variety, flatness, copy semantics (real numpy / cv2)."""

from __future__ import annotations

import cv2
import numpy as np
import pytest

from grasp_s2r.vision.images.synthetic import (
    BLOB_WIDTH_PX,
    DISTRACTOR_KINDS,
    TEXTURE_KINDS,
    add_distractors,
    add_photo_blobs,
    flat_colour,
    procedural_texture,
)

HWS = [(64, 64), (48, 80)]


def _rng(seed: int) -> np.random.Generator:
    return np.random.default_rng(seed)


@pytest.mark.parametrize("hw", HWS)
def test_shapes_and_dtypes(hw):
    for seed in range(20):
        for img in (procedural_texture(hw, _rng(seed)), flat_colour(hw, _rng(seed))):
            assert img.shape == (*hw, 3) and img.dtype == np.uint8
        out = add_distractors(procedural_texture(hw, _rng(seed)), _rng(seed))
        assert out.shape == (*hw, 3) and out.dtype == np.uint8
    for kind in TEXTURE_KINDS:
        img = procedural_texture(hw, _rng(0), kind=kind)
        assert img.shape == (*hw, 3) and img.dtype == np.uint8


def test_unknown_kind_rejected():
    with pytest.raises(ValueError, match="kind"):
        procedural_texture((64, 64), _rng(0), kind="marble")


@pytest.mark.parametrize("fn", [procedural_texture, flat_colour])
def test_deterministic_given_rng(fn):
    for seed in range(10):
        np.testing.assert_array_equal(fn((64, 64), _rng(seed)), fn((64, 64), _rng(seed)))
    draws = [fn((64, 64), _rng(seed)).tobytes() for seed in range(10)]
    assert len(set(draws)) == len(draws)


def test_distractors_deterministic_given_rng():
    bg = flat_colour((64, 64), _rng(0))
    a, b = add_distractors(bg, _rng(5)), add_distractors(bg, _rng(5))
    np.testing.assert_array_equal(a, b)
    assert len({add_distractors(bg, _rng(seed)).tobytes() for seed in range(10)}) == 10


def test_texture_kind_is_the_random_draw_unless_forced():
    """A forced kind still consumes the kind draw, so exactly one forced kind reproduces an unforced draw."""
    seen = set()
    for seed in range(40):
        img = procedural_texture((64, 64), _rng(seed))
        matches = [k for k in TEXTURE_KINDS if np.array_equal(img, procedural_texture((64, 64), _rng(seed), kind=k))]
        assert len(matches) == 1
        seen.add(matches[0])
    assert len(seen) >= 5


def test_texture_variety():
    imgs = [procedural_texture((64, 64), _rng(seed)) for seed in range(200)]
    stds = np.array([cv2.cvtColor(im, cv2.COLOR_RGB2GRAY).std() for im in imgs])
    assert (stds < 3).sum() >= 10, "some textures should be very low contrast"
    assert (stds > 20).sum() >= 20, "some textures should be high contrast"
    means = np.array([im.reshape(-1, 3).mean(axis=0) for im in imgs], dtype=np.uint8)
    hsv = cv2.cvtColor(means[None], cv2.COLOR_RGB2HSV)[0].astype(int)
    brightness = hsv[:, 2]
    assert brightness.min() < 50 and brightness.max() > 200
    saturated = hsv[hsv[:, 1] > 80]
    hue_sextants = set((saturated[:, 0] // 30).tolist())  # OpenCV hue is 0-179
    assert len(hue_sextants) == 6, f"mean colours should cover all hues, got sextants {sorted(hue_sextants)}"
    assert (hsv[:, 1] < 25).sum() >= 10, "some textures should be grey"


def test_flat_colour_is_flat_and_varied():
    imgs = [flat_colour((64, 64), _rng(seed)).astype(np.float32) for seed in range(100)]
    for im in imgs:
        assert im.std(axis=(0, 1)).max() < 12  # a gentle gradient / vignette only
        assert (im - cv2.blur(im, (3, 3))).std() < 3  # tiny pixel noise
    means = np.array([im.mean() for im in imgs])
    assert means.min() < 30 and means.max() > 220  # near-black and near-white happen
    hsv = cv2.cvtColor(np.array([im.reshape(-1, 3).mean(0) for im in imgs], np.uint8)[None], cv2.COLOR_RGB2HSV)[0]
    assert (hsv[:, 1] > 150).sum() >= 10  # saturated colours happen


def test_add_distractors_copies_and_changes():
    changed = 0
    for seed in range(100):
        bg = procedural_texture((64, 64), _rng(seed)) if seed % 2 else flat_colour((64, 64), _rng(seed))
        before = bg.copy()
        out = add_distractors(bg, _rng(1000 + seed))
        np.testing.assert_array_equal(bg, before)
        assert out is not bg and not np.shares_memory(out, bg)
        changed += int(np.any(out != bg))
    assert changed >= 85


def test_add_distractors_zero_count_is_unchanged_copy():
    bg = flat_colour((48, 80), _rng(3))
    out = add_distractors(bg, _rng(4), max_count=0)
    np.testing.assert_array_equal(out, bg)
    assert not np.shares_memory(out, bg)


def test_add_distractors_accepts_non_contiguous_input():
    bg = procedural_texture((64, 128), _rng(1))[:, ::2]
    out = add_distractors(bg, _rng(2), max_count=5)
    assert out.shape == (64, 64, 3) and out.flags.c_contiguous


def test_distractor_kinds_choose_the_shapes_drawn():
    """All kinds by default (the same draws as naming them all); one kind: only its look (holes darken a bright
    surface, speculars brighten a dark one); a bad selection refused."""
    bright, dark = np.full((64, 64, 3), 200, np.uint8), np.full((64, 64, 3), 10, np.uint8)
    for seed in range(30):
        np.testing.assert_array_equal(add_distractors(bright, _rng(seed)),
                                      add_distractors(bright, _rng(seed), kinds=DISTRACTOR_KINDS))
        holes = add_distractors(bright, _rng(seed), max_count=5, kinds=("hole",)).astype(int)
        assert np.all(holes <= 200) and np.any(holes < 200)
        grey = holes[holes.sum(-1) < 600]
        assert np.all(grey.max(-1) == grey.min(-1))  # black to dark grey, no colour
        speculars = add_distractors(dark, _rng(seed), max_count=5, kinds=("specular",))
        assert np.all(speculars >= 10) and np.any(speculars > 10)
    saturated = add_distractors(bright, _rng(0), max_count=5, kinds=("ring", "disc", "ellipse", "rect", "line"))
    assert not np.array_equal(saturated, bright)
    for bad in [(), ("hole", "hole"), ("sphere",)]:
        with pytest.raises(ValueError, match="distractor kinds"):
            add_distractors(bright, _rng(0), kinds=bad)


def test_no_overflow_extremes():
    """Near-black / near-white surfaces with lighting and noise stay in 0-255 without wrap-around."""
    for seed in range(300):
        img = flat_colour((64, 64), _rng(seed))
        # wrap-around would show as isolated pixels far from their neighbours
        diff = np.abs(img.astype(np.int16) - cv2.medianBlur(img, 3).astype(np.int16))
        assert diff.max() < 40
    for seed in range(100):
        img = procedural_texture((64, 64), _rng(seed)).astype(np.float64)
        assert np.isfinite(img).all() and img.min() >= 0 and img.max() <= 255


def test_photo_blobs_are_sphere_sized_lures_with_the_backgrounds_grain():
    # GIVEN a plain background (every changed pixel is a blob's) and a busy one
    plain = np.full((64, 64, 3), 128, np.uint8)
    for seed in range(40):
        out = add_photo_blobs(plain, _rng(seed))
        changed = (np.abs(out.astype(int) - plain).max(axis=2) > 8).astype(np.uint8)
        n, _, stats, _ = cv2.connectedComponentsWithStats(changed)
        # THEN 1-3 blobs (touching ones merge), each no wider than the widest sphere stretched 1.6x (+2 px of soft edge)
        assert 1 <= n - 1 <= 3
        widest = BLOB_WIDTH_PX[1] * 1.6 * 1.35 + 2  # stretch, lobes, anti-aliased rim
        assert stats[1:, cv2.CC_STAT_WIDTH].max() <= widest and stats[1:, cv2.CC_STAT_HEIGHT].max() <= widest
        assert changed.sum() <= 3 * np.pi * (widest / 2) ** 2
    # AND drawn the same for the same rng, differently for others, the input untouched, none with max_count 0
    busy = procedural_texture((64, 64), _rng(0))
    before = busy.copy()
    np.testing.assert_array_equal(add_photo_blobs(busy, _rng(3)), add_photo_blobs(busy, _rng(3)))
    assert len({add_photo_blobs(busy, _rng(seed)).tobytes() for seed in range(10)}) == 10
    np.testing.assert_array_equal(busy, before)
    np.testing.assert_array_equal(add_photo_blobs(busy, _rng(3), max_count=0), busy)


def test_photo_blobs_carry_the_grain_of_a_busy_background():
    # GIVEN a background of strong grain and one blob of a flat colour on the plain version of it
    grainy = (np.random.default_rng(0).random((64, 64, 1)) * 200 + 20).repeat(3, axis=2).astype(np.uint8)
    spreads = []
    for seed in range(30):
        rng_a, rng_b = _rng(seed), _rng(seed)
        on_grain = add_photo_blobs(grainy, rng_a, max_count=1).astype(int)
        on_plain = add_photo_blobs(np.full_like(grainy, 120), rng_b, max_count=1).astype(int)
        inside = np.abs(on_plain - 120).max(axis=2) > 40  # the blob's solid interior on the plain background
        if inside.sum() >= 6:
            spreads.append((on_grain[inside].std(axis=0).mean(), on_plain[inside].std(axis=0).mean()))
    # THEN inside the blob the grainy background's version varies more than the plain one's: the grain is carried
    assert len(spreads) >= 10 and np.mean([g > p for g, p in spreads]) > 0.8


def _pasted(n: int, **changes) -> list:
    """The first ``n`` composites (rgb, mask, fingers' mask) before augmentation, of the training recipe with
    ``changes`` (real PyBullet renders, the embedded training photos)."""
    import dataclasses

    from grasp_s2r.vision.images.backgrounds import load_backgrounds
    from grasp_s2r.vision.images.dataset import TRAINING_DATA, CompositeDataset, env_config_for

    ds = CompositeDataset(env_config=env_config_for(64), data=dataclasses.replace(TRAINING_DATA, **changes),
                          backgrounds=load_backgrounds("train"), stream="train", seed=0, length=n)
    try:
        return [ds._pasted(i)[:3] for i in range(n)]
    finally:
        ds.close()


def test_photo_blobs_in_composites_change_backgrounds_not_labels():
    from grasp_s2r.vision.images.dataset import BackgroundMix

    # GIVEN the recipe on photo backgrounds, without and with blobs on every one
    photos = BackgroundMix(photo=1.0)
    without, with_blobs = _pasted(8, mix=photos, photo_blob_prob=0.0), _pasted(8, mix=photos, photo_blob_prob=1.0)
    # THEN every label is the same, and every image differs only in a few blobs' worth of pixels
    for (rgb0, mask0, _), (rgb1, mask1, _) in zip(without, with_blobs):
        np.testing.assert_array_equal(mask0, mask1)
        changed = np.abs(rgb1.astype(int) - rgb0).max(axis=2) > 0
        assert 0 < changed.sum() < 0.25 * changed.size


def test_distractors_around_a_point_land_near_it():
    plain = np.full((64, 64, 3), 128, np.uint8)
    for seed in range(12):
        out = add_distractors(plain, _rng(seed), max_count=1, kinds=("disc",), around_px=(20.0, 40.0),
                              reach_px=(3.0, 6.0))
        rows, cols = np.nonzero(np.abs(out.astype(int) - plain).max(axis=2) > 0)
        # a disc of radius up to 15 px whose centre is 3-6 px from the point: it reaches within 6 px of the point
        assert len(rows) and np.hypot(rows - 40, cols - 20).min() <= 6.5


def test_distractors_beside_the_sphere_keep_its_pixels_and_label():
    # GIVEN the recipe (every background kind, rendered tables too), without and with lures beside every sphere
    without, beside = _pasted(12, near_blob_prob=0.0), _pasted(12, near_blob_prob=1.0)
    # THEN the labels and the sphere's pixels are the same; where a sphere is in view, pixels near it changed
    changed_any = 0
    for (rgb0, mask0, fingers), (rgb1, mask1, _) in zip(without, beside):
        np.testing.assert_array_equal(mask0, mask1)
        np.testing.assert_array_equal(rgb0[mask0 | fingers], rgb1[mask1 | fingers])  # the lures lie behind both
        changed = np.abs(rgb1.astype(int) - rgb0).max(axis=2) > 0
        if mask0.any() and changed.any():
            rows, cols = np.nonzero(mask0)
            near = np.hypot(*(np.nonzero(changed) - np.array([[rows.mean()], [cols.mean()]])))
            assert near.min() <= 12
            changed_any += 1
        elif not mask0.any():
            assert not changed.any()  # no sphere, nothing beside it
    assert changed_any >= 4


def test_distractor_saturated_share_sets_how_many_are_grey():
    """On a mid-grey surface, the distractors' pixels (the shapes without holes and specular dots): at share 1 every
    changed image holds saturated pixels; at share 0 most hold none above the saturated draws' floor; the default
    (0.7) draws as before."""
    grey = np.full((64, 64, 3), 128, np.uint8)
    kinds = ("ring", "disc", "ellipse", "rect", "line")

    def most_saturated(out: np.ndarray) -> float:
        changed = np.any(out != grey, axis=2)
        return float(cv2.cvtColor(out, cv2.COLOR_RGB2HSV)[..., 1][changed].max()) if changed.any() else -1.0

    sat1 = [most_saturated(add_distractors(grey, _rng(s), max_count=1, kinds=kinds, saturated_share=1.0))
            for s in range(60)]
    sat0 = [most_saturated(add_distractors(grey, _rng(s), max_count=1, kinds=kinds, saturated_share=0.0))
            for s in range(60)]
    drawn1 = [v for v in sat1 if v >= 0]
    assert len(drawn1) >= 40 and min(drawn1) >= 0.55 * 255
    assert np.mean([0 <= v < 0.55 * 255 for v in sat0]) > 0.3
    for seed in range(10):
        np.testing.assert_array_equal(add_distractors(grey, _rng(seed)),
                                      add_distractors(grey, _rng(seed), saturated_share=0.7))


def _extents_px(out: np.ndarray, bg: np.ndarray) -> list[int]:
    """The longest side of the bounding box of each shape drawn on ``bg`` (pixels changed by more than 40 levels, a
    shape's anti-aliased rim left out), shapes cut by the image's border left out."""
    drawn = (np.abs(out.astype(int) - bg.astype(int)).max(axis=2) > 40).astype(np.uint8)
    n, _, stats, _ = cv2.connectedComponentsWithStats(drawn, connectivity=8)
    h, w = drawn.shape
    return [max(int(s[2]), int(s[3])) for s in stats[1:n]
            if s[0] > 0 and s[1] > 0 and s[0] + s[2] < w and s[1] + s[3] < h]


def test_distractors_no_narrower_than_asked_and_unchanged_at_zero():
    grey = np.full((96, 96, 3), 128, np.uint8)
    small, wide = [], []
    for seed in range(300):
        np.testing.assert_array_equal(add_distractors(grey, _rng(seed)), add_distractors(grey, _rng(seed),
                                                                                           min_width_px=0.0))
        small += _extents_px(add_distractors(grey, _rng(seed), max_count=1), grey)
        wide += _extents_px(add_distractors(grey, _rng(seed), max_count=1, min_width_px=8.0), grey)
    assert sum(e < 6 for e in small) >= 20  # every size by default: many of a far sphere's width
    assert len(wide) >= 100 and min(wide) >= 7, sorted(wide)[:10]  # 8 px asked, a pixel to the threshold


def test_palette_distractors_take_the_colours_of_the_texture_around_them():
    """With ``palette_share=1`` every shape is drawn in a colour of the background near it: on a surface of two
    colours in 16 px stripes, every changed pixel is a blend of the two (anti-aliased rims included); the default's
    saturated shapes are not; at share 0 the draws are the recipe's, unchanged."""
    from grasp_s2r.vision.images.synthetic import local_colour

    a, b = np.array([200.0, 180.0, 20.0]), np.array([30.0, 20.0, 10.0])
    stripes = np.zeros((64, 64, 3), np.uint8)
    stripes[:] = a
    for x0 in range(0, 64, 32):
        stripes[:, x0:x0 + 16] = b

    def off_the_blends(out: np.ndarray) -> float:
        """The largest distance (levels) of a changed pixel from the segment between the two colours; -1: none."""
        px = out[np.any(out != stripes, axis=2)].astype(float)
        if not len(px):
            return -1.0
        t = np.clip((px - b) @ (a - b) / ((a - b) @ (a - b)), 0, 1)
        return float(np.linalg.norm(px - (b + t[:, None] * (a - b)), axis=1).max())

    kinds = ("ring", "disc", "ellipse", "rect", "line")
    palette = [off_the_blends(add_distractors(stripes, _rng(s), max_count=3, kinds=kinds, palette_share=1.0))
               for s in range(40)]
    assert sum(d >= 0 for d in palette) >= 30 and max(palette) <= 6.0  # uint8 rounding of the blends
    saturated = [off_the_blends(add_distractors(stripes, _rng(s), max_count=1, kinds=kinds, saturated_share=1.0))
                 for s in range(20)]
    assert np.mean([d > 30 for d in saturated]) > 0.5
    for seed in range(10):
        np.testing.assert_array_equal(add_distractors(stripes, _rng(seed)),
                                      add_distractors(stripes, _rng(seed), palette_share=0.0))
    # the colour comes from within reach of the centre, even when the centre lies outside the image
    rgb = np.zeros((64, 64, 3), np.uint8)
    rgb[:, :32] = 255
    assert all(local_colour(rgb, (-5.0, 10.0), _rng(s)) == (255.0, 255.0, 255.0) for s in range(20))
    assert all(local_colour(rgb, (70.0, 10.0), _rng(s)) == (0.0, 0.0, 0.0) for s in range(20))
