"""Episode datasets on disk: self-describing, versioned, written atomically, read lazily.

Layout (documented for users in ``datasets/README.md``)::

    DIR/meta.json                  format name + version, package version, config, feature schema
    DIR/episode-000042/            one finished episode (the folder appears in one rename)
        info.json                  seed, length, success, randomization params, ...; written last: "arrays",
                                   each array file's size and sha256 (verified by every reader)
        rgb.npy, sphere_mask.npy, ...   one .npy per feature, time first: (T, ...)
    DIR/.tmp-episode-000042-*/     an episode being written; ignored by readers, removed on resume

Arrays are plain ``.npy`` files opened with ``mmap_mode="r"``: a dataset larger than memory can be
used for training, and nothing is read until an array is indexed.

Episodes are verified, not trusted: opening a dataset checks each episode's files against the sizes and digests
its info.json records (:func:`episode_damage`); an episode written before they were recorded (grasp_s2r 0.1.0
before issue 25) is checked by sizes only (each ``.npy`` file whole for the shape its header states, and as long
as the episode). ``collect`` redoes a damaged episode; every other reader refuses the dataset, naming it.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import tempfile
import threading
from collections.abc import Iterator, Mapping
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Self

import numpy as np

from grasp_s2r import __version__
from grasp_s2r.artifacts import ARTIFACT_LOCK, ARTIFACT_MARKER
from grasp_s2r.configs import check_same
from grasp_s2r.files import default_mode, disk_errors, json_bytes, write_json

FORMAT_NAME = "grasp_s2r.episodes"
FORMAT_VERSION = 1
META_FILE = "meta.json"
_EPISODE_RE = re.compile(r"^episode-(\d{6})$")


class DatasetError(Exception):
    """A folder that is not a readable dataset of this format, or whose config differs."""


def episode_dirname(index: int) -> str:
    return f"episode-{index:06d}"


def feature_schema(arrays: Mapping[str, np.ndarray]) -> dict[str, dict[str, Any]]:
    """``{name: {"dtype": ..., "shape": per-step shape}}`` of one episode's arrays."""
    return {k: {"dtype": str(v.dtype), "shape": list(v.shape[1:])} for k, v in arrays.items()}


def init_dataset(root: Path, config: dict[str, Any], features: dict[str, Any], kind: str) -> dict[str, Any]:
    """Create ``root/meta.json``, or check that an existing dataset was made with the same config.

    Raises :class:`DatasetError` (nothing written) when ``root`` holds another format, another
    kind, or another config; resuming into a folder is only allowed for the same job.
    """
    root = Path(root)
    meta = {
        "format": FORMAT_NAME, "format_version": FORMAT_VERSION, "kind": kind,
        "package_version": __version__, "config": config, "features": features,
    }
    if root.exists() and not root.is_dir():
        raise DatasetError(f"{root} exists and is not a folder")
    if root.exists() and any(p.name != ARTIFACT_MARKER and not p.name.startswith(ARTIFACT_LOCK) for p in root.iterdir()):
        old = read_meta(root)
        if old["kind"] != kind:
            raise DatasetError(f"{root} holds a '{old['kind']}' dataset, not '{kind}'")
        layout = {k: (f["dtype"], f["shape"]) for k, f in json.loads(json.dumps(features)).items()}
        old_layout = {k: (f["dtype"], f["shape"]) for k, f in old.get("features", {}).items()}
        if layout != old_layout and set(layout) == set(old_layout):  # the same arrays at other shapes: another
            check_same(old["config"], json.loads(json.dumps(config)), f"{root} was made",  # camera, say
                       "use a new --out folder", error=DatasetError)
        if layout != old_layout:
            differ = sorted(set(layout) ^ set(old_layout)) or sorted(k for k in layout if layout[k] != old_layout[k])
            hint = (f"; 'grasp-s2r upgrade {root} --out NEW' writes it in the current one" if kind ==
                    "expert-demonstrations" else "")
            raise DatasetError(f"{root} holds episodes of another layout (written by grasp_s2r "
                               f"{old.get('package_version', '?')}; differs in {', '.join(differ)}): use a new --out "
                               f"folder{hint}")
        check_same(old["config"], json.loads(json.dumps(config)), f"{root} was made", "use a new --out folder",
                   error=DatasetError)
        return old
    root.mkdir(parents=True, exist_ok=True)
    write_json(root / META_FILE, meta, indent=2, sort_keys=True)
    return meta


