"""Ablation of the segmenter's training ingredients, measured on the *validation* split of the test suites.

    python benchmarks/ablate_vision.py --out runs/ablate [--init CKPT] [--steps 2000] [--parallel 8] [--device cuda]

Each arm fine-tunes the same initial checkpoint (default: the shipped one) for ``--steps`` with one ingredient of
the training recipe (``grasp_s2r.vision.images.dataset.TRAINING_DATA``) removed, or with the old photos-only recipe,
all arms in parallel (``train-vision`` processes, one DataLoader worker and one torch thread each). Every arm is then
measured by ``eval-vision --suite all --split val`` (training photos, validation seeds: the split for choosing);
the held-out split is never looked at here. Prints one row per arm and writes ``OUT/ablation.json`` and
(``--save``) ``benchmarks/results/ablate_vision.json`` (``--json PATH``).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

from results_io import add_json_argument, write_results

from grasp_s2r.files import write_json

ARMS: dict[str, list[str] | None] = {
    "init (not fine-tuned)": None,
    "recipe": [],
    "photos only (old recipe)": ["--mix", "photo=1,texture=0,flat=0,sim_table=0,photo_table=0", "--reshade-prob", "0",
                                 "--affine-scale", "0.9,1.1", "--empty-view-prob", "0.1"],
    "- procedural textures": ["--mix", "texture=0"],
    "- flat colours": ["--mix", "flat=0"],
    "- sim table renders": ["--mix", "sim_table=0"],
    "- photo as sim table": ["--mix", "photo_table=0"],
    "- re-shading": ["--reshade-prob", "0"],
    "- zoom": ["--affine-scale", "0.9,1.1"],
    "- extra empty views": ["--empty-view-prob", "0.1"],
    "+ distractors": ["--distractor-prob", "0.3"],
    "photo-heavy mix": ["--mix", "photo=0.6"],
    "+ grey colours": ["--grey-prob", "0.3"],
    "+ mirror spheres": ["--mirror-prob", "0.15"],
    "+ camouflage": ["--camouflage-prob", "0.15"],
    "+ hard shadows": ["--shadow-sigma", "0.2,3"],
    "+ size-balanced loss": ["--size-balanced"],
    "+ wider look": ["--grey-prob", "0.3", "--mirror-prob", "0.15", "--camouflage-prob", "0.15", "--shadow-sigma",
                     "0.2,3"],
    "+ wider look + size-balanced": ["--grey-prob", "0.3", "--mirror-prob", "0.15", "--camouflage-prob", "0.15",
                                    "--shadow-sigma", "0.2,3", "--size-balanced"],
    "+ corpus photos": ["--backgrounds", "{corpus}"],
    "+ grey colours + corpus": ["--grey-prob", "0.3", "--backgrounds", "{corpus}"],
    "+ wider look + corpus": ["--grey-prob", "0.3", "--mirror-prob", "0.15", "--camouflage-prob", "0.15",
                              "--shadow-sigma", "0.2,3", "--backgrounds", "{corpus}"],
    "+ relocated spheres": ["--relocate-prob", "0.5"],
    "+ random convolution": ["--randconv-prob", "0.5"],
    "+ wider look + corpus + relocated": ["--grey-prob", "0.3", "--mirror-prob", "0.15", "--camouflage-prob", "0.15",
                                          "--shadow-sigma", "0.2,3", "--backgrounds", "{corpus}",
                                          "--relocate-prob", "0.5"],
}
"""Arm name -> ``train-vision`` options on top of the recipe; None: the initial checkpoint itself, evaluated as it
is (the baseline of the arms)."""
COLUMNS = ("precision", "recall", "found_rate", "false_detection_rate")
SELECT_SUITES = ("composites", "sim", "painted")
"""The suites of issue 11's targets; the selection rule is the worst precision or recall over them."""


def worst(row: dict[str, dict[str, float]]) -> float:
    """min over :data:`SELECT_SUITES` of min(precision, recall): the figure the checkpoint is chosen by."""
    return min(min(row[s]["precision"] or 0.0, row[s]["recall"] or 0.0) for s in SELECT_SUITES if s in row)


