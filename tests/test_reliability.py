"""Reliability suite (issue 15, item 5): every bad input of every command is refused in one line, exit code 2, no
traceback, and nothing is written: neither into a folder of another kind nor anywhere where the input was refused.

The table ``CASES`` (``reliability_cases.py``) holds (command line, a substring of the expected error line). Each
row runs ``grasp_s2r.cli.main`` in-process in a fresh, empty working directory (so default ``--out`` folders land there)
against shared artifacts made once per module with the real commands: a dataset, a DAgger run, a segmenter
training run, a segmenter evaluation, an end-to-end evaluation, a pipeline folder, plus files that are not what
they claim (text, random bytes, empty, truncated checkpoints, a pickle that would run code). After each row the
working directory must still be empty and the shared artifacts byte-for-byte as they were (same files, same
modification times). A few rows go through the real ``grasp-s2r`` executable. The probes of the issue's "Why"
table are re-run as tests at the end.
"""

from __future__ import annotations

import json
import os
import shlex
import shutil
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch
from reliability_cases import CASES, NO_CUDA, POS

from grasp_s2r.artifacts import ARTIFACT_MARKER, ArtifactFolder, folder_kind
from grasp_s2r.cli import COMMANDS, main
from grasp_s2r.cpu import available_cores
from grasp_s2r.data.episodes import EpisodeDataset, finished_indices
from grasp_s2r.vision.networks.segmenter import default_checkpoint_path

CASE_TIME_LIMIT_S = 60
"""A bad input must be refused before the work starts: a row still running after this fails."""
class _Payload:
    """Unpickling this calls ``os.system``: what a hostile checkpoint would do."""

    def __init__(self, marker: str):
        self.marker = marker

    def __reduce__(self):
        return os.system, (f"touch {self.marker}",)


def _png(path: Path, value: int = 128) -> None:
    import cv2
    import numpy as np

    path.parent.mkdir(parents=True, exist_ok=True)
    assert cv2.imwrite(str(path), np.full((32, 32, 3), value, np.uint8))


def _ok(*argv: str) -> None:
    code = main([str(a) for a in argv])
    assert code == 0, f"fixture command failed: {argv}"


@pytest.fixture(scope="module")
def assets(tmp_path_factory) -> dict[str, Path]:
    """Real artifacts of every kind and files that are not what they claim; nothing may ever change them."""
    return build_assets(tmp_path_factory.mktemp("assets"))


