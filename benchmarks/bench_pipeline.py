"""Benchmark: the README's main command, timed: ``grasp-s2r pipeline`` end to end, against its targets.

    python benchmarks/bench_pipeline.py --out runs/bench-pipeline [--no-amx] [any ``grasp-s2r pipeline`` option]

Runs (or resumes) the pipeline with exactly the options of ``grasp-s2r pipeline``, then prints the
wall time of every stage and of the whole, the segmenter's figures on every test suite, and the end-to-end
success per condition, with the targets: >= 93 % on heldout-backgrounds and table-photo within 15 minutes on
the machine it runs on (the project's CI machines have 2 CPU cores and no GPU). For a from-scratch
figure use a fresh ``--out`` (a resumed run only times what was left). Writes the pipeline's summary (stage
seconds, segmenter figures, end-to-end success) to
(``--save``) ``benchmarks/results/bench_pipeline.json`` (``--json PATH``).
"""

from __future__ import annotations

import argparse
import json
import os
import sys

import isa_cap

isa_cap.cap_if_asked()  # before torch loads oneDNN; spawned DataLoader workers inherit it

import torch
from results_io import add_json_argument, write_results

from grasp_s2r import pipeline
from grasp_s2r.commands import pipeline as pipeline_command

TARGET_MINUTES = 15.0
TARGET_SUCCESS = {"heldout-backgrounds": 0.93, "table-photo": 0.93}
TARGET_VISION = 0.93
"""Issue 11: precision and recall of the pipeline's segmenter on composites, sim and painted."""


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    pipeline_command.add_arguments(parser)
    add_json_argument(parser, "bench_pipeline")
    isa_cap.add_argument(parser)
    args = parser.parse_args(argv)
    summary = pipeline.run_pipeline(pipeline_command.config_from_args(args))

    seconds = summary["seconds"]
    minutes = sum(seconds.values()) / 60.0
    print(f"\npipeline on {os.cpu_count()} CPU cores, "
          f"{'CUDA ' + torch.cuda.get_device_name() if torch.cuda.is_available() else 'no GPU'}:")
    for stage, s in seconds.items():
        print(f"  {stage:<14} {s / 60:6.1f} min")
    print(f"  {'total':<14} {minutes:6.1f} min   (target <= {TARGET_MINUTES:.0f} min: "
          f"{'met' if minutes <= TARGET_MINUTES else 'NOT met'})")
    for suite, v in summary["vision"].items():
        ok = "met" if min(v["precision"], v["recall"]) >= TARGET_VISION else "NOT met"
        print(f"segmenter, suite {suite:<17} precision {v['precision']:.3f}, recall {v['recall']:.3f}, "
              f"found {v['found_rate']:.3f}, false det {v['false_detection_rate']:.3f}"
              + (f"   (target >= {TARGET_VISION} / {TARGET_VISION}: {ok})" if suite != "composites-clean" else ""))
    for name, r in summary["eval"]["conditions"].items():
        line = (f"end to end, {name:<20} {100 * r['success_rate']:5.1f} % ({r['successes']}/{r['episodes']}, "
                f"95 % CI {100 * r['ci_low']:.1f}-{100 * r['ci_high']:.1f})")
        target = TARGET_SUCCESS.get(name)
        if target is not None:
            line += f"   (target >= {100 * target:.0f} %: {'met' if r['success_rate'] >= target else 'NOT met'})"
        print(line)
    figures = {**json.loads(json.dumps(summary, default=str)), "minutes": minutes, "targets": {
        "minutes": TARGET_MINUTES, "success": TARGET_SUCCESS, "vision_precision_recall": TARGET_VISION}}
    write_results(args.json, "bench_pipeline", figures, args)
    return 0


if __name__ == "__main__":
    sys.exit(main())