def _slug(name: str) -> str:
    return "".join(c if c.isalnum() else "_" for c in name).strip("_")


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--out", type=Path, required=True, help="folder for the arms' runs and ablation.json")
    p.add_argument("--init", type=Path, default=None, help="initial checkpoint (default: the shipped one)")
    p.add_argument("--steps", type=int, default=2000, help="fine-tuning steps per arm (default: 2000)")
    p.add_argument("--batch-size", type=int, default=32, help="composites per step (default: 32)")
    p.add_argument("--lr", type=float, default=1e-3, help="peak learning rate (default: 1e-3)")
    p.add_argument("--n-images", type=int, default=1000, help="validation images per suite (default: 1000)")
    p.add_argument("--parallel", type=int, default=len(ARMS), help="arms trained at once (default: all)")
    p.add_argument("--arms", default=",".join(ARMS), help="comma-separated arm names (default: all)")
    p.add_argument("--device", default=None, help="torch device of the arms (default: cuda when present)")
    p.add_argument("--amp", choices=("auto", "on", "off"), default=None,
                   help="train-vision --amp of every arm (default: its own, auto: a probe under the arms' shared load "
                        "can choose differently per arm; on or off compares them at one precision)")
    p.add_argument("--workers", type=int, default=1, help="DataLoader workers per arm (default: 1)")
    p.add_argument("--keep-models", type=Path, default=None, help="also copy each arm's model.pt here")
    p.add_argument("--corpus", type=Path, default=None,
                   help="a 'grasp-s2r backgrounds' corpus, for the arms that train on it")
    add_json_argument(p, "ablate_vision")
    args = p.parse_args()
    from grasp_s2r.vision.networks.segmenter import default_checkpoint_path

    init = args.init or default_checkpoint_path()
    arms = [a.strip() for a in args.arms.split(",") if a.strip()]
    if unknown := [a for a in arms if a not in ARMS]:
        sys.exit(f"ablate_vision: unknown arms {unknown}; arms: {list(ARMS)}")
    if args.corpus is None and (needs := [a for a in arms if "{corpus}" in (ARMS[a] or [])]):
        sys.exit(f"ablate_vision: arms {needs} need --corpus (a 'grasp-s2r backgrounds' folder)")
    env = {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONUNBUFFERED": "1"}
    device = ["--device", args.device] if args.device else []
    amp = ["--amp", args.amp] if args.amp else []
    args.out.mkdir(parents=True, exist_ok=True)
    t0 = time.perf_counter()
    pending, running, done = list(arms), {}, {}
    while pending or running:
        while pending and len(running) < args.parallel:
            arm = pending.pop(0)
            run = args.out / _slug(arm)
            if ARMS[arm] is None:  # the initial checkpoint: nothing to train
                run.mkdir(parents=True, exist_ok=True)
                done[arm] = 0
                continue
            cmd = [sys.executable, "-m", "grasp_s2r", "train-vision", "--out", str(run), "--init", str(init),
                   "--steps", str(args.steps), "--batch-size", str(args.batch_size), "--lr", str(args.lr),
                   "--workers", str(args.workers), "--threads", "1", "--no-progress", "--val-every", str(args.steps),
                   *device, *amp, *(str(args.corpus) if o == "{corpus}" else o for o in ARMS[arm])]
            log = open(args.out / f"{_slug(arm)}.log", "w")  # noqa: SIM115 - closed when the process ends
            running[arm] = (subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, env=env), log)
            print(f"[{time.perf_counter() - t0:6.0f} s] started {arm}", flush=True)
        for arm, (proc, log) in list(running.items()):
            if proc.poll() is not None:
                log.close()
                del running[arm]
                done[arm] = proc.returncode
                print(f"[{time.perf_counter() - t0:6.0f} s] finished {arm} (exit {proc.returncode})", flush=True)
        time.sleep(2)
    evals = {}
    for arm in arms:  # every arm's evaluation at once
        if done[arm] != 0:
            print(f"{arm}: training failed, see {args.out / (_slug(arm) + '.log')}")
            continue
        run = args.out / _slug(arm)
        evals[arm] = subprocess.Popen(
            [sys.executable, "-m", "grasp_s2r", "eval-vision", "--model", str(init if ARMS[arm] is None else run / "model.pt"),
             "--suite", "all",
             "--split", "val", "--n-images", str(args.n_images), "--out", str(run / "eval-val"), "--threads", "1",
             *device], env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    rows = {}
    for arm, proc in evals.items():
        if proc.wait() == 0:
            rows[arm] = json.loads((args.out / _slug(arm) / "eval-val" / "metrics.json").read_text())["suites"]
        if args.keep_models and ARMS[arm] is not None:
            args.keep_models.mkdir(parents=True, exist_ok=True)
            shutil.copy(args.out / _slug(arm) / "model.pt", args.keep_models / f"{_slug(arm)}.pt")
    if not rows:
        sys.exit("ablate_vision: no arm finished")
    suites = list(next(iter(rows.values())))
    print(f"\nablation: {args.steps} steps from {init}, validation split ({args.n_images} images per suite); "
          f"cells: precision / recall / found / false detection")
    print(f"{'arm':<28}" + "".join(f"{s:>30}" for s in suites) + f"{'worst P/R':>11}")
    for arm, r in rows.items():
        cells = ["/".join(f"{(r[s][c] or 0):.3f}" for c in COLUMNS) for s in suites]
        print(f"{arm:<28}" + "".join(f"{c:>30}" for c in cells) + f"{worst(r):11.3f}")
    best = max(rows, key=lambda a: worst(rows[a]))
    print(f"best arm by the selection rule (largest worst precision-or-recall over {', '.join(SELECT_SUITES)}): {best}")
    figures = {"best_arm": best, "selection_rule": f"max of min(precision, recall) over {list(SELECT_SUITES)}",
               "workers": args.workers, "amp": args.amp, "init": str(init), "steps": args.steps, "batch_size": args.batch_size,
               "lr": args.lr, "split": "val",
               "n_images": args.n_images, "arms": {a: ARMS[a] for a in rows}, "suites": rows}
    write_json(args.out / "ablation.json", figures, indent=2)
    print(f"wrote {args.out / 'ablation.json'} ({time.perf_counter() - t0:.0f} s)")
    write_results(args.json, "ablate_vision", figures, args)


if __name__ == "__main__":
    main()
