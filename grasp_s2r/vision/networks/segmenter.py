"""A trained segmentation network behind one call: RGB wrist images -> sphere masks.

Checkpoint format (a ``torch.save``'d dict, readable with ``weights_only=True``)::

    format          "grasp_s2r.segmenter"
    format_version  1
    architecture    "unet" | "lraspp";  arch_kwargs: constructor arguments
    input_hw        [H, W] the network was trained at
    background_split {"source": [...], "train": [photo names], "heldout": [photo names]}
    config          the training config (SegmenterTrainConfig + DataConfig + EnvConfig as dicts)
    state_dict      the network weights
    step            optimizer steps done;  history: training-curve rows
    optimizer       (only in ``checkpoint-latest.pt`` of a run: what ``--resume`` needs)
    threshold       (optional, default 0.5) probability above which a pixel is the sphere;
    threshold_calibration  how it was chosen (see ``vision/calibrate.py``)

A segmenter may carry a gripper head (``vision/gripper.py``, its own checkpoint file): then it predicts the
gripper fingers' mask too (:meth:`Segmenter.predict_gripper`, :attr:`Segmenter.has_gripper_head`).
"""

from __future__ import annotations

import io
import warnings
from collections.abc import Callable
from importlib import resources
from pathlib import Path
from typing import Any

import cv2
import numpy as np
import torch
from torch import nn
from torch.nn import functional as F

from grasp_s2r.devices import default_device
from grasp_s2r.files import atomic_write, file_sha256, torch_load_problem
from grasp_s2r.vision.networks.model import build_model, to_input_tensor

FORMAT_NAME = "grasp_s2r.segmenter"
FORMAT_VERSION = 1
THRESHOLD = 0.5
"""A pixel is the sphere where the predicted probability exceeds this, unless the checkpoint has a calibrated
``threshold``."""

_REQUIRED_KEYS = ("format", "format_version", "architecture", "arch_kwargs", "input_hw", "background_split",
                  "config", "state_dict")


class CheckpointError(ValueError):
    """A file that is not a usable segmenter checkpoint (missing, corrupt, other format or version)."""


def default_checkpoint_path() -> Path:
    """The small checkpoint shipped inside the package (64x64 px, embedded default backgrounds)."""
    return Path(str(resources.files("grasp_s2r") / "weights" / "segmenter_64px.pt"))


def make_checkpoint(model: nn.Module, *, architecture: str, arch_kwargs: dict[str, Any], input_hw: tuple[int, int],
                    background_split: dict[str, list[str]], config: dict[str, Any], step: int,
                    history: list[dict[str, float]], optimizer: dict[str, Any] | None = None) -> dict[str, Any]:
    """The checkpoint dict of the module docstring (weights copied to the CPU)."""
    ckpt: dict[str, Any] = {
        "format": FORMAT_NAME, "format_version": FORMAT_VERSION, "architecture": architecture,
        "arch_kwargs": dict(arch_kwargs), "input_hw": [int(input_hw[0]), int(input_hw[1])],
        "background_split": background_split, "config": config, "step": int(step), "history": list(history),
        "state_dict": {k: v.detach().cpu().contiguous() for k, v in model.state_dict().items()},  # NCHW as saved
    }
    if optimizer is not None:
        ckpt["optimizer"] = optimizer
    return ckpt


def write_checkpoint(ckpt: dict[str, Any], path: Path | str) -> None:
    """``torch.save`` ``ckpt`` to ``path`` atomically (a reader sees the old file or the new one, whole)."""
    buf = io.BytesIO()
    torch.save(ckpt, buf)
    atomic_write(Path(path), buf.getvalue())


def check_threshold(threshold: float) -> float:
    """``threshold`` as a float, or ValueError unless 0 < threshold < 1."""
    threshold = float(threshold)
    if not 0.0 < threshold < 1.0:
        raise ValueError(f"threshold must be in (0, 1), got {threshold}")
    return threshold


def read_checkpoint(path: Path | str) -> dict[str, Any]:
    """Load and check a checkpoint dict; raises :class:`CheckpointError` with one clear line."""
    path = Path(path)
    if not path.is_file():
        raise CheckpointError(f"checkpoint {path} does not exist")
    try:
        with warnings.catch_warnings():  # a corrupt file can make torch warn about its "pickle protocol": one line
            warnings.simplefilter("ignore")
            ckpt = torch.load(path, map_location="cpu", weights_only=True)
    except Exception as e:  # noqa: BLE001 - arbitrary bytes make torch's unpickler raise almost anything
        raise CheckpointError(f"checkpoint {path} is unreadable or corrupt ({torch_load_problem(path, e)})") from None
    if not isinstance(ckpt, dict) or ckpt.get("format") != FORMAT_NAME:
        raise CheckpointError(f"{path} is not a {FORMAT_NAME} checkpoint")
    if ckpt.get("format_version") != FORMAT_VERSION:
        raise CheckpointError(
            f"{path} has {FORMAT_NAME} format_version {ckpt.get('format_version')}, this version reads "
            f"{FORMAT_VERSION}: retrain it with `grasp-s2r train-vision`"
        )
    missing = [k for k in _REQUIRED_KEYS if k not in ckpt]
    if missing:
        raise CheckpointError(f"checkpoint {path} lacks {', '.join(missing)}")
    try:
        check_threshold(ckpt.get("threshold", THRESHOLD))
    except (TypeError, ValueError) as e:
        raise CheckpointError(f"checkpoint {path}: {e}") from None
    return ckpt


