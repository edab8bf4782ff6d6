"""The controller's input masks made other ways at test time, end to end on validation episodes (no training).

    python benchmarks/mask_variants.py --photos DIR [--ensemble CKPT,...] [--union CKPT,...] [--flip]
        [--keep-largest] [--above HEIGHT_M:CKPT,...] [--fallback-net CKPT,...] [--fallback-tiles SIZE/STRIDE,...]
        [--episodes 300] [--conditions C,...] [--workers 2] [--save]

The shipped controller and parallax filter act in every row; the first row is the shipped system. Each further row
changes one thing about the masks:

- ``--ensemble CKPT,...``: one row per checkpoint, the shipped segmenter's sphere probabilities averaged with that
  segmenter's (do two networks' errors cancel? a lure must then fool both);
- ``--union CKPT,...``: one row per checkpoint, the higher of the two networks' sphere probabilities at each pixel
  (either network's sphere is kept, and either one's lures: for two networks that miss different spheres);
- ``--flip``: the shipped segmenter's probabilities on each image and on its mirror image, averaged (test-time
  augmentation);
- ``--keep-largest``: only the mask's largest blob reaches the filter and the controller (the controller reads the
  mask's moments, whose centroid lies between a sphere and a lure: does committing to one blob help?);
- ``--above HEIGHT_M:CKPT,...``: one row each, that segmenter's masks in the frames whose TCP is more than HEIGHT_M
  above the table, the shipped segmenter's below (a segmenter with fewer lures where the search looks, the one the
  controller was trained over where it grasps). The mask source sees no proprioception, so the row swaps the
  pool's learner step (:func:`above_height`) for its episodes.
- ``--fallback-tiles SIZE/STRIDE,...``: one row each, the shipped segmenter's mask, and in a frame where it is empty
  the same network's prediction tile by tile (``Tiling``: SIZE px windows STRIDE apart, each pixel the most probable
  of its windows) at the same threshold. With less of the image around it, the network finds spheres that the
  surroundings suppress (docs/experiments/vision.md, *Tiled prediction*), and lets through more lures; here only
  where the whole image shows nothing (:class:`EmptyFallback`).
- ``--fallback-net CKPT,...``: one row each, the shipped segmenter's mask, and in a frame where it is empty that
  segmenter's (:class:`EmptyFallback`): another network's spheres, its lures only where the shipped one sees nothing.

``DIR``: a folder of validation photos for the unseen conditions (never the held-out ones). Writes
``runs/benchmarks/mask_variants.json`` (``--save``: ``benchmarks/results/``).
"""

from __future__ import annotations

import argparse
import contextlib
import sys
from pathlib import Path

import cv2
import numpy as np
import torch
from results_io import add_json_argument, display_path, write_results
from torch import nn
from validation import add_episode_arguments, check_episode_arguments, validate

import grasp_s2r.runtime.pool as pool_module
from grasp_s2r.agent import default_controller_path
from grasp_s2r.control.policy import Policy
from grasp_s2r.control.wrist_geometry import TCP_INDEX
from grasp_s2r.learner import learner_step
from grasp_s2r.runtime.masks import make_mask_source
from grasp_s2r.runtime.pool import RolloutPool
from grasp_s2r.sim.config import control_env_config
from grasp_s2r.vision.networks.segmenter import Segmenter, Tiling

CONDITIONS = "table-photo-unseen,backgrounds-unseen"


class MeanProbability(nn.Module):
    """Logits of the mean sphere probability of ``models`` (and of their mirror images with ``flip``; with
    ``reduce="max"`` the highest instead of the mean); the gripper head keeps reading the first model's features."""

    def __init__(self, models: list[nn.Module], flip: bool, reduce: str = "mean"):
        super().__init__()
        if reduce not in ("mean", "max"):
            raise ValueError(f"reduce must be 'mean' or 'max', got {reduce!r}")
        self.models, self.flip, self.reduce = nn.ModuleList(models), flip, reduce
        self.features = models[0].features

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        probs = []
        for m in self.models:
            probs.append(torch.sigmoid(m(x)))
            if self.flip:
                probs.append(torch.flip(torch.sigmoid(m(torch.flip(x, dims=[3]))), dims=[3]))
        stacked = torch.stack(probs)
        p = (stacked.mean(0) if self.reduce == "mean" else stacked.amax(0)).clamp(1e-6, 1 - 1e-6)
        return torch.log(p / (1 - p))


