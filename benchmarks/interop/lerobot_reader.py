"""Load a ``grasp-s2r export --format lerobot`` folder with lerobot itself; run in lerobot's own environment.

    HF_HUB_OFFLINE=1 python benchmarks/interop/lerobot_reader.py EXPORT_DIR SOURCE.npz

SOURCE.npz (written by benchmarks/check_interop.py) holds the source arrays, episode after episode: ``rgb``
(uint8), ``proprio`` (float32), ``action`` (float32), ``state`` (float64), ``lengths``, and for a DAgger export
``learner_action`` / ``learner_queried``. Checks, with lerobot's own code: ``LeRobotDataset(repo_id, root=...)``
loads the folder untouched; every frame's image, ``observation.state``, ``action``, ``sim.state`` equal the source
(LeRobot's conventions: images float32 (C, H, W) in [0, 1], which times 255 is the uint8 source exactly; its item
transform makes any float tensor float32, so ``sim.state`` is compared in float32 there and in float64 in the
dataset's own Arrow table); a ``DataLoader`` batch with ``delta_timestamps`` (action chunks, past frames, padding
at episode ends) matches the source. A video export (``--video``) is decoded with lerobot's ``pyav`` backend (its
default, torchcodec, needs FFmpeg libraries on the system) and its frames, lossy, are compared within
:data:`VIDEO_MEAN_ABS` of the source. Prints one line per check; exit 1 on the first mismatch.
"""

import argparse
import sys

import lerobot
import numpy as np
import torch
from lerobot.datasets.lerobot_dataset import LeRobotDataset

IMAGE = "observation.images.wrist"
VIDEO_MEAN_ABS = 0.04
"""The largest mean absolute difference (in [0, 1]) of decoded video frames from the source: AV1 at crf 30."""


def check(cond, what):
    print(("ok    " if cond else "FAIL  ") + what, flush=True)
    if not cond:
        sys.exit(1)


def same(got, want, name, video=False):
    """A torch tensor from lerobot against a source array: dtype and values (decoded video: within tolerance)."""
    want_t = torch.from_numpy(np.ascontiguousarray(want))
    if not video:
        check(got.dtype == want_t.dtype and torch.equal(got, want_t), f"  {name} {got.dtype} {tuple(got.shape)}")
        return
    err = (got - want_t).abs()
    check(got.dtype == want_t.dtype and got.shape == want_t.shape and err.mean() < VIDEO_MEAN_ABS,
          f"  {name} {got.dtype} {tuple(got.shape)}, decoded video: mean abs difference {err.mean():.4f}, "
          f"max {err.max():.3f}")


def main():
    p = argparse.ArgumentParser()
    p.add_argument("export")
    p.add_argument("source")
    args = p.parse_args()
    src = dict(np.load(args.source))
    print(f"lerobot {lerobot.__version__}: {args.export}", flush=True)
    ds = LeRobotDataset("local/grasp_s2r", root=args.export)
    video = IMAGE in ds.meta.video_keys
    if video:
        ds = LeRobotDataset("local/grasp_s2r", root=args.export, video_backend="pyav")
    n, fps = int(src["lengths"].sum()), ds.fps
    check(ds.num_frames == n and ds.num_episodes == len(src["lengths"]),
          f"LeRobotDataset: {ds.num_episodes} episodes, {ds.num_frames} frames, fps {fps}, codebase "
          f"{ds.meta.info['codebase_version']}")
    items = [ds[i] for i in range(len(ds))]
    stacked = {k: torch.stack([it[k] for it in items]) for k in items[0] if isinstance(items[0][k], torch.Tensor)}
    rgb = src["rgb"].transpose(0, 3, 1, 2)
    same(stacked[IMAGE], torch.from_numpy(rgb).float().div(255).numpy(), f"{IMAGE} (the source / 255)", video)
    if not video:
        check(torch.equal((stacked[IMAGE] * 255).round().to(torch.uint8), torch.from_numpy(rgb)),
              f"  {IMAGE} * 255 is the uint8 source")
    else:  # each decoded frame is its own step's, not a neighbour's
        src_f = torch.from_numpy(rgb).float().div(255)
        own, nxt = (stacked[IMAGE] - src_f).abs().mean(), (stacked[IMAGE][:-1] - src_f[1:]).abs().mean()
        check(own < nxt, f"  decoded frames are in step: {own:.4f} from their own steps, {nxt:.4f} from the next")
    same(stacked["observation.state"], src["proprio"], "observation.state")
    same(stacked["action"], src["action"], "action")
    same(stacked["sim.state"], src["state"].astype(np.float32), "sim.state (lerobot's item transform: float32)")
    table = ds.hf_dataset.with_format("arrow")[:]
    state64 = np.stack(table.column("sim.state").to_numpy(zero_copy_only=False))
    check(state64.dtype == np.float64 and np.array_equal(state64, src["state"]),
          f"  sim.state in the dataset's Arrow table {state64.dtype} {state64.shape}")
    if "learner_action" in src:
        same(stacked["learner_action"], src["learner_action"], "learner_action (zeros where not queried)")
        same(stacked["learner_queried"], src["learner_queried"], "learner_queried")
    else:
        check("learner_action" not in ds.features, "  no learner_action column (the learner was never queried)")
    check(items[0]["task"] == ds.meta.tasks.index[0], f"  task {items[0]['task']!r}")

    delta = {"action": [i / fps for i in range(4)], IMAGE: [-1 / fps, 0.0], "observation.state": [-1 / fps, 0.0]}
    dsd = LeRobotDataset("local/grasp_s2r", root=args.export, delta_timestamps=delta,
                         video_backend="pyav" if video else None)
    batch = next(iter(torch.utils.data.DataLoader(dsd, batch_size=n, shuffle=False)))
    starts = np.repeat(np.cumsum(src["lengths"]) - src["lengths"], src["lengths"])
    ends = starts + np.repeat(src["lengths"], src["lengths"])
    idx = np.arange(n)
    want_a = np.stack([src["action"][np.clip(idx + d, starts, ends - 1)] for d in range(4)], 1)
    same(batch["action"], want_a, "DataLoader batch, delta_timestamps action [0, 0.1, 0.2, 0.3]")
    same(batch["action_is_pad"], np.stack([idx + d >= ends for d in range(4)], 1), "  action_is_pad")
    prev = np.clip(idx - 1, starts, None)
    same(batch["observation.state"], np.stack([src["proprio"][prev], src["proprio"]], 1),
         "  observation.state [-0.1, 0]")
    want_img = torch.from_numpy(np.stack([rgb[prev], rgb], 1)).float().div(255).numpy()
    same(batch[IMAGE], want_img, f"  {IMAGE} [-0.1, 0]", video)
    same(batch[f"{IMAGE}_is_pad"], np.stack([idx - 1 < starts, np.zeros(n, bool)], 1), f"  {IMAGE}_is_pad")


if __name__ == "__main__":
    main()
