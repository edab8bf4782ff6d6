"""Where a fine-tune's weights come from (``train-vision --init``): a checkpoint of the same network, or of one it
grows from without changing what it computes (a narrower U-Net of its depth, one reading fewer colour-anomaly maps
or with fewer self-attention blocks,
a plain one for a run with ``--unshuffle``: ``vision/networks/widen.py``), or one that differs only in its padding
(which holds no weights)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import torch

from grasp_s2r.vision.networks.segmenter import CheckpointError, Segmenter, read_checkpoint
from grasp_s2r.vision.networks.widen import load_widened
from grasp_s2r.vision.training.train_config import SegmenterTrainConfig, TrainError


def check_init_checkpoint(cfg: SegmenterTrainConfig) -> dict[str, Any]:
    """The checkpoint of ``cfg.init_checkpoint``, read and checked to be the same network (or a narrower U-Net of the
    same depth; its padding may differ) at the same input size (a U-Net: any); :class:`TrainError` (one line)
    otherwise. ``train-vision``
    calls it before anything is made or written."""
    try:
        init = read_checkpoint(Path(cfg.init_checkpoint))
        Segmenter.from_checkpoint(init, "cpu", cfg.init_checkpoint)  # its weights fit the network it names
    except CheckpointError as e:
        raise TrainError(f"--init: {e}") from None
    # a U-Net is fully convolutional: its weights fit any input size (a fine-tune at another camera resolution)
    same_size = init["architecture"] == "unet" or tuple(init["input_hw"]) == (cfg.input_px, cfg.input_px)
    # the padding holds no weights: a fine-tune may change it
    same = (init["architecture"] == cfg.architecture
            and _but_padding(init["arch_kwargs"]) == _but_padding(cfg.arch_kwargs))
    if not same_size or not (same or widens(init, cfg)):
        raise TrainError(f"--init {cfg.init_checkpoint}: it is {init['architecture']} {init['arch_kwargs']} at "
                         f"{tuple(init['input_hw'])} px, this run is {cfg.architecture} {cfg.arch_kwargs} at "
                         f"{cfg.input_px} px (a U-Net may start from a narrower one of its depth, or one "
                         "reading fewer --anomaly maps or with fewer --attention blocks, not a wider one; one with "
                         "--unshuffle from a plain one of its width and depth)")
    return init


def _but_padding(arch_kwargs: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in arch_kwargs.items() if k != "padding"}


def widens(init: dict[str, Any], cfg: SegmenterTrainConfig) -> bool:
    """Whether ``init`` is a narrower U-Net of this run's depth (or one reading fewer colour-anomaly maps, or with fewer
    self-attention blocks), or a plain
    one of its width and depth for a run with ``unshuffle`` (``vision/networks/widen.py``)."""
    kwargs = dict(init["arch_kwargs"])
    if not (init["architecture"] == cfg.architecture == "unet" and kwargs.get("depth") == cfg.depth
            and kwargs.get("unshuffle", 1) == 1):
        return False
    width, anomaly, attention = kwargs.get("width", cfg.width), kwargs.get("anomaly", 0), kwargs.get("attention", 0)
    if cfg.unshuffle > 1:
        return width == cfg.width and anomaly == cfg.anomaly and attention == cfg.attention == 0
    # wider, or reading more anomaly maps (their first-layer weights start at zero), or with more attention blocks
    # (their output projections start at zero), or several of these
    # (attention blocks are copied as they are: a checkpoint with them grows in their number only, not in width)
    grown, now = (width, anomaly, attention), (cfg.width, cfg.anomaly, cfg.attention)
    return all(g <= n for g, n in zip(grown, now)) and grown != now and (not attention or width == cfg.width)


def load_initial_weights(model: torch.nn.Module, cfg: SegmenterTrainConfig) -> None:
    """Start from the weights of ``cfg.init_checkpoint``: the same network at the same input size, or a narrower
    U-Net, widened without changing what it computes."""
    init = check_init_checkpoint(cfg)
    if widens(init, cfg):
        load_widened(model, init["state_dict"])
    else:
        model.load_state_dict(init["state_dict"])
