"""Tiled prediction (``Segmenter.tiling``): the sphere predicted window by window, merged by the maximum."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from grasp_s2r.vision.networks.segmenter import (
    CheckpointError,
    Segmenter,
    Tiling,
    default_checkpoint_path,
    read_checkpoint,
    write_checkpoint,
)


@pytest.fixture(scope="module")
def images() -> np.ndarray:
    return np.random.default_rng(3).integers(0, 256, (3, 64, 64, 3), dtype=np.uint8)


def test_window_starts_cover_the_side_flush_with_both_edges():
    assert Tiling(32, 16).starts(64) == [0, 16, 32]
    assert Tiling(24, 16).starts(64) == [0, 16, 32, 40]
    assert Tiling(64, 64).starts(64) == [0]
    with pytest.raises(ValueError, match="do not fit"):
        Tiling(32, 16).starts(24)
    for bad in ((30, 16), (0, 1), (32, 0), (32, 33)):
        with pytest.raises(ValueError):
            Tiling(*bad)


def test_each_pixel_is_the_maximum_of_the_windows_that_cover_it():
    x = torch.rand(2, 3, 64, 64)
    tiling = Tiling(24, 16)
    out = tiling.apply(lambda t: t.mean(dim=(1, 2, 3), keepdim=True).expand(-1, 1, *t.shape[2:]), x)
    starts = tiling.starts(64)
    expected = np.full((2, 64, 64), -np.inf)
    for i in starts:
        for j in starts:
            window_mean = x[:, :, i:i + 24, j:j + 24].mean(dim=(1, 2, 3)).numpy()[:, None, None]
            expected[:, i:i + 24, j:j + 24] = np.maximum(expected[:, i:i + 24, j:j + 24], window_mean)
    np.testing.assert_allclose(out[:, 0].numpy(), expected, rtol=1e-6)


def test_one_window_the_size_of_the_image_is_the_whole_image_prediction(images):
    segmenter = Segmenter.load(default_checkpoint_path())
    whole = segmenter.predict_proba(images)
    segmenter.tiling = Tiling(64, 64)
    np.testing.assert_array_equal(segmenter.predict_proba(images), whole)


def test_a_pixel_sees_only_its_windows(images):
    """With 32 px windows 16 apart, the top-left 16 px block lies in the first window alone: the rest of the image
    cannot change it (the point of tiling: a busy texture far from the sphere cannot suppress it). Untiled, it
    does."""
    segmenter = Segmenter.load(default_checkpoint_path())
    changed = images.copy()
    changed[:, 32:, 32:] = 255 - changed[:, 32:, 32:]
    untiled = np.abs(segmenter.predict_proba(images) - segmenter.predict_proba(changed))[:, :16, :16].max()
    segmenter.tiling = Tiling(32, 16)
    tiled = np.abs(segmenter.predict_proba(images) - segmenter.predict_proba(changed))
    assert tiled[:, :16, :16].max() == 0.0 and tiled.max() > 0.0
    assert untiled > 0.0


def test_a_checkpoint_carries_its_tiling(tmp_path, images):
    ckpt = read_checkpoint(default_checkpoint_path())
    ckpt["tiling"] = Tiling(32, 16).as_dict()
    path = tmp_path / "tiled.pt"
    write_checkpoint(ckpt, path)
    segmenter = Segmenter.load(path)
    assert segmenter.tiling == Tiling(32, 16) and segmenter.config["tiling"] == {"size_px": 32, "stride_px": 16}
    reference = Segmenter.load(default_checkpoint_path())
    reference.tiling = Tiling(32, 16)
    np.testing.assert_array_equal(segmenter.predict(images), reference.predict(images))

    for bad in ({"size_px": 30, "stride_px": 16}, {"size_px": 32}, [32, 16]):
        ckpt["tiling"] = bad
        write_checkpoint(ckpt, path)
        with pytest.raises(CheckpointError, match="tile"):
            read_checkpoint(path)
    ckpt["tiling"] = {"size_px": 128, "stride_px": 16}
    write_checkpoint(ckpt, path)
    with pytest.raises(CheckpointError, match="do not fit"):
        read_checkpoint(path)
    # a deeper U-Net reads no tile its poolings cannot halve: 40 px windows through 4 poolings (40 -> 2.5) are refused
    ckpt["tiling"] = {"size_px": 40, "stride_px": 20}
    ckpt["arch_kwargs"] = {**ckpt["arch_kwargs"], "depth": 4}
    write_checkpoint(ckpt, path)
    with pytest.raises(CheckpointError, match="tiles of 40 px do not suit this network: its input's side must divide by 16"):
        read_checkpoint(path)
    with pytest.raises(ValueError, match="must divide by 16"):
        Segmenter(reference.model, input_hw=(64, 64), config={**reference.config, "arch_kwargs": ckpt["arch_kwargs"]},
                  tiling=Tiling(40, 20))