class Segmenter:
    """RGB -> sphere mask with a trained network; one batched forward pass per call on ``self.device``."""

    def __init__(self, model: nn.Module, *, input_hw: tuple[int, int], config: dict[str, Any],
                 device: torch.device | None = None, threshold: float = THRESHOLD):
        self.device = device or default_device()
        self.model = model.to(self.device).eval()
        self.input_hw = (int(input_hw[0]), int(input_hw[1]))
        self.threshold = check_threshold(threshold)
        """Probability above which a pixel is the sphere (the checkpoint's calibrated one when it has one)."""
        self.config = config
        """The checkpoint's metadata: architecture, arch_kwargs, input_hw, background_split, config, step."""
        self.checkpoint_sha256: str | None = None
        """:func:`file_sha256` of the file it was loaded from (None when made from a dict): a gripper head must
        have been trained on that file."""
        self.gripper_head: nn.Module | None = None
        """The gripper fingers' head over ``model.features`` (``vision.gripper.attach_gripper_head``), or None."""
        self.gripper_threshold = THRESHOLD
        """Probability above which a pixel is a finger's (the head's checkpoint's)."""
        self.gripper_head_path: Path | None = None
        """The file the attached gripper head was read from."""

    @classmethod
    def load(cls, path: Path | str, device: torch.device | str | None = None) -> Segmenter:
        """A segmenter from a checkpoint file; raises :class:`CheckpointError` for unusable files."""
        segmenter = cls.from_checkpoint(read_checkpoint(path), device=device, path=path)
        segmenter.checkpoint_sha256 = file_sha256(path)
        return segmenter

    @classmethod
    def from_checkpoint(cls, ckpt: dict[str, Any], device: torch.device | str | None = None,
                        path: Path | str = "<dict>") -> Segmenter:
        """A segmenter from a checkpoint dict already checked by :func:`read_checkpoint` (``path`` names it in errors)."""
        try:
            model = build_model(ckpt["architecture"], **ckpt["arch_kwargs"])
            model.load_state_dict(ckpt["state_dict"])
        except (ValueError, TypeError, RuntimeError) as e:
            raise CheckpointError(f"checkpoint {path} does not match its architecture: {str(e).splitlines()[0]}")
        meta = {k: v for k, v in ckpt.items() if k not in ("state_dict", "optimizer")}
        return cls(model, input_hw=tuple(ckpt["input_hw"]), config=meta,
                   device=torch.device(device) if device is not None else None,
                   threshold=ckpt.get("threshold", THRESHOLD))

    def _logits(self, rgb_uint8: np.ndarray, net: Callable[[torch.Tensor], torch.Tensor]) -> torch.Tensor:
        """``net``'s logits float (N, 1, H, W) at the images' own size; any H, W (resized to ``input_hw``)."""
        rgb = np.asarray(rgb_uint8)
        if rgb.dtype != np.uint8 or rgb.ndim != 4 or rgb.shape[-1] != 3:
            raise ValueError(f"expected uint8 (N, H, W, 3), got {rgb.dtype} {rgb.shape}")
        hw = rgb.shape[1:3]
        if hw != self.input_hw:
            h, w = self.input_hw
            interp = cv2.INTER_AREA if hw[0] > h else cv2.INTER_LINEAR
            rgb = np.stack([cv2.resize(im, (w, h), interpolation=interp) for im in rgb])
        x = to_input_tensor(rgb).to(self.device, non_blocking=True)
        logits = net(x)
        if hw != self.input_hw:
            logits = F.interpolate(logits, size=hw, mode="bilinear", align_corners=False)
        return logits

    @torch.inference_mode()
    def predict_proba(self, rgb_uint8: np.ndarray) -> np.ndarray:
        """uint8 (N, H, W, 3) -> sphere probability float32 (N, H, W); any H, W (resized to ``input_hw``)."""
        return torch.sigmoid(self._logits(rgb_uint8, self.model)[:, 0]).float().cpu().numpy()

    def predict(self, rgb_uint8: np.ndarray) -> np.ndarray:
        """uint8 (N, H, W, 3) -> bool (N, H, W), or (H, W, 3) -> (H, W)."""
        rgb = np.asarray(rgb_uint8)
        single = rgb.ndim == 3
        mask = self.predict_proba(rgb[None] if single else rgb) > self.threshold
        return mask[0] if single else mask

    @property
    def has_gripper_head(self) -> bool:
        """Whether it predicts the gripper fingers' mask too (a gripper head is attached)."""
        return self.gripper_head is not None

    @torch.inference_mode()
    def predict_gripper_proba(self, rgb_uint8: np.ndarray) -> np.ndarray:
        """uint8 (N, H, W, 3) -> the fingers' probability float32 (N, H, W), like :meth:`predict_proba`; needs a
        gripper head (:class:`CheckpointError` otherwise)."""
        head = self.gripper_head
        if head is None:
            raise CheckpointError("this segmenter has no gripper head: attach one with "
                                  "vision.gripper.attach_gripper_head (train it with 'grasp-s2r train-gripper')")
        features = getattr(self.model, "features", None)
        if features is None:
            raise CheckpointError(f"a {type(self.model).__name__} segmenter has no features for a gripper head")
        return torch.sigmoid(self._logits(rgb_uint8, lambda x: head(features(x)))[:, 0]).float().cpu().numpy()

    def predict_gripper(self, rgb_uint8: np.ndarray) -> np.ndarray:
        """uint8 (N, H, W, 3) -> the gripper fingers' mask bool (N, H, W), or (H, W, 3) -> (H, W)."""
        rgb = np.asarray(rgb_uint8)
        single = rgb.ndim == 3
        mask = self.predict_gripper_proba(rgb[None] if single else rgb) > self.gripper_threshold
        return mask[0] if single else mask
