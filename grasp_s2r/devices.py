"""The torch device a model runs on when none is named."""

from __future__ import annotations

import torch


def default_device() -> torch.device:
    """CUDA when present, else the CPU."""
    return torch.device("cuda" if torch.cuda.is_available() else "cpu")