def read_meta(root: Path) -> dict[str, Any]:
    path = Path(root) / META_FILE
    if not path.is_file():
        raise DatasetError(f"{root} is not a grasp_s2r dataset (no {META_FILE})")
    try:
        meta = json.loads(path.read_text())
    except json.JSONDecodeError as e:
        raise DatasetError(f"{path} is not valid JSON: {e}") from None
    if meta.get("format") != FORMAT_NAME:
        raise DatasetError(f"{root} holds format {meta.get('format')!r}, not {FORMAT_NAME!r}")
    if meta.get("format_version") != FORMAT_VERSION:
        raise DatasetError(
            f"{root} has format version {meta.get('format_version')}, this grasp_s2r {__version__} reads "
            f"version {FORMAT_VERSION}; re-create it with the 'grasp-s2r collect' command of this version"
        )
    return meta


def write_episode(root: Path, index: int, arrays: Mapping[str, np.ndarray], info: dict[str, Any]) -> Path:
    """Write one episode atomically: into a hidden temp folder, fsync'd, its info.json (with each array file's size
    and sha256) last, then one rename. A full disk is reported naming the episode and the free space."""
    root = Path(root)
    final = root / episode_dirname(index)
    tmp = Path(tempfile.mkdtemp(dir=root, prefix=f".tmp-{final.name}-"))
    try:
        with disk_errors(final):  # the free space as it was when the write failed
            os.chmod(tmp, default_mode(folder=True))
            recorded = {}
            for name, arr in arrays.items():
                with open(tmp / f"{name}.npy", "wb") as f:
                    np.save(f, np.ascontiguousarray(arr))
                    f.flush()
                    os.fsync(f.fileno())
                recorded[name] = {"bytes": (tmp / f"{name}.npy").stat().st_size, "sha256": _digest(tmp / f"{name}.npy")}
            with open(tmp / "info.json", "wb") as f:
                f.write(json_bytes({"index": index, **info, "arrays": recorded}, indent=2, sort_keys=True))
                f.flush()
                os.fsync(f.fileno())
            os.rename(tmp, final)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    return final



def _digest(path: Path) -> str:
    with open(path, "rb") as f:
        return hashlib.file_digest(f, "sha256").hexdigest()


def episode_damage(path: Path, features: Mapping[str, Any] | None = None) -> str | None:
    """Why the finished episode folder ``path`` is damaged, or None when it is whole: its info.json unreadable, an
    array missing (of ``features``, the dataset's schema), of another size or digest than recorded, or (an
    episode that records none) not whole for the shape its header states, or not as long as the episode."""
    try:
        info = json.loads((path / "info.json").read_text())
        length = int(info["length"])
    except (OSError, ValueError, KeyError, TypeError):
        return "info.json missing or unreadable"
    recorded = info.get("arrays")
    names = sorted(features) if features else sorted(recorded or (p.stem for p in path.glob("*.npy")))
    for name in names:
        f = path / f"{name}.npy"
        if not f.is_file():
            return f"{f.name} missing"
        size = f.stat().st_size
        if isinstance(recorded, dict) and name in recorded:
            want = recorded[name]
            if size != want.get("bytes"):
                return f"{f.name} has {size} bytes, {want.get('bytes')} recorded"
            if _digest(f) != want.get("sha256"):
                return f"{f.name} differs from its recorded sha256"
            continue
        try:
            arr = np.load(f, mmap_mode="r")
        except (ValueError, OSError, EOFError) as e:
            return f"{f.name} unreadable ({str(e).splitlines()[0] if str(e) else type(e).__name__})"
        if arr.ndim == 0 or arr.shape[0] != length or size != arr.offset + arr.nbytes:
            return f"{f.name} holds shape {arr.shape} in {size} bytes, not {length} steps whole"
    return None


def damaged_episodes(root: Path) -> dict[int, str]:
    """{index: why} of the damaged finished episodes of the dataset ``root`` (:func:`episode_damage`)."""
    features = read_meta(root).get("features")
    found = {i: episode_damage(Path(root) / episode_dirname(i), features) for i in finished_indices(root)}
    return {i: why for i, why in found.items() if why is not None}


def remove_damaged(root: Path) -> dict[int, str]:
    """Remove the damaged finished episodes of ``root`` (to be redone); returns {index: why}."""
    damaged = damaged_episodes(root)
    for i in damaged:
        gone = Path(root) / f".tmp-{episode_dirname(i)}-damaged"
        os.rename(Path(root) / episode_dirname(i), gone)  # one step: never listed half-removed
        shutil.rmtree(gone, ignore_errors=True)
    return damaged


