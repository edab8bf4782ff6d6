"""The controller: a small CNN over the sphere mask plus proprioception -> the env's continuous action.

Inputs (nothing else; no world position of the sphere, no RGB):

- the binary sphere mask of the wrist camera, bool (N, H, W) — predicted by the segmenter, or the
  ground truth — max-pooled to ``PolicyConfig.mask_hw_px`` (a 1-px sphere survives pooling) and
  stacked with two coordinate channels (CoordConv) so the network can read positions;
- explicit moments of the full-resolution mask (visible flag, centroid, spread, sqrt of the area),
  computed inside the network's forward pass: sub-pixel position information that pooling loses;
- proprioception, the subset ``PROPRIO_INPUTS`` of the env's ``proprio`` vector: TCP height above
  the table, finger gap, gripper command. By default *not* the TCP's world x, y: the controller is
  mask-relative, so it follows a sphere wherever it goes (moving target, displaced sphere);
- with ``PolicyConfig.tcp_xy``, the TCP's x, y over the table too (world frame, from the spawn centre): where
  the camera is over the workspace, which a search that sweeps the table needs (kinematics gives it on a robot);
- with ``PolicyConfig.memory``, the episode's memory (:mod:`grasp_s2r.control.memory`): where the sphere
  was last seen and how the camera moved since, so that a lost sphere is looked for where it was;
- with ``PolicyConfig.gripper``, the moments of the gripper fingers' mask too: where the fingers appear in the
  image, so that the sphere is servoed relative to them rather than to where a calibrated camera puts them.

Output: action (N, 4) in [-1, 1] — TCP displacement x, y, z (tanh) and the gripper command (+1
close / -1 open, from a logit). Trained by :mod:`grasp_s2r.control.train`.
"""

from __future__ import annotations

import dataclasses
import io
import warnings
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch
from torch import nn
from torch.nn import functional as F

from grasp_s2r import __version__
from grasp_s2r.control.memory import N_MEMORY, N_MOMENTS
from grasp_s2r.devices import default_device, weights_finite
from grasp_s2r.files import atomic_write, torch_load_problem, weights_problem
from grasp_s2r.sim.config import EnvConfig
from grasp_s2r.sim.env import ACTION_DIM, PROPRIO_NAMES

CHECKPOINT_FORMAT = "grasp_s2r.controller"
CHECKPOINT_VERSION = 1
PROPRIO_INPUTS = ("tcp_z_above_table_m", "finger_gap_m", "gripper_closed")
"""Names (from ``PROPRIO_NAMES``) of the proprioceptive inputs of the controller."""
PROPRIO_SCALE = (0.2, 0.04, 1.0)
"""Each input above is divided by this so that it lies roughly in [0, 1]."""
_PROPRIO_INDEX = tuple(PROPRIO_NAMES.index(n) for n in PROPRIO_INPUTS)
_XY_INDEX = (PROPRIO_NAMES.index("tcp_x_world_m"), PROPRIO_NAMES.index("tcp_y_world_m"))
TCP_XY_SCALE_M = 0.2
"""With ``PolicyConfig.tcp_xy``, the TCP's (x, y) from the origin is divided by this (the workspace: about +-1)."""



@dataclass(frozen=True)
class PolicyConfig:
    """Architecture of the controller network; saved inside every checkpoint."""

    mask_hw_px: int = 32
    """The mask is max-pooled to this square size before the CNN."""
    channels: tuple[int, ...] = ()
    """Output channels of the stride-2 3x3 conv layers; () keeps only the mask moments (no CNN)."""
    hidden: int = 256
    """Width of the MLP head that joins image features and proprioception."""
    memory: bool = False
    """Also read the episode's memory (``control.memory.EpisodeMemory``: last sighting, motion since)."""
    gripper: bool = False
    """Also read the moments of the gripper fingers' mask (where the fingers appear in the image)."""
    tcp_xy: bool = False
    """Also read the TCP's (x, y) in the world frame, from ``tcp_xy_origin_m``, over ``TCP_XY_SCALE_M``."""
    tcp_xy_origin_m: tuple[float, float] = (0.0, 0.0)
    """The point the TCP's (x, y) input is measured from: the scene's spawn centre (``SceneConfig``)."""

    def __post_init__(self) -> None:
        if self.mask_hw_px < 8 or self.mask_hw_px % (2 ** len(self.channels)):
            raise ValueError(f"mask_hw_px must be >= 8 and divisible by 2**len(channels), got {self.mask_hw_px}")


