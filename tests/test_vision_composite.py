"""Composition invariants with real PyBullet renders: masks aligned with pasted pixels, empty views, photo split."""

from __future__ import annotations

import dataclasses

import cv2
import numpy as np
import pytest

from grasp_s2r.sim.camera import Frame
from grasp_s2r.vision.images.augment import NO_AUGMENT, Augmenter
from grasp_s2r.vision.images.backgrounds import (
    EMBEDDED_HELDOUT,
    EMBEDDED_TRAIN,
    BackgroundError,
    load_backgrounds,
    random_crop,
    recolor,
    split_names,
)
from grasp_s2r.vision.images.composite import CompositeConfig, camouflage, composite_frame
from grasp_s2r.vision.images.dataset import CompositeDataset, DataConfig, env_config_for
from grasp_s2r.vision.images.simviews import SimViewSampler, ViewConfig


@pytest.fixture(scope="module")
def sampler():
    s = SimViewSampler(env_config_for(32), ViewConfig(empty_prob=0.0, near_offset_prob=1.0))
    yield s
    s.close()


@pytest.fixture(scope="module")
def frame_with_sphere(sampler) -> Frame:
    for k in range(20):
        f = sampler.render(k, np.random.default_rng(k))
        if f.sphere_mask.sum() >= 4:
            return f
    raise AssertionError("no view with a visible sphere in 20 near-offset draws")


@pytest.fixture(scope="module")
def photos() -> list[np.ndarray]:
    return load_backgrounds("train")[:3]


def test_hard_paste_copies_exactly_the_masked_pixels(frame_with_sphere, rng):
    # GIVEN a real render and a random background, WHEN pasting without soft edges or shadow
    bg = rng.integers(0, 256, size=frame_with_sphere.rgb.shape, dtype=np.uint8)
    cfg = CompositeConfig(edge_sigma_px=(0.0, 0.0), shadow_prob=0.0)
    rgb, mask = composite_frame(frame_with_sphere, bg, rng, cfg)
    # THEN sphere and gripper pixels come from the render, all others from the photo, and the label is the GT mask
    paste = frame_with_sphere.sphere_mask | frame_with_sphere.gripper_mask
    assert np.array_equal(mask, frame_with_sphere.sphere_mask)
    assert np.array_equal(rgb[paste], frame_with_sphere.rgb[paste])
    assert np.array_equal(rgb[~paste], bg[~paste])
    assert frame_with_sphere.gripper_mask.any(), "the gripper fingers should be in view"


def test_soft_edges_only_blend_the_object_rim(frame_with_sphere, rng):
    bg = np.full(frame_with_sphere.rgb.shape, 7, np.uint8)
    rgb, _ = composite_frame(frame_with_sphere, bg, rng, CompositeConfig(edge_sigma_px=(0.8, 0.8), shadow_prob=0.0))
    paste = frame_with_sphere.sphere_mask | frame_with_sphere.gripper_mask
    assert np.array_equal(rgb[~paste], bg[~paste]), "no halo of sim table outside the object"
    interior = cv2.erode(paste.astype(np.uint8), np.ones((5, 5), np.uint8)).astype(bool)
    rim = paste & ~interior
    assert np.abs(rgb[interior].astype(int) - frame_with_sphere.rgb[interior]).max() <= 1
    assert (rgb[rim] != frame_with_sphere.rgb[rim]).any(), "rim pixels should be blended with the photo"


def test_shadow_darkens_only(frame_with_sphere, rng):
    bg = np.full(frame_with_sphere.rgb.shape, 200, np.uint8)
    rgb, _ = composite_frame(frame_with_sphere, bg, rng, CompositeConfig(edge_sigma_px=(0, 0), shadow_prob=1.0))
    outside = ~(frame_with_sphere.sphere_mask | frame_with_sphere.gripper_mask)
    assert rgb[outside].max() <= 200 and rgb[outside].min() < 200


def test_empty_views_have_empty_masks(photos):
    data = DataConfig(view=ViewConfig(empty_prob=1.0), augment=NO_AUGMENT)
    ds = CompositeDataset(env_config=env_config_for(32), data=data, backgrounds=photos, stream="train", seed=0,
                          length=8)
    try:
        masks = [ds.sample(i)[1] for i in range(8)]
        assert not any(m.any() for m in masks)
    finally:
        ds.close()


