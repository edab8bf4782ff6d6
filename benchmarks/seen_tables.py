"""What the segmenter can learn of a table it is tested on: fine-tunes of the shipped weights on the very photos
that then serve as the tables of the validation episodes, against the shipped system on the same episodes.

    python benchmarks/seen_tables.py --photos VAL-PHOTOS --out DIR [--arms adapt,every-table,...] [--steps 3000]
        [--episodes 300] [--views 600] [--workers 2] [--save]

Not a recipe to ship (the photos are seen, so the episodes flatter every arm): a bound. Where a network fine-tuned on
the tables themselves still misses the sphere, more photos like them cannot teach it more, and the gap is the
network's or the pixels'; where it finds it, the gap is how far its training photos are from the test ones. Each arm
is ``grasp-s2r adapt``'s segmenter fine-tune (:func:`grasp_s2r.adapt.segmenter_train_config`: the shipped weights,
lr 1e-3, every photo trained on, the recipe read from the checkpoint) for ``--steps`` steps, with one change
(:data:`ARMS`). Every row runs the shipped controller and mask filter on the validation episodes of
``table-photo-unseen`` and ``backgrounds-unseen`` with ``--photos`` as the table or behind the sphere, and the
segmenter on ``--views`` photo-table views of them (``vision.evaluation.scene_check``, one table texture a photo):
spheres found below and from 6 px wide, false detections. Arms already trained in ``--out`` are not trained again
(an interrupted one resumes); ``--picture PNG`` draws views whose sphere every row misses. Writes
``runs/benchmarks/seen_tables.json`` (``--save``: ``benchmarks/results/``).
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path

import numpy as np
import torch
from results_io import add_json_argument, require_folder, write_results
from validation import UNSEEN_BACKDROP, UNSEEN_TABLE, validate

from grasp_s2r.adapt import AdaptConfig, segmenter_train_config
from grasp_s2r.control.parallax import SHIPPED as SHIPPED_PARALLAX
from grasp_s2r.control.policy import Policy, trained_scene
from grasp_s2r.files import file_sha256
from grasp_s2r.runtime.conditions import load_photos
from grasp_s2r.runtime.masks import make_mask_source
from grasp_s2r.runtime.pool import RolloutPool
from grasp_s2r.vision.evaluation.scene_check import format_scene_table, frame_figures, photo_table_views, predict_views
from grasp_s2r.vision.networks.segmenter import default_checkpoint_path

CONTROLLER = Path(default_checkpoint_path()).parent / "controller.pt"


def _every_table(cfg, n_photos: int):
    """Every photo a table texture of the photo-table views (the recipe cuts 32, from the first 32 photos)."""
    data = cfg.data
    return replace(cfg, data=replace(data, view=replace(data.view, photo_textures=max(n_photos, 1))))


def _tables_first(cfg, n_photos: int):
    """Every photo a table, and half the views photo tables (the recipe: a fifth)."""
    cfg = _every_table(cfg, n_photos)
    mix = cfg.data.mix
    others = mix.photo + mix.texture + mix.flat + mix.sim_table + mix.busy
    return replace(cfg, data=replace(cfg.data, mix=replace(mix, photo_table=others)))


def _camouflaged(cfg, n_photos: int):
    """Tables first, and half the photo-table views' spheres in the table's own colour (``table_colour_prob``)."""
    cfg = _tables_first(cfg, n_photos)
    return replace(cfg, data=replace(cfg.data, view=replace(cfg.data.view, table_colour_prob=0.5)))


def _wide(cfg, n_photos: int):
    """The camouflaged arm with a U-Net of width 32 (widened from the shipped weights: its output unchanged)."""
    return replace(_camouflaged(cfg, n_photos), width=32)


ARMS: dict[str, Callable] = {
    "adapt": lambda cfg, n: cfg,
    "every-table": _every_table,
    "tables-first": _tables_first,
    "camouflaged": _camouflaged,
    "camouflaged-w32": _wide,
}
"""Each arm's change to ``adapt``'s fine-tune (config, number of photos) -> config."""


def train_arm(name: str, photos: Path, n_photos: int, out: Path, steps: int, progress: bool) -> Path:
    """The arm's segmenter, fine-tuned on ``photos`` (``n_photos`` of them) in ``out/name`` (or resumed there; kept
    where finished)."""
    from grasp_s2r.vision.training.train import check_run, train

    base = segmenter_train_config(AdaptConfig(photos=str(photos), segmenter_steps=steps, segmenter_minutes=0.0))
    cfg = ARMS[name](base, n_photos)
    run = out / name
    if (run / "model.pt").is_file():
        check_run(cfg, run, backgrounds_dir=photos)
        return run / "model.pt"
    print(f"seen_tables: training {name} ({steps} steps) in {run}", flush=True)
    t0 = time.perf_counter()
    model = train(cfg, run, resume=(run / "checkpoint-latest.pt").is_file(), backgrounds_dir=photos,
                  progress=progress)
    print(f"seen_tables: {name} trained in {(time.perf_counter() - t0) / 60:.1f} min", flush=True)
    return model


def save_missed_by_all(rgb: np.ndarray, gt: np.ndarray, preds: dict[str, np.ndarray], path: Path, n: int = 12) -> int:
    """Draw up to ``n`` of the views whose sphere no segmenter's mask touches (the view, then each segmenter's
    overlay: green on the sphere, red off it, blue missed), widest spheres first; returns how many views there are."""
    from grasp_s2r.drawing import image_rows, overlay_tile, save_figure
    from grasp_s2r.vision.evaluation.metrics import mask_width_px

    has = gt.any(axis=(1, 2))
    missed = np.flatnonzero(has & ~np.any([(p & gt).any(axis=(1, 2)) for p in preds.values()], axis=0))
    widths = mask_width_px(gt[missed]) if len(missed) else np.zeros(0)
    idx = missed[np.argsort(-widths, kind="stable")][:n]
    if len(idx):
        rows = {"view": [rgb[i] for i in idx], **{name: [overlay_tile(rgb[i], p[i], gt[i]) for i in idx]
                                                  for name, p in preds.items()}}
        captions = {"view": [f"{w:.0f} px" for w in mask_width_px(gt[idx])]}
        title = (f"{len(missed)} of {int(has.sum())} views with the sphere missed by every segmenter\n"
                 "green: mask on the sphere, red: mask off it, blue: sphere missed")
        save_figure(image_rows(rows, suptitle=title, captions=captions, tile_in=1.6), path)
    return len(missed)


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--photos", type=Path, required=True, help="a folder of validation photos (never the held-out ones)")
    p.add_argument("--out", type=Path, required=True, help="folder of the arms' runs (re-running resumes)")
    p.add_argument("--arms", default="adapt,camouflaged", help=f"comma-separated, of: {', '.join(ARMS)} "
                                                                "(default: adapt,camouflaged)")
    p.add_argument("--steps", type=int, default=3000, help="fine-tune steps an arm (default 3000, adapt's)")
    p.add_argument("--episodes", type=int, default=300, help="validation episodes a condition (default 300)")
    p.add_argument("--views", type=int, default=600, help="photo-table views per frame (default 600; 0: none)")
    p.add_argument("--workers", type=int, default=2, help="env processes (default 2)")
    p.add_argument("--picture", type=Path, default=None,
                   help="write a PNG of up to 12 photo-table views whose sphere every segmenter misses (needs --views)")
    p.add_argument("--no-progress", action="store_true", help="no progress bars")
    add_json_argument(p, "seen_tables")
    args = p.parse_args()
    arms = [a.strip() for a in args.arms.split(",") if a.strip()]
    if unknown := [a for a in arms if a not in ARMS]:
        sys.exit(f"seen_tables: unknown arms {unknown}; of: {', '.join(ARMS)}")
    require_folder("seen_tables", "--photos", args.photos)
    if args.steps < 1 or args.episodes < 0 or args.views < 0:
        sys.exit("seen_tables: --steps must be >= 1, --episodes and --views >= 0")
    if args.picture and not args.views:
        sys.exit("seen_tables: --picture needs --views >= 1")
    photos = load_photos(str(args.photos))
    models = {"shipped": Path(default_checkpoint_path())}
    models.update({a: train_arm(a, args.photos, len(photos), args.out, args.steps, not args.no_progress)
                   for a in arms})
    torch.set_num_threads(1)
    policy, blob = Policy.load(CONTROLLER, "cpu")
    rows = {name: {"checkpoint": str(path), "sha256": file_sha256(path)} for name, path in models.items()}
    if args.episodes:
        with RolloutPool(trained_scene(blob), args.workers) as pool:
            for name, path in models.items():
                masks = make_mask_source("predicted", str(path), "cpu")
                rows[name]["validation"] = validate(pool, policy, masks, (UNSEEN_TABLE, UNSEEN_BACKDROP),
                                                    args.episodes, label=name, unseen_photos=str(args.photos),
                                                    parallax=SHIPPED_PARALLAX)
    if args.views:
        rgb, gt = photo_table_views(photos, args.views, progress=not args.no_progress)
        preds = predict_views({n: "" if n == "shipped" else str(m) for n, m in models.items()}, rgb)
        for name, pred in preds.items():
            rows[name]["frames"] = frame_figures(pred, gt)
        print(f"{args.views} photo-table views of {args.photos}:")
        print(format_scene_table({n: rows[n]["frames"] for n in rows}))
        if args.picture:
            print(f"seen_tables: {save_missed_by_all(rgb, gt, preds, args.picture)} views every segmenter misses "
                  f"(up to 12 drawn): {args.picture}")
    write_results(args.json, "seen_tables", {"photos": str(args.photos), "steps": args.steps,
                                             "episodes": args.episodes, "views": args.views,
                                             "controller_sha256": file_sha256(CONTROLLER), "rows": rows}, args)
    return 0


if __name__ == "__main__":
    sys.exit(main())
