"""Issue 25's table, re-run: nothing overwritten, every size bounded before the work, odd devices and a full disk
as one line, the minor messages mended. Each row runs the real command (``grasp_s2r.cli.main`` in-process, or the
``grasp-s2r`` executable where the C libraries' own stderr matters) in an empty working directory. Row 3 (the lock
race) is tests/test_lock_race.py, row 7 (a damaged episode) tests/test_episode_digests.py."""

from __future__ import annotations

import contextlib
import importlib
import os
import re
import shutil
import subprocess
import time
from pathlib import Path

import cv2
import numpy as np
import pytest

from grasp_s2r.cli import main
from grasp_s2r.cpu import available_cores
from grasp_s2r.vision.networks.segmenter import default_checkpoint_path

CTRL = Path(default_checkpoint_path()).parent / "controller.pt"


def refused(capfd, argv: list[str], expected: str, where: Path) -> str:
    """Run ``argv``: exit 2, one line on stderr holding ``expected``, nothing in ``where``."""
    before = sorted(where.rglob("*"))
    try:
        code = main([str(a) for a in argv])
    except SystemExit as e:  # the parser's own refusals
        code = e.code
    err = capfd.readouterr().err
    lines = err.strip().splitlines()
    assert code == 2, f"exit {code}: {err}"
    assert len(lines) == 1, f"not one line: {err!r}"
    assert expected in lines[0], lines[0]
    assert sorted(where.rglob("*")) == before, "something was written"
    return lines[0]


@pytest.fixture
def cwd(tmp_path, monkeypatch) -> Path:
    monkeypatch.chdir(tmp_path)
    return tmp_path


@contextlib.contextmanager
def tmpfs(path: Path, size: str, read_only: bool = False):
    """A small file system at ``path`` (needs root, as in CI's container); skips the test elsewhere."""
    path.mkdir()
    opts = f"size={size}" + (",ro" if read_only else "")
    if subprocess.run(["mount", "-t", "tmpfs", "-o", opts, "tmpfs", str(path)], capture_output=True, check=False).returncode:
        pytest.skip("cannot mount a tmpfs here (not root)")
    try:
        yield path
    finally:
        subprocess.run(["umount", str(path)], check=False)


# --- row 1: never overwrite what is not ours ---------------------------------------------------------------------
@pytest.mark.parametrize("victim", ["controller", "text"])
def test_row1_calibrate_vision_does_not_overwrite_another_file(cwd, capfd, victim):
    seg = cwd / "seg.pt"
    shutil.copy(default_checkpoint_path(), seg)
    target = cwd / "target.pt"
    if victim == "controller":
        shutil.copy(CTRL, target)
    else:
        target.write_text("my notes\n")
    before = target.read_bytes()
    refused(capfd, ["calibrate-vision", "--model", seg, "--out", target, "--n-images", "2"],
            f"--out {target} exists and is not a segmenter checkpoint, so it is not replaced", cwd)
    assert target.read_bytes() == before


# --- row 2 and 5 (full disk) ------------------------------------------------------------------------------------
def test_row2_a_full_disk_is_one_line_naming_the_path_and_the_free_space(cwd, capfd):
    with tmpfs(cwd / "small", "300k") as small:
        out = small / "demos"
        code = main(["collect", "--out", str(out), "--episodes", "4", "--max-steps", "20"])
        stderr = capfd.readouterr().err
        err = [line for line in stderr.splitlines() if "error:" in line]  # after the progress bar, one line
        assert code == 2 and len(err) == 1 and "Traceback" not in stderr, stderr
        assert f"cannot use {out}/episode-0000" in err[0] and "no space left on the device (" in err[0], err[0]
        assert "free)" in err[0]
        assert not list(out.glob(".tmp-*")), "a half-written episode was left"


# --- rows 4 and 9: workers and threads capped at the cores, the cap said ------------------------------------------
CAPPED = "--workers 100000 --threads 100000"


