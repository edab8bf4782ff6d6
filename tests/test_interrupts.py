"""Ctrl-C (SIGINT to the process group) and SIGTERM: every long command exits within 5 s, leaves no process
behind, says how to resume, and the run can be resumed. Real commands in real subprocesses."""

from __future__ import annotations

import multiprocessing as mp
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from multiprocessing import resource_tracker
from multiprocessing import util as mp_util
from pathlib import Path

import pytest

from grasp_s2r.control.policy import Policy
from grasp_s2r.data.episodes import EpisodeDataset, finished_indices
from grasp_s2r.interrupts import children_ignore_interrupts
from grasp_s2r.vision.networks.segmenter import read_checkpoint

EXIT_WITHIN_S = 5.0


def _group_alive(pgid: int) -> bool:
    try:
        os.killpg(pgid, 0)
    except ProcessLookupError:
        return False
    return True


def _group_size(pgid: int) -> int:
    """The group's processes still running: a zombie has ended (an orphan waits there for init to reap it)."""
    out = subprocess.run(["ps", "-e", "-o", "pgid=,stat="], capture_output=True, text=True, check=True).stdout
    return sum(1 for line in out.splitlines() if line.split()[0] == str(pgid) and not line.split()[1].startswith("Z"))


def _interrupt(argv: list[str], ready: Callable[[], bool], sig: int, tmp: Path, timeout_s: float = 120) -> str:
    """Start ``grasp-s2r ARGV`` in its own process group, wait for ``ready()``, send ``sig`` to the whole group;
    check exit code, timing, and that no process of the group survives; returns stderr."""
    err_path = tmp / "stderr.txt"
    with open(err_path, "wb") as err, open(tmp / "stdout.txt", "wb") as out:
        proc = subprocess.Popen([sys.executable, "-m", "grasp_s2r.cli", *argv], stdout=out,
                                stderr=err, start_new_session=True)
        pgid = _interrupt.pgid = proc.pid  # type: ignore[attr-defined]
        deadline = time.monotonic() + timeout_s
        try:
            while not ready():
                assert proc.poll() is None, f"{argv[0]} ended before it could be interrupted: " + err_path.read_text()
                assert time.monotonic() < deadline, f"{argv[0]} never got ready"
                time.sleep(0.1)
            os.killpg(pgid, sig)
            t0 = time.monotonic()
            rc = proc.wait(timeout=30)
            took = time.monotonic() - t0
            while _group_size(pgid) and time.monotonic() - t0 < EXIT_WITHIN_S:
                time.sleep(0.05)
            survivors = _group_size(pgid)
        finally:
            if proc.poll() is None or _group_alive(pgid):
                os.killpg(pgid, signal.SIGKILL)
    stderr = err_path.read_text()
    assert rc == 130, f"exit code {rc}: {stderr[-2000:]}"
    assert took < EXIT_WITHIN_S, f"{argv[0]} took {took:.1f} s to exit"
    assert survivors == 0, f"{survivors} process(es) of {argv[0]} survived the interrupt"
    assert "Traceback" not in stderr, stderr[-3000:]
    last = stderr.strip().splitlines()[-1]
    assert last.startswith(f"grasp-s2r {argv[0]}: interrupted;") and ("again" in last or "--resume" in last), last
    return stderr


def _run(argv: list[str]) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "grasp_s2r.cli", *argv], check=False, capture_output=True, text=True,
                          timeout=600)


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM], ids=["SIGINT", "SIGTERM"])
def test_collect_interrupted_then_resumed(tmp_path: Path, sig: int) -> None:
    out = tmp_path / "demos"
    argv = ["collect", "--episodes", "40", "--workers", "2", "--out", str(out)]
    _interrupt(argv, lambda: out.is_dir() and len(finished_indices(out)) >= 2, sig, tmp_path)
    assert not list(out.glob(".tmp-*")), "a half-written episode was left visible"
    kept = len(finished_indices(out))
    assert 2 <= kept < 40
    r = _run(argv)
    assert r.returncode == 0, r.stderr
    ds = EpisodeDataset(out)
    assert ds.indices == list(range(40))
    assert f"{40 - kept} new this run" in r.stdout


