"""Does the segmenter learn the frames where the controller goes? Fine-tune the shipped segmenter on its recipe's
composites with a share of each batch drawn from the frames of controller episodes (DAgger rounds' datasets, with
their ground-truth sphere masks), on photos it never trained on.

    python benchmarks/episode_frames.py ROUND_DIR [ROUND_DIR ...] --out RUN [--share 0.3] [--hard-share 0]
        [--steps 3000] [--lr 3e-4] [--every 2] [--seed 1]

``ROUND_DIR``: folders of ``grasp_s2r.episodes`` datasets (``dagger``'s ``OUT/round-NNN``; ``adapt --rounds``'s
``OUT/controller/round-NNN``): every ``--every``-th frame of every episode, its ``rgb`` and ``sphere_mask``, through
the recipe's augmentation; with ``--hard-share H`` a share H of them is drawn from the frames the shipped segmenter
gets wrong (:func:`wrong_frames`). The rest of each batch of 32 are the shipped weights' recipe's composites on the training
photos (``recipe_of``), made by one worker process, as ``train-vision`` makes them. Schedule and loss are
``train-vision``'s (AdamW, warm-up and cosine decay, BCE + Dice). Writes ``RUN/model.pt`` (a segmenter checkpoint
whose ``config`` records the frames' folders and share) and ``RUN/curve.csv``; measure it with ``eval-vision`` and
``segmenter_recipe.py``. Picking the rounds' photos: never the held-out photos, the validation photos or a
package reserved for testing.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import cv2
import numpy as np
import torch
from finetune_loop import composite_batches, draw_items, fine_tune, write_run
from tqdm import tqdm

from grasp_s2r.data.episodes import EpisodeDataset
from grasp_s2r.vision.images.augment import Augmenter
from grasp_s2r.vision.networks.model import to_input_tensor
from grasp_s2r.vision.networks.segmenter import Segmenter, default_checkpoint_path, read_checkpoint
from grasp_s2r.vision.training.train_config import SegmenterTrainConfig, recipe_of

BATCH = 32


def episode_frames(rounds: list[Path], every: int) -> tuple[np.ndarray, np.ndarray]:
    """Every ``every``-th frame of every episode of the datasets ``rounds``: rgb uint8 (N, H, W, 3), mask bool."""
    rgb, masks = [], []
    for folder in tqdm(rounds, desc="episode frames", unit="round"):
        ds = EpisodeDataset(folder)
        for i in range(len(ds)):
            ep = ds.episode(i)
            rgb.append(np.asarray(ep["rgb"][::every]))
            masks.append(np.asarray(ep["sphere_mask"][::every], dtype=bool))
    if not rgb:
        raise SystemExit("episode_frames: no episodes in the folders given")
    return np.concatenate(rgb), np.concatenate(masks)


def wrong_frames(segmenter: Segmenter, rgb: np.ndarray, masks: np.ndarray, batch: int = 256) -> np.ndarray:
    """bool (N,): the frames ``segmenter`` gets wrong: a sphere of 3 px or more with no predicted pixel on it, or 3
    predicted pixels or more farther than 2 px from the sphere (a false blob)."""
    wrong = np.zeros(len(rgb), bool)
    near_kernel = np.ones((5, 5), np.uint8)
    for start in tqdm(range(0, len(rgb), batch), desc="the shipped segmenter's errors", unit="batch"):
        pred = segmenter.predict(rgb[start:start + batch])
        gt = masks[start:start + batch]
        missed = (gt.sum((1, 2)) >= 3) & ~(pred & gt).any((1, 2))
        near = np.stack([cv2.dilate(m.astype(np.uint8), near_kernel).astype(bool) for m in gt])
        wrong[start:start + batch] = missed | ((pred & ~near).sum((1, 2)) >= 3)
    return wrong


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("rounds", nargs="+", type=Path, help="episode dataset folders (DAgger rounds)")
    p.add_argument("--out", type=Path, required=True, help="run folder (new)")
    p.add_argument("--share", type=float, default=0.3, help="share of each batch from the episode frames")
    p.add_argument("--hard-share", type=float, default=0.0,
                   help="share of the episode frames drawn from those the shipped segmenter gets wrong (default 0)")
    p.add_argument("--steps", type=int, default=3000)
    p.add_argument("--lr", type=float, default=3e-4)
    p.add_argument("--every", type=int, default=2, help="keep every N-th frame of an episode (default 2)")
    p.add_argument("--seed", type=int, default=1)
    args = p.parse_args()
    if not (0.0 <= args.share <= 1.0 and 0.0 <= args.hard_share <= 1.0):
        p.error("--share and --hard-share must be in [0, 1]")
    if args.out.exists():
        p.error(f"--out {args.out} exists: choose a new folder")
    n_frames = round(args.share * BATCH)
    n_comp = BATCH - n_frames
    shipped = default_checkpoint_path()
    init = read_checkpoint(shipped)
    data = recipe_of(shipped)
    cfg = SegmenterTrainConfig(steps=args.steps, lr=args.lr, seed=args.seed, init_checkpoint=str(shipped), data=data)
    frames_rgb, frames_mask = episode_frames(sorted(args.rounds), args.every)
    hard = np.flatnonzero(wrong_frames(Segmenter.from_checkpoint(init, "cpu", shipped), frames_rgb, frames_mask)) \
        if args.hard_share > 0 else np.zeros(0, int)
    if args.hard_share > 0 and not len(hard):
        raise SystemExit("episode_frames: the shipped segmenter gets none of the frames wrong: no --hard-share")
    print(f"episode_frames: {len(frames_rgb)} frames ({frames_mask.any((1, 2)).mean():.0%} show the sphere, "
          f"{len(hard)} wrong for the shipped segmenter), {n_frames} of each batch of {BATCH}", flush=True)

    torch.manual_seed(args.seed)
    torch.set_num_threads(1)
    model = Segmenter.from_checkpoint(init, "cpu", shipped).model  # the weights to train, apart from wrong_frames'
    loader = composite_batches(data, args.seed, args.steps, n_comp)
    augment = Augmenter(data.augment)
    rng = np.random.default_rng(args.seed)
    args.out.mkdir(parents=True)
    t0 = time.perf_counter()

    def next_batch(step: int) -> tuple[torch.Tensor, torch.Tensor]:
        xs, ys = [], []
        if loader is not None:
            x, y = next(loader)
            xs.append(x)
            ys.append(y)
        if n_frames:
            pick = draw_items(rng, len(frames_rgb), n_frames, hard, args.hard_share)
            aug = [augment(frames_rgb[i], frames_mask[i], seed=int(rng.integers(2**31))) for i in pick]
            xs.append(to_input_tensor(np.stack([a[0] for a in aug])))
            ys.append(torch.from_numpy(np.stack([a[1] for a in aug])[:, None].astype(np.float32)))
        return torch.cat(xs), torch.cat(ys)

    history = fine_tune(model, next_batch, cfg)
    config = {**init["config"], "episode_frames": {"rounds": [str(r) for r in args.rounds], "share": args.share,
                                                   "hard_share": args.hard_share, "hard_frames": len(hard),
                                                   "every": args.every, "frames": len(frames_rgb),
                                                   "steps": args.steps, "lr": args.lr, "seed": args.seed,
                                                   "command": " ".join(sys.argv)}}
    write_run(args.out, model, init, config, args.steps, history)
    print(f"episode_frames: wrote {args.out / 'model.pt'} in {(time.perf_counter() - t0) / 60:.1f} min", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
