"""Load ``grasp-s2r export`` output with the field's own libraries, each in its own virtual environment.

    python benchmarks/check_interop.py                  # both readers; venvs cached under ~/.cache/grasp_s2r/interop
    python benchmarks/check_interop.py --readers lerobot --cache /tmp/venvs --json /tmp/interop.json

1. Each reader's virtual environment (:data:`READERS`: the pinned pip installs a new user runs, nothing more) is
   built once under ``--cache`` (a folder per reader and pin set, kept between runs; a stamp marks a complete
   build) and reused while its stamp and an import check hold.
2. A small ``grasp-s2r collect`` dataset and a two-round DAgger run are made here, exported with the
   ``grasp-s2r export`` command (robomimic with and without next_obs, LeRobot), and their source arrays written to
   an .npz beside each export (read from the episode files, not through the exporter).
3. ``benchmarks/interop/<reader>_reader.py`` loads each export with the library in its environment and compares
   with the source arrays (see those scripts); robomimic also trains BC for one epoch on the collect export.

A reader whose environment does not install is reported ``NOT CHECKED`` and fails the run (exit 1), as does any
failed check; results: (``--save``) ``benchmarks/results/check_interop.json`` (``--json``). Takes about 1 min with warm
environments; a cold build downloads and installs torch for each reader (a few GB; minutes).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
from results_io import REPO, add_json_argument, write_results

from grasp_s2r.data.episodes import EpisodeDataset
from grasp_s2r.files import write_json

READERS: dict[str, list[list[str]]] = {
    "robomimic": [["torch==2.14.1", "torchvision==0.29.1"], ["robomimic==0.3.0", "six"]],
    "lerobot": [["torch==2.9.1", "torchvision==0.24.1"], ["lerobot==0.4.4"]],
}
"""The pip installs of each reader's environment, in order. robomimic 0.3.0 imports six without declaring it;
lerobot 0.4.4 needs torch < 2.11."""
IMPORTS = {"robomimic": "import robomimic, robomimic.utils.dataset, six, torchvision",
           "lerobot": "import lerobot.datasets.lerobot_dataset"}
INSTALL_TIMEOUT_S = 1800
READ_TIMEOUT_S = 600


def _run(cmd: list[str], timeout: float, **kw) -> subprocess.CompletedProcess:
    return subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, check=False, **kw)


def _last_line(res: subprocess.CompletedProcess) -> str:
    lines = (res.stderr.strip() or res.stdout.strip()).splitlines()
    return lines[-1] if lines else f"exit status {res.returncode}"


def reader_env(name: str, cache: Path) -> tuple[Path | None, dict]:
    """The reader's python (None when it does not install) and how it was had: cached or built, seconds, error."""
    pins = READERS[name]
    key = hashlib.sha256(json.dumps([sys.version_info[:2], pins]).encode()).hexdigest()[:10]
    venv, t0 = cache / f"{name}-{key}", time.monotonic()
    python, stamp = venv / "bin" / "python", venv / ".complete"
    info = {"pins": [" ".join(p) for p in pins], "venv": str(venv)}
    if stamp.is_file() and _run([str(python), "-c", IMPORTS[name]], 300).returncode == 0:
        return python, info | {"cached": True, "seconds": round(time.monotonic() - t0, 1)}
    print(f"interop: building {name}'s environment in {venv} (cold: downloads torch; minutes)", flush=True)
    shutil.rmtree(venv, ignore_errors=True)
    steps = [[sys.executable, "-m", "venv", str(venv)]] + [[str(python), "-m", "pip", "install", "-q", *p] for p in pins]
    steps.append([str(python), "-c", IMPORTS[name]])
    for cmd in steps:
        try:
            res = _run(cmd, INSTALL_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            return None, info | {"cached": False, "error": f"{' '.join(cmd[-3:])}: timed out"}
        if res.returncode != 0:
            return None, info | {"cached": False, "error": f"{' '.join(cmd[2:])}: {_last_line(res)}"}
    write_json(stamp, info)
    return python, info | {"cached": False, "seconds": round(time.monotonic() - t0, 1)}


def _grasp(*args: str, cwd: Path) -> None:
    res = _run([sys.executable, "-m", "grasp_s2r", *args], 900, cwd=cwd)
    if res.returncode != 0:
        raise SystemExit(f"interop: grasp-s2r {' '.join(args[:1])} failed: {_last_line(res)}")


def source_npz(episodes: list, path: Path, next_obs: bool) -> Path:
    """The source arrays of ``episodes`` (in export order), read from the episode files; learner actions as the
    exports hold them (NaN -> 0 beside ``learner_queried``) when any step was queried."""
    cat = {k: np.concatenate([ep[k] for ep in episodes]) for k in ("rgb", "proprio", "action", "state")}
    cat |= {"lengths": np.array([len(ep) for ep in episodes]), "next_obs": np.array(int(next_obs))}
    if all("learner_action" in ep.features() for ep in episodes):
        la = np.concatenate([ep["learner_action"] for ep in episodes])
        queried = np.isfinite(la).all(1)
        if queried.any():
            cat |= {"learner_action": np.where(queried[:, None], la, 0).astype(np.float32), "learner_queried": queried}
    np.savez(path, **cat)
    return path


def make_exports(work: Path) -> list[dict]:
    """Collect 6 episodes and a 2-round DAgger run, export them with the command; what each reader loads."""
    t0 = time.monotonic()
    _grasp("collect", "--episodes", "6", "--max-steps", "40", "--out", str(work / "demos"), cwd=work)
    _grasp("dagger", "--out", str(work / "dagger"), "--rounds", "2", "--episodes-per-round", "3", "--eval-episodes",
           "1", "--masks", "gt", "--train-steps", "5", "--max-steps", "40", "--no-bc", "--quiet", cwd=work)
    demos = list(EpisodeDataset(work / "demos"))
    rounds = sorted((work / "dagger").glob("round-[0-9][0-9][0-9]"))
    run = [ep for r in rounds for ep in EpisodeDataset(r)]
    plan = [("robomimic", "collect", work / "demos", "demos.hdf5", [], demos, True),
            ("robomimic", "collect --no-next-obs", work / "demos", "demos-nonext.hdf5", ["--no-next-obs"], demos, False),
            ("robomimic", "dagger run", work / "dagger", "dagger.hdf5", [], run, True),
            ("lerobot", "collect", work / "demos", "demos-lerobot", [], demos, False),
            ("lerobot", "dagger run", work / "dagger", "dagger-lerobot", [], run, False),
            ("lerobot", "collect --video", work / "demos", "demos-lerobot-video", ["--video"], demos, False)]
    out = []
    for reader, label, src, name, extra, episodes, next_obs in plan:
        _grasp("export", str(src), "--format", reader, "--out", str(work / name), *extra, cwd=work)
        out.append({"reader": reader, "export": label, "path": work / name,
                    "source": source_npz(episodes, work / f"{name}.npz", next_obs),
                    "train": reader == "robomimic" and label == "collect", "exact": "--video" not in extra})
    print(f"interop: {len(out)} exports in {time.monotonic() - t0:.0f} s", flush=True)
    return out


def read(python: Path, job: dict, work: Path) -> dict:
    script = REPO / "benchmarks" / "interop" / f"{job['reader']}_reader.py"
    cmd = [str(python), str(script), str(job["path"]), str(job["source"])]
    if job["train"]:
        cmd += ["--train", str(work / "robomimic-train")]
    t0 = time.monotonic()
    try:
        res = _run(cmd, READ_TIMEOUT_S, cwd=work, env=os.environ | {"HF_HUB_OFFLINE": "1", "PYTHONPATH": ""})
        lines = [ln for ln in res.stdout.splitlines() if ln.startswith(("ok ", "FAIL "))]
        passed, why = res.returncode == 0 and bool(lines), _last_line(res)
    except subprocess.TimeoutExpired:
        lines, passed, why = [], False, f"timed out after {READ_TIMEOUT_S} s"
    for ln in lines:
        print(f"  {ln}")
    if not passed and not (lines and lines[-1].startswith("FAIL")):
        print(f"  FAIL  {why}")
    return {"passed": passed, "checks": len(lines), "exact": job["exact"], "seconds": round(time.monotonic() - t0, 1),
            **({} if passed else {"error": lines[-1] if lines and lines[-1].startswith("FAIL") else why})}


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--readers", default=",".join(READERS), help="comma-separated, of: " + ", ".join(READERS))
    p.add_argument("--cache", type=Path, default=Path.home() / ".cache" / "grasp_s2r" / "interop",
                   help="where the readers' environments are kept between runs (default: %(default)s)")
    add_json_argument(p, "check_interop")
    args = p.parse_args(argv)
    readers = [r for r in args.readers.split(",") if r]
    if bad := [r for r in readers if r not in READERS]:
        p.error(f"--readers: unknown {', '.join(bad)} (known: {', '.join(READERS)})")
    t0 = time.monotonic()
    args.cache.mkdir(parents=True, exist_ok=True)
    envs = {r: reader_env(r, args.cache) for r in readers}
    figures: dict = {"readers": {}}
    with tempfile.TemporaryDirectory(prefix="grasp_s2r-interop-") as tmp:
        jobs = make_exports(Path(tmp))
        for r in readers:
            python, info = envs[r]
            figures["readers"][r] = {"environment": info, "exports": {}}
            if python is None:
                print(f"interop: {r}: NOT CHECKED: its environment did not install: {info['error']}")
                continue
            version = _run([str(python), "-c", f"import {r}; print({r}.__version__)"], 120).stdout.strip()
            figures["readers"][r]["version"] = version
            how = "cached" if info["cached"] else f"built in {info['seconds']:.0f} s"
            print(f"interop: {r} {version} ({how}: {info['venv']})", flush=True)
            for job in (j for j in jobs if j["reader"] == r):
                print(f" {r} <- {job['export']}", flush=True)
                figures["readers"][r]["exports"][job["export"]] = read(python, job, Path(tmp))
    figures["seconds"] = round(time.monotonic() - t0, 1)
    failed = [f"{r}: {'not checked' if not f['exports'] else e}" for r, f in figures["readers"].items()
              for e in (f["exports"] or [None]) if not f["exports"] or not f["exports"][e]["passed"]]
    figures["passed"] = not failed
    write_results(args.json, "check_interop", figures, {"readers": readers, "json": args.json}, save=args.save)
    print(f"interop: {'FAILED: ' + '; '.join(failed) if failed else 'every export loads in every reader'} "
          f"({figures['seconds']:.0f} s)")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
