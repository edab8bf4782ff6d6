"""Issue 25, item 4: the artifact lock cannot be raced. N writers start at the same instant (a barrier), many
times, into fresh folders: some with no lock, some with a stale lock of a dead process (the takeover the old lock
lost), some with an unreadable stale lock (an older grasp_s2r's). Each owner marks its ownership with an O_EXCL
file while it holds the lock: a second owner at the same time would find it. Real processes, real files."""

from __future__ import annotations

import json
import multiprocessing as mp
import os
import socket
import time
from pathlib import Path

from grasp_s2r.artifacts import ARTIFACT_LOCK, ArtifactError, ArtifactFolder

WRITERS = 8
ROUNDS = 25
"""8 writers x 25 rounds = 200 simultaneous starts (``benchmarks/bench_lock_race.py`` runs more)."""


def _writer(root: str, rounds: int, barrier, results) -> None:
    owned = refused = double = 0
    for r in range(rounds):
        folder = Path(root) / f"round-{r:04d}"
        barrier.wait()
        try:
            with ArtifactFolder(folder, "dataset"):
                try:
                    fd = os.open(folder / "owner", os.O_CREAT | os.O_EXCL | os.O_WRONLY)
                except FileExistsError:
                    double += 1
                else:
                    owned += 1
                    time.sleep(0.002)
                    os.close(fd)
                    (folder / "owner").unlink()
        except ArtifactError:
            refused += 1
        barrier.wait()  # the next round starts when every writer is done with this one
    results.put((owned, refused, double))


def _dead_pid() -> int:
    p = mp.get_context("fork").Process(target=int)
    p.start()
    p.join()
    return p.pid


def race(root: Path, writers: int = WRITERS, rounds: int = ROUNDS) -> dict[str, int]:
    """Run the race; returns {"starts", "owned", "refused", "double"} (``double``: simultaneous second owners)."""
    dead = _dead_pid()
    for r in range(rounds):
        folder = root / f"round-{r:04d}"
        if r % 3 == 1:  # a stale lock of a dead process
            folder.mkdir(parents=True)
            (folder / ARTIFACT_LOCK).write_text(json.dumps({"pid": dead, "host": socket.gethostname()}))
        elif r % 3 == 2:  # an empty lock, as an older grasp_s2r left it when killed between create and write
            folder.mkdir(parents=True)
            (folder / ARTIFACT_LOCK).write_text("")
            os.utime(folder / ARTIFACT_LOCK, (time.time() - 60, time.time() - 60))
    ctx = mp.get_context("fork")
    barrier, results = ctx.Barrier(writers), ctx.Queue()
    procs = [ctx.Process(target=_writer, args=(str(root), rounds, barrier, results)) for _ in range(writers)]
    for p in procs:
        p.start()
    totals = [results.get(timeout=300) for _ in procs]
    for p in procs:
        p.join()
    owned, refused, double = (sum(t[i] for t in totals) for i in range(3))
    return {"starts": writers * rounds, "owned": owned, "refused": refused, "double": double}


def test_200_simultaneous_starts_have_no_double_owner(tmp_path):
    r = race(tmp_path)
    assert r["starts"] >= 200
    assert r["double"] == 0, r
    assert r["owned"] + r["refused"] + r["double"] == r["starts"]
    assert r["owned"] >= ROUNDS, r  # every round has an owner: stale locks were taken over
    assert not list(tmp_path.rglob(f"{ARTIFACT_LOCK}*")), "a lock or a temp lock was left behind"


def test_a_live_owner_is_never_displaced(tmp_path):
    folder = tmp_path / "d"
    with ArtifactFolder(folder, "dataset"):
        ctx = mp.get_context("fork")
        q = ctx.Queue()

        def other():
            try:
                with ArtifactFolder(folder, "dataset"):
                    q.put("owned")
            except ArtifactError as e:
                q.put(str(e))

        p = ctx.Process(target=other)
        p.start()
        p.join()
        assert "being written by another grasp-s2r process (pid" in q.get(timeout=10)
        assert json.loads((folder / ARTIFACT_LOCK).read_text())["pid"] == os.getpid()


def test_a_lock_of_another_host_is_not_taken_over(tmp_path):
    folder = tmp_path / "d"
    folder.mkdir()
    (folder / ARTIFACT_LOCK).write_text(json.dumps({"pid": 1, "host": "elsewhere"}))
    try:
        with ArtifactFolder(folder, "dataset"):
            raise AssertionError("took over a lock of another host")
    except ArtifactError as e:
        assert "locked by pid 1 on host elsewhere" in str(e)