class LargestBlob:
    """A mask source that keeps only the largest 8-connected blob of ``source``'s masks."""

    def __init__(self, source):
        self.source, self.kind = source, source.kind

    def __call__(self, rgb: np.ndarray, gt_mask: np.ndarray | None = None) -> np.ndarray:
        masks = self.source(rgb, gt_mask)
        for mask in masks:
            n, labels, stats, _ = cv2.connectedComponentsWithStats(mask.astype(np.uint8), connectivity=8)
            if n > 2:
                mask &= labels == 1 + int(np.argmax(stats[1:, cv2.CC_STAT_AREA]))
        return masks

    def gripper(self, rgb: np.ndarray, gt_gripper: np.ndarray | None = None) -> np.ndarray:
        return self.source.gripper(rgb, gt_gripper)


class EmptyFallback:
    """A mask source: ``source``'s masks, and ``fallback``'s in the images where ``source``'s is empty."""

    def __init__(self, source, fallback):
        self.source, self.fallback, self.kind = source, fallback, source.kind

    def __call__(self, rgb: np.ndarray, gt_mask: np.ndarray | None = None) -> np.ndarray:
        masks = np.array(self.source(rgb, gt_mask), dtype=bool)
        empty = ~masks.any(axis=(1, 2))
        if empty.any():
            masks[empty] = self.fallback(np.asarray(rgb)[empty], None)
        return masks

    def gripper(self, rgb: np.ndarray, gt_gripper: np.ndarray | None = None) -> np.ndarray:
        return self.source.gripper(rgb, gt_gripper)


def parse_tiles(text: str) -> list[Tiling]:
    """``SIZE/STRIDE,...`` -> [Tiling]; exits with one line on a malformed entry."""
    out = []
    for item in (t for t in text.split(",") if t):
        size, _, stride = item.partition("/")
        try:
            out.append(Tiling(int(size), int(stride)))
        except ValueError as e:
            sys.exit(f"mask_variants: --fallback-tiles wants SIZE/STRIDE, got {item!r}: {e}")
    return out


@contextlib.contextmanager
def above_height(height_m: float, high):
    """While open, the pool's learner step gives the rows whose TCP is more than ``height_m`` above the table the
    masks of the mask source ``high`` instead of its own source's."""
    z = TCP_INDEX[2]

    def step(masks, policy, rgb, proprio, **kwargs):
        above = np.asarray(proprio)[:, z] > height_m

        def switched(rgb_: np.ndarray, gt_mask: np.ndarray | None = None) -> np.ndarray:
            out = np.array(masks(rgb_, gt_mask), dtype=bool)
            if above.any():
                out[above] = high(rgb_[above], None)
            return out

        return learner_step(switched, policy, rgb, proprio, **kwargs)

    pool_module.learner_step = step
    try:
        yield
    finally:
        pool_module.learner_step = learner_step