def mask_moments(mask: torch.Tensor) -> torch.Tensor:
    """Moments of a mask (N, 1, H, W) in [0, 1] -> (N, N_MOMENTS); all zero where the mask is empty
    (the definition of ``control.memory.mask_moments_np``, in torch inside the network)."""
    h, w = mask.shape[-2:]
    m = mask[:, 0]
    area = m.sum(dim=(1, 2))
    visible = (area > 0).float()
    safe = area.clamp(min=1.0)
    ys = torch.linspace(-1.0, 1.0, h, device=mask.device)[None, :, None]
    xs = torch.linspace(-1.0, 1.0, w, device=mask.device)[None, None, :]
    cx = (m * xs).sum(dim=(1, 2)) / safe
    cy = (m * ys).sum(dim=(1, 2)) / safe
    sx = ((m * (xs - cx[:, None, None]) ** 2).sum(dim=(1, 2)) / safe).clamp(min=0).sqrt()
    sy = ((m * (ys - cy[:, None, None]) ** 2).sum(dim=(1, 2)) / safe).clamp(min=0).sqrt()
    return torch.stack([visible, cx, cy, 4 * sx, 4 * sy, 4 * (area / (h * w)).sqrt()], dim=1)


def moments_per_channel(masks: torch.Tensor) -> torch.Tensor:
    """:func:`mask_moments` of each channel of (N, C, H, W) -> (N, C * N_MOMENTS)."""
    return torch.cat([mask_moments(masks[:, c:c + 1]) for c in range(masks.shape[1])], dim=1)


def n_proprio_inputs(cfg: PolicyConfig) -> int:
    """Width of :func:`select_proprio`'s output for a controller of config ``cfg``."""
    return len(PROPRIO_INPUTS) + (2 if cfg.tcp_xy else 0)


def select_proprio(proprio: np.ndarray, cfg: PolicyConfig | None = None) -> np.ndarray:
    """Controller inputs from the env's proprio (N, len(PROPRIO_NAMES)) -> float32 (N, n_proprio_inputs(cfg)):
    ``PROPRIO_INPUTS`` scaled, then (``cfg.tcp_xy`` only) the TCP's (x, y) from ``cfg.tcp_xy_origin_m`` scaled."""
    full = np.asarray(proprio, dtype=np.float32)
    p = full[..., list(_PROPRIO_INDEX)] / np.asarray(PROPRIO_SCALE, dtype=np.float32)
    if cfg is None or not cfg.tcp_xy:
        return p
    xy = (full[..., list(_XY_INDEX)] - np.asarray(cfg.tcp_xy_origin_m, dtype=np.float32)) / TCP_XY_SCALE_M
    return np.concatenate([p, xy.astype(np.float32)], axis=-1)


class ControllerNet(nn.Module):
    """``forward(mask (N, C, H, W) float, proprio (N, P), memory (N, N_MEMORY) | None) -> (xyz (N, 3) in [-1, 1],
    grip_logit (N,))``; channel 0 the sphere mask, channel 1 (``cfg.gripper`` only) the gripper fingers' mask.

    The mask may come at any resolution: moments are taken at full resolution (of every channel), the CNN sees
    the sphere's max-pooled to ``cfg.mask_hw_px``.
    """

    def __init__(self, cfg: PolicyConfig):
        super().__init__()
        self.cfg = cfg
        self.mask_channels = 2 if cfg.gripper else 1
        layers: list[nn.Module] = []
        c_in = 3  # mask + 2 coordinate channels
        for c_out in cfg.channels:
            layers += [nn.Conv2d(c_in, c_out, 3, stride=2, padding=1), nn.ReLU()]
            c_in = c_out
        self.cnn = nn.Sequential(*layers, nn.Flatten()) if layers else None
        side = cfg.mask_hw_px // 2 ** len(cfg.channels)
        n_feat = c_in * side * side if layers else 0
        self.head = nn.Sequential(
            nn.Linear(n_feat + N_MOMENTS * self.mask_channels + n_proprio_inputs(cfg) + (N_MEMORY if cfg.memory else 0),
                      cfg.hidden),
            nn.ReLU(),
            nn.Linear(cfg.hidden, cfg.hidden), nn.ReLU(), nn.Linear(cfg.hidden, ACTION_DIM),
        )
        lin = torch.linspace(-1.0, 1.0, cfg.mask_hw_px)
        yy, xx = torch.meshgrid(lin, lin, indexing="ij")
        self.register_buffer("coords", torch.stack([xx, yy])[None], persistent=False)

    def forward(self, mask: torch.Tensor, proprio: torch.Tensor,
                memory: torch.Tensor | None = None) -> tuple[torch.Tensor, torch.Tensor]:
        if mask.shape[1] != self.mask_channels:
            raise ValueError(f"this controller reads {self.mask_channels} mask channel(s), got {mask.shape[1]}")
        feats = [moments_per_channel(mask), proprio]
        mask = mask[:, :1]
        if self.cfg.memory:
            if memory is None:
                raise ValueError("this controller has memory: pass the episode memory features")
            feats.append(memory)
        if self.cnn is not None:
            hw = self.cfg.mask_hw_px
            m = F.adaptive_max_pool2d(mask, hw) if mask.shape[-1] != hw or mask.shape[-2] != hw else mask
            feats.append(self.cnn(torch.cat([m, self.coords.expand(m.shape[0], -1, -1, -1)], dim=1)))
        out = self.head(torch.cat(feats, dim=1))
        return torch.tanh(out[:, :3]), out[:, 3]


