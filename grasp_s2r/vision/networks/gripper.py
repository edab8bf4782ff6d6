"""A gripper head on a frozen segmenter: the gripper fingers' mask from the segmenter's last decoder features.

The controller may read the fingers' mask next to the sphere's (``PolicyConfig.gripper``). The shipped segmenter
stays as it is, byte for byte; a small head (:class:`GripperHead`: conv 3x3, BatchNorm, ReLU, conv 1x1) over its
``UNet.features`` predicts the fingers (the shipped one: four such blocks, dilated 1, 2, 4, 8), trained with the segmenter frozen (``vision/gripper_train.py``,
``grasp-s2r train-gripper``). Attached (:func:`attach_gripper_head`), the segmenter gains
``Segmenter.predict_gripper`` and ``has_gripper_head`` is true.

Checkpoint format (a ``torch.save``'d dict, readable with ``weights_only=True``), written atomically::

    format            "grasp_s2r.gripper_head"
    format_version    1
    state_dict        the head's weights
    width             channels of the features it reads (the segmenter's ``UNet.width``)
    dilations         the dilation of each 3 x 3 block (:class:`GripperHead`)
    threshold         probability above which a pixel is a finger's
    segmenter_sha256  ``files.file_sha256`` of the segmenter checkpoint it was trained on: it is attached to
                      that segmenter only
    config            the training config (``GripperTrainConfig`` as a dict)
    metrics           precision / recall / IoU of the fingers' mask on validation and held-out composites
    package_version   grasp_s2r's version that wrote it
"""

from __future__ import annotations

import io
import warnings
from importlib import resources
from pathlib import Path
from typing import Any

import torch
from torch import nn

from grasp_s2r import __version__
from grasp_s2r.files import atomic_write, weights_problem
from grasp_s2r.vision.networks.segmenter import THRESHOLD, CheckpointError, Segmenter, check_threshold

FORMAT_NAME = "grasp_s2r.gripper_head"
FORMAT_VERSION = 1
HEAD_FILE = "gripper_head_64px.pt"
"""Name of the head shipped in ``grasp_s2r/weights/`` (trained on the shipped segmenter)."""
_REQUIRED_KEYS = ("state_dict", "width", "dilations", "threshold", "segmenter_sha256", "config", "metrics", "package_version")


class GripperHeadError(CheckpointError):
    """A file that is not a usable gripper head, or a head trained on another segmenter; one line."""


class GripperHead(nn.Module):
    """Segmenter features float (N, width, H, W) -> the fingers' logits float (N, 1, H, W).

    One block (conv 3x3 width -> width without bias, BatchNorm, ReLU) per entry of ``dilations`` (its dilation),
    then a conv 1x1 width -> 1. The default, one block, sees 3 x 3 feature pixels: too little to tell a finger's
    flat interior from a flat table (validation IoU 0.28, docs/vision.md); the shipped head stacks dilations
    1, 2, 4, 8 (31 x 31 pixels).
    """

    def __init__(self, width: int, dilations: tuple[int, ...] = (1,)):
        super().__init__()
        self.width = int(width)
        self.dilations = check_dilations(dilations)
        layers: list[nn.Module] = []
        for d in self.dilations:
            layers += [nn.Conv2d(self.width, self.width, 3, padding=d, dilation=d, bias=False),
                       nn.BatchNorm2d(self.width), nn.ReLU(inplace=True)]
        self.net = nn.Sequential(*layers, nn.Conv2d(self.width, 1, 1))

    def forward(self, features: torch.Tensor) -> torch.Tensor:
        return self.net(features)


def check_dilations(dilations: Any) -> tuple[int, ...]:
    """``dilations`` as a tuple of ints, or ValueError unless it is 1 to 8 integers in [1, 16]."""
    try:
        out = tuple(int(d) for d in dilations)
    except (TypeError, ValueError):
        raise ValueError(f"dilations must be integers, got {dilations!r}") from None
    if not 1 <= len(out) <= 8 or not all(1 <= d <= 16 for d in out) or list(out) != list(dilations):
        raise ValueError(f"dilations must be 1 to 8 integers in [1, 16], got {dilations!r}")
    return out


def default_head_path() -> Path:
    """The head shipped inside the package (trained on the shipped segmenter; may be absent)."""
    return Path(str(resources.files("grasp_s2r") / "weights" / HEAD_FILE))


def feature_width(segmenter: Segmenter) -> int:
    """Channels of the segmenter's ``features``; :class:`GripperHeadError` for a network without them."""
    width = getattr(segmenter.model, "width", None)
    if not hasattr(segmenter.model, "features") or width is None:
        raise GripperHeadError(f"a gripper head needs a U-Net segmenter (its features), this one is "
                               f"{segmenter.config.get('architecture', type(segmenter.model).__name__)}")
    return int(width)


