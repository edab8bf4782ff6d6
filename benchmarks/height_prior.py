"""Does a segmenter told the camera's height find more spheres? Fine-tune the shipped segmenter by its own recipe
with the TCP's height above the table as a fourth input channel (``UNet(height=K)``,
:func:`~grasp_s2r.vision.networks.model.height_channel`), read by the first ``--height-levels`` K encoder blocks
(1: beside the colours only; the U-Net's depth + 1: at every level), or without it (the control: the same steps,
draws and loop).

    python benchmarks/height_prior.py --out RUN [--no-height | --height-levels K] [--steps 3000] [--lr 3e-4]
        [--height-noise 0.05] [--seed 1] [--val-images 1000]

The sphere's width in pixels is set by the camera's height (and where in the image it lies); at 64 px a 2-3 px
sphere seen from the search height and a 2-3 px blob of the table seen from 3 cm look alike, and a network that
does not know the height must answer both the same way. Each composite's height is its sim view's TCP height above
the table (times a log-normal factor of ``--height-noise``, its own draw per item); on a robot it is the
``tcp_z_above_table_m`` of its proprio, which the runtime passes to a segmenter that reads it. The new input
channel's weights start at zero (``vision/networks/widen.py``), so training starts from the shipped
network's exact function.

Writes ``RUN/model.pt`` (a segmenter checkpoint whose ``config`` records the arm), ``RUN/curve.csv`` and
``RUN/val.json``: found / false detection of the new and the shipped network on ``--val-images`` composites of the
``val`` stream made by the recipe (training photos), overall and by TCP height. Measure it end to end
with ``segmenter_recipe.py RUN/model.pt``.
"""

from __future__ import annotations

import argparse
import itertools
import json
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np
import torch
from finetune_loop import fine_tune, write_run
from torch.utils.data import DataLoader
from tqdm import tqdm

from grasp_s2r.interrupts import dataloader_worker_init
from grasp_s2r.vision.evaluation.metrics import pixel_metrics
from grasp_s2r.vision.images.backgrounds import load_backgrounds
from grasp_s2r.vision.images.dataset import STREAMS, CompositeDataset, DataConfig, env_config_for
from grasp_s2r.vision.networks.model import UNet, height_channel, to_input_tensor
from grasp_s2r.vision.networks.segmenter import Segmenter, default_checkpoint_path, read_checkpoint
from grasp_s2r.vision.networks.widen import load_widened
from grasp_s2r.vision.testsets.suites import VAL_ITEM_START
from grasp_s2r.vision.training.train_config import SegmenterTrainConfig, recipe_of

BATCH = 32
HEIGHT_BINS_M = (0.0, 0.02, 0.05, 0.10, 0.15, 0.20, 0.30)
"""TCP heights of ``val.json``'s rows (the error budget's bins)."""


class HeightComposites(CompositeDataset):
    """The recipe's composites, each with its view's TCP height above the table (times a log-normal factor of
    ``height_noise``); items are (image float (3 + reads_height, H, W), mask float (1, H, W))."""

    def __init__(self, *args: Any, reads_height: bool, height_noise: float = 0.0, **kwargs: Any):
        super().__init__(*args, **kwargs)
        self.reads_height = reads_height
        self.height_noise = float(height_noise)

    def sample_with_height(self, index: int) -> tuple[np.ndarray, np.ndarray, float]:
        """Item ``index`` as (rgb uint8 (H, W, 3), mask bool (H, W), TCP height above the table in metres)."""
        rgb, mask = self.sample(index)
        env = self._sampler.env  # still posed as the item's view: sample() rendered it, or its cached render did
        z = float(env.robot.tcp_pos_world_m()[2] - env.config.scene.table_height_m)
        if self.height_noise > 0:
            noise_rng = np.random.default_rng([self.seed, STREAMS[self.stream], 9, index])
            z *= float(np.exp(noise_rng.normal(0.0, self.height_noise)))
        return rgb, mask, z

    def __getitem__(self, index: int) -> tuple[torch.Tensor, torch.Tensor]:
        rgb, mask, z = self.sample_with_height(int(index))
        x = to_input_tensor(rgb[None])
        if self.reads_height:
            x = torch.cat([x, height_channel([z], tuple(x.shape[2:]))], dim=1)
        return x[0], torch.from_numpy(mask[None].astype(np.float32))


