"""``grasp-s2r eval-vision``: pixel precision / recall / IoU / F1 and per-image detection of a checkpoint, on one test
suite, every suite (``--suite all``: one row each, one JSON) or a ``--data`` folder."""

from __future__ import annotations

import argparse
from pathlib import Path

import torch

from grasp_s2r.artifacts import ArtifactFolder
from grasp_s2r.drawing import save_overlay_grid
from grasp_s2r.files import remove_unwritten, write_json
from grasp_s2r.options import (
    Option,
    UsageError,
    add_options,
    config_from_options,
    non_negative_int,
    positive_int,
    threshold,
    torch_device,
)
from grasp_s2r.vision.evaluation.evaluate import EvalResult, VisionEvalConfig, evaluate_segmenter, evaluate_suites
from grasp_s2r.vision.evaluation.metrics import format_suite_table, format_table, format_width_table
from grasp_s2r.vision.images.backgrounds import BackgroundError
from grasp_s2r.vision.images.folder import DataFolderError
from grasp_s2r.vision.networks.segmenter import CheckpointError, default_checkpoint_path
from grasp_s2r.vision.testsets.suites import SUITE_ALL, SUITES, SuiteError, resolve_suites

RESUME_HINT = "an evaluation keeps no partial results: run the same command again"
"""What an interrupted ``grasp-s2r`` run of this command says (``cli.main``)."""

OPTIONS = (
    Option("--split", "heldout: held-out photos and seeds, to report on; val: training photos and validation "
           "seeds, to choose recipes and thresholds on", "split"),
    Option("--n-images", "images per suite", "n_images", type=positive_int),
    Option("--seed", "seed of the suite's images", "seed", type=non_negative_int),
    Option("--batch-size", "images per forward pass", "batch_size", type=positive_int),
)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--model", type=Path, default=None,
                        help="segmenter checkpoint (default: the shipped grasp_s2r/weights/segmenter_64px.pt)")
    parser.add_argument("--data", type=Path, default=None,
                        help="folder DIR/images/<name>.{png,jpg,jpeg} + DIR/masks/<name>.png (default: fresh "
                             "held-out-photo composites)")
    parser.add_argument("--suite", default=None, metavar="NAME",
                        help="test suite: " + "; ".join(f"{k}: {v}" for k, v in SUITES.items())
                        + f"; {SUITE_ALL}: every suite, one row each (default: composites)")
    add_options(parser, VisionEvalConfig, OPTIONS)
    parser.add_argument("--no-augment", action="store_true", help="same as --suite composites-clean")
    parser.add_argument("--backgrounds", type=Path, default=None,
                        help="your own photos folder, for held-out composites (default: embedded photos)")
    parser.add_argument("--out", type=Path, default=Path("runs/eval-vision"),
                        help="folder for metrics.json and overlays.png (overlays-SUITE.png with several suites) (default: runs/eval-vision)")
    parser.add_argument("--save-overlays", action="store_true", help="write overlays.png (TP green, FP red, FN blue)")
    parser.add_argument("--threshold", type=threshold, default=None,
                        help="probability threshold of a sphere pixel (default: the checkpoint's, else 0.5)")
    parser.add_argument("--device", type=torch_device, default=None,
                        help="torch device (default: cuda when present, else cpu)")
    parser.add_argument("--threads", type=positive_int, default=None, help="torch CPU threads (default: torch's)")


def _overlay_order(result: EvalResult) -> list[int]:
    """Images with errors first, then the others: what a person should look at."""
    errors = [i for i, r in enumerate(result.report["per_image"]) if r["fp"] or r["fn"]]
    error_set = set(errors)
    rest = [i for i in range(len(result.names)) if i not in error_set]
    return errors[:24] + rest[: 48 - min(24, len(errors))]


def _suites(args: argparse.Namespace) -> list[str]:
    if args.no_augment and args.suite not in (None, "composites-clean"):
        raise UsageError(f"--no-augment is --suite composites-clean; it cannot go with --suite {args.suite}")
    if args.data is not None and args.suite is not None:
        raise UsageError("--data DIR is evaluated as it is; --suite applies to the generated test suites only")
    try:
        return resolve_suites(args.suite or ("composites-clean" if args.no_augment else "composites"))
    except SuiteError as e:
        raise UsageError(f"--suite: {e}") from None


def run(args: argparse.Namespace) -> int:
    if args.threads:
        torch.set_num_threads(args.threads)
    suites = _suites(args)
    model = args.model or default_checkpoint_path()
    if model.is_dir():
        raise UsageError(f"--model {model} is a folder, not a checkpoint file (a training run's is RUN/model.pt)")
    cfg = config_from_options(VisionEvalConfig, args, OPTIONS, suite=suites[0])
    # the folder is claimed (created, locked) before the work: an unwritable --out fails now, not after it
    with ArtifactFolder(args.out, "vision-eval"):
        try:
            if len(suites) > 1:
                report, results = evaluate_suites(model, suites, cfg=cfg, backgrounds_dir=args.backgrounds,
                                                  device=args.device or None, threshold=args.threshold)
            else:
                result = evaluate_segmenter(model, cfg=cfg, data_dir=args.data, backgrounds_dir=args.backgrounds,
                                            device=args.device or None, threshold=args.threshold)
                report, results = result.report, {suites[0]: result}
        except (CheckpointError, DataFolderError, BackgroundError, SuiteError) as e:
            raise UsageError(str(e)) from None
        except RuntimeError as e:
            if args.device and "device" in str(e).lower():
                raise UsageError(f"bad --device {args.device!r}: {str(e).splitlines()[0]}") from None
            raise
        threshold = report["model"]["threshold"]
        if len(suites) > 1:
            print(format_suite_table(report["suites"], f"eval-vision: {model} (threshold {threshold:.3f}), "
                                     f"{cfg.n_images} images per suite, {cfg.split} split, seed {cfg.seed}; "
                                     "latency: batch 1, 1 CPU thread"))
        else:
            source = (f"folder {args.data}" if args.data else
                      f"{cfg.n_images} images of suite {suites[0]} ({SUITES[suites[0]]}), {cfg.split} split, "
                      f"seed {cfg.seed}")
            print(format_table(report["metrics"], f"eval-vision: {model} (threshold {threshold:.3f}) on {source}"))
        by_width = report["by_width"] if len(suites) > 1 else {suites[0]: report["by_width"]}
        for name, rows in by_width.items():
            if rows:
                print(format_width_table(rows, f"by sphere width ({name}): found = at least one sphere pixel "
                                               "predicted"))
        report_path = args.out / "metrics.json"
        write_json(report_path, report, indent=2)  # undefined metrics (NaN) as null
        print(f"eval-vision: wrote {report_path}")
        overlays = []
        if args.save_overlays:
            for name, result in results.items():
                idx = _overlay_order(result)
                overlays.append(args.out / ("overlays.png" if len(results) == 1 else f"overlays-{name}.png"))
                save_overlay_grid(result.images[idx], result.pred[idx], result.target[idx], overlays[-1])
                print(f"eval-vision: wrote {overlays[-1]} (TP green, FP red, FN blue; images with errors first)")
        # an earlier run's overlays would sit beside this run's metrics.json as if they were its own
        remove_unwritten(args.out, ["overlays.png", *(f"overlays-{suite}.png" for suite in SUITES)], overlays)
    return 0
