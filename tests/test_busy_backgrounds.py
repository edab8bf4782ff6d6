"""Busy photo backgrounds (``train-vision --busy-background-prob``): small spheres on the textures that hide them."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from grasp_s2r.vision.images.backgrounds import busiest_crop, detail_around, load_backgrounds, random_crop
from grasp_s2r.vision.images.dataset import TRAINING_DATA, BackgroundMix, CompositeDataset, DataConfig, env_config_for

PHOTOS_ONLY = dataclasses.replace(TRAINING_DATA, mix=BackgroundMix(photo=1.0))


def _dataset(data: DataConfig) -> CompositeDataset:
    return CompositeDataset(env_config=env_config_for(64), data=data, backgrounds=load_backgrounds("train"),
                            stream="train", seed=0, length=100)


def _detail_around_spheres(data: DataConfig, n: int) -> float:
    ds = _dataset(data)
    try:
        scores = []
        for i in range(n):
            rgb, mask = ds._pasted(i)[:2]
            if mask.any():
                ys, xs = np.nonzero(mask)
                scores.append(detail_around(rgb, (int(ys.mean()), int(xs.mean()))))
        return float(np.mean(scores))
    finally:
        ds.close()


def test_detail_is_zero_on_a_flat_surface_and_high_on_a_checker():
    flat = np.full((64, 64, 3), 120, np.uint8)
    checker = (np.indices((64, 64)).sum(0) % 2 * 255).astype(np.uint8)[..., None].repeat(3, 2)
    assert detail_around(flat, (32, 32)) == 0.0
    assert detail_around(checker, (32, 32)) > 100


def test_the_busiest_crop_is_the_busiest_of_its_tries():
    photos = load_backgrounds("train")
    busiest = busiest_crop(photos, (64, 64), np.random.default_rng(3), (32, 32), tries=4)
    rng = np.random.default_rng(3)  # the same draws, one at a time
    tries = [random_crop(photos[int(rng.integers(len(photos)))], (64, 64), rng) for _ in range(4)]
    assert detail_around(busiest, (32, 32)) == max(detail_around(t, (32, 32)) for t in tries)


def test_busy_backgrounds_put_more_texture_around_the_sphere():
    plain = _detail_around_spheres(PHOTOS_ONLY, 40)
    busy = _detail_around_spheres(dataclasses.replace(PHOTOS_ONLY, busy_background_prob=1.0), 40)
    assert busy > 1.3 * plain, (plain, busy)


def test_busy_backgrounds_change_the_background_only():
    # the busy draw has its own random stream: the same views, spheres and masks as the recipe's composites
    ds, busy = _dataset(PHOTOS_ONLY), _dataset(dataclasses.replace(PHOTOS_ONLY, busy_background_prob=1.0))
    try:
        changed = 0
        for i in (0, 5, 17, 30):
            (a, ma), (b, mb) = ds._pasted(i)[:2], busy._pasted(i)[:2]
            assert np.array_equal(ma, mb)
            changed += not np.array_equal(a, b)
        assert changed >= 3  # a crop is its own busiest now and then
    finally:
        ds.close()
        busy.close()


@pytest.mark.parametrize("bad", [-0.1, 1.5, float("nan")])
def test_bad_busy_background_prob_is_refused(bad):
    with pytest.raises(ValueError, match="busy_background_prob must be in"):
        dataclasses.replace(TRAINING_DATA, busy_background_prob=bad)


def test_busy_textures_hold_far_sphere_sized_detail_in_a_few_colours():
    from grasp_s2r.vision.images.synthetic import busy_texture, flat_colour

    busy, flat = [], []
    for seed in range(6):
        img = busy_texture((64, 64), np.random.default_rng(seed))
        assert img.shape == (64, 64, 3) and img.dtype == np.uint8
        busy.append(detail_around(img, (32, 32), 32))
        flat.append(detail_around(flat_colour((64, 64), np.random.default_rng(seed)), (32, 32), 32))
    assert min(b / max(f, 0.1) for b, f in zip(busy, flat)) > 3  # some palettes are dull: less contrast
    assert np.mean(busy) > 20 * np.mean(flat)
    assert np.array_equal(busy_texture((64, 64), np.random.default_rng(1)), busy_texture((64, 64), np.random.default_rng(1)))


def test_the_busy_mix_kind_puts_spheres_on_busy_textures():
    busy_mix = dataclasses.replace(TRAINING_DATA, mix=BackgroundMix(photo=0.0, busy=1.0))
    assert _detail_around_spheres(busy_mix, 30) > 1.5 * _detail_around_spheres(PHOTOS_ONLY, 30)
