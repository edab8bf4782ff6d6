"""Does a segmenter that reads the previous frame, warped onto the image through the table plane, find the spheres
the colours hide? Fine-tune the shipped segmenter with the warped previous frame as three more input channels
(``UNet(previous=...)``: the warped frame itself, or the image less it; their weights start at zero, so training
starts from the shipped function), or without them (the control: the same batches, the image alone).
``--from-scratch`` trains the same network from random weights instead (learning rate 3e-3, ``train-vision``'s
for random weights, unless ``--lr`` is given): a network that has the cue from its first step.

    python benchmarks/two_frame.py --out RUN --pairs PAIRS.npz [--episodes 600] [--share 0.5] [--steps 3000]
        [--lr 3e-4] [--every 2] [--previous-as difference|frame] [--hard-share 0] [--colour-dropout 0]
        [--no-previous] [--from-scratch] [--seed 1]

The frame pairs come from the shipped system's own episodes on the training tables (``--pairs``: made once,
then read by every run): ``table-photo-train`` (the embedded training photos as the table), ``sim-render`` and
``nominal`` (the training photos behind the sphere, which do not move as the table does), episodes
``PAIR_SEED_BASE + i``, every ``--every``-th frame with its previous frame warped onto it by the runtime's own
``control.wrist_geometry.PreviousFrame`` and its true sphere mask. ``--share`` of each batch of 32 are such pairs,
both images through the same draw of the recipe's augmentation (the previous one with its own sensor noise
besides); the rest are the recipe's composites, for which the previous frame is the image itself (nothing to
read: as at an episode's first frame). ``--hard-share H``: a share H of the pairs drawn from those whose sphere the
shipped system's mask missed. ``--colour-dropout P`` (with ``--previous-as difference``): in a share P of the
pairs the image's own channels are blanked (the normalized mean, zero), so that only the image less the warped
previous frame is left to find the sphere by: a pair in which the colours cannot answer (modality dropout; never
at run time). Schedule and loss are ``train-vision``'s. Writes ``RUN/model.pt`` and
``RUN/curve.csv``; measure with ``eval-vision`` and ``segmenter_recipe.py`` (the runtime hands a segmenter that
reads it the previous frame). Never the held-out photos, the validation photos or a reserved package.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np
import torch
from finetune_loop import composite_batches, draw_items, fine_tune, write_run
from validation import TRAIN_PHOTO_CONDITIONS

from grasp_s2r.agent import default_controller_path
from grasp_s2r.control.parallax import SHIPPED as SHIPPED_PARALLAX
from grasp_s2r.control.policy import Policy
from grasp_s2r.control.wrist_geometry import PreviousFrame
from grasp_s2r.runtime.masks import make_mask_source
from grasp_s2r.runtime.pool import RolloutPool
from grasp_s2r.runtime.records import EpisodeRequest
from grasp_s2r.sim.config import control_env_config
from grasp_s2r.vision.images.augment import Augmenter
from grasp_s2r.vision.networks.model import PREVIOUS_INPUTS, UNet, to_input_tensor, two_frame_input
from grasp_s2r.vision.networks.segmenter import Segmenter, default_checkpoint_path, read_checkpoint
from grasp_s2r.vision.networks.widen import load_widened
from grasp_s2r.vision.training.train_config import SegmenterTrainConfig, recipe_of

BATCH = 32
PAIR_SEED_BASE = 3_000_000
"""Episode i of the pairs: seed ``PAIR_SEED_BASE + i`` (no training or evaluation run uses these)."""
PAIR_CONDITIONS = ("table-photo-train", "table-photo-train", "sim-render", "nominal")
"""Episode i plays ``PAIR_CONDITIONS[i % 4]``: half with a training photo as the table."""
PREVIOUS_NOISE_STD = (0.0, 4.0)
"""The previous frame's own sensor noise (uint8 levels), drawn uniformly per pair."""


