"""What :class:`~grasp_s2r.agent.GraspAgent` takes from a robot, checked at the door.

A real arm's driver can hand the agent millimetres for metres, a float image in 0..255, a NaN from a dropped
joint reading or a tensor on the wrong device; each of those used to pass silently (a NaN action that then stayed
in the episode memory, an all-white image, a saturated step) or fail deep inside torch. Here each is one line
(:class:`~grasp_s2r.learner.AgentError`) that names what is wrong and what to pass instead. Only the agent's
inputs are checked: the simulator's own rollouts call the learner step directly and pay nothing for it.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from grasp_s2r.learner import AgentError
from grasp_s2r.sim.env import PROPRIO_NAMES, PROPRIO_RANGES

MIN_CROP_SHARE = 0.25
"""The smallest camera crop accepted, as a share of the trained image's side: a crop of fewer pixels than this
(16 of the trained 64) is enlarged into an image the segmenter never saw the like of."""
FLOAT_SLACK = 1e-3
"""How far past [0, 1] a float image may stray (rounding of a conversion) before it is refused."""


def rgb_uint8(rgb: Any) -> np.ndarray:
    """A camera image -> uint8 (H, W, 3). Accepts uint8, or float in [0, 1]; anything else -> :class:`AgentError`
    saying what it got and what to pass (channels first, a batch, a 0..255 float image, NaN pixels, no pixels)."""
    if rgb is None:
        raise AgentError("the image is None: pass the camera's RGB image (H, W, 3)")
    img = _array(rgb, "the image")
    if img.ndim == 4:
        raise AgentError(f"act takes one RGB image (H, W, 3), got a batch of shape {img.shape}: use act_batch")
    if img.ndim == 3 and img.shape[0] == 3 and img.shape[2] != 3:
        raise AgentError(f"expected an RGB image (H, W, 3), got shape {img.shape}: channels first? transpose it to "
                         "(H, W, 3)")
    if img.ndim != 3 or img.shape[2] != 3:
        raise AgentError(f"expected an RGB image (H, W, 3), got shape {img.shape}")
    if img.shape[0] == 0 or img.shape[1] == 0:
        raise AgentError(f"the image has no pixels (shape {img.shape})")
    if img.dtype == np.uint8:
        return img
    if not np.issubdtype(img.dtype, np.floating):
        raise AgentError(f"expected uint8 or float RGB in [0, 1], got {img.dtype}")
    if not np.isfinite(img).all():
        raise AgentError("the image holds NaN or infinite pixels")
    lo, hi = float(img.min()), float(img.max())
    if lo < -FLOAT_SLACK or hi > 1.0 + FLOAT_SLACK:
        hint = ": a 0..255 image as float? pass it as uint8, or divide by 255" if hi > 1.0 + FLOAT_SLACK else ""
        raise AgentError(f"a float image must be in [0, 1], got values in [{lo:g}, {hi:g}]{hint}")
    return (np.clip(img, 0.0, 1.0) * 255.0 + 0.5).astype(np.uint8)


def check_crop(crop_hw: tuple[int, int], out_hw: tuple[int, int], image_hw: tuple[int, int]) -> None:
    """:class:`AgentError` when the crop of the trained view, ``crop_hw`` px of a ``image_hw`` image, is smaller
    than :data:`MIN_CROP_SHARE` of the trained ``out_hw``."""
    if min(c / o for c, o in zip(crop_hw, out_hw, strict=True)) < MIN_CROP_SHARE:
        raise AgentError(f"this {image_hw[1]}x{image_hw[0]} image gives the trained view only {crop_hw[1]}x"
                         f"{crop_hw[0]} px, under a quarter of the {out_hw[1]}x{out_hw[0]} px the segmenter reads; "
                         "use a camera of more pixels")


def proprio_rows(proprio: Any) -> np.ndarray:
    """Proprioception (N, 5) in ``PROPRIO_NAMES`` order and SI units -> float32 (N, 5); :class:`AgentError` for
    another shape, non-numbers, a non-finite value or one outside :data:`PROPRIO_RANGES`, naming row and field."""
    if proprio is None:
        raise AgentError(f"proprio is None: pass ({', '.join(PROPRIO_NAMES)})")
    raw = _array(proprio, "proprio")
    if raw.dtype.kind not in "biuf":
        raise AgentError(f"proprio must be numbers ({', '.join(PROPRIO_NAMES)}), got {type(proprio).__name__} of "
                         f"{raw.dtype}")
    p = raw.astype(np.float32)
    if p.ndim != 2 or p.shape[1] != len(PROPRIO_NAMES):
        raise AgentError(f"proprio must be (N, {len(PROPRIO_NAMES)}) in the order {', '.join(PROPRIO_NAMES)}; "
                         f"got shape {p.shape}")
    for j, name in enumerate(PROPRIO_NAMES):
        column = p[:, j]
        lo, hi = PROPRIO_RANGES[name]
        bad = np.flatnonzero(~np.isfinite(column) | (column < lo) | (column > hi))
        if len(bad):
            i, value = int(bad[0]), float(column[int(bad[0])])
            where = f"proprio[{i}]" if len(p) > 1 else "proprio"
            if not math.isfinite(value):
                why = "is not finite: a reading the arm did not give; its action would be NaN"
            else:
                unit = " (metres: millimetres given?)" if name.endswith("_m") and abs(value) > hi else ""
                why = f"is outside [{lo:g}, {hi:g}]{unit}"
            raise AgentError(f"{where} {name} = {value:g} {why}")
    return p


def _array(value: Any, what: str) -> np.ndarray:
    """``np.asarray(value)``, a torch tensor's refusals (on a GPU, needing grad) in one line naming ``what``."""
    try:
        return np.asarray(value)
    except (TypeError, ValueError, RuntimeError) as e:
        raise AgentError(f"{what}: cannot be read as an array ({str(e).splitlines()[0]}); pass a numpy array (a "
                         "torch tensor: .detach().cpu().numpy())") from None