def test_interrupt_while_the_workers_are_still_starting(tmp_path: Path) -> None:
    """Ctrl-C while the spawned workers import their modules: they started with it ignored, so no traceback."""
    out = tmp_path / "demos"
    argv = ["collect", "--episodes", "2000", "--workers", "2", "--out", str(out)]  # never done before the signal
    started: list[int] = []

    def workers_alive() -> bool:  # the group holds the command and its two workers, which are importing
        started.append(1)
        return len(started) > 1 and _group_size(_interrupt.pgid) >= 3

    _interrupt(argv, workers_alive, signal.SIGINT, tmp_path)


def test_an_interrupt_during_a_process_start_is_not_lost(monkeypatch: pytest.MonkeyPatch) -> None:
    """Ctrl-C that lands while a worker is being forked and exec'd is raised when the start is done."""
    resource_tracker.ensure_running()  # started now: its own start blocks the signals already
    spawn = mp_util.spawnv_passfds

    def spawn_interrupted(path: object, args: object, passfds: object) -> int:
        # to this thread, the one that spawns (blocked here, as it is for the spawn): a signal to the process could
        # be taken by any other thread of the test session that does not block it, and be handled whenever
        signal.pthread_kill(threading.main_thread().ident, signal.SIGINT)
        return spawn(path, args, passfds)

    monkeypatch.setattr(mp_util, "spawnv_passfds", spawn_interrupted)
    worker = mp.get_context("spawn").Process(target=time.sleep, args=(0,))
    with pytest.raises(KeyboardInterrupt), children_ignore_interrupts():
        worker.start()
    assert signal.SIGINT not in signal.sigpending()  # raised, and nothing left for a later test
    worker.join(timeout=30)
    assert worker.exitcode == 0


_CUT_HANDOVER = """
import os, socket, sys, threading, time
from multiprocessing import resource_sharer
if sys.argv[1] == "quiet":
    from grasp_s2r.interrupts import ignore_interrupts_in_child
    ignore_interrupts_in_child()
read_end, _ = os.pipe()
resource_sharer.DupFd(read_end)  # offered to a parent: the real serving thread starts and listens
peer = socket.socket(socket.AF_UNIX)
peer.connect(resource_sharer._resource_sharer._address)
peer.close()  # the parent interrupted mid-handshake: the server's challenge meets a closed connection
time.sleep(1.0)
threading.Thread(target=lambda: 1 / 0).start()  # any other thread's error is still shown
time.sleep(0.5)
"""


