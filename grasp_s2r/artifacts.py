"""Artifact folders: what a folder a command writes holds (its marker: kind, format, version) and who is writing
into it (its lock), so that no command writes into another's output or beside another writer.

The files inside go through :mod:`grasp_s2r.files` (atomic writes)."""

from __future__ import annotations

import errno
import fcntl
import json
import os
import socket
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Self

from grasp_s2r import __version__
from grasp_s2r.files import TEMP_NAME, write_json

ARTIFACT_MARKER = ".grasp_s2r-artifact.json"
"""Written into every folder a command owns: its kind, format and version."""
ARTIFACT_LOCK = ".grasp_s2r.lock"
"""Present while a command writes into the folder; holds the writer's pid and host."""
ARTIFACT_FORMAT = "grasp_s2r.artifact"
ARTIFACT_FORMAT_VERSION = 1
ARTIFACT_KINDS = {
    "dataset": "an episode dataset (grasp-s2r collect)",
    "vision-run": "a segmenter training run (grasp-s2r train-vision)",
    "adapt": "an adaptation to a scene (grasp-s2r adapt)",
    "vision-eval": "a segmenter evaluation (grasp-s2r eval-vision)",
    "gripper-run": "a gripper head training run (grasp-s2r train-gripper)",
    "dagger-run": "a DAgger run (grasp-s2r dagger)",
    "eval-report": "an end-to-end evaluation (grasp-s2r eval)",
    "pipeline": "a pipeline run (grasp-s2r pipeline)",
    "export": "a dataset export (grasp-s2r export)",
}
"""Kind -> what it is, for messages."""
_LEGACY_SIGNATURES = (  # folders written before markers existed: (kind, file, its "format" field or None)
    ("dataset", "meta.json", "grasp_s2r.episodes"),
    ("pipeline", "demos/meta.json", "grasp_s2r.episodes"),
    ("vision-run", "config.json", "grasp_s2r.vision_run"),
    ("vision-eval", "metrics.json", "grasp_s2r.vision_eval"),
    ("dagger-run", "run.json", None),
    ("eval-report", "eval.json", None),
    ("pipeline", "summary.json", None),
)


class ArtifactError(ValueError):
    """A folder that a command must not write into (another kind, foreign files, another writer at work)."""


def _legacy_kind(folder: Path, nested: bool = True) -> str | None:
    """The kind a folder written before markers holds, by its files; ``nested=False``: by its own files only, not a
    sub-folder's (a pipeline's ``demos/meta.json``)."""
    for kind, name, fmt in _LEGACY_SIGNATURES:
        path = folder / name
        if not path.is_file() or (not nested and "/" in name):
            continue
        if fmt is None:
            return kind
        try:
            if json.loads(path.read_text()).get("format") == fmt:
                return kind
        except (ValueError, OSError, AttributeError):
            continue
    return None


def folder_kind(folder: Path) -> str | None:
    """The kind of artifact ``folder`` holds (its marker, else a pre-marker signature); None when it holds none."""
    marker = Path(folder) / ARTIFACT_MARKER
    if marker.is_file():
        try:
            return str(json.loads(marker.read_text())["kind"])
        except (ValueError, KeyError, OSError):
            raise ArtifactError(f"{folder}: unreadable {ARTIFACT_MARKER}; use another folder") from None
    return _legacy_kind(Path(folder))


def enclosing_artifact(path: Path) -> tuple[Path, str] | None:
    """The nearest folder above ``path`` that holds a command's output, and its kind; None when none does: a file
    written there would land inside it. By the folder's marker, or its own files (not a sub-folder's: ``runs/``,
    which holds a ``collect --out runs/demos`` dataset, is no pipeline run)."""
    for folder in Path(path).absolute().parents:
        if (folder / ARTIFACT_MARKER).is_file():
            return folder, str(folder_kind(folder))
        if folder.is_dir() and (kind := _legacy_kind(folder, nested=False)) is not None:
            return folder, kind
    return None


