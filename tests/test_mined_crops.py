"""Mined backgrounds (``train-vision --mined-crop-prob``, ``adapt --mined-crop-prob``): the photo crops the starting
segmenter fires on, found with the shipped segmenter on the embedded photos and drawn as backgrounds."""

from __future__ import annotations

import dataclasses
import json

import cv2
import numpy as np
import pytest

from grasp_s2r.adapt import AdaptConfig, segmenter_train_config
from grasp_s2r.vision.images.backgrounds import load_backgrounds
from grasp_s2r.vision.images.dataset import TRAINING_DATA, BackgroundMix, CompositeDataset, env_config_for
from grasp_s2r.vision.images.mined import MINED_FILE, MinedCrops, load_or_mine, mine_crops, save_mined_picture
from grasp_s2r.vision.networks.segmenter import Segmenter, default_checkpoint_path
from grasp_s2r.vision.training.train_config import SegmenterTrainConfig, TrainError

PHOTOS_ONLY = dataclasses.replace(TRAINING_DATA, mix=BackgroundMix(photo=1.0))


@pytest.fixture(scope="module")
def photos() -> list[np.ndarray]:
    return load_backgrounds("train")


@pytest.fixture(scope="module")
def mined(photos) -> MinedCrops:
    return mine_crops(default_checkpoint_path(), photos, image_px=64, crops_per_photo=24, seed=0, progress=False)


def test_the_kept_crops_are_exactly_those_the_segmenter_fires_on(photos, mined):
    segmenter = Segmenter.load(default_checkpoint_path())
    assert mined.photos == len(photos) and mined.segmenter_sha256 == segmenter.checkpoint_sha256
    assert 0 < len(mined.hits) < mined.photos * mined.crops_per_photo  # the embedded photos hold a few lures
    every = MinedCrops(hits=tuple((p, d) for p in range(len(photos)) for d in range(24)), photos=len(photos),
                       crops_per_photo=24, seed=0, image_px=64, segmenter_sha256="", threshold=mined.threshold)
    crops = np.stack([every.crop(photos, i) for i in range(len(every.hits))])
    fired = segmenter.predict(crops).any(axis=(1, 2))
    assert {h for h, f in zip(every.hits, fired) if f} == set(mined.hits)


def test_a_mining_is_written_with_what_made_it_and_read_back_instead_of_mined_again(tmp_path, photos, mined):
    path = tmp_path / MINED_FILE
    mined.write(path)
    blob = json.loads(path.read_text())
    assert blob["format"] == "grasp_s2r.mined_crops" and blob["segmenter_sha256"] == mined.segmenter_sha256
    assert MinedCrops.read(path) == mined
    forged = dataclasses.replace(mined, hits=((0, 0),))  # a file that records this mining is read, not re-mined
    forged.write(path)
    again = load_or_mine(path, default_checkpoint_path(), photos, image_px=64, crops_per_photo=24, seed=0,
                         progress=False)
    assert again.hits == ((0, 0),)
    other = load_or_mine(path, default_checkpoint_path(), photos, image_px=64, crops_per_photo=24, seed=1,
                         progress=False)  # another seed: mined again, and the file replaced
    assert other.seed == 1 and MinedCrops.read(path) == other
    save_mined_picture(other, default_checkpoint_path(), photos, tmp_path / "mined.png", count=4)
    picture = cv2.imread(str(tmp_path / "mined.png"))
    assert picture is not None and picture.shape[1] >= 8 * 64  # four crops, each beside its tinted copy


def test_mined_backgrounds_are_mined_crops_and_change_the_background_only(photos, mined):
    def dataset(prob: float) -> CompositeDataset:
        data = dataclasses.replace(PHOTOS_ONLY, mined_crop_prob=prob)
        return CompositeDataset(env_config=env_config_for(64), data=data,
                                backgrounds=photos, stream="train", seed=0, length=50, mined=mined)

    crops = [mined.crop(photos, i) for i in range(len(mined.hits))]
    all_mined, plain, none = dataset(1.0), dataset(0.0), dataset(0.0)
    try:
        for i in range(6):
            rng = np.random.default_rng(i)
            background = all_mined._background("photo", rng, i, np.zeros((64, 64), bool))
            assert any(np.array_equal(background, c) for c in crops)
            rgb_plain, mask_plain = plain._pasted(i)[:2]
            rgb_mined, mask_mined = all_mined._pasted(i)[:2]
            assert np.array_equal(mask_plain, mask_mined)  # the same views and spheres
            assert not np.array_equal(rgb_plain, rgb_mined)
        assert np.array_equal(plain._pasted(3)[0], none._pasted(3)[0])
    finally:
        for ds in (all_mined, plain, none):
            ds.close()


def test_mining_needs_starting_weights_and_adapt_passes_its_share_on():
    with pytest.raises(TrainError, match="needs --init"):
        SegmenterTrainConfig(data=dataclasses.replace(TRAINING_DATA, mined_crop_prob=0.3))
    with pytest.raises(TrainError, match="mine_crops_per_photo"):
        SegmenterTrainConfig(init_checkpoint="x.pt", mine_crops_per_photo=0)
    with pytest.raises(ValueError, match="mined_crop_prob"):
        AdaptConfig(photos="x", mined_crop_prob=1.5)
    assert segmenter_train_config(AdaptConfig(photos="x", mined_crop_prob=0.3)).data.mined_crop_prob == 0.3
    assert segmenter_train_config(AdaptConfig(photos="x")).data.mined_crop_prob == 0.0
