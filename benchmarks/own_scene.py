"""Benchmark: does adapting to your own scene pay? Each photo of a set is cut into a tuning part and a test part.

    python benchmarks/own_scene.py PHOTOS_DIR [PHOTOS_DIR ...] [--tune-share 0.6] [--episodes 100]
        [--adapt-args "--segmenter-steps 0 --rounds 8"] [--out runs/own_scene] [--split-only] [--save]

For every photo set (a folder of your photos of one scene; never the reserved KDE / Plasma wallpapers): the left
``--tune-share`` of each photo's width goes to ``OUT/<set>/tune/``, the rest to ``OUT/<set>/test/``, so the test
parts show the same scene as the tuning parts but never the same pixels. Then

1. the shipped system (segmenter + controller, untouched) is evaluated on the test parts;
2. ``grasp-s2r adapt --photos OUT/<set>/tune --check-photos OUT/<set>/test --out OUT/<set>/adapted`` runs, timed
   (the issue's budget: 15 minutes on 2 cores; its scene check draws where the two segmenters differ on the test
   parts, ``OUT/<set>/adapted/scene_check.png``);
3. the adapted system (its segmenter, the shipped one with ``--segmenter-steps 0``; its controller, the shipped one
   with ``--rounds 0``, the default; one of them must be trained, and ``--adapt-args`` are checked as ``adapt``
   checks them before the first evaluation) is evaluated on the same test parts, the same episodes (the episodes'
   seeds are the evaluation's: the two rows are paired).

Conditions: ``table-photo`` (the test parts as the sim table's texture) and ``heldout-backgrounds`` (composited
behind the sphere), ``--episodes`` each, with 95 % Wilson intervals and the paired difference's. Writes
``runs/benchmarks/own_scene.json`` (``--save``: ``benchmarks/results/own_scene.json``); a set already adapted in
``OUT`` is re-evaluated, not re-trained (delete ``OUT/<set>/adapted`` to re-train).

``--split-only`` cuts the sets and stops: screen the untouched system on each test part with the *validation* seeds
(``unseen_tables.py --photos OUT/<set>/test``) to choose the sets to report on, so that the choice never sees the
episodes this benchmark reports (docs/own-scene.md, *Which scenes need it*).
"""

from __future__ import annotations

import argparse
import json
import shlex
import subprocess
import sys
import time
from pathlib import Path

import cv2
from results_io import add_json_argument, write_results

from grasp_s2r.agent import default_controller_path
from grasp_s2r.control.evaluate import PolicyEvalConfig, evaluate_policy
from grasp_s2r.stats import format_difference, format_rate
from grasp_s2r.vision.images.backgrounds import IMAGE_SUFFIXES
from grasp_s2r.vision.images.corpus_sources import RESERVED_PATTERN
from grasp_s2r.vision.images.folder import quiet_imread

CONDITIONS = ("table-photo", "heldout-backgrounds")
TARGET_SUCCESS = 0.95
"""Issue 23: table-photo on the test parts after adaptation."""
TARGET_GAIN = 0.05
"""Issue 23: and at least this much above the untouched shipped system on the same parts."""
TARGET_MINUTES = 15.0


def gain_met(adapted: dict, shipped: dict, gain: float = TARGET_GAIN) -> bool:
    """Whether the adapted system's success rate is at least ``gain`` above the shipped one's, compared in counts of
    episodes (in floats 0.98 - 0.93 is 0.0499...); a gain short of it by any fraction of an episode is not met."""
    a, s = adapted, shipped
    gained = a["successes"] * s["episodes"] - s["successes"] * a["episodes"]  # in episodes, times both counts
    return gained >= gain * a["episodes"] * s["episodes"] - 1e-6