class EpisodeWriter:
    """:func:`write_episode` on background threads, so that the loop producing episodes keeps stepping its envs
    while the files are written and fsync'd (fsync dominates and releases the GIL).

    At most ``max_pending`` episodes wait in memory (``write`` blocks beyond that): memory stays flat however
    long the run. A failed write is raised by the next ``write`` or by ``close``. Leaving the ``with`` block
    waits for the writes in progress; on an exception (e.g. Ctrl-C) the ones not yet started are dropped
    (they are re-run on resume) and a half-written one is never visible (see :func:`write_episode`).
    """

    def __init__(self, root: Path, threads: int = 4, max_pending: int = 16):
        self.root = Path(root)
        self._pool = ThreadPoolExecutor(threads, thread_name_prefix="episode-writer")
        self._slots = threading.BoundedSemaphore(max_pending)
        self._error: BaseException | None = None
        self.written = 0

    def write(self, index: int, arrays: Mapping[str, np.ndarray], info: dict[str, Any]) -> None:
        self._raise_if_failed()
        self._slots.acquire()
        try:
            future = self._pool.submit(write_episode, self.root, index, arrays, info)
        except BaseException:
            self._slots.release()
            raise
        future.add_done_callback(self._done)

    def _done(self, future: Future) -> None:
        self._slots.release()
        if future.cancelled():
            return
        if future.exception() is not None:
            self._error = self._error or future.exception()
        else:
            self.written += 1

    def _raise_if_failed(self) -> None:
        if self._error is not None:
            raise self._error

    def close(self, cancel: bool = False) -> None:
        self._pool.shutdown(wait=True, cancel_futures=cancel)
        self._raise_if_failed()

    def __enter__(self) -> Self:
        return self

    def __exit__(self, exc_type: object, *exc: object) -> None:
        if exc_type is None:
            self.close()
        else:
            self._pool.shutdown(wait=True, cancel_futures=True)


def remove_partial(root: Path) -> int:
    """Delete folders of episodes that were in flight when a writer died; returns how many."""
    partial = [p for p in Path(root).glob(".tmp-*")]
    for p in partial:
        shutil.rmtree(p, ignore_errors=True) if p.is_dir() else p.unlink(missing_ok=True)
    return len(partial)


def finished_indices(root: Path) -> list[int]:
    out = []
    for p in Path(root).iterdir() if Path(root).is_dir() else []:
        m = _EPISODE_RE.match(p.name)
        if m and p.is_dir():
            out.append(int(m.group(1)))
    return sorted(out)


@dataclass
class Episode:
    """One episode; arrays are memory-mapped and loaded when indexed."""

    path: Path
    info: dict[str, Any]

    def __getitem__(self, feature: str) -> np.ndarray:
        f = self.path / f"{feature}.npy"
        if not f.is_file():
            raise KeyError(f"{self.path.name} has no feature {feature!r}")
        return np.load(f, mmap_mode="r")

    def __len__(self) -> int:
        return int(self.info["length"])

    def features(self) -> list[str]:
        return sorted(p.stem for p in self.path.glob("*.npy"))


class EpisodeDataset:
    """Finished episodes of a dataset folder, in index order; half-written ones are never listed. Verified when
    opened (``verify``): a damaged episode raises :class:`DatasetError` naming it."""

    def __init__(self, root: str | os.PathLike[str], verify: bool = True):
        self.root = Path(root)
        self.meta = read_meta(self.root)
        self.indices = finished_indices(self.root)
        if verify:
            damaged = damaged_episodes(self.root)
            if damaged:
                i, why = next(iter(damaged.items()))
                more = f" (and {len(damaged) - 1} more)" if len(damaged) > 1 else ""
                redo = ("run the collect command again to redo it" if self.meta.get("kind") == "expert-demonstrations"
                        else "delete that folder and run the same command again to redo it")
                raise DatasetError(f"{self.root / episode_dirname(i)} is damaged: {why}{more}; {redo}")

    def __len__(self) -> int:
        return len(self.indices)

    def episode(self, i: int) -> Episode:
        path = self.root / episode_dirname(self.indices[i])
        return Episode(path=path, info=json.loads((path / "info.json").read_text()))

    def __iter__(self) -> Iterator[Episode]:
        return (self.episode(i) for i in range(len(self)))

    def num_steps(self) -> int:
        return sum(len(e) for e in self)

    def success_rate(self) -> float:
        return float(np.mean([e.info["success"] for e in self])) if len(self) else float("nan")
