"""Which segmenter to ship, chosen end to end on validation episodes: the shipped controller over each candidate's
masks, on every condition that shows no held-out photo (``validation.TRAIN_PHOTO_CONDITIONS``).

    python benchmarks/segmenter_recipe.py CANDIDATE.pt [CANDIDATE.pt ...] [--episodes 200] [--conditions C,...]
        [--workers 2] [--camera-px N] [--save]

The shipped segmenter and controller are always the first row; each candidate runs with the shipped controller,
or with its own (``--controllers``: one trained over its masks, ``grasp-s2r dagger --vision CANDIDATE``), through the
camera that controller was trained on (its run's scene: a controller of ``dagger --resolution 96`` sees 96 px
images; ``--camera-px N``: the candidates through an N x N camera of the same field of view; through any camera but
the default 64 px one, the mask filter's pixel settings are scaled to it: ``control.parallax.scaled_parallax``). Each row is the success
on ``--episodes`` validation episodes a condition (seeds no training or test run uses, the training photos only)
with its 95 % interval and the mean over conditions; the held-out photos and test seeds only report
(``bench_eval.py``). The segmenter figures that chose the candidates come from ``ablate_vision.py`` (val split).
Writes ``runs/benchmarks/segmenter_recipe.json`` (``--save``: ``benchmarks/results/``).
"""

from __future__ import annotations

import argparse
import dataclasses
import sys
from pathlib import Path

import torch
from results_io import add_json_argument, require_checkpoints, require_folder, write_results
from validation import TRAIN_PHOTO_CONDITIONS, UNSEEN_CONDITIONS, validate

from grasp_s2r.control.parallax import SHIPPED as SHIPPED_PARALLAX
from grasp_s2r.control.parallax import scaled_parallax
from grasp_s2r.control.policy import Policy, trained_scene
from grasp_s2r.files import file_sha256
from grasp_s2r.runtime.masks import make_mask_source
from grasp_s2r.runtime.pool import RolloutPool
from grasp_s2r.sim.config import CameraConfig
from grasp_s2r.vision.networks.segmenter import default_checkpoint_path

CONTROLLER = Path(default_checkpoint_path()).parent / "controller.pt"


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("candidates", nargs="+", type=Path, help="segmenter checkpoints to compare with the shipped one")
    p.add_argument("--episodes", type=int, default=200, help="validation episodes per condition (default 200)")
    p.add_argument("--controllers", default="",
                   help="comma-separated controller checkpoints, one a candidate (default: the shipped controller "
                        "for each): a controller trained over the candidate's masks (dagger --vision CANDIDATE)")
    p.add_argument("--workers", type=int, default=2, help="env processes (default 2)")
    p.add_argument("--conditions", default=",".join(TRAIN_PHOTO_CONDITIONS),
                   help=f"comma-separated, of: {', '.join(TRAIN_PHOTO_CONDITIONS)} (default: all)")
    p.add_argument("--unseen-photos", type=Path, default=None,
                   help=f"a folder of validation photos no candidate trained on: adds the conditions "
                        f"{' and '.join(UNSEEN_CONDITIONS)} "
                        "(them as the table; them behind the sphere) to the choices of --conditions")
    p.add_argument("--camera-px", type=int, default=None,
                   help="the candidates' camera side in px (default: their controller's): a segmenter trained at "
                        "that --image-size; the shipped row keeps its own")
    add_json_argument(p, "segmenter_recipe")
    args = p.parse_args()
    conditions = [c.strip() for c in args.conditions.split(",") if c.strip()]
    known = [*TRAIN_PHOTO_CONDITIONS, *(UNSEEN_CONDITIONS if args.unseen_photos else ())]
    if unknown := [c for c in conditions if c not in known]:
        sys.exit(f"segmenter_recipe: unknown conditions {unknown}; of: {', '.join(known)}"
                 + ("" if args.unseen_photos else f" ({', '.join(UNSEEN_CONDITIONS)} with --unseen-photos)"))
    require_folder("segmenter_recipe", "--unseen-photos", args.unseen_photos)
    require_checkpoints("segmenter_recipe", args.candidates)
    controllers = [Path(c) for c in args.controllers.split(",") if c.strip()] or [CONTROLLER] * len(args.candidates)
    if len(controllers) != len(args.candidates) or (gone := [str(c) for c in controllers if not c.is_file()]):
        sys.exit("segmenter_recipe: --controllers needs one existing checkpoint a candidate"
                 + (f"; missing: {', '.join(gone)}" if len(controllers) == len(args.candidates) else ""))
    if args.camera_px is not None and (args.camera_px < 16 or args.camera_px % 8):
        sys.exit(f"segmenter_recipe: --camera-px must be a multiple of 8, at least 16, got {args.camera_px}")
    torch.set_num_threads(1)
    rows = {}
    for path, controller in [(Path(default_checkpoint_path()), CONTROLLER), *zip(args.candidates, controllers)]:
        own = controller.resolve() != CONTROLLER.resolve()  # the shipped one, however its path is written
        label = "shipped" if len(rows) == 0 else str(path) + (f" + {controller}" if own else "")
        masks = make_mask_source("predicted", str(path), "cpu")
        policy, blob = Policy.load(controller, "cpu")
        env = trained_scene(blob)
        if rows and args.camera_px:
            env = env.replace(camera=dataclasses.replace(env.camera, width_px=args.camera_px,
                                                         height_px=args.camera_px))
        parallax = scaled_parallax(SHIPPED_PARALLAX, env.camera.height_px / CameraConfig().height_px)
        with RolloutPool(env, args.workers) as pool:
            val = validate(pool, policy, masks, conditions, args.episodes, label=label,
                           unseen_photos=str(args.unseen_photos) if args.unseen_photos else None, parallax=parallax)
        mean = sum(v["successes"] / v["episodes"] for v in val.values()) / len(val)
        rows[label] = {"checkpoint": str(path), "sha256": file_sha256(path), "controller": str(controller),
                       "controller_sha256": file_sha256(controller), "camera_px": env.camera.height_px,
                       "validation": val, "mean": mean}
        print(f"{label}: mean over {len(val)} conditions {100 * mean:.1f} %", flush=True)
    best = max(rows, key=lambda k: rows[k]["mean"])
    print(f"best by the mean validation success: {best}")
    write_results(args.json, "segmenter_recipe", {"episodes": args.episodes, "conditions": conditions,
                                                  "unseen_photos": str(args.unseen_photos or ""),
                                                  "controller": str(CONTROLLER),
                                                  "controller_sha256": file_sha256(CONTROLLER), "rows": rows,
                                                  "best": best}, args)
    return 0


if __name__ == "__main__":
    sys.exit(main())
