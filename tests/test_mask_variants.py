"""benchmarks/mask_variants.py's ``--above`` rows: another segmenter's masks above a TCP height, the shipped one's
below, through the pool's real learner step."""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest

BENCH = Path(__file__).resolve().parents[1] / "benchmarks"
sys.path.insert(0, str(BENCH))

import mask_variants  # benchmarks/ is not a package: imported from its folder

import grasp_s2r.runtime.pool as pool_module
from grasp_s2r.control.wrist_geometry import TCP_INDEX
from grasp_s2r.learner import learner_step
from grasp_s2r.sim.env import PROPRIO_NAMES


def test_rows_above_the_height_get_the_other_sources_masks_and_the_pool_gets_its_step_back():
    # GIVEN two mask sources that mark nothing / everything, and three rows at 5, 12 and 20 cm
    below = lambda rgb, gt=None: np.zeros(rgb.shape[:3], bool)
    calls = []

    def above(rgb, gt=None):
        calls.append(len(rgb))
        return np.ones(rgb.shape[:3], bool)

    rgb = np.zeros((3, 8, 8, 3), np.uint8)
    proprio = np.zeros((3, len(PROPRIO_NAMES)), np.float32)
    proprio[:, TCP_INDEX[2]] = [0.05, 0.12, 0.20]
    # WHEN the pool's step runs inside the switch at 10 cm
    with mask_variants.above_height(0.10, above):
        assert pool_module.learner_step is not learner_step
        step = pool_module.learner_step(below, None, rgb, proprio, query=[])
    # THEN the two rows above 10 cm carry the other source's masks, only they went through it, and the pool's own
    # step is back
    assert [bool(m.all()) for m in step.masks] == [False, True, True]
    assert not step.masks[0].any() and calls == [2]
    assert pool_module.learner_step is learner_step


@pytest.mark.parametrize("text", ["abc", "0.1", "1.5:missing.pt", "0.1:missing.pt"])
def test_malformed_above_is_refused_in_one_line(text):
    with pytest.raises(SystemExit, match="mask_variants: --above"):
        mask_variants.parse_above(text)


def test_above_entries_parse(tmp_path):
    ckpt = tmp_path / "a.pt"
    ckpt.write_bytes(b"x")
    assert mask_variants.parse_above(f"0.08:{ckpt},0.15:{ckpt}") == [(0.08, ckpt), (0.15, ckpt)]
    assert mask_variants.parse_above("") == []


def test_the_fallback_fills_only_the_empty_masks_and_sees_only_their_images():
    # GIVEN a source whose first image's mask marks a pixel and whose second is empty, and a fallback marking all
    def source(rgb, gt=None):
        out = np.zeros(rgb.shape[:3], bool)
        out[0, 2, 3] = True
        return out

    seen = []

    def fallback(rgb, gt=None):
        seen.append(rgb[:, 0, 0, 0].tolist())
        return np.ones(rgb.shape[:3], bool)

    source.kind = "predicted"
    rgb = np.zeros((2, 8, 8, 3), np.uint8)
    rgb[1] = 7
    # WHEN the combined source makes the masks
    masks = mask_variants.EmptyFallback(source, fallback)(rgb)
    # THEN the first keeps its own, the second is the fallback's, which saw the second image alone
    assert masks[0].sum() == 1 and masks[0, 2, 3] and masks[1].all()
    assert seen == [[7]]


def test_fallback_tiles_parse_and_malformed_ones_are_refused():
    tilings = mask_variants.parse_tiles("32/16,24/8")
    assert [(t.size_px, t.stride_px) for t in tilings] == [(32, 16), (24, 8)]
    for text in ("32", "30/8", "32/40", "a/b"):
        with pytest.raises(SystemExit, match="mask_variants: --fallback-tiles"):
            mask_variants.parse_tiles(text)


def test_the_union_keeps_each_networks_sphere_where_the_mean_halves_it():
    # GIVEN two constant "networks": one sure of a sphere at pixel (1, 1), the other sure of one at (2, 2)
    import torch
    from torch import nn

    class Sure(nn.Module):
        def __init__(self, yx):
            super().__init__()
            self.yx, self.features = yx, nn.Identity()

        def forward(self, x):
            logits = torch.full((x.shape[0], 1, *x.shape[2:]), -12.0)
            logits[:, :, self.yx[0], self.yx[1]] = 12.0
            return logits

    nets = [Sure((1, 1)), Sure((2, 2))]
    x = torch.zeros(1, 3, 4, 4)
    # WHEN their probabilities are combined by the highest and by the mean
    p_max = torch.sigmoid(mask_variants.MeanProbability(nets, flip=False, reduce="max")(x))[0, 0]
    p_mean = torch.sigmoid(mask_variants.MeanProbability(nets, flip=False)(x))[0, 0]
    # THEN the union keeps both spheres near 1 and nothing else, where the mean puts both at 0.5
    assert p_max[1, 1] > 0.99 and p_max[2, 2] > 0.99 and float((p_max > 0.5).sum()) == 2
    assert abs(float(p_mean[1, 1]) - 0.5) < 1e-3 and float((p_mean > 0.5).sum()) == 0
    with pytest.raises(ValueError, match="reduce"):
        mask_variants.MeanProbability(nets, flip=False, reduce="median")