def val_items(n: int, seed: int, data: DataConfig) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``n`` composites of the ``val`` stream made by ``data`` (the recipe's: its far views included; training
    photos, items from the suites' :data:`VAL_ITEM_START`, which no training run draws) with their exact heights:
    rgb uint8 (n, H, W, 3), mask bool (n, H, W), height float (n,)."""
    ds = HeightComposites(env_config=env_config_for(64), data=data, backgrounds=load_backgrounds("train"),
                          stream="val", seed=seed, length=VAL_ITEM_START + n, reads_height=True)
    items = [ds.sample_with_height(VAL_ITEM_START + i) for i in tqdm(range(n), desc="val composites", unit="img")]
    ds.close()
    return np.stack([i[0] for i in items]), np.stack([i[1] for i in items]), np.array([i[2] for i in items])


def by_height(pred: np.ndarray, masks: np.ndarray, z: np.ndarray) -> list[dict[str, Any]]:
    """Found / false detection of ``pred`` in each TCP height bin of :data:`HEIGHT_BINS_M`, and over all."""
    rows = []
    for lo, hi in [*itertools.pairwise(HEIGHT_BINS_M), (HEIGHT_BINS_M[0], HEIGHT_BINS_M[-1] + 1.0)]:
        sel = (z >= lo) & (z < hi)
        m = pixel_metrics(pred[sel], masks[sel]) if sel.any() else {}
        rows.append({"height_m": [lo, hi], "images": int(sel.sum()),
                     **{k: m.get(k) for k in ("found_rate", "false_detection_rate", "precision", "recall")}})
    return rows


def _fmt(x: float | None) -> str:
    return "-" if x is None or np.isnan(x) else f"{x:.3f}"


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--out", type=Path, required=True, help="run folder (new)")
    p.add_argument("--no-height", action="store_true", help="the control: the same fine-tune without the height")
    p.add_argument("--height-levels", type=int, default=1,
                   help="encoder blocks that read the height (1: the input's; default 1)")
    p.add_argument("--steps", type=int, default=3000)
    p.add_argument("--lr", type=float, default=3e-4)
    p.add_argument("--height-noise", type=float, default=0.05,
                   help="sigma of the log-normal factor on each training item's height (default 0.05)")
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--val-images", type=int, default=1000)
    args = p.parse_args()
    if args.out.exists():
        p.error(f"--out {args.out} exists: choose a new folder")
    if args.steps < 1 or args.height_noise < 0 or args.val_images < 0 or args.height_levels < 1:
        p.error("--steps and --height-levels must be >= 1, --height-noise and --val-images >= 0")
    reads_height = not args.no_height
    shipped = default_checkpoint_path()
    init = read_checkpoint(shipped)
    data = recipe_of(shipped)
    cfg = SegmenterTrainConfig(steps=args.steps, lr=args.lr, seed=args.seed, init_checkpoint=str(shipped), data=data)
    arch_kwargs = {**init["arch_kwargs"], **({"height": args.height_levels} if reads_height else {})}

    torch.manual_seed(args.seed)
    torch.set_num_threads(1)
    model = UNet(**arch_kwargs)
    load_widened(model, init["state_dict"])  # the height channel's weights start at zero
    comps = HeightComposites(env_config=env_config_for(64), data=data, backgrounds=load_backgrounds("train"),
                             stream="train", seed=args.seed, length=args.steps * BATCH, reads_height=reads_height,
                             height_noise=args.height_noise)
    loader = iter(DataLoader(comps, batch_size=BATCH, num_workers=1, multiprocessing_context="spawn",
                             worker_init_fn=dataloader_worker_init))
    args.out.mkdir(parents=True)
    t0 = time.perf_counter()
    history = fine_tune(model, lambda step: next(loader), cfg)
    arm = {"reads_height": reads_height, "height_levels": args.height_levels if reads_height else 0,
           "height_noise": args.height_noise, "steps": args.steps, "lr": args.lr,
           "seed": args.seed, "command": " ".join(sys.argv)}
    path = write_run(args.out, model, init, {**init["config"], "height_prior": arm}, args.steps, history,
                     arch_kwargs=arch_kwargs)
    print(f"height_prior: wrote {path} in {(time.perf_counter() - t0) / 60:.1f} min", flush=True)

    if args.val_images:
        rgb, masks, z = val_items(args.val_images, seed=0, data=data)
        rows = {}
        for name, seg, heights in (("shipped", Segmenter.from_checkpoint(init, "cpu", shipped), None),
                                   ("run", Segmenter.load(path, "cpu"), z if reads_height else None)):
            pred = np.concatenate([seg.predict(rgb[i:i + 250], None if heights is None else heights[i:i + 250])
                                   for i in range(0, len(rgb), 250)])
            rows[name] = by_height(pred, masks, z)
            print(f"{name:8s} " + "  ".join(f"{r['height_m'][0]:.2f}-{r['height_m'][1]:.2f} m: "
                                            f"{_fmt(r['found_rate'])}/{_fmt(r['false_detection_rate'])}"
                                            for r in rows[name]), flush=True)
        (args.out / "val.json").write_text(json.dumps({"arm": arm, "val_images": args.val_images, "rows": rows},
                                                      indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