def actions_from_outputs(xyz: torch.Tensor, grip_logit: torch.Tensor) -> np.ndarray:
    """float64 (N, 4) actions from a controller's outputs: the displacement as it is, the gripper command +1 (close)
    where the logit is positive, else -1 (open)."""
    grip = torch.where(grip_logit > 0, 1.0, -1.0)
    return torch.cat([xyz, grip[:, None]], dim=1).double().cpu().numpy()


class ControllerCheckpointError(ValueError):
    """A controller checkpoint that cannot be used: unreadable, of another format or version, damaged, diverged
    (one line naming the file, for the user)."""


def read_policy_blob(path: Path) -> dict[str, Any]:
    """The dict of a controller checkpoint, read with ``weights_only=True`` (tensors and plain data only: a pickle
    that would run code is refused); anything unreadable -> :class:`ControllerCheckpointError` naming the file, in
    one line."""
    try:
        with warnings.catch_warnings():  # a corrupt file can make torch warn about its "pickle protocol": one line
            warnings.simplefilter("ignore")
            blob = torch.load(path, map_location="cpu", weights_only=True)
    except Exception as e:  # noqa: BLE001 - torch raises UnpicklingError, RuntimeError, EOFError... for bad files
        raise ControllerCheckpointError(f"{path} is not a readable controller checkpoint "
                                        f"({torch_load_problem(path, e)})") from None
    if not isinstance(blob, dict):
        raise ControllerCheckpointError(f"{path} is not a controller checkpoint (it holds a {type(blob).__name__})")
    return blob


