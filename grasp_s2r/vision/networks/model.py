"""Segmentation networks, built by name: a compact U-Net and torchvision's LR-ASPP (no pretrained weights).

Every network maps a normalized image float (N, 3, H, W) to logits float (N, 1, H, W) at the input
resolution; ``H`` and ``W`` must be multiples of 8 (a U-Net with ``unshuffle`` s: of 8 s).
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
HEIGHT_REF_M = 0.05
"""The TCP height above the table whose height channel is 0 (:func:`height_channel`: log(height / this))."""
_MEAN_RGB = (0.485, 0.456, 0.406)
_STD_RGB = (0.229, 0.224, 0.225)


def to_input_tensor(rgb_uint8: np.ndarray) -> torch.Tensor:
    """uint8 (N, H, W, 3) -> normalized float32 (N, 3, H, W) on the CPU."""
    rgb = np.require(rgb_uint8, requirements=["C", "W"])  # read-only arrays (memory-mapped episodes) are copied
    x = torch.from_numpy(rgb).permute(0, 3, 1, 2).float().div_(255.0)
    mean = torch.tensor(_MEAN_RGB).view(1, 3, 1, 1)
    std = torch.tensor(_STD_RGB).view(1, 3, 1, 1)
    return (x - mean) / std


def height_channel(tcp_z_above_table_m: np.ndarray | torch.Tensor, hw: tuple[int, int]) -> torch.Tensor:
    """The camera's height as an input channel: float32 (N, 1, H, W), each image's plane log(height /
    :data:`HEIGHT_REF_M`), for a U-Net with ``height`` (heights float (N,), metres above the table top, the TCP's:
    ``proprio``'s ``tcp_z_above_table_m``; clipped to 3 mm and more). The sphere's width in pixels falls as the
    height grows, so the plane tells the network how wide a sphere it may see."""
    z = torch.as_tensor(np.asarray(tcp_z_above_table_m, dtype=np.float32)).reshape(-1, 1, 1, 1)
    return torch.log(z.clamp(min=0.003) / HEIGHT_REF_M).expand(-1, 1, *hw).contiguous()


def _conv_block(c_in: int, c_out: int) -> nn.Sequential:
    return nn.Sequential(
        nn.Conv2d(c_in, c_out, 3, padding=1, bias=False), nn.BatchNorm2d(c_out), nn.ReLU(inplace=True),
        nn.Conv2d(c_out, c_out, 3, padding=1, bias=False), nn.BatchNorm2d(c_out), nn.ReLU(inplace=True),
    )


class UNet(nn.Module):
    """Compact U-Net: ``depth`` 2x poolings, ``width`` channels at full resolution, doubling per level.

    ``anomaly`` k > 0: the first k colour-anomaly maps of each image (:func:`~grasp_s2r.vision.networks.anomaly.
    local_anomaly`, no weights) are read beside its colours.

    ``unshuffle`` s > 1: the image's s x s pixel blocks are stacked as channels first (``pixel_unshuffle``: 3 s^2
    channels at 1/s of the side, nothing lost) and the head predicts s^2 logits a block, put back in place
    (``pixel_shuffle``): the network sees every camera pixel at about the multiply-adds of one at 1/s the side.

    ``height`` k > 0: the input holds a fourth channel, the camera's height above the table (:func:`height_channel`),
    which the first k encoder blocks read beside their input (the first: beside the colours and the anomaly maps).
    """

    def __init__(self, width: int = 16, depth: int = 3, unshuffle: int = 1, anomaly: int = 0, height: int = 0):
        super().__init__()
        if unshuffle < 1:
            raise ValueError(f"unshuffle must be >= 1, got {unshuffle}")
        if not 0 <= anomaly <= len(ANOMALY_WINDOWS_PX):
            raise ValueError(f"anomaly must be in [0, {len(ANOMALY_WINDOWS_PX)}], got {anomaly}")
        if not 0 <= int(height) <= depth + 1:
            raise ValueError(f"height must be in [0, {depth + 1}] (encoder blocks reading it), got {height}")
        self.unshuffle = int(unshuffle)
        self.anomaly = int(anomaly)
        """Colour-anomaly maps read beside the colours (``vision/networks/anomaly.py``); 0: the colours only."""
        self.height = int(height)
        """Encoder blocks reading the camera's height, the input's fourth channel (:func:`height_channel`); 0: no
        such channel."""
        s2 = self.unshuffle**2
        chans = [width * 2**i for i in range(depth + 1)]
        self.down = nn.ModuleList([_conv_block((3 + self.anomaly + bool(self.height)) * s2, chans[0])])
        self.down.extend(_conv_block(chans[i] + (i + 1 < self.height), chans[i + 1]) for i in range(depth))
        self.up = nn.ModuleList(nn.ConvTranspose2d(chans[i + 1], chans[i], 2, stride=2) for i in reversed(range(depth)))
        self.fuse = nn.ModuleList(_conv_block(2 * chans[i], chans[i]) for i in reversed(range(depth)))
        self.head = nn.Conv2d(chans[0], s2, 1)
        self.width = chans[0]
        """Channels of :meth:`features`."""

    def _decoded(self, x: torch.Tensor) -> torch.Tensor:
        """The last decoder block's output float (N, width, H/s, W/s)."""
        height = x[:, 3:4, :1, :1] if self.height else None  # (N, 1, 1, 1): each image's plane is constant
        if self.anomaly:  # the maps of the colours; a height channel stays last
            rgb, rest = x[:, :3], x[:, 3:]
            x = torch.cat([rgb, local_anomaly(rgb, ANOMALY_WINDOWS_PX[:self.anomaly]).to(x.dtype), rest], dim=1)
        if self.unshuffle > 1:
            x = F.pixel_unshuffle(x, self.unshuffle)
        skips = []
        for i, block in enumerate(self.down):
            if i:
                x = F.max_pool2d(x, 2)
                if i < self.height:
                    x = torch.cat([x, height.expand(-1, -1, *x.shape[2:])], dim=1)
            x = block(x)
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


def count_parameters(model: nn.Module) -> int:
    return sum(p.numel() for p in model.parameters())