@pytest.mark.parametrize("line", [
    f"eval --policy {{ctrl}} --masks gt --episodes 1 --conditions nominal --video 0 --quiet {CAPPED}",
    ("dagger --out run --rounds 1 --episodes-per-round 1 --eval-episodes 1 --masks gt --no-bc --train-steps 1 "
     f"--max-steps 5 --quiet {CAPPED}"),
    ("train-vision --out tv --steps 1 --batch-size 2 --image-size 16 --width 4 --val-every 1 --no-progress "
     f"{CAPPED}"),
], ids=["eval", "dagger", "train-vision"])
def test_rows4_9_workers_and_threads_are_capped_and_said(cwd, capfd, line):
    code = main(line.format(ctrl=CTRL).split())
    err = capfd.readouterr().err
    assert code == 0, err
    cores = available_cores()
    assert f"--workers 100000 capped at {cores} (the CPU cores this process may use)" in err
    assert f"--threads 100000 capped at {cores}" in err


def test_train_vision_replicas_are_capped_at_the_cores_and_said(cwd, capfd):
    line = "train-vision --out tv --steps 1 --batch-size 2 --image-size 16 --width 4 --val-every 1 --no-progress " \
           "--replicas 100000"
    code = main(line.split())
    err = capfd.readouterr().err
    assert code == 0, err
    assert f"--replicas 100000 capped at {available_cores()}" in err


# --- rows 5, 6, 8: sizes without an upper bound, odd devices, an empty --out ----------------------------------
@pytest.mark.parametrize("line, expected", [
    ("collect --out d --resolution 100000", "--resolution must be in [8, 1024], got 100000"),
    ("collect --out d --episodes 1000000000000", "--episodes must be in [1, 100000], got 1000000000000"),
    ("collect --out d --seed 99999999999", "--seed must be in [0, 2147483647]"),
    ("train-vision --out d --image-size 100000", "--image-size must be in [16, 1024], got 100000"),
    ("train-vision --out d --batch-size 100000000", "--batch-size must be in [1, 4096], got 100000000"),
    ("train-vision --out d --batch-size 4096 --image-size 1024 --device cpu", "GB of memory, this machine has"),
    ("eval-vision --out d --n-images 1000000000", "--n-images must be in [1, 100000], got 1000000000"),
    ("dagger --out d --rounds 5000", "--rounds must be in [1, 1000], got 5000"),
    ("train-vision --out d --device meta", "'meta' is not a device this machine runs grasp_s2r on; use one of: cpu"),
    ("eval --device xla --masks gt", "'xla' is not a device this machine runs grasp_s2r on"),
    ("eval-vision --out d --device cpu:3", "'cpu:3' is not a device this machine runs grasp_s2r on"),
    ("collect --out ", "--out: an empty path; name a file or folder"),
    ("collect --out= --episodes 1", "--out: an empty path"),
    ("train-vision --out  --steps 1", "--out: an empty path"),
    ("export  --format robomimic --out x.hdf5", "an empty DATASET path"),
], ids=lambda v: v if len(v) < 40 else v[:40])
def test_rows5_6_8_refused_before_anything_is_made(cwd, capfd, line, expected):
    refused(capfd, line.split(" "), expected, cwd)  # "--out " and a double space: an empty argument
    assert list(cwd.iterdir()) == []


# --- row 10: messages ---------------------------------------------------------------------------------------------
def test_row10_a_file_as_backgrounds_is_called_a_file(cwd, capfd):
    (cwd / "photo.png").write_bytes(b"x")
    refused(capfd, ["train-vision", "--out", "tv", "--steps", "1", "--backgrounds", "photo.png"],
            "backgrounds folder photo.png is a file, not a folder of photos", cwd)


def test_row10_a_text_file_as_policy_says_why(cwd, capfd):
    (cwd / "text.pt").write_text("hello\n")
    line = refused(capfd, ["eval", "--policy", "text.pt", "--masks", "gt"],
                   "text.pt is not a readable controller checkpoint (not a torch file: neither a zip archive nor "
                   "a pickle)", cwd)
    assert "(101)" not in line


@pytest.mark.parametrize("line", [
    "calibrate-vision --model {seg} --out {ro}/c.pt --n-images 2",
    "export {ds} --format robomimic --out {ro}/x.hdf5",
    "eval-vision --out {ro}/ev --n-images 3000",
], ids=["calibrate-vision", "export", "eval-vision"])
def test_row10_11_an_unwritable_out_is_named_as_given_and_found_first(cwd, capfd, line):
    seg = cwd / "seg.pt"
    shutil.copy(default_checkpoint_path(), seg)
    ds = cwd / "ds"
    if "export" in line:
        pytest.importorskip("h5py")
        assert main(["collect", "--out", str(ds), "--episodes", "1", "--max-steps", "5"]) == 0
        capfd.readouterr()
    with tmpfs(cwd / "ro", "64k", read_only=True) as ro:
        t0 = time.perf_counter()
        code = main(line.format(seg=seg, ro=ro, ds=ds).split())
        seconds = time.perf_counter() - t0
        err = capfd.readouterr().err.strip().splitlines()
        assert code == 2 and len(err) == 1, err
        assert f"cannot use {ro}/" in err[0] and "Read-only file system" in err[0] and ".tmp-" not in err[0], err[0]
        assert seconds < 20, "the work ran before the --out was tried"  # 3000 images take minutes