def build_assets(root: Path) -> dict[str, Path]:
    a: dict[str, Path] = {"root": root}
    # a pipeline folder (its marker, as `pipeline` writes it: a real run takes minutes) whose demos/ is a real
    # collect dataset (the first probe of the issue)
    a["pipe"] = root / "pipeline"
    with ArtifactFolder(a["pipe"], "pipeline"):
        pass
    a["ds"] = a["pipe"] / "demos"
    _ok("collect", "--episodes", "1", "--max-steps", "5", "--out", a["ds"])
    a["dg"] = root / "dagger"
    _ok("dagger", "--out", a["dg"], "--rounds", "1", "--episodes-per-round", "1", "--eval-episodes", "1",
        "--masks", "gt", "--no-bc", "--workers", "1", "--train-steps", "1", "--max-steps", "5", "--quiet")
    a["ctrl"] = a["dg"] / "policy.pt"
    a["tv"] = root / "vision"
    _ok("train-vision", "--out", a["tv"], "--steps", "1", "--batch-size", "2", "--val-every", "1", "--threads", "1",
        "--no-progress", "--image-size", "16", "--width", "4")
    a["seg16"] = a["tv"] / "model.pt"
    a["seg"] = root / "segmenter.pt"  # a copy of the shipped segmenter (calibrate-vision rewrites --model in place)
    shutil.copy(default_checkpoint_path(), a["seg"])
    a["ve"] = root / "vision-eval"
    _ok("eval-vision", "--model", a["seg16"], "--n-images", "2", "--threads", "1", "--out", a["ve"])
    a["er"] = root / "eval"
    _ok("eval", "--policy", a["ctrl"], "--masks", "gt", "--episodes", "1", "--conditions", "nominal", "--workers",
        "1", "--video", "0", "--quiet", "--out", a["er"])
    # files that are not what they claim
    a["txt"] = root / "notes.txt"
    a["txt"].write_text("not a checkpoint\n")
    a["corrupt"] = root / "corrupt.pt"
    a["corrupt"].write_bytes(os.urandom(4096))
    a["empty"] = root / "empty.pt"
    a["empty"].write_bytes(b"")
    a["trunc"] = root / "truncated.pt"
    a["trunc"].write_bytes(a["ctrl"].read_bytes()[:2000])
    a["pwned"] = root / "pwned"  # must never appear
    a["hostile"] = root / "hostile.pt"
    torch.save({"format": "grasp_s2r.controller", "format_version": 1, "payload": _Payload(str(a["pwned"]))},
               a["hostile"])
    a["foreign"] = root / "thesis"
    a["foreign"].mkdir()
    (a["foreign"] / "thesis.tex").write_text("mine")
    a["emptydir"] = root / "emptydir"
    a["emptydir"].mkdir()
    a["badmarker"] = root / "badmarker"
    a["badmarker"].mkdir()
    (a["badmarker"] / ARTIFACT_MARKER).write_text("{not json")
    a["baddata"] = root / "baddata"  # an eval-vision --data folder whose PNGs are corrupt
    for sub in ("images", "masks"):
        (a["baddata"] / sub).mkdir(parents=True)
        (a["baddata"] / sub / "a.png").write_bytes(b"\x89PNG\r\n\x1a\n garbage")
    a["photos1"] = root / "one-photo"  # backgrounds folders: too few photos, corrupt photos
    _png(a["photos1"] / "a.png")
    a["badphotos"] = root / "bad-photos"
    a["badphotos"].mkdir()
    for name in ("a.png", "b.jpg", "c.png"):
        (a["badphotos"] / name).write_bytes(b"not an image")
    a["photos"] = root / "two-photos"  # a usable folder (adapt's refusals of its other options)
    _png(a["photos"] / "a.png")
    _png(a["photos"] / "b.png")
    # checkpoints of the right format whose fields or weights are damaged, a run record that is not JSON
    damaged = {"ctrl_nokey": lambda b: b["state_dict"].pop(next(iter(b["state_dict"]))),
               "ctrl_extrafield": lambda b: b["policy_config"].update(foo=1),
               "ctrl_noproprio": lambda b: b.pop("proprio_inputs")}
    for name, damage in damaged.items():
        blob = torch.load(a["ctrl"], weights_only=True)
        damage(blob)
        a[name] = root / f"{name}.pt"
        torch.save(blob, a[name])
    blob = torch.load(a["seg"], weights_only=True)
    blob["state_dict"].pop(next(iter(blob["state_dict"])))
    a["seg_nokey"] = root / "seg_nokey.pt"
    torch.save(blob, a["seg_nokey"])
    blob = torch.load(a["seg"], weights_only=True)
    first = next(k for k, v in blob["state_dict"].items() if v.is_floating_point())
    blob["state_dict"][first] = torch.full_like(blob["state_dict"][first], float("nan"))
    a["seg_nan"] = root / "seg_nan.pt"  # a diverged training's weights
    torch.save(blob, a["seg_nan"])
    a["dg_badrecord"] = root / "dagger-bad-record"
    shutil.copytree(a["dg"], a["dg_badrecord"])
    (a["dg_badrecord"] / "run.json").write_text("{oops")
    return a


def _snapshot(root: Path) -> list[tuple[str, int, int]]:
    return sorted((p.relative_to(root).as_posix(), p.stat().st_size, p.stat().st_mtime_ns)
                  for p in root.rglob("*") if p.is_file())


def _case_id(case) -> str:
    line = case.values[0] if hasattr(case, "values") else case[0]
    return line.replace("{", "").replace("}", "") or "<nothing>"


def _argv(line: str, assets: dict[str, Path]) -> list[str]:
    return shlex.split(line.format(**{k: str(v) for k, v in assets.items()}))


def _prefixes(argv: list[str], expected: str) -> tuple[str, ...]:
    if not argv or argv[0] not in COMMANDS:
        return ("grasp-s2r: error: ",)
    if "unrecognized arguments" in expected:  # argparse reports these from the top-level parser
        return (f"grasp-s2r {argv[0]}: error: ", "grasp-s2r: error: ")
    return (f"grasp-s2r {argv[0]}: error: ",)


class _TooSlow(Exception):
    pass


def _alarm(signum, frame):
    raise _TooSlow(f"not refused within {CASE_TIME_LIMIT_S} s: the input was not checked before the work")