def parse_above(text: str) -> list[tuple[float, Path]]:
    """``HEIGHT_M:CKPT,...`` -> [(height_m, checkpoint)]; exits with one line on a malformed or missing entry."""
    out = []
    for item in (t for t in text.split(",") if t):
        height, _, ckpt = item.partition(":")
        try:
            h = float(height)
        except ValueError:
            sys.exit(f"mask_variants: --above wants HEIGHT_M:CKPT, got {item!r}")
        if not 0 < h < 1 or not Path(ckpt).is_file():
            sys.exit(f"mask_variants: --above {item!r}: need 0 < HEIGHT_M < 1 and an existing checkpoint")
        out.append((h, Path(ckpt)))
    return out


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--ensemble", default="", help="comma-separated segmenter checkpoints, one row each, averaged "
                                                  "with the shipped segmenter")
    p.add_argument("--union", default="", help="comma-separated segmenter checkpoints, one row each: the higher of "
                                               "its and the shipped segmenter's probabilities")
    p.add_argument("--flip", action="store_true", help="a row with each image and its mirror averaged")
    p.add_argument("--keep-largest", action="store_true", help="a row keeping only the mask's largest blob")
    p.add_argument("--above", default="", help="comma-separated HEIGHT_M:CKPT, one row each: that segmenter's masks "
                                               "with the TCP above HEIGHT_M, the shipped one's below")
    p.add_argument("--fallback-tiles", default="", help="comma-separated SIZE/STRIDE, one row each: where the "
                   "shipped segmenter's mask is empty, its prediction on SIZE px tiles STRIDE apart")
    p.add_argument("--fallback-net", default="", help="comma-separated segmenter checkpoints, one row each: where "
                   "the shipped segmenter's mask is empty, that segmenter's")
    add_episode_arguments(p, CONDITIONS)
    add_json_argument(p, "mask_variants")
    args = p.parse_args()
    check_episode_arguments(args, "mask_variants")
    above = parse_above(args.above)
    tilings = parse_tiles(args.fallback_tiles)
    ensemble, union, fallback_nets = ([Path(c) for c in text.split(",") if c]
                                      for text in (args.ensemble, args.union, args.fallback_net))
    for c in [*ensemble, *union, *fallback_nets]:
        if not c.is_file():
            sys.exit(f"mask_variants: no checkpoint at {c}")
    torch.set_num_threads(1)
    policy = Policy.load(default_controller_path(), "cpu")[0]
    shipped = make_mask_source("predicted", None, "cpu")
    net = shipped.segmenter.model
    # (name, what the row changes, its mask source, what the row runs inside: the pool's learner step as it is,
    # or switched by height)
    variants: list[tuple[str, dict, object, contextlib.AbstractContextManager]] = [
        ("shipped", {}, shipped, contextlib.nullcontext())]
    for reduce, key, paths in (("mean", "ensemble", ensemble), ("max", "union", union)):
        for c in paths:
            masks = make_mask_source("predicted", None, "cpu")
            masks.segmenter.model = MeanProbability([net, Segmenter.load(c, "cpu").model], flip=False,
                                                    reduce=reduce).eval()
            variants.append((f"{reduce} with {display_path(str(c))}", {key: display_path(str(c))}, masks,
                             contextlib.nullcontext()))
    if args.flip:
        masks = make_mask_source("predicted", None, "cpu")
        masks.segmenter.model = MeanProbability([net], flip=True).eval()
        variants.append(("mirror averaged", {"flip": True}, masks, contextlib.nullcontext()))
    if args.keep_largest:
        variants.append(("largest blob", {"keep_largest": True}, LargestBlob(shipped), contextlib.nullcontext()))
    for tiling in tilings:
        tiled = make_mask_source("predicted", None, "cpu")
        tiled.segmenter.tiling = tiling
        variants.append((f"tiled {tiling.size_px}/{tiling.stride_px} where the mask is empty",
                         {"fallback_tiles": tiling.as_dict()}, EmptyFallback(shipped, tiled), contextlib.nullcontext()))
    for c in fallback_nets:
        variants.append((f"{display_path(str(c))} where the mask is empty", {"fallback_net": display_path(str(c))},
                         EmptyFallback(shipped, make_mask_source("predicted", str(c), "cpu")),
                         contextlib.nullcontext()))
    for h, c in above:
        variants.append((f"{display_path(str(c))} above {100 * h:g} cm", {"above": [h, display_path(str(c))]},
                         shipped, above_height(h, make_mask_source("predicted", str(c), "cpu"))))
    conditions = args.conditions.split(",")
    rows = []
    with RolloutPool(control_env_config(), args.workers) as pool:
        for name, variant, masks, switch in variants:
            try:
                with switch:
                    figures = validate(pool, policy, masks, conditions, args.episodes, label=name,
                                       unseen_photos=str(args.photos))
            except (KeyError, ValueError) as e:
                sys.exit(f"mask_variants: {e}")
            rows.append({"name": name, **variant, "conditions": figures})
    write_results(args.json, "mask_variants", {"photos": args.photos.name, "episodes": args.episodes,
                                               "conditions": conditions, "rows": rows}, args)
    return 0


if __name__ == "__main__":
    sys.exit(main())