def make_head_checkpoint(head: GripperHead, *, threshold: float, segmenter_sha256: str, config: dict[str, Any],
                         metrics: dict[str, Any]) -> dict[str, Any]:
    """The checkpoint dict of the module docstring (weights copied to the CPU)."""
    return {
        "format": FORMAT_NAME, "format_version": FORMAT_VERSION,
        "state_dict": {k: v.detach().cpu() for k, v in head.state_dict().items()},
        "width": head.width, "dilations": list(head.dilations), "threshold": check_threshold(threshold), "segmenter_sha256": str(segmenter_sha256),
        "config": config, "metrics": metrics, "package_version": __version__,
    }


def write_head_checkpoint(ckpt: dict[str, Any], path: Path | str) -> None:
    """``torch.save`` ``ckpt`` to ``path`` atomically."""
    buf = io.BytesIO()
    torch.save(ckpt, buf)
    atomic_write(Path(path), buf.getvalue())


def read_head_checkpoint(path: Path | str) -> dict[str, Any]:
    """Load and check a gripper head checkpoint; :class:`GripperHeadError` with one line naming what it is."""
    path = Path(path)
    if not path.is_file():
        raise GripperHeadError(f"gripper head {path} does not exist")
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            ckpt = torch.load(path, map_location="cpu", weights_only=True)
    except Exception as e:  # noqa: BLE001 - arbitrary bytes make torch's unpickler raise almost anything
        raise GripperHeadError(f"gripper head {path} is unreadable or corrupt ({type(e).__name__})") from None
    found = ckpt.get("format") if isinstance(ckpt, dict) else None
    if found != FORMAT_NAME:
        what = f"a {found} checkpoint" if isinstance(found, str) else "not a grasp_s2r checkpoint"
        raise GripperHeadError(f"{path} is {what}, not a {FORMAT_NAME} one")
    if ckpt.get("format_version") != FORMAT_VERSION:
        raise GripperHeadError(f"{path} has {FORMAT_NAME} format_version {ckpt.get('format_version')}, this version "
                               f"reads {FORMAT_VERSION}: retrain it with `grasp-s2r train-gripper`")
    missing = [k for k in _REQUIRED_KEYS if k not in ckpt]
    if missing:
        raise GripperHeadError(f"gripper head {path} lacks {', '.join(missing)}")
    try:
        check_threshold(ckpt["threshold"])
    except (TypeError, ValueError) as e:
        raise GripperHeadError(f"gripper head {path}: {e}") from None
    return ckpt


def trained_on(ckpt: dict[str, Any], segmenter: Segmenter) -> bool:
    """Whether the head of ``ckpt`` was trained on the file ``segmenter`` was loaded from."""
    return segmenter.checkpoint_sha256 is not None and ckpt["segmenter_sha256"] == segmenter.checkpoint_sha256


def attach_gripper_head(segmenter: Segmenter, path: Path | str | None = None) -> Path | None:
    """Attach a gripper head to ``segmenter`` (in place); returns the head's path, or None when none is attached.

    With ``path``: that head, refused (:class:`GripperHeadError`) unless it was trained on the segmenter's file.
    Without: the shipped head (:func:`default_head_path`) if it exists and was trained on the segmenter's file,
    else nothing (the segmenter keeps ``has_gripper_head`` false).
    """
    if path is None:
        default = default_head_path()
        if not default.is_file():
            return None
        ckpt = read_head_checkpoint(default)
        if not trained_on(ckpt, segmenter):
            return None
        path = default
    else:
        path = Path(path)
        ckpt = read_head_checkpoint(path)
        if segmenter.checkpoint_sha256 is None:
            raise GripperHeadError(f"gripper head {path}: this segmenter was not loaded from a file "
                                   "(Segmenter.load), so the segmenter the head was trained on cannot be checked")
        if not trained_on(ckpt, segmenter):
            raise GripperHeadError(f"gripper head {path} was trained on segmenter {ckpt['segmenter_sha256']}, this "
                                   f"segmenter is {segmenter.checkpoint_sha256}: train a head on it with "
                                   "`grasp-s2r train-gripper --vision CKPT`")
    width = feature_width(segmenter)
    if int(ckpt["width"]) != width:
        raise GripperHeadError(f"gripper head {path} reads {ckpt['width']} channels, the segmenter has {width}")
    try:
        head = GripperHead(width, tuple(ckpt["dilations"]))
        head.load_state_dict(ckpt["state_dict"])
    except (RuntimeError, TypeError, ValueError) as e:
        raise GripperHeadError(f"gripper head {path} does not match its network: {weights_problem(e)}") from None
    segmenter.gripper_head = head.to(segmenter.device).eval()
    segmenter.gripper_threshold = check_threshold(ckpt.get("threshold", THRESHOLD))
    segmenter.gripper_head_path = path
    return path


def load_segmenter_with_head(path: Path | str, device: Any = None, head: Path | str | None = None) -> Segmenter:
    """:meth:`Segmenter.load` with :func:`attach_gripper_head` (``head``, or the shipped one when it matches)."""
    segmenter = Segmenter.load(path, device=device)
    attach_gripper_head(segmenter, head)
    return segmenter
