"""Widening a trained U-Net without changing what it computes: more channels, fine-tuned from trained weights.

A wider network (``train-vision --width 16 --init`` a width-12 checkpoint) starts from the narrower one's function
instead of random weights, so capacity can be tried in a fine-tune's minutes rather than a from-scratch run's hours.
The old channels keep their trained weights at the front of every layer; the new channels take the wider network's
fresh initial weights; every weight from a new channel into an old one (and into the 1-channel head) is zero. So
the old channels, and the logits, are exactly those of the narrow network at the start (in eval and train mode:
batch norm is per channel), and the new channels join as training moves those zero weights (Net2Net's
function-preserving widening by zero extension; Chen et al. 2016).

A U-Net with more self-attention blocks than the checkpoint (``UNet(attention=L)``, ``train-vision --attention L
--init`` one with fewer or none) takes the checkpoint's blocks as they are and its new ones at their initial weights,
whose output projections are zero: each new block adds nothing at the start.

A U-Net that reads colour-anomaly maps beside the colours (``UNet(anomaly=k)``, ``train-vision --anomaly k --init``
a checkpoint reading fewer) is widened the same way at its input: the maps' first-layer weights start at zero.

The same holds for a U-Net that reads s x s pixel blocks (``UNet(unshuffle=s)``, ``train-vision --unshuffle 2
--image-size 128 --init`` a 64 px checkpoint): its first conv reads each block's pixels with the plain network's
weights over s^2, and its head repeats the plain one's logit over the block, so at the start it computes the plain
network on the image averaged over s x s blocks, each logit repeated over its block (:func:`unshuffle_unet_state`).
"""

from __future__ import annotations

import torch
from torch import nn

from grasp_s2r.vision.networks.model import UNet


def _input_index(name: str, old_in: int, new_in: int) -> torch.Tensor:
    """Where a layer's old input channels sit among its new ones.

    A decoder block's first conv (``fuse.I.0``) reads ``cat([upsampled, skip])``, each half as wide as the input: the
    old skip channels move behind the new upsampled ones. Every other layer's inputs stay at the front.
    """
    if name.startswith("fuse.") and name.endswith(".0.weight"):
        half_old, half_new = old_in // 2, new_in // 2
        return torch.cat([torch.arange(half_old), half_new + torch.arange(half_old)])
    return torch.arange(old_in)


def widen_unet_state(old_state: dict[str, torch.Tensor], wide: UNet) -> dict[str, torch.Tensor]:
    """The state dict of ``wide`` (a U-Net of the same depth, at least as wide as the one ``old_state`` is from) that
    computes what ``old_state`` computes; the new channels keep ``wide``'s own initial weights.

    ``ValueError`` when the layers do not match (another depth) or a layer would be narrower.
    """
    new_state = wide.state_dict()
    added = set(new_state) - set(old_state)  # self-attention blocks the checkpoint lacks: they start as the identity
    if set(old_state) - set(new_state) or any(not name.startswith("context.") for name in added):
        raise ValueError("the checkpoint's U-Net has other layers (another depth?) than the network to widen")
    widened = {}
    for name, new in new_state.items():
        if name in added:
            widened[name] = new.clone()
            continue
        old = old_state[name].to(new.dtype)
        if name.startswith("context.") and old.shape != new.shape:
            raise ValueError(f"cannot widen the self-attention block {name}: {tuple(old.shape)} -> {tuple(new.shape)}")
        if old.shape == new.shape:
            widened[name] = old.clone()
            continue
        if old.dim() != new.dim() or any(o > n for o, n in zip(old.shape, new.shape)):
            raise ValueError(f"cannot widen {name}: {tuple(old.shape)} -> {tuple(new.shape)}")
        t = new.clone()
        if new.dim() == 1:  # per-channel: batch-norm weight, bias and statistics, a transposed conv's bias
            t[: old.shape[0]] = old
        else:  # conv (out, in, k, k); transposed conv (in, out, k, k)
            out_dim, in_dim = (1, 0) if name.startswith("up.") else (0, 1)
            t = t.movedim((out_dim, in_dim), (0, 1))
            o = old.movedim((out_dim, in_dim), (0, 1))
            t[: o.shape[0]] = 0.0  # old output channels read no new input channel
            t[: o.shape[0], _input_index(name, o.shape[1], t.shape[1])] = o
            t = t.movedim((0, 1), (out_dim, in_dim)).contiguous()
        widened[name] = t
    return widened


def unshuffle_unet_state(old_state: dict[str, torch.Tensor], model: UNet) -> dict[str, torch.Tensor]:
    """``old_state`` (a plain U-Net, ``unshuffle`` 1, of ``model``'s width and depth) as the state dict of ``model``
    (``unshuffle`` s): the plain network on the s x s block means, each logit repeated over its block."""
    s2 = model.unshuffle**2
    state = {name: t.clone() for name, t in old_state.items()}
    first = old_state["down.0.0.weight"]  # (out, 3, k, k); pixel_unshuffle puts channel c's block at c * s^2 + i
    state["down.0.0.weight"] = first.repeat_interleave(s2, dim=1) / s2
    state["head.weight"] = old_state["head.weight"].repeat(s2, 1, 1, 1)
    state["head.bias"] = old_state["head.bias"].repeat(s2)
    shapes = {name: tuple(t.shape) for name, t in model.state_dict().items()}
    if set(state) != set(shapes) or any(tuple(state[n].shape) != shapes[n] for n in shapes):
        raise ValueError("the checkpoint's U-Net is not a plain one of this network's width and depth")
    return state


def load_widened(model: nn.Module, old_state: dict[str, torch.Tensor]) -> None:
    """Load ``old_state`` (a narrower U-Net's weights, or a plain one of the same width for a network with
    ``unshuffle``) into ``model`` by :func:`widen_unet_state` / :func:`unshuffle_unet_state`."""
    if not isinstance(model, UNet):
        raise TypeError(f"only a U-Net can be widened, not {type(model).__name__}")
    if model.unshuffle > 1:
        model.load_state_dict(unshuffle_unet_state(old_state, model))
    else:
        model.load_state_dict(widen_unet_state(old_state, model))