class Policy:
    """A controller network on a device: ``act(masks (N, H, W) bool, proprio (N, 5)) -> actions (N, 4)``."""

    def __init__(self, cfg: PolicyConfig | None = None, device: torch.device | str | None = None):
        self.cfg = cfg or PolicyConfig()
        self.device = torch.device(device) if device is not None else default_device()
        self.net = ControllerNet(self.cfg).to(self.device)

    def tensors(self, masks: np.ndarray, proprio: np.ndarray, memory: np.ndarray | None = None,
                gripper_masks: np.ndarray | None = None) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor | None]:
        """(mask uint8 (N, C, H, W), proprio inputs float32 (N, P), memory float32 (N, N_MEMORY) or None) on the
        device; the net takes ``mask.float()``. The memory is used only by a controller with ``cfg.memory``, the
        gripper masks bool (N, H, W) (channel 1) only by one with ``cfg.gripper``."""
        masks = np.asarray(masks)[:, None]
        if self.cfg.gripper:
            if gripper_masks is None:
                raise ValueError("this controller reads the gripper mask: pass the gripper masks (N, H, W)")
            masks = np.concatenate([masks, np.asarray(gripper_masks)[:, None]], axis=1)
        m = torch.from_numpy(np.ascontiguousarray(masks, dtype=np.uint8)).to(self.device)
        p = torch.from_numpy(select_proprio(proprio, self.cfg)).to(self.device)
        mem = None
        if self.cfg.memory:
            if memory is None:
                raise ValueError("this controller has memory: pass the episode memory features (N, N_MEMORY)")
            mem = torch.from_numpy(np.ascontiguousarray(memory, dtype=np.float32)).to(self.device)
        return m, p, mem

    @torch.no_grad()
    def act(self, masks: np.ndarray, proprio: np.ndarray, memory: np.ndarray | None = None,
            gripper_masks: np.ndarray | None = None) -> np.ndarray:
        """One batched forward pass; float64 (N, 4) actions (gripper exactly +-1). ``memory``: float32
        (N, N_MEMORY) from ``control.memory.EpisodeMemory.features`` (needed, and only read, with cfg.memory);
        ``gripper_masks``: bool (N, H, W), the fingers' mask (needed, and only read, with cfg.gripper)."""
        if len(masks) == 0:
            return np.zeros((0, ACTION_DIM))
        return actions_from_outputs(*self.outputs(masks, proprio, memory, gripper_masks))

    @torch.no_grad()
    def outputs(self, masks: np.ndarray, proprio: np.ndarray, memory: np.ndarray | None = None,
                gripper_masks: np.ndarray | None = None) -> tuple[torch.Tensor, torch.Tensor]:
        """The network's outputs for :meth:`act`'s inputs: TCP displacement (N, 3) in [-1, 1], gripper logit (N,)."""
        self.net.eval()
        m, p, mem = self.tensors(masks, proprio, memory, gripper_masks)
        return self.net(m.float(), p, mem)

    # --- checkpoints ------------------------------------------------------------------------
    def save(self, path: Path, extra: dict[str, Any] | None = None) -> None:
        """Write atomically (temp file + rename): a checkpoint is either whole or absent."""
        blob = {
            "format": CHECKPOINT_FORMAT, "format_version": CHECKPOINT_VERSION, "package_version": __version__,
            "policy_config": dataclasses.asdict(self.cfg), "proprio_inputs": list(PROPRIO_INPUTS),
            "state_dict": {k: v.cpu() for k, v in self.net.state_dict().items()}, **(extra or {}),
        }
        buf = io.BytesIO()
        torch.save(blob, buf)
        atomic_write(path, buf.getvalue())

    @classmethod
    def load(cls, path: Path, device: torch.device | str | None = None) -> tuple[Policy, dict[str, Any]]:
        """(policy, the whole checkpoint dict: config of the run that made it, metrics, ...)."""
        path = Path(path)
        if not path.is_file():
            raise FileNotFoundError(f"no controller checkpoint at {path}")
        blob = read_policy_blob(path)
        if blob.get("format") != CHECKPOINT_FORMAT:
            raise ControllerCheckpointError(f"{path} is not a controller checkpoint (format {blob.get('format')!r})")
        if blob.get("format_version") != CHECKPOINT_VERSION:
            raise ControllerCheckpointError(
                f"{path} has controller format version {blob.get('format_version')}, this grasp_s2r reads "
                f"{CHECKPOINT_VERSION}; retrain it with 'grasp-s2r dagger' of this version"
            )
        try:
            if tuple(blob["proprio_inputs"]) != PROPRIO_INPUTS:
                raise ControllerCheckpointError(f"{path} was trained on proprio inputs {blob['proprio_inputs']}, "
                                                f"not {PROPRIO_INPUTS}")
            unknown = sorted(set(blob["policy_config"]) - {f.name for f in dataclasses.fields(PolicyConfig)})
            if unknown:
                raise ControllerCheckpointError(
                    f"{path} is a controller of grasp_s2r {blob.get('package_version', '(unknown version)')} with "
                    f"settings this one ({__version__}) does not have ({', '.join(unknown)}): load it with the "
                    "version that trained it")
            cfg = PolicyConfig(**{k: tuple(v) if isinstance(v, list) else v
                                  for k, v in blob["policy_config"].items()})
            policy = cls(cfg, device)
            policy.net.load_state_dict(blob["state_dict"])
        except (KeyError, TypeError, RuntimeError, AttributeError) as e:  # a field missing or unknown, weights unfit
            what = f"no {e}" if isinstance(e, KeyError) else weights_problem(e)
            raise ControllerCheckpointError(f"{path} is a damaged controller checkpoint: {what}") from None
        if not policy.weights_finite():
            raise ControllerCheckpointError(f"{path} holds non-finite weights (a diverged training): its actions "
                                            "would be NaN")
        return policy, blob

    def weights_finite(self) -> bool:
        """Whether every weight is a finite number (NaN actions would stall the simulator)."""
        return weights_finite(self.net)


def trained_scene(blob: dict[str, Any]) -> EnvConfig:
    """The scene a controller checkpoint (``Policy.load``'s dict) was trained in, its camera included: the one it
    is evaluated and deployed through (the default scene for a checkpoint without its run's config)."""
    env = blob.get("config", {}).get("env")
    return EnvConfig.from_dict(env) if env else EnvConfig()