def split_photos(photos: Path, out: Path, tune_share: float) -> tuple[Path, Path, int]:
    """Cut every photo of ``photos`` at ``tune_share`` of its width: the left part into ``out/tune``, the right into
    ``out/test`` (PNG, lossless). Returns the two folders and the photo count."""
    tune, test = out / "tune", out / "test"
    tune.mkdir(parents=True, exist_ok=True)
    test.mkdir(parents=True, exist_ok=True)
    files = sorted(p for p in photos.iterdir() if p.is_file() and p.suffix.lower() in IMAGE_SUFFIXES)
    n = 0
    for f in files:
        bgr = quiet_imread(f, cv2.IMREAD_COLOR)
        if bgr is None:
            print(f"own_scene: skipped {f} (unreadable)", file=sys.stderr)
            continue
        cut = round(bgr.shape[1] * tune_share)
        if cut < 8 or bgr.shape[1] - cut < 8:
            print(f"own_scene: skipped {f} ({bgr.shape[1]} px wide: too narrow to cut)", file=sys.stderr)
            continue
        cv2.imwrite(str(tune / f"{f.stem}.png"), bgr[:, :cut])
        cv2.imwrite(str(test / f"{f.stem}.png"), bgr[:, cut:])
        n += 1
    if n < 2:
        sys.exit(f"own_scene: {photos} has {n} usable photos; a set needs at least 2")
    return tune, test, n


def evaluate(policy: str, vision: str, test: Path, episodes: int, workers: int) -> dict[str, dict]:
    """End-to-end success per condition on the test parts (the evaluation's seeds: paired across systems)."""
    results = evaluate_policy(PolicyEvalConfig(policy=policy, vision=vision, episodes=episodes, conditions=CONDITIONS,
                                               backgrounds=str(test), workers=workers), progress=False)
    return {name: {k: r[k] for k in ("successes", "episodes", "success_rate", "ci_low", "ci_high")}
            for name, r in results["conditions"].items()}


def frame_metrics(visions: dict[str, str], test: Path, n_views: int) -> dict[str, dict]:
    """Each segmenter on the same ``n_views`` sim views with a test part as the table's texture (the views of
    ``table-photo``; a fifth without the sphere): found rate of spheres under / over 6 px, false detections (the
    views and figures of ``adapt``'s scene check, :mod:`grasp_s2r.vision.evaluation.scene_check`)."""
    from grasp_s2r.runtime.conditions import load_photos
    from grasp_s2r.vision.evaluation.scene_check import frame_figures, photo_table_views, predict_views

    rgb, gt = photo_table_views(load_photos(str(test)), n_views)
    return {name: frame_figures(pred, gt) for name, pred in predict_views(visions, rgb).items()}


def adapt(tune: Path, test: Path, out: Path, extra: list[str]) -> tuple[dict, float]:
    """``grasp-s2r adapt`` on the tuning parts (timed; its scene check on the test parts), or its record when ``out``
    holds a finished one."""
    record = out / "adapt.json"
    if record.is_file():
        print(f"{record} exists: re-evaluated, not re-trained", flush=True)
        return json.loads(record.read_text()), float("nan")
    cmd = [sys.executable, "-m", "grasp_s2r", "adapt", "--photos", str(tune), "--out", str(out), "--no-progress",
           "--check-photos", str(test), *extra]
    print("$ " + shlex.join(cmd), flush=True)
    t = time.perf_counter()
    subprocess.run(cmd, check=True)
    return json.loads(record.read_text()), time.perf_counter() - t


