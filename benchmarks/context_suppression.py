"""Does the texture around a sphere make the segmenter miss it? Per suite, of the spheres it misses, the share it
finds with only a few pixels of the image left around the sphere.

    python benchmarks/context_suppression.py [--vision CKPT] [--suites painted,composites] [--split val]
        [--images 1000] [--save]

For each suite's images with a sphere of 3 pixels or more (``vision.testsets.suites.suite_images``; the ``val``
split by default: the training photos, other seeds, where recipes are chosen): the share whose sphere the segmenter
finds (its probability above its threshold on a sphere pixel), and, of the missed ones, the share it finds when every
pixel farther than 4, 8 or 16 px from the sphere's centroid takes the colour just around the sphere
(``table_photo_failures.within_context``; the episodes' counterpart is ``table_photo_failures.py``). A share near 1
at 4 px and low at 8-16 px says the texture 4-16 px around the sphere decides (the sphere's own look does not: a
head reading it and 4-5 px around it is unsure of these spheres too, docs/experiments/vision.md). Writes
``runs/benchmarks/context_suppression.json`` (``--save``: ``benchmarks/results/``).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import torch
from results_io import add_json_argument, write_results
from table_photo_failures import CONTEXT_PX, found_within_context, sphere_found

from grasp_s2r.vision.networks.segmenter import Segmenter, default_checkpoint_path
from grasp_s2r.vision.testsets.suites import SuiteError, suite_images


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--vision", default="", help="segmenter checkpoint (default: the shipped one)")
    p.add_argument("--suites", default="painted,composites",
                   help="comma-separated suites (default: painted,composites)")
    p.add_argument("--split", default="val", choices=("val", "heldout"), help="the suites' split (default: val)")
    p.add_argument("--images", type=int, default=1000, help="images a suite, before those without a sphere are dropped")
    p.add_argument("--seed", type=int, default=0)
    add_json_argument(p, "context_suppression")
    args = p.parse_args()
    torch.set_num_threads(1)
    segmenter = Segmenter.load(Path(args.vision or default_checkpoint_path()), "cpu")
    figures = {"split": args.split, "context_px": list(CONTEXT_PX), "suites": {}}
    for suite in [s for s in args.suites.split(",") if s]:
        try:
            images, masks = suite_images(suite, segmenter.input_hw, n_images=args.images, seed=args.seed,
                                         split=args.split)
        except SuiteError as e:
            sys.exit(f"context_suppression: {e}")
        sphere = masks.reshape(len(masks), -1).sum(1) >= 3
        images, masks = images[sphere], masks[sphere]
        hit = sphere_found(segmenter, images, masks, segmenter.threshold)
        within = (found_within_context(segmenter, images[~hit], masks[~hit], segmenter.threshold) if (~hit).any()
                  else {})
        row = {"spheres": len(masks), "found": float(hit.mean()), "missed": int((~hit).sum()),
               "missed_found_within_context_px": {str(r): float(v.mean()) for r, v in within.items()}}
        figures["suites"][suite] = row
        shares = ", ".join(f"{r} px {v:.2f}" for r, v in row["missed_found_within_context_px"].items())
        print(f"{suite} ({args.split}): {row['spheres']} spheres, found {row['found']:.2f}; of the {row['missed']} "
              f"missed, found with only this much of the image around them: {shares}")
    write_results(args.json, "context_suppression", figures, args)
    return 0


if __name__ == "__main__":
    sys.exit(main())