UNREADABLE_LOCK_AGE_S = 10.0
"""An unreadable lock older than this is stale (grasp_s2r 0.1.0 before issue 25 wrote the pid just after creating the file)."""


@contextmanager
def _folder_mutex(folder: Path) -> Iterator[None]:
    """Exclusive ``flock`` of ``folder`` while inside: released by the kernel when its process dies, so it is
    never stale."""
    fd = os.open(folder, os.O_RDONLY)
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
        except OSError as e:  # a file system without flock (some network ones): the lock file alone, as before
            if e.errno not in (errno.ENOLCK, errno.ENOTSUP, errno.EOPNOTSUPP, errno.EINVAL):
                raise
        yield
    finally:
        os.close(fd)


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # alive, another user's
        return True
    return True


class ArtifactFolder:
    """``with ArtifactFolder(path, kind):`` claims ``path`` for one command of ``kind`` and locks it while inside.

    Refused with :class:`ArtifactError`, before anything is written: a path that is a file; a folder holding
    another kind of artifact; a folder holding files that no grasp_s2r command wrote; a folder another live
    process is writing into (its lock names the pid). A lock left by a dead process is taken over. The same kind
    is accepted (resuming). Creates the folder and its marker on first use.
    """

    def __init__(self, path: Path | str, kind: str):
        if kind not in ARTIFACT_KINDS:
            raise ValueError(f"unknown artifact kind {kind!r}")
        self.path, self.kind = Path(path), kind
        self._locked = False
        self._wrote_marker = False
        self._created: list[Path] = []
        """Folders this ``with`` created (the folder and missing parents, innermost first)."""

    def check(self) -> None:
        """Raise :class:`ArtifactError` if this command may not write into the folder (writes nothing)."""
        p = self.path
        if p.exists() and not p.is_dir():
            raise ArtifactError(f"{p} exists and is not a folder")
        if not p.is_dir():
            above = next((a for a in p.absolute().parents if a.exists()), None)
            if above is not None and not above.is_dir():
                raise ArtifactError(f"cannot create {p}: {above} is not a folder")
            return
        kind = folder_kind(p)
        if kind is not None and kind != self.kind:
            raise ArtifactError(f"{p} holds {ARTIFACT_KINDS.get(kind, kind)}, not {ARTIFACT_KINDS[self.kind]}; "
                                "choose another --out")
        foreign = sorted(x.name for x in p.iterdir()  # a dead writer's temp file is ours by its name
                         if x.name != ARTIFACT_MARKER and not x.name.startswith(ARTIFACT_LOCK)
                         and not TEMP_NAME.match(x.name))
        if kind is None and foreign:
            shown = ", ".join(foreign[:3]) + (", ..." if len(foreign) > 3 else "")
            raise ArtifactError(f"{p} holds files no grasp_s2r command wrote ({shown}); choose an empty or new --out")

    def _lock(self) -> None:
        """Take the folder's lock: the lock file appears whole (written to a temp file, then linked into place),
        and judging an existing lock and taking it over happen under ``flock`` of the folder, so two processes
        can never both own it (``tests/test_lock_race.py``)."""
        lock = self.path / ARTIFACT_LOCK
        tmp = self.path / f"{ARTIFACT_LOCK}.{os.getpid()}.tmp"
        try:  # the temp file goes again whatever fails, its own write on a full disk included
            tmp.write_text(json.dumps({"pid": os.getpid(), "host": socket.gethostname()}))
            with _folder_mutex(self.path):
                if lock.exists():
                    self._judge(lock)  # raises unless its owner is provably gone
                    lock.unlink()
                try:
                    os.link(tmp, lock)
                except OSError as e:  # a file system without hard links: rename (the judging is under the mutex)
                    if e.errno not in (errno.EPERM, errno.ENOTSUP, errno.EOPNOTSUPP, errno.EXDEV):
                        raise
                    os.rename(tmp, lock)
        finally:
            tmp.unlink(missing_ok=True)
        self._locked = True

    def _judge(self, lock: Path) -> None:
        """Raise :class:`ArtifactError` unless the writer named in ``lock`` is provably gone: a dead pid of this
        host, this process itself, or (a lock of an older grasp_s2r, created before its pid was written) an
        unreadable lock older than :data:`UNREADABLE_LOCK_AGE_S`."""
        try:
            owner = json.loads(lock.read_text())
            pid, host = int(owner["pid"]), str(owner["host"])
        except (ValueError, OSError, KeyError, TypeError):
            age = time.time() - lock.stat().st_mtime
            if age > UNREADABLE_LOCK_AGE_S:
                return
            raise ArtifactError(f"{self.path} is being claimed by another grasp-s2r process (its lock has no owner "
                                "yet); wait for it or choose another --out") from None
        if host != socket.gethostname():
            raise ArtifactError(f"{self.path} is locked by pid {pid} on host {host}; if no grasp-s2r runs there, "
                                f"delete {lock}")
        if pid > 0 and pid != os.getpid() and _pid_alive(pid):
            raise ArtifactError(f"{self.path} is being written by another grasp-s2r process (pid {pid}); "
                                "wait for it or choose another --out")

    def __enter__(self) -> Self:
        self.check()
        self._created = [a for a in (self.path, *self.path.absolute().parents) if not a.exists()]
        try:
            self.path.mkdir(parents=True, exist_ok=True)
            self._lock()
            marker = self.path / ARTIFACT_MARKER
            if not marker.is_file():
                self._wrote_marker = True
                write_json(marker, {"format": ARTIFACT_FORMAT, "format_version": ARTIFACT_FORMAT_VERSION,
                                    "kind": self.kind, "package_version": __version__}, indent=2)
            self._remove_dead_temp_files()  # after the marker: a parent's sweep skips this folder from now on
        except BaseException as e:  # an unwritable place, another writer: release and remove what was made
            self.__exit__(type(e), e, e.__traceback__)
            raise
        return self

    def _remove_dead_temp_files(self) -> None:
        """The temp files (``.tmp-NAME-XXXXXXXX``, :func:`atomic_write`'s) a killed writer left in the folder and its
        subfolders (a DAgger run's ``checkpoints/``, a round's episodes): with the lock held no one else writes
        here, so none is being written. A subfolder that is an artifact folder of its own (its marker: a
        pipeline's ``vision/``, ``dagger/``; or its lock: one being claimed) is left to the command that opens it
        under its own lock, and temp
        folders stay: an episode dataset counts and removes its own half-written episodes
        (``data.episodes.remove_partial``)."""
        def theirs(folder: Path) -> bool:  # an artifact folder of its own, or one a live command is claiming
            return (folder / ARTIFACT_MARKER).exists() or (folder / ARTIFACT_LOCK).exists()

        for top, dirs, files in os.walk(self.path):
            dirs[:] = [d for d in dirs if not TEMP_NAME.match(d) and not theirs(Path(top) / d)]
            for name in files:
                if TEMP_NAME.match(name):
                    (Path(top) / name).unlink(missing_ok=True)

    def __exit__(self, exc_type: object, *exc: object) -> None:
        if self._locked:
            (self.path / ARTIFACT_LOCK).unlink(missing_ok=True)  # ours: no one takes a live process's lock
            self._locked = False
        if exc_type is not None:
            self._remove_if_unused()

    def _remove_if_unused(self) -> None:
        """After a failure: the marker this ``with`` wrote, and the folders it created, go again if nothing else
        was written (a refused input leaves no trace); a folder holding any work is kept (resumable)."""
        p = self.path
        if self._wrote_marker and p.is_dir() and all(x.name == ARTIFACT_MARKER for x in p.iterdir()):
            (p / ARTIFACT_MARKER).unlink(missing_ok=True)
        for folder in self._created:  # innermost first; stops at the first one that is not empty
            try:
                folder.rmdir()
            except OSError:
                break
        self._created = []