def one_proprio(proprio: Any) -> np.ndarray:
    """:meth:`GraspAgent.act`'s one reading (5,) -> float32 (1, 5), checked as :func:`proprio_rows`."""
    shape = np.shape(proprio) if proprio is not None else None
    if shape is not None and len(shape) != 1:
        got = f"a {type(proprio).__name__}" if len(shape) == 0 else f"shape {shape}"
        raise AgentError(f"act takes one proprio reading of shape ({len(PROPRIO_NAMES)},), got {got}"
                         + (": act_batch takes batches" if len(shape) == 2 else ""))
    return proprio_rows(None if proprio is None else np.asarray(proprio)[None])


def check_vfov(camera_vfov_deg: float | None, trained_fov_deg: float) -> None:
    """A camera's vertical field of view, checked when the agent is made (not at its first image): a number in
    (0, 180) degrees and at least the ``trained_fov_deg`` the segmenter reads."""
    if camera_vfov_deg is None:
        return
    try:
        v = float(camera_vfov_deg)
    except (TypeError, ValueError):
        raise AgentError(f"camera_vfov_deg must be a number of degrees, got {camera_vfov_deg!r}") from None
    if not 0.0 < v < 180.0:
        raise AgentError(f"camera_vfov_deg must be in (0, 180) degrees, got {camera_vfov_deg}")
    if v < trained_fov_deg:
        hint = " (degrees, not radians?)" if v < math.pi + 0.01 else ""
        raise AgentError(f"camera_vfov_deg {v:g}°{hint} sees less than the trained {trained_fov_deg:g}° view: the "
                         "segmenter would see the sphere at the wrong scale; use a camera with a wider field of view")


def resolve_device(device: Any) -> Any:
    """``device`` as torch takes it, refused in one line when torch does not know it ("gpu") or this machine has
    none of it (CUDA without a GPU); None stays None (the default: CUDA when present, else the CPU)."""
    if device is None:
        return None
    import torch

    try:
        dev = torch.device(device)
    except (RuntimeError, TypeError, ValueError) as e:
        raise AgentError(f"device {device!r} is not a torch device ({type(e).__name__}); use 'cpu', 'cuda' or "
                         "'cuda:N'") from None
    if dev.type == "cuda" and not torch.cuda.is_available():
        raise AgentError(f"device {device!r}: no CUDA GPU is usable here; use device='cpu' (or None: the CPU when "
                         "there is no GPU)")
    if dev.type == "cuda" and dev.index is not None and dev.index >= torch.cuda.device_count():
        raise AgentError(f"device {device!r}: this machine has {torch.cuda.device_count()} CUDA device(s)")
    return dev
