"""Atomic file writes: every artifact (checkpoint, curve, report, metadata) goes through here."""

from __future__ import annotations

import errno
import fcntl
import hashlib
import json
import math
import os
import re
import shutil
import socket
import tempfile
import time
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Self

from grasp_s2r import __version__


def file_sha256(path: Path | str) -> str:
    """The first 16 hex digits of the sha256 of a file's bytes: what names a checkpoint's content (a segmenter's in
    ``runtime.masks.mask_source_identity`` and in the gripper head it carries; a controller's validation cache)."""
    return hashlib.sha256(Path(path).read_bytes()).hexdigest()[:16]


def torch_load_problem(path: Path | str, e: BaseException) -> str:
    """Why ``torch.load`` could not read ``path`` (it raised ``e``), in words a user can act on: torch's own
    messages for arbitrary bytes are a bare key ("101") or a paragraph about ``weights_only``."""
    try:
        head = Path(path).read_bytes()[:2]
    except OSError as err:
        return err.strerror or type(err).__name__
    if not head:
        return "an empty file"
    if head != b"PK" and head[:1] != b"\x80":
        return "not a torch file: neither a zip archive nor a pickle"
    reason = str(e).strip().splitlines()[0] if str(e).strip() else ""
    if reason.startswith("Weights only load failed"):  # torch's paragraph about its weights_only default
        return "not a torch file of tensors and plain data: something else, or a pickle that would run code"
    if not reason or isinstance(e, KeyError) or reason.strip("'").isdigit():
        return f"a damaged torch file ({type(e).__name__})"
    return f"{type(e).__name__}: {reason[:200]}"


def weights_problem(e: BaseException) -> str:
    """Why weights did not load into a network (``load_state_dict`` raised ``e``), in one line: torch's message
    starts with a line that says only where ("Error(s) in loading state_dict for UNet:"), the keys and shapes follow."""
    lines = [ln.strip() for ln in str(e).strip().splitlines() if ln.strip()]
    if not lines:
        return type(e).__name__
    detail = lines[1] if len(lines) > 1 and lines[0].endswith(":") else lines[0]
    return detail if len(detail) <= 200 else detail[:197] + "..."


def free_space(path: Path | str) -> str:
    """The free space of the file system holding ``path`` (or its nearest existing parent), for messages."""
    where = next((a for a in (Path(path).absolute(), *Path(path).absolute().parents) if a.exists()), Path("/"))
    free = float(shutil.disk_usage(where).free)
    for unit in ("bytes", "kB", "MB", "GB"):
        if free < 1000 or unit == "GB":
            return f"{free:.0f} {unit}" if unit == "bytes" else f"{free:.1f} {unit}"
        free /= 1000
    raise AssertionError  # unreachable


_TEMP_NAME = re.compile(r"^\.tmp-(.+)-[A-Za-z0-9_]{8}(\.[A-Za-z0-9]+)?$")
"""``.tmp-NAME-XXXXXXXX[.SUFFIX]``: the temp file or folder (``tempfile.mkstemp`` / ``mkdtemp``) that becomes
``NAME``."""


def user_path(name: str | os.PathLike[str]) -> str:
    """The path the user asked for: each temp file or folder of ours in ``name`` (``.tmp-NAME-XXXXXXXX``) named as
    what it becomes (``NAME``)."""
    parts = [m.group(1) if (m := _TEMP_NAME.match(p)) else p for p in Path(name).parts]
    return str(Path(*parts)) if parts else str(name)


def full_disk(e: OSError) -> bool:
    """Whether ``e`` says the disk is full: ENOSPC or a quota, numpy's errno-less short write ("N requested and M
    written"), or a library's message holding the C library's (pyarrow's "[errno 28] No space left on device",
    h5py's "errno = 28")."""
    text = str(e)
    return (e.errno in (errno.ENOSPC, errno.EDQUOT) or ("requested and" in text and "written" in text)
            or os.strerror(errno.ENOSPC) in text or f"errno = {errno.ENOSPC}," in text)


def disk_error(e: OSError, path: Path | str) -> OSError:
    """``e`` as the user should read it: a full disk (:func:`full_disk`) names ``path`` and the free space; a
    refused temp file of ours names ``path``."""
    if full_disk(e):
        return OSError(errno.ENOSPC, f"no space left on the device ({free_space(path)} free)", str(path))
    if e.filename is not None and user_path(e.filename) != str(e.filename) and e.errno is not None:
        return OSError(e.errno, e.strerror, str(path))
    return e


