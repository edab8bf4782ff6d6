"""Growing a trained U-Net (``vision/networks/widen.py``): the wider network, or one with self-attention blocks
(``UNet(attention=L)``, ``model.GlobalContext``), computes what the narrow one did, and its new weights can learn;
``train-vision`` checks what may grow into what."""

from __future__ import annotations

import pytest
import torch

from grasp_s2r.vision.networks.model import GlobalContext, UNet, build_model
from grasp_s2r.vision.networks.widen import load_widened, unshuffle_unet_state, widen_unet_state
from grasp_s2r.vision.training.starting_weights import widens
from grasp_s2r.vision.training.train_config import SegmenterTrainConfig, TrainError


def _trained_narrow(width: int = 8, depth: int = 3) -> UNet:
    """A narrow U-Net whose weights and batch-norm statistics are not the initial ones (a few SGD steps)."""
    torch.manual_seed(0)
    net = UNet(width, depth)
    opt = torch.optim.SGD(net.parameters(), lr=0.05)
    for _ in range(3):
        x = torch.randn(4, 3, 32, 32) * 2 + 0.5
        net(x).square().mean().backward()
        opt.step()
        opt.zero_grad()
    return net


@pytest.mark.parametrize("mode", ["eval", "train"])
@pytest.mark.parametrize("grown", [{"width": 12}, {"width": 8, "attention": 2}, {"width": 12, "attention": 1}],
                         ids=["wider", "attention blocks", "both"])
def test_grown_unet_computes_the_narrow_ones_logits(mode, grown):
    # GIVEN a trained width-8 U-Net and a fresh one of the same depth: wider, with self-attention blocks, or both
    narrow = _trained_narrow()
    wide = UNet(depth=3, **grown)
    # WHEN the grown one takes the narrow one's weights, widened (new blocks' output projections are zero)
    load_widened(wide, narrow.state_dict())
    # THEN both give the same logits (batch norm by running statistics, or by the batch's: per channel either way)
    getattr(narrow, mode)()
    getattr(wide, mode)()
    x = torch.randn(3, 3, 32, 32)
    with torch.no_grad():
        torch.testing.assert_close(wide(x), narrow(x), atol=1e-5, rtol=1e-5)


def test_new_channels_start_fresh_and_learn():
    narrow = _trained_narrow()
    wide = UNet(12, 3)
    load_widened(wide, narrow.state_dict())
    # the old channels keep their weights at the front; the new ones read the old ones through fresh weights
    torch.testing.assert_close(wide.down[1][0].weight[:16, :8], narrow.down[1][0].weight)
    assert wide.down[1][0].weight[16:, :8].abs().sum() > 0
    assert wide.down[1][0].weight[:16, 8:].abs().sum() == 0  # nothing new flows into an old channel yet
    # a decoder block's skip half sits behind the widened upsampled half
    torch.testing.assert_close(wide.fuse[2][0].weight[:8, 12:20], narrow.fuse[2][0].weight[:, 8:16])
    # WHEN the wide network trains a few Adam steps, THEN its output is no longer the narrow one's and the new
    # channels feed the head
    opt = torch.optim.Adam(wide.parameters(), lr=1e-2)
    x, target = torch.randn(4, 3, 32, 32), (torch.rand(4, 1, 32, 32) > 0.9).float()
    for _ in range(5):
        torch.nn.functional.binary_cross_entropy_with_logits(wide(x), target).backward()
        opt.step()
        opt.zero_grad()
    assert wide.head.weight[0, 8:].abs().min() > 0
    assert wide.down[1][0].weight[:16, 8:].abs().sum() > 0


def test_narrowing_or_another_depth_is_refused():
    narrow = _trained_narrow()
    with pytest.raises(ValueError, match="cannot widen"):
        widen_unet_state(UNet(12, 3).state_dict(), UNet(8, 3))
    with pytest.raises(ValueError, match="other layers"):
        widen_unet_state(narrow.state_dict(), UNet(12, 2))
    with pytest.raises(TypeError, match="only a U-Net"):
        load_widened(build_model("lraspp"), narrow.state_dict())


