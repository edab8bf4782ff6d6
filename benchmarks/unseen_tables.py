"""How segmenters carry to tables they never trained on: per frame at an episode's start and search heights, and end
to end, on a folder of validation photos.

    python benchmarks/unseen_tables.py --photos DIR [CKPT ...] [--controllers C,...] [--views 400] [--episodes 300]
        [--camera-px 64] [--workers 2] [--save]

The shipped segmenter (with the shipped controller) is always the first row; each checkpoint follows with the
shipped controller or its own (``--controllers``, one a checkpoint). Per row:

- ``far``: photo-table sim views (the photos as the sim table's texture) from an episode's start and search heights
  (``ViewConfig.far_view_prob`` 1: the sphere 2-4 px wide), a third of them without the sphere: pixel precision and
  recall, spheres found, false detections on the sphere-free ones;
- ``all``: the same over the training views' heights (a fifth without the sphere);
- ``table-photo-unseen``: end-to-end success on ``--episodes`` validation episodes with the photos as the table
  (``validation.UNSEEN_TABLE``, the validation seeds), with its 95 % interval.

``--camera-px N``: views and episodes through an N x N wrist camera (the same field of view; the sphere N/64 times
as wide; the controller max-pools every mask to its own size), for segmenters trained at that size.

Each row also times its segmenter on the camera's frames (``Segmenter.predict``, batch 1, one CPU thread, median of
200) against the shipped segmenter on 64 px frames, the scene's camera, their calls alternating: the ratio is the
row's cost against today's, fit to compare on a shared machine.

The photos must be ones no checkpoint trained on, and not the held-out ones (those only report, ``bench_eval.py``).
``--photos train`` takes the embedded training photos instead: the same figures on tables the segmenters trained on,
the reference that says how much of the gap is the photos being new.
Writes ``runs/benchmarks/unseen_tables.json`` (``--save``: ``benchmarks/results/``).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np
import torch
from results_io import add_json_argument, require_checkpoints, write_results
from tqdm import tqdm
from validation import UNSEEN_TABLE, validate

from grasp_s2r.agent import default_controller_path
from grasp_s2r.control.policy import Policy
from grasp_s2r.files import file_sha256
from grasp_s2r.runtime.conditions import load_photos
from grasp_s2r.runtime.masks import make_mask_source
from grasp_s2r.runtime.pool import RolloutPool
from grasp_s2r.sim.config import EnvConfig, control_env_config
from grasp_s2r.vision.evaluation.metrics import pixel_metrics
from grasp_s2r.vision.images.simviews import SimViewSampler, ViewConfig
from grasp_s2r.vision.networks.segmenter import Segmenter, default_checkpoint_path
from grasp_s2r.vision.testsets.suites import paired_latency_ms

VIEWS = {"far": ViewConfig(empty_prob=0.3, far_view_prob=1.0), "all": ViewConfig(empty_prob=0.2)}
"""The two sets of per-frame views."""
VIEW_SEED_BASE = {"far": 6_000_000, "all": 5_000_000}
"""Episode seeds of the views (past every training stream's)."""
METRICS = ("precision", "recall", "found_rate", "false_detection_rate")


def photo_table_views(photos: list[np.ndarray], view: ViewConfig, base: int, n: int,
                      env_config: EnvConfig | None = None) -> tuple[np.ndarray, np.ndarray]:
    """``n`` photo-table views (rgb uint8 (n, H, W, 3), sphere masks bool (n, H, W)), each photo a table; the
    controller's scene (``env_config``: another camera)."""
    sampler = SimViewSampler(env_config or control_env_config(), view, table_photos=photos, texture_seed=123,
                             n_photo_textures=max(64, len(photos)))
    rgb, masks = [], []
    try:
        for i in tqdm(range(n), desc="views", leave=False):
            frame = sampler.render(base + i, np.random.default_rng([i, 77, base]),
                                   photo_table=np.random.default_rng([i, 78]))
            rgb.append(frame.rgb)
            masks.append(frame.sphere_mask)
    finally:
        sampler.close()
    return np.stack(rgb), np.stack(masks).astype(bool)


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("checkpoints", nargs="*", type=Path, help="segmenter checkpoints to compare with the shipped one")
    p.add_argument("--photos", type=Path, required=True,
                   help="a folder of validation photos no checkpoint trained on ('train': the embedded training "
                   "photos, for reference)")
    p.add_argument("--controllers", default="",
                   help="comma-separated controller checkpoints, one a segmenter (default: the shipped controller)")
    p.add_argument("--views", type=int, default=400, help="sim views per set (default 400)")
    p.add_argument("--episodes", type=int, default=300, help="validation episodes (default 300; 0: per frame only)")
    p.add_argument("--workers", type=int, default=2, help="env processes (default 2)")
    p.add_argument("--camera-px", type=int, default=64,
                   help="the wrist camera's side in px, views and episodes (default 64, the scene's; the controller "
                        "max-pools any mask to its own size)")
    add_json_argument(p, "unseen_tables")
    args = p.parse_args()
    if args.camera_px < 16 or args.camera_px % 8:
        sys.exit(f"unseen_tables: --camera-px must be a multiple of 8, at least 16, got {args.camera_px}")
    if str(args.photos) != "train" and not args.photos.is_dir():
        sys.exit(f"unseen_tables: --photos {args.photos} is not a folder (nor 'train', the embedded training photos)")
    require_checkpoints("unseen_tables", args.checkpoints)
    shipped_ctrl = Path(default_controller_path())
    controllers = [Path(c) for c in args.controllers.split(",") if c.strip()] or [shipped_ctrl] * len(args.checkpoints)
    if len(controllers) != len(args.checkpoints) or any(not c.is_file() for c in controllers):
        sys.exit("unseen_tables: --controllers needs one existing checkpoint a segmenter")
    torch.set_num_threads(1)
    photos = load_photos(str(args.photos))
    env_cfg = control_env_config(camera_px=args.camera_px)
    views = {name: photo_table_views(photos, v, VIEW_SEED_BASE[name], args.views, env_cfg) for name, v in VIEWS.items()}
    shipped = Segmenter.load(default_checkpoint_path())
    frames_64px = np.random.default_rng(0).integers(0, 256, (8, 64, 64, 3), dtype=np.uint8)  # cost: not content
    rows = {}
    with RolloutPool(env_cfg, args.workers) as pool:
        for path, ctrl in [(Path(default_checkpoint_path()), shipped_ctrl), *zip(args.checkpoints, controllers)]:
            own = ctrl.resolve() != shipped_ctrl.resolve()  # the shipped one, however its path is written
            label = "shipped" if not rows else str(path) + (f" + {ctrl}" if own else "")
            seg = Segmenter.load(path)
            row = {"checkpoint": str(path), "sha256": file_sha256(path), "controller": str(ctrl),
                   "controller_sha256": file_sha256(ctrl)}
            for name, (rgb, masks) in views.items():
                m = pixel_metrics(seg.predict(rgb), masks)
                row[name] = {k: float(m[k]) for k in METRICS}
                print(f"{label:24s} {name:4s} " + "  ".join(f"{k} {row[name][k]:.3f}" for k in METRICS), flush=True)
            row["shipped_64px_ms"], row["predict_ms"] = paired_latency_ms(shipped, frames_64px, seg,
                                                                          views["far"][0][:8])
            print(f"{label:24s} {row['predict_ms']:.2f} ms a frame at {args.camera_px} px, "
                  f"{row['predict_ms'] / row['shipped_64px_ms']:.2f}x the shipped one at 64 px", flush=True)
            if args.episodes:
                policy = Policy.load(ctrl, "cpu")[0]
                row.update(validate(pool, policy, make_mask_source("predicted", str(path), "cpu"), [UNSEEN_TABLE],
                                    args.episodes, label=label, unseen_photos=str(args.photos)))
            rows[label] = row
    write_results(args.json, "unseen_tables", {"photos": str(args.photos), "n_photos": len(photos),
                                               "camera_px": args.camera_px,
                                               "views": args.views, "episodes": args.episodes, "rows": rows}, args)
    return 0


if __name__ == "__main__":
    sys.exit(main())
