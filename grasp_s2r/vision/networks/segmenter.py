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
    package_version grasp_s2r's version that wrote it (absent from older files)
    optimizer       (only in ``checkpoint-latest.pt`` of a run: what ``--resume`` needs)
    progress        (optional, beside ``optimizer``) {"elapsed_s": training seconds up to ``step``,
                    "losses_since_row": the step losses after the last ``history`` row}: a resume's curve goes on
                    as if it had not stopped
    threshold       (optional, default 0.5) probability above which a pixel is the sphere;
    threshold_calibration  how it was chosen (see ``vision/calibrate.py``)
    tiling          (optional) {"size_px", "stride_px"}: the sphere is predicted on overlapping square tiles of the
                    ``input_hw`` image, each pixel the most probable of the tiles that cover it (:class:`Tiling`)

A segmenter may carry a gripper head (``vision/networks/gripper.py``, its own checkpoint file): then it predicts the
gripper fingers' mask too (:meth:`Segmenter.predict_gripper`, :attr:`Segmenter.has_gripper_head`).
"""

from __future__ import annotations

import io
import warnings
from collections.abc import Callable
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import Any

import cv2
import numpy as np
import torch
from torch import nn
from torch.nn import functional as F

from grasp_s2r import __version__
from grasp_s2r.devices import default_device, weights_finite
from grasp_s2r.files import atomic_write, file_sha256, torch_load_problem, weights_problem
from grasp_s2r.vision.networks.model import build_model, input_multiple_px, to_input_tensor, two_frame_input

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
                    history: list[dict[str, float]], optimizer: dict[str, Any] | None = None,
                    progress: dict[str, Any] | None = None) -> dict[str, Any]:
    """The checkpoint dict of the module docstring (weights copied to the CPU)."""
    ckpt: dict[str, Any] = {
        "format": FORMAT_NAME, "format_version": FORMAT_VERSION, "architecture": architecture,
        "arch_kwargs": dict(arch_kwargs), "input_hw": [int(input_hw[0]), int(input_hw[1])],
        "background_split": background_split, "config": config, "step": int(step), "history": list(history),
        "state_dict": {k: v.detach().cpu().contiguous() for k, v in model.state_dict().items()},  # NCHW as saved
        "package_version": __version__,
    }
    if optimizer is not None:
        ckpt["optimizer"] = optimizer
    if progress is not None:
        ckpt["progress"] = {"elapsed_s": float(progress["elapsed_s"]),
                            "losses_since_row": [float(v) for v in progress["losses_since_row"]]}
    return ckpt


def write_checkpoint(ckpt: dict[str, Any], path: Path | str) -> None:
    """``torch.save`` ``ckpt`` to ``path`` atomically (a reader sees the old file or the new one, whole)."""
    buf = io.BytesIO()
    torch.save(ckpt, buf)
    atomic_write(Path(path), buf.getvalue())


@dataclass(frozen=True)
class Tiling:
    """Predict the sphere tile by tile: each ``size_px`` square window, ``stride_px`` apart, through the network
    alone, a pixel's probability the highest of the windows that cover it.

    A network trained on crops of ``size_px`` (``train-vision``'s crop training) then sees at inference the field
    it was trained on, no more: a busy texture elsewhere in the image cannot suppress the sphere. Costs
    (windows x size_px^2) / (H x W) of the whole image's multiply-adds: 2.25 for 32 px tiles, 16 apart, on 64 px.
    """

    size_px: int
    stride_px: int

    def __post_init__(self) -> None:
        if self.size_px < 8 or self.size_px % 8:
            raise ValueError(f"tile size must be a multiple of 8 and at least 8, got {self.size_px}")
        if not 1 <= self.stride_px <= self.size_px:
            raise ValueError(f"tile stride must be in [1, tile size {self.size_px}], got {self.stride_px}")

    @classmethod
    def from_dict(cls, d: Any) -> Tiling:
        """From a checkpoint's ``tiling`` entry; ValueError with the problem otherwise."""
        if not isinstance(d, dict) or set(d) != {"size_px", "stride_px"}:
            raise ValueError(f"tiling must be {{'size_px': int, 'stride_px': int}}, got {d!r}")
        return cls(int(d["size_px"]), int(d["stride_px"]))

    def as_dict(self) -> dict[str, int]:
        return {"size_px": self.size_px, "stride_px": self.stride_px}

    def starts(self, side_px: int) -> list[int]:
        """Window starts along a side of ``side_px``: ``stride_px`` apart, the last flush with the far edge."""
        if side_px < self.size_px:
            raise ValueError(f"tiles of {self.size_px} px do not fit an image side of {side_px} px")
        starts = list(range(0, side_px - self.size_px + 1, self.stride_px))
        if starts[-1] != side_px - self.size_px:
            starts.append(side_px - self.size_px)
        return starts

    def apply(self, net: Callable[[torch.Tensor], torch.Tensor], x: torch.Tensor) -> torch.Tensor:
        """``net``'s one-channel logits (N, 1, H, W) of ``x`` (N, C, H, W), tile by tile, merged by their maximum."""
        n, _, h, w = x.shape
        s = self.size_px
        windows = [(i, j) for i in self.starts(h) for j in self.starts(w)]
        tiles = torch.cat([x[:, :, i:i + s, j:j + s] for i, j in windows])  # (len(windows) * N, C, s, s)
        logits = net(tiles).reshape(len(windows), n, 1, s, s)
        out = torch.full((n, 1, h, w), float("-inf"), dtype=logits.dtype, device=logits.device)
        for k, (i, j) in enumerate(windows):
            out[:, :, i:i + s, j:j + s] = torch.maximum(out[:, :, i:i + s, j:j + s], logits[k])
        return out


def check_threshold(threshold: float) -> float:
    """``threshold`` as a float, or ValueError unless 0 < threshold < 1."""
    threshold = float(threshold)
    if not 0.0 < threshold < 1.0:
        raise ValueError(f"threshold must be in (0, 1), got {threshold}")
    return threshold


def read_checkpoint(path: Path | str) -> dict[str, Any]:
    """Load and check a checkpoint dict; raises :class:`CheckpointError` with one clear line."""
    path = Path(path)
    if path.is_dir():
        inside = [path / name for name in ("model.pt", "segmenter/model.pt") if (path / name).is_file()]
        raise CheckpointError(f"{path} is a folder, not a checkpoint"
                              + (f"; its segmenter is {inside[0]}" if inside else ""))
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
        if ckpt.get("tiling") is not None:
            check_tiling(Tiling.from_dict(ckpt["tiling"]), ckpt)
    except (TypeError, ValueError) as e:
        raise CheckpointError(f"checkpoint {path}: {e}") from None
    return ckpt


def check_tiling(tiling: Tiling, ckpt: dict[str, Any]) -> None:
    """ValueError unless ``tiling``'s windows fit the input of checkpoint (or metadata) ``ckpt`` and its network
    reads windows of that size (a U-Net's must divide by ``2 ** depth``)."""
    tiling.starts(min(ckpt["input_hw"]))
    multiple = input_multiple_px(ckpt["architecture"], ckpt.get("arch_kwargs") or {})
    if tiling.size_px % multiple:
        raise ValueError(f"tiles of {tiling.size_px} px do not suit this network: its input's side must divide by "
                         f"{multiple} ({ckpt['architecture']} {ckpt.get('arch_kwargs')})")


def _as_batch(rgb_uint8: np.ndarray, previous: np.ndarray | None) -> tuple[np.ndarray, np.ndarray | None, bool]:
    """One image (H, W, 3) or a batch (N, H, W, 3), and its previous frames likewise shaped (or None) -> the batch,
    its previous frames as a batch, and whether one image was given."""
    rgb = np.asarray(rgb_uint8)
    single = rgb.ndim == 3
    before = None if previous is None else (np.asarray(previous)[None] if single else previous)
    return (rgb[None] if single else rgb), before, single


def checkpoint_margin_px(ckpt: dict[str, Any]) -> int:
    """Pixels beyond each edge of the controller's view that the network of checkpoint (or metadata) ``ckpt`` was
    trained to read (its run's ``train-vision --margin-px``); 0 for one that records none."""
    run = ckpt.get("config")
    train = run.get("train", {}) if isinstance(run, dict) else {}
    return int(train.get("margin_px", 0) or 0) if isinstance(train, dict) else 0


class Segmenter:
    """RGB -> sphere mask with a trained network; one batched forward pass per call on ``self.device``."""

    def __init__(self, model: nn.Module, *, input_hw: tuple[int, int], config: dict[str, Any],
                 device: torch.device | None = None, threshold: float = THRESHOLD, tiling: Tiling | None = None):
        self.device = device or default_device()
        self.model = model.to(self.device).eval()
        self.input_hw = (int(input_hw[0]), int(input_hw[1]))
        self.threshold = check_threshold(threshold)
        """Probability above which a pixel is the sphere (the checkpoint's calibrated one when it has one)."""
        if tiling is not None:
            check_tiling(tiling, {**config, "input_hw": list(self.input_hw)})
        self.tiling = tiling
        """How the sphere is predicted: tile by tile (:class:`Tiling`), or None: the whole ``input_hw`` image."""
        self.config = config
        """The checkpoint's metadata: architecture, arch_kwargs, input_hw, background_split, config, step."""
        self.margin_px = checkpoint_margin_px(config)
        """Pixels its training camera saw beyond each edge of the controller's view (``train-vision --margin-px``):
        such a network reads only frames of its own ``input_hw``, the view in their middle. 0: the view itself."""
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
            raise CheckpointError(f"checkpoint {path} does not match its architecture: {weights_problem(e)}")
        if not weights_finite(model):
            raise CheckpointError(f"checkpoint {path} holds non-finite weights (a diverged training): its masks "
                                  "would be noise")
        meta = {k: v for k, v in ckpt.items() if k not in ("state_dict", "optimizer")}
        return cls(model, input_hw=tuple(ckpt["input_hw"]), config=meta,
                   device=torch.device(device) if device is not None else None,
                   threshold=ckpt.get("threshold", THRESHOLD),
                   tiling=Tiling.from_dict(ckpt["tiling"]) if ckpt.get("tiling") is not None else None)

    @property
    def reads_previous(self) -> bool:
        """Whether the network reads the previous frame warped onto the image beside it (``UNet(previous=...)``):
        :meth:`predict` then takes ``previous``."""
        return bool(getattr(self.model, "previous", False))

    def _input(self, rgb_uint8: np.ndarray, what: str = "") -> np.ndarray:
        rgb = np.asarray(rgb_uint8)
        if rgb.dtype != np.uint8 or rgb.ndim != 4 or rgb.shape[-1] != 3:
            raise ValueError(f"{what}expected uint8 (N, H, W, 3), got {rgb.dtype} {rgb.shape}")
        if rgb.shape[1:3] != self.input_hw:
            if self.margin_px:
                raise ValueError(f"{what}this segmenter reads frames seen {self.margin_px} px beyond the view "
                                 f"(train-vision --margin-px), {self.input_hw} px; got {rgb.shape[1:3]}")
            h, w = self.input_hw
            interp = cv2.INTER_AREA if rgb.shape[1] > h else cv2.INTER_LINEAR
            rgb = np.stack([cv2.resize(im, (w, h), interpolation=interp) for im in rgb])
        return rgb

    def _logits(self, rgb_uint8: np.ndarray, net: Callable[[torch.Tensor], torch.Tensor],
                previous: np.ndarray | None = None) -> torch.Tensor:
        """``net``'s logits float (N, 1, H, W) at the images' own size; any H, W (resized to ``input_hw``).
        ``previous``: for a network that reads it, the previous frames warped onto these (None: the images
        themselves, as at an episode's first frame); ignored by one that does not."""
        hw = np.shape(rgb_uint8)[1:3]
        rgb = self._input(rgb_uint8)
        x = to_input_tensor(rgb)
        if self.reads_previous:
            before = rgb if previous is None else self._input(previous, "previous frames: ")
            if before.shape != rgb.shape:
                raise ValueError(f"previous frames {before.shape} do not match the images {rgb.shape}")
            x = two_frame_input(x, to_input_tensor(before), self.model.previous)
        x = x.to(self.device, non_blocking=True)
        logits = net(x)
        if hw != self.input_hw:
            logits = F.interpolate(logits, size=hw, mode="bilinear", align_corners=False)
        return logits

    @torch.inference_mode()
    def predict_proba(self, rgb_uint8: np.ndarray, previous: np.ndarray | None = None) -> np.ndarray:
        """uint8 (N, H, W, 3) -> sphere probability float32 (N, H, W); any H, W (resized to ``input_hw``).
        ``previous`` uint8 (N, H, W, 3): see :attr:`reads_previous`."""
        tiling = self.tiling
        net = self.model if tiling is None else (lambda x: tiling.apply(self.model, x))
        return torch.sigmoid(self._logits(rgb_uint8, net, previous)[:, 0]).float().cpu().numpy()

    def predict(self, rgb_uint8: np.ndarray, previous: np.ndarray | None = None) -> np.ndarray:
        """uint8 (N, H, W, 3) -> bool (N, H, W), or (H, W, 3) -> (H, W); ``previous`` likewise shaped."""
        rgb, before, single = _as_batch(rgb_uint8, previous)
        mask = self.predict_proba(rgb, before) > self.threshold
        return mask[0] if single else mask

    @property
    def has_gripper_head(self) -> bool:
        """Whether it predicts the gripper fingers' mask too (a gripper head is attached)."""
        return self.gripper_head is not None

    @torch.inference_mode()
    def predict_gripper_proba(self, rgb_uint8: np.ndarray, previous: np.ndarray | None = None) -> np.ndarray:
        """uint8 (N, H, W, 3) -> the fingers' probability float32 (N, H, W), like :meth:`predict_proba`; needs a
        gripper head (:class:`CheckpointError` otherwise)."""
        head = self.gripper_head
        if head is None:
            raise CheckpointError("this segmenter has no gripper head: attach one with "
                                  "vision.gripper.attach_gripper_head (train it with 'grasp-s2r train-gripper')")
        features = getattr(self.model, "features", None)
        if features is None:
            raise CheckpointError(f"a {type(self.model).__name__} segmenter has no features for a gripper head")
        return torch.sigmoid(self._logits(rgb_uint8, lambda x: head(features(x)), previous)[:, 0]).float().cpu().numpy()

    def predict_gripper(self, rgb_uint8: np.ndarray, previous: np.ndarray | None = None) -> np.ndarray:
        """uint8 (N, H, W, 3) -> the gripper fingers' mask bool (N, H, W), or (H, W, 3) -> (H, W)."""
        rgb, before, single = _as_batch(rgb_uint8, previous)
        mask = self.predict_gripper_proba(rgb, before) > self.gripper_threshold
        return mask[0] if single else mask