@pytest.mark.parametrize("hooks", ["stdlib", "quiet"])
def test_a_cut_descriptor_handover_ends_quietly(hooks: str) -> None:
    """A child's real fd-serving thread whose parent hung up mid-handshake prints nothing with the child's hooks
    (the stdlib's loop shows it through ``sys.excepthook``); without them it prints the traceback CI once saw."""
    r = subprocess.run([sys.executable, "-c", _CUT_HANDOVER, hooks], check=False, capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    assert "ZeroDivisionError" in r.stderr
    assert ("resource_sharer.py" in r.stderr) == (hooks == "stdlib"), r.stderr


def test_dagger_interrupted_then_resumed(tmp_path: Path) -> None:
    out = tmp_path / "dagger"
    argv = ["dagger", "--out", str(out), "--rounds", "2", "--episodes-per-round", "12", "--eval-episodes", "4",
            "--masks", "gt", "--no-bc", "--train-steps", "20", "--max-steps", "40", "--quiet"]
    round0 = out / "round-000"
    _interrupt(argv, lambda: round0.is_dir() and len(finished_indices(round0)) >= 1, signal.SIGINT, tmp_path)
    r = _run(argv)
    assert r.returncode == 0, r.stderr
    assert (out / "policy.pt").is_file() and len(finished_indices(round0)) == 12


def test_eval_interrupted(tmp_path: Path) -> None:
    policy = tmp_path / "policy.pt"
    Policy(device="cpu").save(policy)
    out = tmp_path / "eval"
    argv = ["eval", "--policy", str(policy), "--masks", "gt", "--episodes", "200", "--conditions", "nominal",
            "--out", str(out), "--workers", "2", "--quiet"]
    started = time.monotonic()
    _interrupt(argv, lambda: time.monotonic() - started > 8, signal.SIGTERM, tmp_path)
    assert not (out / "eval.json").exists()


def test_train_vision_interrupted_keeps_its_steps(tmp_path: Path) -> None:
    out = tmp_path / "vision"
    argv = ["train-vision", "--out", str(out), "--steps", "5000", "--batch-size", "4", "--width", "8",
            "--val-every", "5000", "--workers", "1", "--device", "cpu", "--calibration-images", "0", "--no-progress"]
    training_since: list[float] = []

    def training() -> bool:  # some seconds into the optimizer steps, long before the first periodic checkpoint
        if not training_since and (out / "composites.png").is_file():  # written just before the first step
            training_since.append(time.monotonic())
        return bool(training_since) and time.monotonic() - training_since[0] > 4

    _interrupt(argv, training, signal.SIGINT, tmp_path)
    ckpt = read_checkpoint(out / "checkpoint-latest.pt")  # written by the interrupt: the steps done are kept
    assert 0 < ckpt["step"] < 5000 and ckpt["optimizer"] is not None


def test_pipeline_interrupted(tmp_path: Path) -> None:
    """Interrupted in its first stage (the segmenter's training, DataLoader workers running)."""
    out = tmp_path / "pipeline"
    argv = ["pipeline", "--out", str(out)]
    training_since: list[float] = []

    def training() -> bool:
        if not training_since and (out / "vision").is_dir():
            training_since.append(time.monotonic())
        return bool(training_since) and time.monotonic() - training_since[0] > 8

    _interrupt(argv, training, signal.SIGINT, tmp_path)


_CHILD_OF_KILLED = """
import multiprocessing as mp
import time

from grasp_s2r.interrupts import dataloader_worker_init


def work():
    dataloader_worker_init(0)
    print("ready", flush=True)
    time.sleep(60)


if __name__ == "__main__":
    child = mp.get_context("spawn").Process(target=work)
    child.start()
    print(child.pid, flush=True)
    time.sleep(60)
"""


def _running(pid: int) -> bool:
    """Whether ``pid`` runs (a zombie, or a pid gone, does not)."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"
    except (OSError, IndexError):
        return False


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="the parent-death signal is Linux's")
def test_a_data_worker_ends_with_its_parent_even_after_kill_9(tmp_path: Path) -> None:
    """A DataLoader worker (spawned, ``worker_init_fn=dataloader_worker_init``) ends as soon as the process that
    started it is killed with ``kill -9`` (``interrupts.end_with_parent``). Without it, this worker would sleep on
    for a minute (a DataLoader's would run until torch's next status check, up to 5 s)."""
    script = tmp_path / "parent.py"
    script.write_text(_CHILD_OF_KILLED)
    parent = subprocess.Popen([sys.executable, str(script)], stdout=subprocess.PIPE, text=True,
                              start_new_session=True)
    try:
        child = int(parent.stdout.readline())
        assert parent.stdout.readline().strip() == "ready"
        os.kill(parent.pid, signal.SIGKILL)
        parent.wait(timeout=10)
        t0 = time.monotonic()
        while _running(child) and time.monotonic() - t0 < 3.0:
            time.sleep(0.05)
        assert not _running(child), "the worker outlived its parent's kill -9 by 3 s"
    finally:
        if _group_alive(parent.pid):
            os.killpg(parent.pid, signal.SIGKILL)