def _call(argv: list[str], capsys) -> tuple[int, str, str]:
    old = signal.signal(signal.SIGALRM, _alarm)
    signal.alarm(CASE_TIME_LIMIT_S)
    try:
        try:
            code = main(argv)
        except SystemExit as e:  # argparse exits through the parser
            code = e.code if isinstance(e.code, int) else 2
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, old)
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def assert_refused(code: int, out: str, err: str, argv: list[str], expected: str) -> None:
    assert "Traceback" not in out + err, err
    assert code == 2, f"exit {code}; stderr: {err}"
    lines = err.strip().splitlines()
    assert len(lines) == 1, f"not one line: {err!r}"
    assert lines[0].startswith(_prefixes(argv, expected)), lines[0]
    assert expected in lines[0], lines[0]


def test_the_table_is_big_and_covers_every_command():
    commands = {_case_id(c).split()[0] for c in CASES if _case_id(c) != "<nothing>"}
    assert commands >= set(COMMANDS)
    assert len(CASES) >= 60


@pytest.mark.parametrize("line, expected", CASES, ids=[_case_id(c) for c in CASES])
def test_bad_input_is_refused_in_one_line_and_writes_nothing(line, expected, assets, tmp_path, monkeypatch, capsys):
    work = tmp_path / "cwd"
    work.mkdir()
    monkeypatch.chdir(work)
    argv = _argv(line, assets)
    expected = expected.format(**{k: str(v) for k, v in assets.items()})
    before = _snapshot(assets["root"])
    code, out, err = _call(argv, capsys)
    assert_refused(code, out, err, argv, expected)
    assert sorted(p.name for p in work.iterdir()) == [], "something was created where the input was refused"
    assert _snapshot(assets["root"]) == before, "a shared artifact was changed"
    assert not assets["pwned"].exists(), "a hostile checkpoint ran code"


# --- the real entry point, as a user runs it ---------------------------------------------------------------------
ENTRY_POINT_CASES = [
    ("collect --out new --workers 0", f"{POS}, got 0"),
    ("eval --policy {txt} --masks gt --episodes 1 --out new", "is not a readable controller checkpoint"),
    ("dagger --out {ds}", "holds an episode dataset (grasp-s2r collect), not a DAgger run"),
    ("train-vision --out /proc/grasp-s2r-test/run --steps 1 --no-progress", "cannot use /proc/grasp-s2r-test"),
    ("eval-vision --threshold nan --out new", "threshold must be in (0, 1), got nan"),
    ("calibrate-vision --model {ctrl} --out new.pt", "is not a grasp_s2r.segmenter checkpoint"),
    ("pipeline --out {tv}", "holds a segmenter training run"),
]


@pytest.mark.parametrize("line, expected", ENTRY_POINT_CASES, ids=[c[0].split()[0] for c in ENTRY_POINT_CASES])
def test_real_entry_point_refuses_in_one_line(line, expected, assets, tmp_path):
    exe = shutil.which("grasp-s2r")
    command = [exe] if exe else [sys.executable, "-m", "grasp_s2r"]
    argv = _argv(line, assets)
    before = _snapshot(assets["root"])
    r = subprocess.run([*command, *argv], capture_output=True, text=True, timeout=120, cwd=tmp_path, check=False)
    assert_refused(r.returncode, r.stdout, r.stderr, argv, expected)
    assert list(tmp_path.iterdir()) == []
    assert _snapshot(assets["root"]) == before


# --- the probes of issue 15's "Why" table ------------------------------------------------------------------------
def test_probe_dagger_into_a_pipelines_demos_folder_is_refused_untouched(assets, capsys):
    demos = assets["pipe"] / "demos"
    assert folder_kind(demos) == "dataset" and folder_kind(assets["pipe"]) == "pipeline"
    before = _snapshot(assets["pipe"])
    code, out, err = _call(["dagger", "--out", str(demos)], capsys)
    assert_refused(code, out, err, ["dagger"], "holds an episode dataset (grasp-s2r collect), not a DAgger run")
    assert _snapshot(assets["pipe"]) == before
    assert not (demos / "run.json").exists() and not (demos / "checkpoints").exists()


def test_probe_eval_with_a_text_file_as_policy(assets, tmp_path, capsys):
    x = tmp_path / "x.pt"
    x.write_text("hello\n")
    code, out, err = _call(["eval", "--policy", str(x)], capsys)
    assert_refused(code, out, err, ["eval"], f"{x} is not a readable controller checkpoint")


