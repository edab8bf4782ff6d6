"""The U-Net's padding (``UNet(padding=...)``, ``train-vision --padding``): what its convolutions read past the
image's edge, and a fine-tune from a checkpoint of another padding."""

from __future__ import annotations

import argparse

import pytest
import torch

from grasp_s2r.commands import train_vision
from grasp_s2r.vision.networks.model import UNet
from grasp_s2r.vision.networks.segmenter import Segmenter
from grasp_s2r.vision.training.starting_weights import check_init_checkpoint
from grasp_s2r.vision.training.train import SegmenterTrainConfig, TrainError, train


def _border_gap(net: UNet) -> float:
    """How far the encoder's features of a uniform image are from uniform (every level, down to 4 x 4 px): 0 where
    nothing marks the image's edge."""
    torch.manual_seed(1)
    for p in net.parameters():  # weights and biases away from their initial values
        p.data.add_(torch.randn_like(p) * 0.1)
    net.eval()
    x, gap = torch.full((1, 3, 32, 32), 0.7), 0.0
    with torch.no_grad():
        for i, block in enumerate(net.down):
            x = block(x if i == 0 else torch.nn.functional.max_pool2d(x, 2))
            gap = max(gap, float((x - x[..., :1, :1]).abs().max()))
    return gap


@pytest.mark.parametrize("padding", ["replicate", "reflect"])
def test_a_uniform_image_shows_no_edge_through_replicate_or_reflect_padding_where_zeros_shows_one(padding):
    # GIVEN the same weights under zero padding and under `padding`
    torch.manual_seed(0)
    zeros, other = UNet(8, 3), UNet(8, 3, padding=padding)
    other.load_state_dict(zeros.state_dict())  # the padding holds no weights
    # WHEN each reads a uniform image, THEN only zero padding makes its border differ from its inside
    assert _border_gap(other) < 1e-4
    assert _border_gap(zeros) > 1e-2
    assert all(m.padding_mode == padding for m in other.modules() if isinstance(m, torch.nn.Conv2d)
               and m.kernel_size == (3, 3))
    with pytest.raises(ValueError, match="padding must be one of"):
        UNet(8, 3, padding="circular")


def test_a_fine_tune_may_change_the_padding_and_its_checkpoint_keeps_it(tmp_path, capsys):
    # GIVEN a checkpoint trained with zero padding
    base = {"steps": 2, "batch_size": 2, "val_images": 4, "val_every": 2, "checkpoint_every": 2, "crop_px": 0,
            "workers": 0, "width": 8}
    zeros = train(SegmenterTrainConfig(**base), tmp_path / "zeros", progress=False)
    # WHEN a run with replicate padding starts from it (the same network but for the padding)
    cfg = SegmenterTrainConfig(**base, padding="replicate", init_checkpoint=str(zeros))
    assert check_init_checkpoint(cfg)["arch_kwargs"] == {"width": 8, "depth": 3}
    capsys.readouterr()
    train_vision._check_inputs(cfg, argparse.Namespace(out=tmp_path / "replicate", resume=False, backgrounds=None))
    assert "pads its convolutions with zeros, this run with replicate" in capsys.readouterr().out  # said, not silent
    tuned = Segmenter.load(train(cfg, tmp_path / "replicate", progress=False), "cpu")
    # THEN its checkpoint says so and loads with it; a checkpoint of the default padding is as before
    assert tuned.config["arch_kwargs"] == {"width": 8, "depth": 3, "padding": "replicate"}
    assert tuned.model.down[0][0].padding_mode == "replicate"
    assert SegmenterTrainConfig().arch_kwargs == {"width": 12, "depth": 3}
    # AND a padding other than the U-Net's is refused before anything runs
    with pytest.raises(TrainError, match="padding must be one of"):
        SegmenterTrainConfig(architecture="lraspp", padding="reflect")
    with pytest.raises(TrainError, match="--init"):  # the padding alone may differ, not the width
        check_init_checkpoint(SegmenterTrainConfig(**{**base, "width": 6}, padding="reflect",
                                                   init_checkpoint=str(zeros)))