def check_adapt_args(extra: list[str]) -> None:
    """``--adapt-args`` checked as ``grasp-s2r adapt`` checks them, before the minutes of the first evaluation."""
    from grasp_s2r.cli import build_parser
    from grasp_s2r.commands.adapt import config_from_args
    from grasp_s2r.options import UsageError

    parser = build_parser(only="adapt")
    try:
        args, unknown = parser.parse_known_args(["adapt", "--photos", "PHOTOS", *extra])
        if unknown:
            raise ValueError(f"unrecognized options {' '.join(unknown)}")
        config_from_args(args)
    except (ValueError, UsageError, SystemExit) as e:
        sys.exit(f"own_scene: --adapt-args {shlex.join(extra)!r}: {e}" if not isinstance(e, SystemExit) else
                 f"own_scene: --adapt-args {shlex.join(extra)!r} are not options of grasp-s2r adapt (above)")


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("sets", nargs="+", type=Path, help="folders of photos, one scene each")
    p.add_argument("--tune-share", type=float, default=0.6, help="share of each photo's width to tune on (left)")
    p.add_argument("--episodes", type=int, default=100, help="episodes per condition (default 100)")
    p.add_argument("--adapt-args", default="", help="extra options of grasp-s2r adapt, one string")
    p.add_argument("--workers", type=int, default=2, help="env processes (default 2)")
    p.add_argument("--frames", type=int, default=600,
                   help="photo-table views on which each system's segmenter is measured per frame (0: none)")
    p.add_argument("--out", type=Path, default=Path("runs/own_scene"), help="split photos and adapted runs")
    p.add_argument("--split-only", action="store_true",
                   help="cut the sets into OUT/<set>/tune and test and stop (to screen them first: docs/own-scene.md)")
    add_json_argument(p, "own_scene")
    args = p.parse_args()
    if not 0.1 <= args.tune_share <= 0.9:
        sys.exit("own_scene: --tune-share must be in [0.1, 0.9]")
    for s in args.sets:
        if not s.is_dir():
            sys.exit(f"own_scene: {s} is not a folder of photos")
        if RESERVED_PATTERN.search(str(s.resolve())):
            sys.exit(f"own_scene: {s} is a reserved package (KDE / Plasma wallpapers): kept for independent tests")
    if not args.split_only:
        check_adapt_args(shlex.split(args.adapt_args))
    rows = {}
    for photos in args.sets:
        name = photos.resolve().name
        tune, test, n = split_photos(photos, args.out / name, args.tune_share)
        if args.split_only:
            print(f"{name}: {n} photos cut into {tune} and {test}")
            continue
        print(f"\n=== {name}: {n} photos, tune {args.tune_share:.0%} / test {1 - args.tune_share:.0%} of each ===",
              flush=True)
        shipped = evaluate(str(default_controller_path()), "", test, args.episodes, args.workers)
        record, seconds = adapt(tune, test, args.out / name / "adapted", shlex.split(args.adapt_args))
        vision = "" if record["segmenter"] == "shipped" else record["segmenter"]
        policy = str(default_controller_path()) if record["controller"] == "shipped" else record["controller"]
        adapted = evaluate(policy, vision, test, args.episodes, args.workers)
        systems = {"shipped segmenter": "", **({"adapted segmenter": vision} if vision else {})}
        frames = frame_metrics(systems, test, args.frames) if args.frames else {}
        rows[name] = {"photos": str(photos), "n_photos": n, "adapt_seconds": seconds, "adapt": record,
                      "shipped": shipped, "adapted": adapted, "frames": frames}
        for c in CONDITIONS:
            s, a = shipped[c], adapted[c]
            print(f"{name:28s} {c:20s} shipped {format_rate(s['successes'], s['episodes'])}   "
                  f"adapted {format_rate(a['successes'], a['episodes'])}   "
                  f"{format_difference(a['successes'], a['episodes'], s['successes'], s['episodes'])}", flush=True)
        for system, m in frames.items():
            print(f"{name:28s} frames, {system}: found < 6 px {m['found_below_6px']:.3f}, >= 6 px "
                  f"{m['found_6px_and_over']:.3f}, false detection {m['false_detection_rate']:.3f} "
                  f"({m['views']} photo-table views)", flush=True)
    if args.split_only:
        return 0
    print("\ntargets (issue 23), table-photo on the test parts:")
    for name, r in rows.items():
        s, a = r["shipped"]["table-photo"], r["adapted"]["table-photo"]
        rate_s, rate_a = s["success_rate"], a["success_rate"]
        minutes = sum(r["adapt"]["seconds"].values()) / 60  # the adaptation's stages, as it recorded them
        print(f"  {name}: adapted {100 * rate_a:.1f} % (>= {100 * TARGET_SUCCESS:.0f}: "
              f"{'met' if rate_a >= TARGET_SUCCESS else 'not met'}), {100 * (rate_a - rate_s):+.1f} points "
              f"(>= +{100 * TARGET_GAIN:.0f}: {'met' if gain_met(a, s) else 'not met'}), "
              f"adaptation {minutes:.1f} min (<= {TARGET_MINUTES:.0f}: "
              f"{'met' if minutes <= TARGET_MINUTES else 'not met'})")
    write_results(args.json, "own_scene", {"conditions": list(CONDITIONS), "episodes": args.episodes,
                                           "tune_share": args.tune_share, "rows": rows}, args)
    return 0


if __name__ == "__main__":
    sys.exit(main())