def record_pairs(episodes: int, every: int, workers: int) -> dict[str, np.ndarray]:
    """The shipped system's episodes on the training tables: every ``every``-th frame (from the second) with its
    previous frame warped onto it and its true sphere mask: rgb, previous uint8 (N, H, W, 3), mask bool (N, H, W)."""
    env_cfg = control_env_config()
    policy = Policy.load(Path(default_controller_path()), "cpu")[0]
    masks = make_mask_source("predicted", "", "cpu")
    requests = [EpisodeRequest(seed=PAIR_SEED_BASE + i,
                               condition=TRAIN_PHOTO_CONDITIONS[PAIR_CONDITIONS[i % len(PAIR_CONDITIONS)]])
                for i in range(episodes)]
    rgb, previous, mask, missed = [], [], [], []

    def keep(rec) -> None:
        frames, proprio = np.asarray(rec.arrays["rgb"]), np.asarray(rec.arrays["proprio"])
        warper = PreviousFrame(env_cfg.camera)
        warped = np.stack([warper.warped(f, p) for f, p in zip(frames, proprio)])
        rgb.append(frames[1::every])
        previous.append(warped[1::every])
        gt, seen = np.asarray(rec.arrays["sphere_mask"], bool), np.asarray(rec.arrays["input_mask"], bool)
        mask.append(gt[1::every])
        missed.append(((gt.sum((1, 2)) >= 3) & ~(gt & seen).any((1, 2)))[1::every])

    with RolloutPool(env_cfg, workers) as pool:
        pool.run(requests, policy, masks, record=lambda i: True, progress=True, desc="pair episodes",
                 parallax=SHIPPED_PARALLAX, on_episode=keep)
    return {"rgb": np.concatenate(rgb), "previous": np.concatenate(previous), "mask": np.concatenate(mask),
            "missed": np.concatenate(missed)}


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--out", type=Path, required=True, help="run folder (new)")
    p.add_argument("--pairs", type=Path, required=True, help="the frame pairs' file: read if it exists, else made")
    p.add_argument("--episodes", type=int, default=600, help="episodes the pairs are drawn from (when made)")
    p.add_argument("--every", type=int, default=2, help="keep every N-th frame of an episode (when made)")
    p.add_argument("--share", type=float, default=0.5, help="share of each batch from the pairs")
    p.add_argument("--steps", type=int, default=3000)
    p.add_argument("--lr", type=float, default=None,
                   help="peak learning rate (default 3e-4 fine-tuning, 3e-3 with --from-scratch)")
    p.add_argument("--from-scratch", action="store_true",
                   help="random weights, the shipped network's architecture, instead of the shipped weights")
    p.add_argument("--no-previous", action="store_true", help="the control: the image alone, the same batches")
    p.add_argument("--previous-as", default="difference", choices=PREVIOUS_INPUTS[1:],
                   help="what the extra channels hold: the warped previous frame or the image less it")
    p.add_argument("--hard-share", type=float, default=0.0,
                   help="share of the pairs drawn from those whose sphere the shipped system's mask missed")
    p.add_argument("--colour-dropout", type=float, default=0.0,
                   help="share of the pairs whose image channels are blanked, the difference alone left")
    p.add_argument("--workers", type=int, default=2)
    p.add_argument("--seed", type=int, default=1)
    args = p.parse_args()
    if args.lr is None:
        args.lr = 3e-3 if args.from_scratch else 3e-4
    if not all(0.0 <= v <= 1.0 for v in (args.share, args.hard_share, args.colour_dropout)):
        p.error("--share, --hard-share and --colour-dropout must be in [0, 1]")
    if args.colour_dropout and (args.no_previous or args.previous_as != "difference"):
        p.error("--colour-dropout needs --previous-as difference (with the frame itself it would leave no image)")
    if args.out.exists():
        p.error(f"--out {args.out} exists: choose a new folder")
    if args.pairs.exists():
        with np.load(args.pairs) as f:
            pairs = {k: f[k] for k in f.files}
    else:
        pairs = record_pairs(args.episodes, args.every, args.workers)
        args.pairs.parent.mkdir(parents=True, exist_ok=True)
        np.savez(args.pairs, **pairs)
    n_pairs = round(args.share * BATCH)
    n_comp = BATCH - n_pairs
    hard = np.flatnonzero(pairs["missed"]) if args.hard_share > 0 else np.zeros(0, int)
    if args.hard_share > 0 and not len(hard):
        raise SystemExit("two_frame: no pair's sphere was missed: no --hard-share")
    print(f"two_frame: {len(pairs['rgb'])} frame pairs ({pairs['mask'].any((1, 2)).mean():.0%} show the sphere, "
          f"{int(pairs.get('missed', np.zeros(0)).sum())} missed by the shipped system), "
          f"{n_pairs} of each batch of {BATCH}; "
          f"{'the image alone (control)' if args.no_previous else 'previous frame read'}",
          flush=True)

    shipped = default_checkpoint_path()
    init = read_checkpoint(shipped)
    data = recipe_of(shipped)
    cfg = SegmenterTrainConfig(steps=args.steps, lr=args.lr, seed=args.seed,
                               init_checkpoint="" if args.from_scratch else str(shipped), data=data)
    torch.manual_seed(args.seed)
    torch.set_num_threads(1)
    plain = init
    if not args.no_previous:
        init = {**init, "arch_kwargs": {**init["arch_kwargs"], "previous": args.previous_as}}
    if args.from_scratch:
        model = UNet(**init["arch_kwargs"])
    else:
        model = Segmenter.from_checkpoint(plain, "cpu", shipped).model
        if not args.no_previous:
            wide = UNet(**init["arch_kwargs"])
            load_widened(wide, model.state_dict())
            model = wide
    loader = composite_batches(data, args.seed, args.steps, n_comp)
    augment = Augmenter(data.augment)
    rng = np.random.default_rng(args.seed)
    args.out.mkdir(parents=True)
    t0 = time.perf_counter()

    def next_batch(step: int) -> tuple[torch.Tensor, torch.Tensor]:
        xs, ys = [], []
        if loader is not None:
            x, y = next(loader)
            xs.append(x if args.no_previous else two_frame_input(x, x, args.previous_as))
            ys.append(y)
        if n_pairs:
            now, before, truth = [], [], []
            for i in draw_items(rng, len(pairs["rgb"]), n_pairs, hard, args.hard_share):
                seed = int(rng.integers(2**31))
                a, m = augment(pairs["rgb"][i], pairs["mask"][i], seed=seed)
                b, _ = augment(pairs["previous"][i], pairs["mask"][i], seed=seed)
                noise = rng.normal(0.0, rng.uniform(*PREVIOUS_NOISE_STD), size=b.shape)
                now.append(a)
                before.append(np.clip(b + noise, 0, 255).astype(np.uint8))
                truth.append(m)
            x = to_input_tensor(np.stack(now))
            if not args.no_previous:
                x = two_frame_input(x, to_input_tensor(np.stack(before)), args.previous_as)
                if args.colour_dropout:  # (no draw without it: the earlier runs' batches stay as they were)
                    x[:, :3][torch.from_numpy(rng.random(n_pairs) < args.colour_dropout)] = 0.0
            xs.append(x)
            ys.append(torch.from_numpy(np.stack(truth)[:, None].astype(np.float32)))
        return torch.cat(xs), torch.cat(ys)

    history = fine_tune(model, next_batch, cfg, desc=("two-frame" if not args.no_previous else "control")
                        + (" from scratch" if args.from_scratch else " fine-tune"))
    config = {**init["config"], "two_frame": {"pairs": str(args.pairs), "frames": len(pairs["rgb"]),
                                              "share": args.share, "hard_share": args.hard_share,
                                              "colour_dropout": args.colour_dropout,
                                              "previous": "" if args.no_previous else args.previous_as,
                                              "steps": args.steps, "lr": args.lr, "seed": args.seed,
                                              "from_scratch": args.from_scratch,
                                              "command": " ".join(sys.argv)}}
    write_run(args.out, model, init, config, args.steps, history)
    print(f"two_frame: wrote {args.out / 'model.pt'} in {(time.perf_counter() - t0) / 60:.1f} min", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
