"""What every network of the package shares of torch: the device a model runs on when none is named, and whether its
weights are numbers at all."""

from __future__ import annotations

import torch


def default_device() -> torch.device:
    """CUDA when present, else the CPU."""
    return torch.device("cuda" if torch.cuda.is_available() else "cpu")


def weights_finite(module: torch.nn.Module) -> bool:
    """Whether every floating-point weight and buffer of ``module`` is a finite number (a diverged training's are not:
    a controller's actions, a segmenter's masks would be NaN or noise)."""
    return all(bool(torch.isfinite(v).all()) for v in module.state_dict().values() if v.is_floating_point())
