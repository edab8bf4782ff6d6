"""Atomic file writes: every artifact (checkpoint, curve, report, metadata) goes through here; the folders they go
into, their markers and locks: :mod:`grasp_s2r.artifacts`."""

from __future__ import annotations

import errno
import hashlib
import json
import math
import os
import re
import shutil
import tempfile
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any


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


TEMP_NAME = re.compile(r"^\.tmp-(.+)-[A-Za-z0-9_]{8}(\.[A-Za-z0-9]+)?$")
"""``.tmp-NAME-XXXXXXXX[.SUFFIX]``: the temp file or folder (``tempfile.mkstemp`` / ``mkdtemp``) that becomes
``NAME``."""


def user_path(name: str | os.PathLike[str]) -> str:
    """The path the user asked for: each temp file or folder of ours in ``name`` (``.tmp-NAME-XXXXXXXX``) named as
    what it becomes (``NAME``)."""
    parts = [m.group(1) if (m := TEMP_NAME.match(p)) else p for p in Path(name).parts]
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


def json_bytes(obj: Any, **dumps: Any) -> bytes:
    """``obj`` as strict JSON text (:func:`json_safe`; ``dumps``: ``json.dumps``' options, e.g. ``indent``), ending
    in a newline: what every JSON file the project writes holds."""
    return (json.dumps(json_safe(obj), allow_nan=False, **dumps) + "\n").encode()


def write_json(path: Path, obj: Any, **dumps: Any) -> None:
    """``obj`` as strict JSON (:func:`json_bytes`), written atomically (:func:`atomic_write`)."""
    atomic_write(Path(path), json_bytes(obj, **dumps))


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
