"""Segmentation networks, built by name: a compact U-Net and torchvision's LR-ASPP (no pretrained weights).

Every network maps a normalized image float (N, 3, H, W) to logits float (N, 1, H, W) at the input
resolution; ``H`` and ``W`` must be multiples of :func:`input_multiple_px` (8; a U-Net of ``depth`` d with
``unshuffle`` s: of 2 ** d * s).
"""

from __future__ import annotations

from typing import Any, Literal, get_args

import numpy as np
import torch
from torch import nn
from torch.nn import functional as F

from grasp_s2r.vision.networks.anomaly import ANOMALY_WINDOWS_PX, local_anomaly

Architecture = Literal["unet", "lraspp"]
ARCHITECTURES: tuple[str, ...] = get_args(Architecture)
"""Names accepted by :func:`build_model`."""
_MEAN_RGB = (0.485, 0.456, 0.406)
_STD_RGB = (0.229, 0.224, 0.225)


def to_input_tensor(rgb_uint8: np.ndarray) -> torch.Tensor:
    """uint8 (N, H, W, 3) -> normalized float32 (N, 3, H, W) on the CPU."""
    rgb = np.require(rgb_uint8, requirements=["C", "W"])  # read-only arrays (memory-mapped episodes) are copied
    x = torch.from_numpy(rgb).permute(0, 3, 1, 2).float().div_(255.0)
    mean = torch.tensor(_MEAN_RGB).view(1, 3, 1, 1)
    std = torch.tensor(_STD_RGB).view(1, 3, 1, 1)
    return (x - mean) / std


Padding = Literal["zeros", "replicate", "reflect"]
PADDINGS: tuple[str, ...] = get_args(Padding)
"""What a U-Net's 3x3 convolutions read beyond the image's edge (``nn.Conv2d``'s ``padding_mode``)."""


def _conv_block(c_in: int, c_out: int, padding: str = "zeros") -> nn.Sequential:
    return nn.Sequential(
        nn.Conv2d(c_in, c_out, 3, padding=1, bias=False, padding_mode=padding), nn.BatchNorm2d(c_out),
        nn.ReLU(inplace=True),
        nn.Conv2d(c_out, c_out, 3, padding=1, bias=False, padding_mode=padding), nn.BatchNorm2d(c_out),
        nn.ReLU(inplace=True),
    )


ATTENTION_HEADS = 4
"""Heads of a U-Net's self-attention blocks (:class:`GlobalContext`); every level's channels divide by it."""


class GlobalContext(nn.Module):
    """Self-attention over every cell of a feature map float (N, C, h, w), added to it: each place compared with the
    whole image (multi-head, :data:`ATTENTION_HEADS` heads, no positions). Its output projection starts at zero, so
    a network with the block computes what it computed without it until training moves those weights."""

    def __init__(self, channels: int):
        super().__init__()
        self.norm = nn.GroupNorm(1, channels)
        self.attend = nn.MultiheadAttention(channels, ATTENTION_HEADS, batch_first=True)
        nn.init.zeros_(self.attend.out_proj.weight)
        nn.init.zeros_(self.attend.out_proj.bias)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        n, c, h, w = x.shape
        cells = self.norm(x).flatten(2).transpose(1, 2)  # (N, h w, C)
        context, _ = self.attend(cells, cells, cells, need_weights=False)
        return x + context.transpose(1, 2).reshape(n, c, h, w)


PREVIOUS_INPUTS = ("", "frame", "difference")
"""What a U-Net's ``previous`` may be: no previous frame, the warped previous frame, or the image less it."""


def two_frame_input(now: torch.Tensor, before: torch.Tensor, previous: str) -> torch.Tensor:
    """The 6-channel input of a U-Net reading the previous frame: normalized images (N, 3, H, W) of now and of the
    previous frame warped onto it -> ``cat(now, before)`` (``"frame"``) or ``cat(now, now - before)``
    (``"difference"``: zero wherever the two line up, as the table does)."""
    if previous not in PREVIOUS_INPUTS[1:]:
        raise ValueError(f"previous must be one of {PREVIOUS_INPUTS[1:]}, got {previous!r}")
    return torch.cat([now, before if previous == "frame" else now - before], dim=1)