def test_photo_weights_choose_the_backgrounds():
    # GIVEN a black and a white photo, the white one given every draw, WHEN photo composites are made (photos only,
    # no augmentation, empty views: nothing but the photo in the image)
    data = DataConfig(view=ViewConfig(empty_prob=1.0), augment=NO_AUGMENT)
    photos = [np.zeros((48, 48, 3), np.uint8), np.full((48, 48, 3), 255, np.uint8)]
    for weights, grey in (([0.0, 1.0], 255), ([1.0, 0.0], 0)):
        ds = CompositeDataset(env_config=env_config_for(32), data=data, backgrounds=photos, stream="train", seed=0,
                              length=8, photo_weights=np.array(weights))
        try:  # THEN every background is the photo given every draw (the fingers and a shadow aside)
            assert all(np.median(ds.sample(i)[0]) == grey for i in range(8))
        finally:
            ds.close()
    with pytest.raises(ValueError, match="3 photo weights for 2 photos"):
        CompositeDataset(env_config=env_config_for(32), data=data, backgrounds=photos, stream="train", seed=0,
                         length=8, photo_weights=np.ones(3) / 3)


def test_dataset_is_reproducible_and_augmentation_keeps_alignment(photos):
    # GIVEN every augmentation on, WHEN the same item is made twice by two dataset instances
    data = DataConfig(view=ViewConfig(empty_prob=0.0, near_offset_prob=1.0), renders_per_view=2)
    a, b = (CompositeDataset(env_config=env_config_for(32), data=data, backgrounds=photos, stream="train", seed=3,
                             length=6) for _ in range(2))
    try:
        for i in (0, 1, 5):
            (ra, ma), (rb, mb) = a.sample(i), b.sample(i)
            assert np.array_equal(ra, rb) and np.array_equal(ma, mb)
        x, y = a[1]
        assert tuple(x.shape) == (3, 32, 32) and tuple(y.shape) == (1, 32, 32)
        assert not np.array_equal(a.sample(0)[0], a.sample(1)[0]), "items sharing a render differ"
    finally:
        a.close()
        b.close()


def test_affine_augmentation_moves_mask_with_image(rng):
    # GIVEN a grey image with one pure-blue disc and its mask, WHEN only the affine warp is applied
    img = np.full((32, 32, 3), 128, np.uint8)
    mask = np.zeros((32, 32), bool)
    cv2.circle(img, (20, 12), 5, (0, 0, 255), -1)
    mask[np.all(img == (0, 0, 255), axis=2)] = True
    aug = Augmenter(dataclasses.replace(NO_AUGMENT, affine_prob=1.0, affine_rotate_deg=20.0))
    for seed in range(5):
        out, m = aug(img, mask, seed)
        blue = (out[:, :, 2] > 200) & (out[:, :, 0] < 60)
        # THEN the warped mask covers the blue pixels (nearest-neighbour mask vs bilinear image: rims may differ)
        assert (m & blue).sum() >= 0.8 * m.sum() > 0


def test_random_crop_shape_and_range(rng):
    photo = rng.integers(0, 256, size=(300, 451, 3), dtype=np.uint8)
    for _ in range(20):
        crop = random_crop(photo, (40, 24), rng)
        assert crop.shape == (40, 24, 3) and crop.dtype == np.uint8


def test_heldout_photos_never_in_training_split(tmp_path):
    split = split_names()
    assert set(split["train"]).isdisjoint(split["heldout"])
    assert tuple(split["heldout"]) == EMBEDDED_HELDOUT and tuple(split["train"]) == EMBEDDED_TRAIN
    assert len(load_backgrounds("heldout")) == len(EMBEDDED_HELDOUT)
    # a user folder: every photo in exactly one split, both splits non-empty, stable
    for i in range(7):
        cv2.imwrite(str(tmp_path / f"photo_{i}.jpg"), np.full((20 + i, 30, 3), 10 * i, np.uint8))
    user = split_names(tmp_path)
    assert sorted(user["train"] + user["heldout"]) == sorted(p.name for p in tmp_path.iterdir())
    assert set(user["train"]).isdisjoint(user["heldout"]) and user["train"] and user["heldout"]
    assert split_names(tmp_path) == user
    assert all(p.shape[2] == 3 for p in load_backgrounds("heldout", tmp_path))


def test_bad_backgrounds_folder(tmp_path):
    with pytest.raises(BackgroundError, match="does not exist"):
        split_names(tmp_path / "missing")
    (tmp_path / "a.png").write_bytes(b"not a png")
    (tmp_path / "b.png").write_bytes(b"not a png")
    with pytest.raises(BackgroundError, match="cannot read"):
        load_backgrounds("train", tmp_path)