@contextmanager
def disk_errors(path: Path | str) -> Iterator[None]:
    """Writes inside the ``with`` that fail for a full disk or a refused temp file raise :func:`disk_error`."""
    try:
        yield
    except OSError as e:
        new = disk_error(e, path)
        if new is e:
            raise
        raise new from None


def default_mode(folder: bool) -> int:
    """The permissions a file (or folder) created by ``open`` (``mkdir``) gets under this process's umask, for the
    temp files and folders that become artifacts: ``mkstemp``'s 0600 and ``mkdtemp``'s 0700 would hide them from
    everyone else."""
    mask = os.umask(0)
    os.umask(mask)
    return (0o777 if folder else 0o666) & ~mask


def check_writable(path: Path | str) -> None:
    """Raise an OSError naming ``path`` when no file can be created where it would go (a read-only file system, a
    folder without write permission): checked before long work, so that it fails at once rather than after it. The
    probe is a temp file in the nearest existing folder of ``path``'s, removed at once."""
    path = Path(path)
    where = next((a for a in path.absolute().parents if a.exists()), Path("/"))
    try:
        with tempfile.TemporaryFile(dir=where, prefix=".tmp-probe-"):
            pass
    except OSError as e:
        raise OSError(e.errno, e.strerror, str(path)) from None


def json_safe(obj: Any) -> Any:
    """``obj`` with every NaN or infinite float (an undefined metric, a rate of no episodes) as None: strict JSON,
    which ``json.dumps`` alone does not write."""
    if isinstance(obj, float) and not math.isfinite(obj):
        return None
    if isinstance(obj, dict):
        return {k: json_safe(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [json_safe(v) for v in obj]
    return obj


def write_json(path: Path, obj: Any, **dumps: Any) -> None:
    """``obj`` as strict JSON (:func:`json_safe`; ``dumps``: ``json.dumps``' options, e.g. ``indent``), written
    atomically (:func:`atomic_write`)."""
    atomic_write(Path(path), json.dumps(json_safe(obj), allow_nan=False, **dumps).encode())


def remove_unwritten(folder: Path, names: Iterable[str], written: Iterable[Path]) -> list[str]:
    """Remove each file ``folder/NAME`` of ``names`` (every file a command may write there) that is not in
    ``written`` (what its run just wrote): a run into the folder of an earlier one leaves none of that run's
    pictures beside its new report. Returns the names removed, in ``names``' order; other files stay."""
    keep = {Path(w).resolve() for w in written}
    removed = []
    for name in names:
        path = Path(folder) / name
        if path.is_file() and path.resolve() not in keep:
            path.unlink()
            removed.append(name)
    return removed


def atomic_write(path: Path, data: bytes) -> None:
    """Write ``data`` to ``path`` through a temp file + rename (readers see the old or the new file, whole). A full
    disk or a refused place is an OSError naming ``path`` (and the free space), never the temp file."""
    path = Path(path)
    with disk_errors(path):
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".tmp-{path.name}-")
    try:
        with disk_errors(path), os.fdopen(fd, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        os.chmod(tmp, 0o644)
        os.replace(tmp, path)
    except BaseException:  # a full disk, a folder where the file should go, an interrupt: leave no temp file
        Path(tmp).unlink(missing_ok=True)
        raise


# --- artifact folders: what a folder holds, and who is writing into it -----------------------------------------

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
                         and not _TEMP_NAME.match(x.name))
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
            self._remove_dead_temp_files()
            marker = self.path / ARTIFACT_MARKER
            if not marker.is_file():
                self._wrote_marker = True
                atomic_write(marker, json.dumps({"format": ARTIFACT_FORMAT, "format_version": ARTIFACT_FORMAT_VERSION,
                                                 "kind": self.kind, "package_version": __version__},
                                                indent=2).encode())
        except BaseException as e:  # an unwritable place, another writer: release and remove what was made
            self.__exit__(type(e), e, e.__traceback__)
            raise
        return self

    def _remove_dead_temp_files(self) -> None:
        """The temp files (``.tmp-NAME-XXXXXXXX``, :func:`atomic_write`'s) a killed writer left in the folder: with the
        lock held no one else writes here, so none is being written. Temp folders stay: an episode dataset counts
        and removes its own half-written episodes (``data.episodes.remove_partial``)."""
        for x in self.path.iterdir():
            if _TEMP_NAME.match(x.name) and x.is_file():
                x.unlink(missing_ok=True)

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
