"""Every command's ``--out`` knows what it holds: another kind, foreign files or a live writer are refused in one
line and the folder is left as it was; a stale lock is taken over (real commands, real files, real processes)."""

from __future__ import annotations

import json
import socket
import subprocess
import sys

import pytest

from grasp_s2r.artifacts import ARTIFACT_LOCK, ARTIFACT_MARKER, ArtifactError, ArtifactFolder, folder_kind
from grasp_s2r.cli import main


def _run(capsys, *argv: str) -> tuple[int, str]:
    code = main(list(argv))
    captured = capsys.readouterr()
    return code, captured.err


def _snapshot(folder):
    return sorted((p.relative_to(folder).as_posix(), p.stat().st_mtime_ns) for p in folder.rglob("*"))


@pytest.fixture(scope="module")
def dataset(tmp_path_factory):
    out = tmp_path_factory.mktemp("artifacts") / "demos"
    assert main(["collect", "--episodes", "1", "--out", str(out)]) == 0
    return out


def test_collect_marks_its_folder_and_leaves_no_lock(dataset):
    marker = json.loads((dataset / ARTIFACT_MARKER).read_text())
    assert marker["kind"] == "dataset" and marker["format"] == "grasp_s2r.artifact" and marker["format_version"] == 1
    assert not (dataset / ARTIFACT_LOCK).exists()
    assert folder_kind(dataset) == "dataset"


@pytest.mark.parametrize("argv", [
    ["dagger", "--rounds", "1", "--episodes-per-round", "1", "--eval-episodes", "1", "--masks", "gt", "--no-bc"],
    ["train-vision", "--steps", "1", "--threads", "1", "--no-progress"],
    ["eval-vision", "--n-images", "2", "--threads", "1"],
    ["pipeline"],
])
def test_a_dataset_folder_is_refused_by_other_commands_untouched(dataset, argv, capsys):
    before = _snapshot(dataset)
    code, err = _run(capsys, argv[0], "--out", str(dataset), *argv[1:])
    assert code == 2, err
    assert "holds an episode dataset (grasp-s2r collect)" in err and len(err.strip().splitlines()) == 1
    assert _snapshot(dataset) == before


def test_folder_with_foreign_files_is_refused(tmp_path, capsys):
    (tmp_path / "thesis.tex").write_text("mine")
    code, err = _run(capsys, "eval-vision", "--n-images", "2", "--threads", "1", "--out", str(tmp_path))
    assert code == 2 and "holds files no grasp_s2r command wrote (thesis.tex)" in err
    assert [p.name for p in tmp_path.iterdir()] == ["thesis.tex"]


def test_folder_written_before_markers_is_still_recognized(dataset, tmp_path, capsys):
    legacy = tmp_path / "legacy"
    legacy.mkdir()
    (legacy / "meta.json").write_text((dataset / "meta.json").read_text())
    assert folder_kind(legacy) == "dataset"
    code, err = _run(capsys, "train-vision", "--out", str(legacy), "--steps", "1")
    assert code == 2 and "holds an episode dataset" in err


def test_live_writer_is_refused_and_a_stale_lock_taken_over(tmp_path, capsys):
    out = tmp_path / "demos"
    out.mkdir()
    sleeper = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        (out / ARTIFACT_LOCK).write_text(json.dumps({"pid": sleeper.pid, "host": socket.gethostname()}))
        code, err = _run(capsys, "collect", "--episodes", "1", "--out", str(out))
        assert code == 2 and f"being written by another grasp-s2r process (pid {sleeper.pid})" in err
    finally:
        sleeper.kill()
        sleeper.wait()
    # the writer is gone: its lock is stale and taken over, and released at the end
    code, err = _run(capsys, "collect", "--episodes", "1", "--out", str(out))
    assert code == 0, err
    assert not (out / ARTIFACT_LOCK).exists() and folder_kind(out) == "dataset"


def test_a_writer_killed_as_it_claimed_the_folder_or_wrote_a_file_leaves_it_usable(tmp_path, capsys):
    """kill -9 in the few milliseconds between the lock and the marker left only the lock and the marker's temp
    file, and the folder was refused for good ("files no grasp_s2r command wrote"); a temp file of a checkpoint
    stayed through every resume."""
    out = tmp_path / "demos"
    out.mkdir()
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    (out / ARTIFACT_LOCK).write_text(json.dumps({"pid": dead.pid, "host": socket.gethostname()}))
    (out / f".tmp-{ARTIFACT_MARKER}-ab12cd34").write_text("{")
    code, err = _run(capsys, "collect", "--episodes", "1", "--out", str(out))
    assert code == 0, err
    (out / ".tmp-meta.json-zz12cd_4").write_text("half")  # a later writer killed mid-write
    code, err = _run(capsys, "collect", "--episodes", "2", "--out", str(out))
    assert code == 0, err
    assert not [p.name for p in out.iterdir() if p.name.startswith(".tmp-")]
    assert folder_kind(out) == "dataset" and not (out / ARTIFACT_LOCK).exists()


def test_a_file_is_not_a_folder(tmp_path):
    path = tmp_path / "f"
    path.write_text("x")
    with pytest.raises(ArtifactError, match="not a folder"), ArtifactFolder(path, "dataset"):
        pass


def test_a_killed_write_deep_in_the_folder_is_swept_but_not_inside_another_artifact(tmp_path):
    # GIVEN a run folder where killed writers left temp files: in a subfolder (a checkpoint of checkpoints/) and
    # deeper; a nested artifact folder of its own (a pipeline's dagger/) with one; and a temp *folder* (an episode
    # being staged) holding a file of that name pattern
    out = tmp_path / "run"
    with ArtifactFolder(out, "pipeline"):
        pass
    deep = [out / "checkpoints" / ".tmp-round-003.pt-ab12cd34", out / "rounds" / "r0" / ".tmp-meta.json-zz12cd_4"]
    nested = tmp_path / "run" / "dagger"
    with ArtifactFolder(nested, "dagger-run"):
        pass
    theirs = nested / "checkpoints" / ".tmp-policy.pt-ab12cd34"
    staged = out / ".tmp-episode_000007-q1w2e3r4" / ".tmp-obs.npy-ab12cd34"
    for p in [*deep, theirs, staged]:
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_bytes(b"half")
    kept = out / "checkpoints" / "round-002.pt"
    kept.write_bytes(b"whole")
    # WHEN the folder is opened again for writing
    with ArtifactFolder(out, "pipeline"):
        pass
    # THEN its own dead temp files are gone at every depth, what another artifact folder and a temp folder hold
    # stays (their own writers sweep them), and finished files are untouched
    assert not any(p.exists() for p in deep)
    assert theirs.exists() and staged.exists() and kept.read_bytes() == b"whole"