def test_row10_a_corrupt_jpg_is_one_line(cwd, tmp_path):
    photos = cwd / "photos"
    photos.mkdir()
    for i in range(3):
        _, buf = cv2.imencode(".jpg", np.random.default_rng(i).integers(0, 255, (64, 64, 3), np.uint8))
        data = bytearray(buf.tobytes())
        if i == 1:
            for j in range(200, 300):
                data[j] = 0xFF if j % 2 else 0xD9
            data = data[:300]
        (photos / f"p{i}.jpg").write_bytes(bytes(data))
    assert "Corrupt JPEG" not in _photos_refused(cwd, "p1.jpg")


def _photos_refused(cwd: Path, name: str) -> str:
    """``grasp-s2r train-vision --backgrounds photos`` (the executable: libjpeg writes to the process's stderr) is
    refused in one line naming ``photos/name``, with nothing written; returns the whole stderr."""
    exe = shutil.which("grasp-s2r")
    assert exe
    r = subprocess.run([exe, "train-vision", "--out", "tv", "--steps", "1", "--backgrounds", "photos"],
                       capture_output=True, text=True, timeout=120, cwd=cwd, check=False)
    lines = r.stderr.strip().splitlines()
    assert r.returncode == 2 and len(lines) == 1, r.stderr
    assert f"cannot read background image photos/{name}" in lines[0], lines[0]
    assert not (cwd / "tv").exists()
    return r.stderr


# --- row 11: behaviour --------------------------------------------------------------------------------------------
def test_row11_no_progress_means_no_bar(cwd, capfd):
    code = main(["train-vision", "--out", "tv", "--steps", "1", "--batch-size", "2", "--image-size", "16", "--width",
                 "4", "--threads", "1", "--no-progress", "--calibration-images", "64"])
    err = capfd.readouterr().err
    assert code == 0, err
    assert "it/s" not in err and "img/s" not in err and "composites:" not in err, err


def test_row11_dataset_folders_are_readable_by_others(cwd, capfd):
    assert main(["collect", "--out", "d", "--episodes", "1", "--max-steps", "5"]) == 0
    umask = os.umask(0)
    os.umask(umask)
    for p in [cwd / "d", *(cwd / "d").iterdir()]:
        want = (0o777 if p.is_dir() else 0o666) & ~umask
        assert p.stat().st_mode & want == want, (p, oct(p.stat().st_mode))


PROGRESS_BAR = re.compile(r"^[\w -]+:\s+\d+%\|")
"""A line of a tqdm progress bar (on stderr beside the one message line)."""


# --- found by tests/test_cli_properties.py: a learning rate of 1e308 made NaN weights, and NaN actions stall -----
def test_a_huge_lr_is_refused_and_a_nan_controller_is_not_rolled_out(cwd, capfd):
    import torch

    refused(capfd, ["dagger", "--out", "run", "--lr", "1e308"], "--lr must be at most 10, got 1e+308", cwd)
    blob = torch.load(CTRL, weights_only=True)
    first = next(k for k, v in blob["state_dict"].items() if v.is_floating_point())
    blob["state_dict"][first] = torch.full_like(blob["state_dict"][first], float("nan"))
    torch.save(blob, cwd / "nan.pt")
    refused(capfd, ["eval", "--policy", cwd / "nan.pt", "--masks", "gt", "--episodes", "1", "--out", "ev"],
            "nan.pt holds non-finite weights (a diverged training)", cwd)