@pytest.mark.parametrize("mode", ["eval", "train"])
def test_unet_of_pixel_blocks_starts_as_the_plain_one_on_block_means(mode):
    # GIVEN a trained plain U-Net and a fresh one of its width and depth reading 2 x 2 pixel blocks
    plain = _trained_narrow()
    blocks = UNet(8, 3, unshuffle=2)
    # WHEN the block one takes the plain one's weights
    load_widened(blocks, plain.state_dict())
    getattr(plain, mode)()
    getattr(blocks, mode)()
    x = torch.randn(3, 3, 64, 64)
    with torch.no_grad():
        # THEN it computes the plain network on the 2 x 2 block means, each logit repeated over its block
        want = torch.nn.functional.avg_pool2d(x, 2)
        want = plain(want).repeat_interleave(2, dim=2).repeat_interleave(2, dim=3)
        torch.testing.assert_close(blocks(x), want, atol=1e-5, rtol=1e-5)
        # AND its features, for a gripper head, are per pixel
        assert blocks.features(x).shape == (3, 8, 64, 64)


def test_unshuffle_refuses_a_network_of_other_width():
    with pytest.raises(ValueError, match="not a plain one"):
        unshuffle_unet_state(_trained_narrow(8).state_dict(), UNet(12, 3, unshuffle=2))


def test_attention_blocks_learn_and_read_far_cells():
    torch.manual_seed(0)
    block = GlobalContext(16)
    x = torch.randn(2, 16, 8, 8)
    assert torch.equal(block(x), x)  # the identity at the start
    # WHEN its output projection has trained (a few Adam steps towards a target it can only reach through them)
    opt = torch.optim.Adam(block.parameters(), lr=1e-2)
    for _ in range(5):
        (block(x) - x - 1.0).square().mean().backward()
        opt.step()
        opt.zero_grad()
    assert block.attend.out_proj.weight.abs().sum() > 0
    # THEN a cell's output depends on a cell at the far corner: no convolution of the U-Net reaches that far in one
    # layer
    far = x.clone()
    far[:, :, 7, 7] += 5.0
    with torch.no_grad():
        assert (block(far)[:, :, 0, 0] - block(x)[:, :, 0, 0]).abs().max() > 1e-4


def test_blocks_are_copied_as_they_are_and_never_widened():
    with_blocks = UNet(8, 3, attention=1)
    # more blocks at the same width: the old one is copied, the new one starts at zero output
    grown = UNet(8, 3, attention=2)
    load_widened(grown, with_blocks.state_dict())
    torch.testing.assert_close(grown.context[0].attend.in_proj_weight, with_blocks.context[0].attend.in_proj_weight)
    assert grown.context[0].attend.embed_dim == 64 and grown.context[1].attend.embed_dim == 32  # 8 * 2 ** 3, 2 ** 2
    assert grown.context[1].attend.out_proj.weight.abs().sum() == 0
    # a wider network cannot take a block's weights, nor a network with fewer blocks
    with pytest.raises(ValueError, match="self-attention block"):
        widen_unet_state(with_blocks.state_dict(), UNet(12, 3, attention=1))
    with pytest.raises(ValueError, match="other layers"):
        widen_unet_state(grown.state_dict(), UNet(8, 3, attention=1))


def test_train_vision_checks_attention_and_grows_checkpoints_without_it():
    init = {"architecture": "unet", "arch_kwargs": {"width": 12, "depth": 3}}
    assert widens(init, SegmenterTrainConfig(attention=2))
    assert SegmenterTrainConfig(attention=2).arch_kwargs["attention"] == 2
    assert "attention" not in SegmenterTrainConfig().arch_kwargs  # checkpoints without blocks read as before
    with_blocks = {**init, "arch_kwargs": {"width": 12, "depth": 3, "attention": 1}}
    assert widens(with_blocks, SegmenterTrainConfig(attention=2))
    assert not widens(with_blocks, SegmenterTrainConfig(width=16, attention=1))
    assert not widens(with_blocks, SegmenterTrainConfig(attention=0))
    with pytest.raises(TrainError, match="attention must be in"):
        SegmenterTrainConfig(attention=5)
    with pytest.raises(TrainError, match="attention must be in"):
        SegmenterTrainConfig(architecture="lraspp", attention=1)
    with pytest.raises(ValueError, match="attention must be in"):
        UNet(8, 2, attention=4)
