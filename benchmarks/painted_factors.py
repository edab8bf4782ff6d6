"""Which of the painted renderer's ingredients the segmenter's misses follow, on the val split (training photos).

    python benchmarks/painted_factors.py [CKPT ...] [--n-images 1500] [--photos VAL-PHOTOS] [--save]

The ``painted`` suite (``vision/testsets/painted.py``) draws each sphere with Blinn-Phong shading, a soft contact
shadow, an anti-aliased edge, then blurs, noises and compresses the whole image. Each arm draws the val images of
the same seeds (the same photos, crops and sphere sizes; the same places but in the border arm) with one ingredient
taken out (or the photos replaced by flat colours), and counts the spheres each checkpoint finds (at least one
sphere pixel predicted). An ingredient whose removal finds many more spheres is one the segmenter does not cope
with; one that changes nothing is not what it misses; the flat colours tell the sphere's look from its surround's
part. The suite itself is not changed: the figures say what the training renderers lack, for choosing what to widen
there, on the val split only.
Writes ``runs/benchmarks/painted_factors.json`` (``--save``: ``benchmarks/results/``).
"""

from __future__ import annotations

import argparse
import dataclasses
import sys
from pathlib import Path

import numpy as np
from results_io import add_json_argument, require_checkpoints, require_folder, write_results

from grasp_s2r.runtime.conditions import load_photos
from grasp_s2r.vision.images.backgrounds import load_backgrounds
from grasp_s2r.vision.networks.segmenter import Segmenter, default_checkpoint_path
from grasp_s2r.vision.testsets.painted import PaintedConfig, make_painted

VAL_SEED = 1 + 10_000
"""The painted suite's val split seed (``suites.suite_images``: ``seed + 10_000`` off the held-out split)."""
ARMS: dict[str, dict] = {
    "as the suite draws it": {},
    "no contact shadow": {"shadow_prob": 0.0},
    "no blur": {"defocus_prob": 0.0, "motion_blur_prob": 0.0},
    "no noise, no JPEG": {"noise_prob": 0.0, "jpeg_prob": 0.0},
    "no highlight": {"specular": (0.0, 0.0)},
    "lit from the camera": {"light_elevation_deg": (90.0, 90.0)},
    "aliased edge": {"supersample": 1},
    "coloured albedos only": {"dull_albedo_prob": 0.0},
    "no sphere at the border": {"border_cut_prob": 0.0},
    "dull albedos only": {"dull_albedo_prob": 1.0},
    "flat colours for the photos": {"photos": "flat"},
    "dull albedos only, on flat colours": {"dull_albedo_prob": 1.0, "photos": "flat"},
}
"""Arm -> the :class:`PaintedConfig` fields it changes (``photos``: ``"flat"`` paints onto :data:`N_FLAT` photos of one
random colour each instead of the training photos; ``--photos DIR`` adds two arms on every photo of ``DIR``)."""
N_FLAT = 40


def flat_photos(n: int = N_FLAT, seed: int = 0) -> list[np.ndarray]:
    """``n`` photos of one uniform colour each (uint8 (256, 256, 3), the colours uniform in RGB): a surround with
    nothing in it that looks like a sphere."""
    rng = np.random.default_rng(seed)
    return [np.full((256, 256, 3), rng.integers(0, 256, 3), np.uint8) for _ in range(n)]


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("checkpoints", nargs="*", type=Path, help="segmenters (default: the shipped one)")
    p.add_argument("--n-images", type=int, default=1500, help="val images an arm (default 1500)")
    p.add_argument("--photos", type=Path, help="also draw the suite, and its dull spheres, onto this folder of "
                   "validation photos no segmenter trained on (never the held-out or reserved ones)")
    add_json_argument(p, "painted_factors")
    args = p.parse_args()
    checkpoints = args.checkpoints or [Path(default_checkpoint_path())]
    require_checkpoints("painted_factors", checkpoints)
    require_folder("painted_factors", "--photos", args.photos)
    segmenters = {str(path): Segmenter.load(path) for path in checkpoints}
    photos = {"train": load_backgrounds("train"), "flat": flat_photos()}
    arms_asked = dict(ARMS)
    if args.photos:
        photos["folder"] = load_photos(str(args.photos))
        arms_asked |= {f"on {args.photos.name}": {"photos": "folder"},
                       f"dull albedos only, on {args.photos.name}": {"dull_albedo_prob": 1.0, "photos": "folder"}}
    arms = {}
    for arm, changes in arms_asked.items():
        fields = {k: v for k, v in changes.items() if k != "photos"}
        imgs, masks = make_painted(photos[changes.get("photos", "train")], args.n_images, seed=VAL_SEED,
                                   cfg=dataclasses.replace(PaintedConfig(), **fields))
        has = masks.reshape(len(masks), -1).any(1)
        row = {"changes": changes, "spheres": int(has.sum()), "found": {}, "false_detection": {}}
        for name, seg in segmenters.items():
            pred = np.concatenate([seg.predict(imgs[i:i + 100]) for i in range(0, len(imgs), 100)])
            hit = (pred & masks).reshape(len(masks), -1).any(1)
            row["found"][name] = float(hit[has].mean())
            empty = pred[~has].reshape((~has).sum(), -1).any(1)
            row["false_detection"][name] = float(empty.mean()) if len(empty) else None  # no sphere-free image
        arms[arm] = row
        print(f"{arm:24s} " + "  ".join(f"found {row['found'][n]:.3f}, false det. {row['false_detection'][n]:.3f}"
                                        for n in segmenters) + f"  ({row['spheres']} spheres)")
    write_results(args.json, "painted_factors", {"n_images": args.n_images, "split": "val", "arms": arms}, args)
    return 0


if __name__ == "__main__":
    sys.exit(main())