def test_background_of_another_size_is_resized(frame_with_sphere, rng):
    big = np.full((300, 451, 3), 90, np.uint8)
    rgb, mask = composite_frame(frame_with_sphere, big, rng, CompositeConfig(edge_sigma_px=(0, 0), shadow_prob=0.0))
    paste = frame_with_sphere.sphere_mask | frame_with_sphere.gripper_mask
    assert rgb.shape == frame_with_sphere.rgb.shape and mask.shape == frame_with_sphere.sphere_mask.shape
    assert (rgb[~paste] == 90).all()


def test_recolor_is_seeded_and_tints_grey_photos(rng):
    grey = np.repeat(np.linspace(0, 255, 32 * 32).reshape(32, 32, 1), 3, axis=2).astype(np.uint8)
    a, b = recolor(grey, np.random.default_rng(7)), recolor(grey, np.random.default_rng(7))
    assert a.dtype == np.uint8 and a.shape == grey.shape and np.array_equal(a, b)
    tinted = [recolor(grey, np.random.default_rng(k)) for k in range(8)]
    assert any(np.abs(t[:, :, 0].astype(int) - t[:, :, 1]).mean() > 5 for t in tinted), "a grey photo stays grey"


def test_recolored_backgrounds_change_the_photo_only(photos):
    # GIVEN the same items with and without background recolouring (no augmentation)
    view = ViewConfig(empty_prob=0.0, near_offset_prob=1.0)
    plain, colored = (CompositeDataset(env_config=env_config_for(32), backgrounds=photos, stream="train", seed=4,
                                       length=8, data=DataConfig(view=view, augment=NO_AUGMENT,
                                                                 background_recolor_prob=p)) for p in (0.0, 1.0))
    try:
        for i in range(4):
            (rp, mp), (rc, mc) = plain.sample(i), colored.sample(i)
            frame = plain.frame(i // plain.data.renders_per_view)
            pasted = frame.sphere_mask | frame.gripper_mask
            inner = cv2.erode(pasted.astype(np.uint8), np.ones((5, 5), np.uint8)).astype(bool)  # alpha ~1 there
            # THEN labels and the pasted objects' inner pixels are identical, the photo pixels are not
            assert np.array_equal(mp, mc)
            assert inner.any() and np.abs(rp[inner].astype(int) - rc[inner]).max() <= 2
            assert (np.abs(rp[~pasted].astype(int) - rc[~pasted]).max(axis=1) > 8).mean() > 0.3
    finally:
        plain.close()
        colored.close()


def test_camouflage_takes_the_photo_colour_and_keeps_the_shading(frame_with_sphere):
    # GIVEN a rendered sphere on a uniform teal photo
    m = frame_with_sphere.sphere_mask
    photo = np.zeros((*m.shape, 3), np.float32) + np.float32([20, 140, 130])
    sphere = frame_with_sphere.rgb.astype(np.float32)
    # WHEN it is camouflaged at the photo's own brightness
    out = camouflage(sphere, m, photo, brightness=1.0)
    # THEN only sphere pixels change, their median colour is the photo's, and their shading order is kept
    assert np.array_equal(out[~m], sphere[~m])
    assert np.allclose(np.median(out[m], axis=0), [20, 140, 130], atol=12)
    before, after = sphere[m].mean(axis=1), out[m].mean(axis=1)
    assert np.corrcoef(before, after)[0, 1] > 0.95


def test_camouflaged_composites_keep_their_labels(photos):
    def dataset(prob: float) -> CompositeDataset:
        cfg = DataConfig(view=ViewConfig(empty_prob=0.0, near_offset_prob=1.0), augment=NO_AUGMENT,
                         composite=CompositeConfig(camouflage_prob=prob))
        return CompositeDataset(env_config=env_config_for(32), data=cfg, backgrounds=photos, stream="train", seed=2,
                                length=4)

    plain, camo = dataset(0.0), dataset(1.0)
    try:
        changed = 0
        for i in range(4):
            (rp, mp), (rc, mc) = plain.sample(i), camo.sample(i)
            frame = camo.frame(i // camo.data.renders_per_view)
            photo = ~(frame.sphere_mask | frame.gripper_mask)
            assert np.array_equal(mc, frame.sphere_mask) and np.array_equal(mp, mc)
            assert np.array_equal(rp[photo], rc[photo])  # the photo (and its shadow) is untouched
            changed += int(np.abs(rp[mc].astype(int) - rc[mc]).max() > 10)
        assert changed >= 2, "camouflage did not recolour the spheres"
    finally:
        plain.close()
        camo.close()
