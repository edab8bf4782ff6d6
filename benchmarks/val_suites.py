"""Which segmenter to ship, per image: the test suites' validation split on two sets of photos, the training photos
and a folder of validation photos no candidate trained on.

    python benchmarks/val_suites.py CANDIDATE.pt [CANDIDATE.pt ...] --photos CORPUS/mate-backgrounds
        [--suites composites,painted,sim] [--n-images 1000] [--save]

The val split of the training photos alone is a biased judge between recipes with different photo mixes: a network
that spent its whole budget on the 15 embedded training photos has learned them by heart, and one trained on a corpus
beside them saw them as 15 of hundreds. Suites built on photos neither trained on (``--photos``) say how the features
carry. Both are validation data (the seeds of the val split; never the held-out photos or the reserved KDE / Plasma
packages): choose on them, report on the held-out split (``bench_vision.py``). The shipped segmenter is always the
first row. Each cell: precision / recall / found (share of sphere images whose mask touches the sphere) / false
detection (share of sphere-free images with any predicted pixel). Writes ``runs/benchmarks/val_suites.json``
(``--save``: ``benchmarks/results/``).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import torch
from results_io import add_json_argument, require_checkpoints, write_results

from grasp_s2r.files import file_sha256
from grasp_s2r.vision.evaluation.evaluate import VisionEvalConfig, evaluate_suites
from grasp_s2r.vision.networks.segmenter import default_checkpoint_path
from grasp_s2r.vision.testsets.suites import SUITES

METRICS = ("precision", "recall", "found_rate", "false_detection_rate")
"""The figures kept a suite (``vision.evaluation.metrics.summarize``)."""


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("candidates", nargs="*", type=Path, help="segmenter checkpoints to compare with the shipped one")
    p.add_argument("--photos", type=Path, required=True,
                   help="a folder of validation photos no candidate trained on (never the held-out or reserved ones)")
    p.add_argument("--suites", default="composites,painted,sim", help="comma-separated suites (default: %(default)s)")
    p.add_argument("--n-images", type=int, default=1000, help="images a suite (default 1000)")
    add_json_argument(p, "val_suites")
    args = p.parse_args()
    suites = [s.strip() for s in args.suites.split(",") if s.strip()]
    if unknown := [s for s in suites if s not in SUITES]:
        sys.exit(f"val_suites: unknown suites {unknown}; of: {', '.join(SUITES)}")
    if not args.photos.is_dir():
        sys.exit(f"val_suites: --photos {args.photos} is not a folder")
    require_checkpoints("val_suites", args.candidates)
    if args.n_images < 1:
        sys.exit(f"val_suites: --n-images must be >= 1, got {args.n_images}")
    torch.set_num_threads(1)
    cfg = VisionEvalConfig(n_images=args.n_images, split="val")
    photo_sets = {"training photos": None, "validation photos": args.photos}
    rows = {}
    for path in [Path(default_checkpoint_path()), *args.candidates]:
        label = "shipped" if not rows else str(path)
        row = {"checkpoint": str(path), "sha256": file_sha256(path), "photos": {}}
        for photos, folder in photo_sets.items():
            # the sim suite shows no photo: the same images on either set, measured once
            names = suites if folder is None else [s for s in suites if s != "sim"]
            if not names:
                continue
            report, _ = evaluate_suites(path, names, cfg=cfg, backgrounds_dir=folder, device="cpu", latency_frames=0)
            row["photos"][photos] = {s: {m: report["suites"][s][m] for m in METRICS} for s in names}
            for s in names:
                cells = " / ".join(f"{row['photos'][photos][s][m]:.3f}" for m in METRICS)
                print(f"{label:40s} {photos:18s} {s:12s} P / R / found / false det. {cells}", flush=True)
        rows[label] = row
    write_results(args.json, "val_suites", {"suites": suites, "n_images": args.n_images, "split": "val",
                                            "photos": str(args.photos), "rows": rows}, args)
    return 0


if __name__ == "__main__":
    sys.exit(main())