def test_row2_a_library_write_on_a_full_disk_names_out_and_never_our_temp_folder(cwd, capfd):
    pytest.importorskip("pyarrow")
    assert main(["collect", "--out", "ds", "--episodes", "3", "--max-steps", "30"]) == 0
    with tmpfs(cwd / "small", "200k") as small:
        capfd.readouterr()
        code = main(["export", "ds", "--format", "lerobot", "--out", str(small / "lr")])
        err = [line for line in capfd.readouterr().err.strip().splitlines()
               if not PROGRESS_BAR.match(line)]  # the export's progress bar, then one line
        assert code == 2 and len(err) == 1, err
        assert f"cannot use {small}/lr" in err[0] and "no space left on the device (" in err[0], err[0]
        assert ".tmp-" not in err[0]


# --- found by re-running the table (issue 25's closing check) ------------------------------------------------------
def test_a_disk_full_from_the_start_leaves_no_lock_temp_file_and_no_folder(cwd, capfd):
    with tmpfs(cwd / "tiny", "4k") as tiny:
        filler = tiny / "filler"
        with contextlib.suppress(OSError), filler.open("wb") as f:
            f.write(b"\0" * 65536)  # fill it: the lock's own temp file cannot be written
        refused(capfd, ["collect", "--out", tiny / "ds", "--episodes", "2"], "no space left on the device", tiny)
        assert sorted(p.name for p in tiny.iterdir()) == ["filler"]


@pytest.mark.parametrize("damage", ["truncated", "garbled"])
def test_a_partly_decodable_jpg_is_refused_not_trained_on(cwd, damage):
    """libjpeg decodes a truncated or garbled JPEG into an image with a grey or scrambled part, and ``cv2.imread``
    returns it: the decoder's warning makes it a damaged file, refused in one line like one that does not decode."""
    from skimage import data

    photos = cwd / "photos"
    photos.mkdir()
    ok, buf = cv2.imencode(".jpg", data.astronaut()[..., ::-1])
    assert ok
    good = buf.tobytes()
    for i in range(4):
        (photos / f"p{i}.jpg").write_bytes(good)
    from grasp_s2r.vision.images.backgrounds import split_names

    victim = split_names(photos)["train"][0]  # a training photo: the ones train-vision reads
    bad = bytearray(good)
    if damage == "truncated":
        bad = bad[: len(bad) // 2]
    else:
        for j in range(len(bad) // 2, len(bad) // 2 + 400):
            bad[j] = (bad[j] * 7 + 13) % 256
    (photos / victim).write_bytes(bytes(bad))
    assert cv2.imread(str(photos / victim)) is not None  # OpenCV alone returns the damaged image
    assert "JPEG" not in _photos_refused(cwd, victim)


def test_calibrate_vision_tries_an_unwritable_out_before_the_work(cwd, capfd):
    with tmpfs(cwd / "ro", "64k", read_only=True) as ro:
        t0 = time.perf_counter()
        code = main(["calibrate-vision", "--model", str(default_checkpoint_path()), "--out", str(ro / "seg.pt"),
                     "--n-images", "3000"])
        seconds = time.perf_counter() - t0
        err = capfd.readouterr().err.strip().splitlines()
        assert code == 2 and len(err) == 1, err
        assert f"cannot use {ro}/seg.pt: Read-only file system" in err[0], err[0]
        assert seconds < 20, "the calibration ran before the --out was tried"  # 3000 images take minutes


@pytest.mark.parametrize("fmt", ["robomimic", "lerobot"])
def test_exports_are_readable_by_others(cwd, capfd, fmt):
    pytest.importorskip("h5py" if fmt == "robomimic" else "pyarrow")
    assert main(["collect", "--out", "d", "--episodes", "1", "--max-steps", "5"]) == 0
    out = cwd / ("x.hdf5" if fmt == "robomimic" else "lr")
    assert main(["export", "d", "--format", fmt, "--out", str(out)]) == 0
    umask = os.umask(0)
    os.umask(umask)
    for p in [out, *(out.rglob("*") if out.is_dir() else [])]:
        want = (0o777 if p.is_dir() else 0o666) & ~umask
        assert p.stat().st_mode & want == want, (p, oct(p.stat().st_mode))


def test_an_interrupt_says_what_is_kept(monkeypatch, capfd):
    """Commands that keep nothing of an interrupted run do not say "finished work is kept"."""
    from grasp_s2r import cli

    for command in ("eval-vision", "calibrate-vision", "export"):
        module = importlib.import_module(cli.COMMANDS[command][0])
        assert getattr(module, "RESUME_HINT", cli.RESUME_HINT) != cli.RESUME_HINT, command