class UNet(nn.Module):
    """Compact U-Net: ``depth`` 2x poolings, ``width`` channels at full resolution, doubling per level.

    ``anomaly`` k > 0: the first k colour-anomaly maps of each image (:func:`~grasp_s2r.vision.networks.anomaly.
    local_anomaly`, no weights) are read beside its colours.

    ``previous`` ``"frame"`` or ``"difference"``: the input holds 6 channels, the image and, from the previous frame
    warped onto it through the table plane (``control.wrist_geometry.PreviousFrame``), that frame or the image less
    it (:func:`two_frame_input`): what stands above the table, the sphere, differs between the two by its parallax,
    whatever its colour.

    ``unshuffle`` s > 1: the image's s x s pixel blocks are stacked as channels first (``pixel_unshuffle``: 3 s^2
    channels at 1/s of the side, nothing lost) and the head predicts s^2 logits a block, put back in place
    (``pixel_shuffle``): the network sees every camera pixel at about the multiply-adds of one at 1/s the side.

    ``attention`` L > 0: a :class:`GlobalContext` block after each of the L deepest encoder levels (the bottleneck
    first): every place compared with the whole image; it starts as the identity, so a checkpoint without it loads
    into one with it unchanged (``vision/networks/widen.py``).

    ``padding`` (one of :data:`PADDINGS`): what every 3x3 convolution reads beyond the edge of its feature map; with
    ``"zeros"`` an object cut by the image's border ends in a frame of the mean colour (zero after
    :func:`to_input_tensor`'s normalization) that no image shows, with ``"replicate"`` or
    ``"reflect"`` the image goes on past it. It holds no weights: a checkpoint of one padding loads into another.
    """

    def __init__(self, width: int = 16, depth: int = 3, unshuffle: int = 1, anomaly: int = 0,
                 previous: str | bool = "", padding: str = "zeros", attention: int = 0):
        super().__init__()
        if padding not in PADDINGS:
            raise ValueError(f"padding must be one of {PADDINGS}, got {padding!r}")
        if unshuffle < 1:
            raise ValueError(f"unshuffle must be >= 1, got {unshuffle}")
        if not 0 <= anomaly <= len(ANOMALY_WINDOWS_PX):
            raise ValueError(f"anomaly must be in [0, {len(ANOMALY_WINDOWS_PX)}], got {anomaly}")
        if not 0 <= attention <= depth + 1:
            raise ValueError(f"attention must be in [0, {depth + 1}] (the encoder's levels), got {attention}")
        self.unshuffle = int(unshuffle)
        self.anomaly = int(anomaly)
        """Colour-anomaly maps read beside the colours (``vision/networks/anomaly.py``); 0: the colours only."""
        previous = {True: "frame", False: ""}.get(previous, previous)
        if previous not in PREVIOUS_INPUTS:
            raise ValueError(f"previous must be one of {PREVIOUS_INPUTS}, got {previous!r}")
        if previous and anomaly:
            raise ValueError("a U-Net reads the previous frame or colour-anomaly maps, not both")
        self.previous = previous
        """What the input's channels 3-5 hold (:func:`two_frame_input`); "": there are none."""
        s2 = self.unshuffle**2
        chans = [width * 2**i for i in range(depth + 1)]
        self.padding = padding
        c_in = (3 + self.anomaly + 3 * bool(self.previous)) * s2
        self.down = nn.ModuleList([_conv_block(c_in, chans[0], padding)])
        self.down.extend(_conv_block(chans[i], chans[i + 1], padding) for i in range(depth))
        self.up = nn.ModuleList(nn.ConvTranspose2d(chans[i + 1], chans[i], 2, stride=2) for i in reversed(range(depth)))
        self.fuse = nn.ModuleList(_conv_block(2 * chans[i], chans[i], padding) for i in reversed(range(depth)))
        self.head = nn.Conv2d(chans[0], s2, 1)
        self.attention = int(attention)
        """Encoder levels, the deepest first, followed by a :class:`GlobalContext` block; 0: none."""
        self.context = nn.ModuleList(GlobalContext(chans[depth - i]) for i in range(self.attention))
        self.width = chans[0]
        """Channels of :meth:`features`."""

    def _decoded(self, x: torch.Tensor) -> torch.Tensor:
        """The last decoder block's output float (N, width, H/s, W/s)."""
        if self.anomaly:
            x = torch.cat([x, local_anomaly(x, ANOMALY_WINDOWS_PX[:self.anomaly]).to(x.dtype)], dim=1)
        if self.unshuffle > 1:
            x = F.pixel_unshuffle(x, self.unshuffle)
        skips = []
        depth = len(self.down) - 1
        for i, block in enumerate(self.down):
            x = block(x if i == 0 else F.max_pool2d(x, 2))
            if depth - i < self.attention:
                x = self.context[depth - i](x)
            skips.append(x)
        skips.pop()
        for up, fuse in zip(self.up, self.fuse):
            x = fuse(torch.cat([up(x), skips.pop()], dim=1))
        return x

    def features(self, x: torch.Tensor) -> torch.Tensor:
        """The last decoder block's output float (N, width, H, W) (with ``unshuffle``: each block's features
        repeated over its pixels): what a gripper head (``vision/gripper.py``) reads."""
        x = self._decoded(x)
        return x if self.unshuffle == 1 else F.interpolate(x, scale_factor=self.unshuffle, mode="nearest")

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        logits = self.head(self._decoded(x))
        return logits if self.unshuffle == 1 else F.pixel_shuffle(logits, self.unshuffle)


class LRASPP(nn.Module):
    """torchvision LR-ASPP with a MobileNetV3-Large backbone, randomly initialised, one output class."""

    def __init__(self) -> None:
        super().__init__()
        from torchvision.models.segmentation import lraspp_mobilenet_v3_large

        self.net = lraspp_mobilenet_v3_large(weights=None, weights_backbone=None, num_classes=1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.net(x)["out"]


def build_model(architecture: str, **kwargs: Any) -> nn.Module:
    """A fresh network by name (one of :data:`ARCHITECTURES`); ``kwargs`` go to its constructor."""
    if architecture == "unet":
        return UNet(**kwargs)
    if architecture == "lraspp":
        return LRASPP(**kwargs)
    raise ValueError(f"unknown architecture {architecture!r}; choose one of {', '.join(ARCHITECTURES)}")


def input_multiple_px(architecture: str, arch_kwargs: dict[str, Any]) -> int:
    """What the side of a network's input (an image, a crop, a tile) must be a multiple of: a U-Net halves it
    ``depth`` times after its pixel unshuffle; LR-ASPP, 8."""
    if architecture == "unet":
        return 2 ** int(arch_kwargs.get("depth", 3)) * int(arch_kwargs.get("unshuffle", 1))
    return 8


def count_parameters(model: nn.Module) -> int:
    return sum(p.numel() for p in model.parameters())