def test_probe_hostile_checkpoints_run_nothing_anywhere(assets, tmp_path, capsys):
    """Controller (--policy), segmenter (--vision, --model, --init) and DAgger's own round checkpoints."""
    for argv in (["eval", "--policy", str(assets["hostile"]), "--masks", "gt", "--out", str(tmp_path / "e")],
                 ["eval-vision", "--model", str(assets["hostile"]), "--out", str(tmp_path / "v")],
                 ["train-vision", "--init", str(assets["hostile"]), "--out", str(tmp_path / "t")]):
        code, out, err = _call(argv, capsys)
        assert code == 2 and "Traceback" not in err and len(err.strip().splitlines()) == 1, err
    # a DAgger run whose round-0 checkpoint was replaced: resuming it for one more round reads that file
    run = tmp_path / "dagger"
    dagger = ["dagger", "--out", str(run), "--episodes-per-round", "1", "--eval-episodes", "1", "--masks", "gt",
              "--no-bc", "--workers", "1", "--train-steps", "1", "--max-steps", "5", "--quiet"]
    _ok(*dagger, "--rounds", "1")
    capsys.readouterr()
    shutil.copy(assets["hostile"], run / "checkpoints" / "round-000.pt")
    code, out, err = _call([*dagger, "--rounds", "2"], capsys)
    assert_refused(code, out, err, ["dagger"], "is not a readable controller checkpoint")
    assert not assets["pwned"].exists()


def test_probe_train_vision_out_under_proc(capsys, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    argv = ["train-vision", "--out", "/proc/x", "--steps", "1", "--threads", "1", "--no-progress"]
    code, out, err = _call(argv, capsys)
    assert_refused(code, out, err, argv, "cannot use /proc/x")


@NO_CUDA
def test_probe_eval_vision_cuda_without_cuda(capsys, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    code, out, err = _call(["eval-vision", "--device", "cuda"], capsys)
    assert_refused(code, out, err, ["eval-vision"], "'cuda' asked for, but this machine has no usable CUDA device")
    assert list(tmp_path.iterdir()) == []


def test_probe_collect_1000_workers_is_capped_and_says_so(tmp_path, capsys):
    code, out, err = _call(["collect", "--workers", "1000", "--episodes", "2", "--max-steps", "5", "--out",
                            str(tmp_path / "d")], capsys)
    assert code == 0, err
    used = min(2, os.cpu_count() or 1)
    speed = next(line for line in out.splitlines() if line.startswith("speed"))
    assert f"--workers 1000 capped at {min(1000, available_cores())} (the CPU cores" in err  # said before the run
    assert f"with {used} worker(s)" in speed
    assert "1000 worker(s)" not in out


@pytest.mark.parametrize("probe, expected", [
    ("eval-vision --n-images 2 --out new --data {baddata}", "(corrupt or not an image)"),
    ("collect --out new --episodes 0", f"{POS}, got 0"),
    ("collect --out new --workers 0", f"{POS}, got 0"),
    ("eval-vision --out new --threshold nan", "threshold must be in (0, 1), got nan"),
    ("eval --out new --masks gt --policy {seg}", "is not a controller checkpoint (format 'grasp_s2r.segmenter')"),
], ids=["corrupt-png", "episodes-0", "workers-0", "threshold-nan", "segmenter-as-policy"])
def test_probe_rows_that_were_already_one_line(probe, expected, assets, tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    argv = _argv(probe, assets)
    code, out, err = _call(argv, capsys)
    assert_refused(code, out, err, argv, expected)
    assert list(tmp_path.iterdir()) == []


def test_probe_collect_kill_9_then_rerun_resumes_intact(tmp_path):
    out = tmp_path / "demos"
    args = [sys.executable, "-m", "grasp_s2r", "collect", "--episodes", "30", "--max-steps", "20", "--workers", "2",
            "--out", str(out), "--seed", "11"]
    proc = subprocess.Popen(args, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline and (not out.exists() or len(finished_indices(out)) < 3):
        time.sleep(0.01)
    os.killpg(proc.pid, signal.SIGKILL)
    proc.wait()
    n_before = len(finished_indices(out))
    assert 3 <= n_before < 30, "the run must be killed mid-way for this test to mean anything"
    lock = json.loads((out / ".grasp_s2r.lock").read_text())  # the dead writer's lock: taken over on rerun
    assert lock["pid"] == proc.pid and lock["host"] == socket.gethostname()
    r = subprocess.run(args, capture_output=True, text=True, timeout=300, check=False)
    assert r.returncode == 0, r.stderr
    assert f"{30 - n_before} new" in r.stdout
    assert finished_indices(out) == list(range(30)) and not list(out.glob(".tmp-*"))
    assert all(len(e["action"]) == len(e) for e in EpisodeDataset(out))
    assert not (out / ".grasp_s2r.lock").exists()
