"""``grasp-s2r export --format lerobot``: a LeRobotDataset v3.0 folder, the layout lerobot 0.4 reads.

::

    meta/info.json                               codebase_version "v3.0", fps, features, data_path, totals
    meta/tasks.parquet                           task_index, indexed by the task text (as pandas writes it)
    meta/episodes/chunk-000/file-000.parquet     one row per episode: length, tasks, where its rows are
                                                 (data/chunk_index, data/file_index, dataset_from/to_index),
                                                 stats/<feature>/<stat>, and source / seed / success
    meta/stats.json                              the episodes' stats aggregated as lerobot aggregates them
    data/chunk-000/file-000.parquet              one row per step, episodes in order; a new file past 100 MB

The wrist image is an ``image`` feature: PNG bytes embedded in the parquet, as ``LeRobotDataset`` stores images
(frames come back equal to the source); with ``video``, a ``video`` feature instead, as lerobot records by default:
``videos/observation.images.wrist/chunk-000/file-000.mp4`` holds the episodes in a row (AV1, yuv420p, crf 30,
keyframe every 2 frames: lossy), the episode rows say where (``videos/<key>/chunk_index``, ``file_index``,
``from_timestamp``, ``to_timestamp``); needs PyAV. Each data file's schema carries its Hugging Face ``datasets``
features. Stats per feature: min, max, mean, std, count and the quantiles q01 ... q99 (images per channel, in
[0, 1]). No column holds NaN or null (see :func:`grasp_s2r.export.step_arrays`).
"""

from __future__ import annotations

import json
import os
import shutil
import tempfile
from fractions import Fraction
from pathlib import Path
from typing import Any

import cv2
import numpy as np

from grasp_s2r.artifacts import ArtifactFolder
from grasp_s2r.export import (
    ACTION_NAMES,
    TASK,
    Source,
    check_out,
    episodes_bar,
    export_meta,
    learner_queried,
    replace_into,
    require,
    step_arrays,
)
from grasp_s2r.files import default_mode

CODEBASE_VERSION = "v3.0"
CHUNK_SIZE = 1000
"""Files per chunk folder (lerobot's ``DEFAULT_CHUNK_SIZE``)."""
DATA_FILE_MB = 100
"""A data file is closed once it holds this much (lerobot's ``DEFAULT_DATA_FILE_SIZE_IN_MB``)."""
CHUNK_FILE = "chunk-{chunk_index:03d}/file-{file_index:03d}.parquet"
DATA_PATH = "data/" + CHUNK_FILE
EPISODES_PATH = "meta/episodes/" + CHUNK_FILE
VIDEO_FILE_MB = 200
"""A video file is closed once it holds this much (lerobot's ``DEFAULT_VIDEO_FILE_SIZE_IN_MB``)."""
VIDEO_PATH = "videos/{video_key}/chunk-{chunk_index:03d}/file-{file_index:03d}.mp4"
VIDEO_CODEC = {"codec": "libsvtav1", "pix_fmt": "yuv420p", "options": {"g": "2", "crf": "30", "preset": "12"}}
"""lerobot's default encoding (``encode_video_frames``: vcodec libsvtav1, g 2, crf 30, preset 12)."""
IMAGE_KEY = "observation.images.wrist"
QUANTILES = (0.01, 0.10, 0.50, 0.90, 0.99)
"""lerobot's ``DEFAULT_QUANTILES``, stored as q01, q10, q50, q90, q99."""
_SCALAR = {"shape": [1], "names": None}


def lerobot_fps(src: Source) -> float:
    """The frame rate, the control rate: an int where it is whole (lerobot's ``fps`` is an int)."""
    hz = src.env.scene.control_hz
    return int(hz) if float(hz).is_integer() else hz


def features(src: Source, learner: bool, video: bool = False) -> dict[str, dict[str, Any]]:
    """LeRobot features of ``src``: what every step carries, the rollout columns the source holds, LeRobot's own."""
    cam, fps = src.env.camera, lerobot_fps(src)
    names = src.episodes[0][1].features() if src.episodes else set()
    vec = {"observation.state": ("float32", src.names("proprio")), "action": ("float32", ACTION_NAMES),
           "sim.state": ("float64", src.names("state"))}
    if learner:
        vec["learner_action"] = ("float32", ACTION_NAMES)
    if "executed_action" in names:
        vec["executed_action"] = ("float32", ACTION_NAMES)
    image = {"dtype": "image", "shape": [cam.height_px, cam.width_px, 3], "names": ["height", "width", "channel"]}
    if video:
        image |= {"dtype": "video", "names": ["height", "width", "channels"], "info": {
            "video.height": cam.height_px, "video.width": cam.width_px, "video.codec": "av1",
            "video.pix_fmt": VIDEO_CODEC["pix_fmt"], "video.is_depth_map": False, "video.fps": fps,
            "video.channels": 3, "has_audio": False}}
    feats: dict[str, dict[str, Any]] = {
        IMAGE_KEY: image,
        **{k: {"dtype": d, "shape": [len(n)], "names": n} for k, (d, n) in vec.items()},
        "next.reward": {"dtype": "float32", **_SCALAR}, "next.done": {"dtype": "bool", **_SCALAR},
        "next.success": {"dtype": "bool", **_SCALAR}, "expert.phase": {"dtype": "int64", **_SCALAR},
    }
    if learner:
        feats["learner_queried"] = {"dtype": "bool", **_SCALAR}
    if "from_expert" in names:
        feats["from_expert"] = {"dtype": "bool", **_SCALAR}
    for k in ("timestamp", "frame_index", "episode_index", "index", "task_index"):
        feats[k] = {"dtype": "float32" if k == "timestamp" else "int64", **_SCALAR}
    return feats


def _columns(a: dict[str, np.ndarray], ep_index: int, start: int, fps: float,
             feats: dict[str, dict[str, Any]]) -> dict[str, Any]:
    n = len(a["action"])
    cols: dict[str, Any] = {
        "observation.state": a["proprio"], "action": a["action"], "sim.state": a["state"], "next.reward": a["reward"],
        "next.done": a["done"], "next.success": a["done"] & (a["reward"] > 0), "expert.phase": a["phase"],
        "timestamp": np.arange(n) / fps, "frame_index": np.arange(n), "episode_index": np.full(n, ep_index),
        "index": np.arange(start, start + n), "task_index": np.zeros(n),
    }
    cols |= {k: a[k] for k in ("learner_action", "learner_queried", "executed_action", "from_expert") if k in a}
    cols = {k: np.asarray(v, feats[k]["dtype"]) for k, v in cols.items()}
    if feats[IMAGE_KEY]["dtype"] == "image":
        png = [cv2.imencode(".png", cv2.cvtColor(im, cv2.COLOR_RGB2BGR))[1].tobytes() for im in a["rgb"]]
        cols[IMAGE_KEY] = [{"bytes": b, "path": None} for b in png]
    return cols


def _stats(cols: dict[str, Any], feats: dict[str, dict[str, Any]], rgb: np.ndarray) -> dict[str, dict[str, Any]]:
    """lerobot's per-episode stats of every feature (``compute_episode_stats``), exact rather than sampled."""
    out = {}
    for k, ft in feats.items():
        if ft["dtype"] in ("image", "video"):  # (T, C, H, W) in [0, 1], reduced over T, H, W: (C, 1, 1)
            x = rgb.astype(np.float64).transpose(0, 3, 1, 2) / 255.0
            axes: Any = (0, 2, 3)
        else:
            x, axes = np.asarray(cols[k], np.float64).reshape(len(rgb), -1), 0
        s = {f: getattr(np, f)(x, axis=axes, keepdims=True) for f in ("min", "max", "mean", "std")}
        s |= {f"q{round(q * 100):02d}": np.quantile(x, q, axis=axes, keepdims=True) for q in QUANTILES}
        out[k] = {f: v[0].tolist() for f, v in s.items()} | {"count": [len(rgb)]}
    return out


def aggregate_stats(stats: list[dict[str, dict[str, Any]]]) -> dict[str, dict[str, Any]]:
    """The dataset's stats from its episodes', as lerobot's ``aggregate_stats`` makes them (quantiles: the
    count-weighted mean of the episodes')."""
    out = {}
    for k in stats[0]:
        n = np.array([s[k]["count"][0] for s in stats], float)
        w = (n / n.sum()).reshape(-1, *[1] * np.ndim(stats[0][k]["mean"]))
        means = np.array([s[k]["mean"] for s in stats])
        mean = (w * means).sum(0)
        var = (w * (np.array([s[k]["std"] for s in stats]) ** 2 + (means - mean) ** 2)).sum(0)
        out[k] = {"min": np.min([s[k]["min"] for s in stats], 0).tolist(),
                  "max": np.max([s[k]["max"] for s in stats], 0).tolist(), "mean": mean.tolist(),
                  "std": np.sqrt(var).tolist(), "count": [int(n.sum())]}
        out[k] |= {q: (w * np.array([s[k][q] for s in stats])).sum(0).tolist() for q in stats[0][k] if q[1:].isdigit()}
    return out


def _hf_value(dtype: str) -> dict[str, str]:
    return {"dtype": dtype, "_type": "Value"}


def _arrow_table(pa: Any, cols: dict[str, Any], feats: dict[str, dict[str, Any]]) -> Any:
    """One episode's rows, with the Hugging Face features in the schema (what ``datasets`` decodes them by)."""
    arrays, hf = {}, {}
    for k, ft in feats.items():
        if ft["dtype"] == "video":
            continue
        v = cols[k]
        if ft["dtype"] == "image":
            arrays[k] = pa.array(v, type=pa.struct([("bytes", pa.binary()), ("path", pa.string())]))
            hf[k] = {"_type": "Image"}
        elif ft["shape"] == [1]:
            arrays[k] = pa.array(v.reshape(-1))
            hf[k] = _hf_value(ft["dtype"])
        else:
            arrays[k] = pa.FixedSizeListArray.from_arrays(pa.array(np.ascontiguousarray(v).reshape(-1)), ft["shape"][0])
            hf[k] = {"feature": _hf_value(ft["dtype"]), "length": ft["shape"][0], "_type": "Sequence"}
    return pa.table(arrays).replace_schema_metadata({"huggingface": json.dumps({"info": {"features": hf}})})


def _tasks_table(pa: Any, tasks: list[str]) -> Any:
    """``meta/tasks.parquet`` as ``pandas.DataFrame({"task_index": ...}, index=tasks).to_parquet()`` writes it:
    lerobot reads it with pandas and looks tasks up by the index."""
    pandas_meta = {"index_columns": ["__index_level_0__"], "column_indexes": [{
        "name": None, "field_name": None, "pandas_type": "unicode", "numpy_type": "object",
        "metadata": {"encoding": "UTF-8"}}], "columns": [
        {"name": "task_index", "field_name": "task_index", "pandas_type": "int64", "numpy_type": "int64",
         "metadata": None},
        {"name": None, "field_name": "__index_level_0__", "pandas_type": "unicode", "numpy_type": "object",
         "metadata": None}], "creator": {"library": "pyarrow", "version": pa.__version__}, "pandas_version": "2.2.0"}
    table = pa.table({"task_index": pa.array(range(len(tasks)), pa.int64()), "__index_level_0__": pa.array(tasks)})
    return table.replace_schema_metadata({"pandas": json.dumps(pandas_meta)})


class _DataFiles:
    """Appends episodes to ``data/chunk-C/file-F.parquet``, opening the next file past :data:`DATA_FILE_MB`."""

    def __init__(self, root: Path, pq: Any):
        self.root, self.pq, self.writer = root, pq, None
        self.chunk, self.file, self.nbytes = 0, 0, 0

    def write(self, table: Any) -> dict[str, int]:
        if self.writer is not None and self.nbytes + table.nbytes > DATA_FILE_MB * 2**20:
            self.close()
            self.chunk, self.file = (self.chunk + 1, 0) if self.file == CHUNK_SIZE - 1 else (self.chunk, self.file + 1)
        if self.writer is None:
            path = self.root / DATA_PATH.format(chunk_index=self.chunk, file_index=self.file)
            path.parent.mkdir(parents=True, exist_ok=True)
            self.writer, self.nbytes = self.pq.ParquetWriter(path, table.schema, compression="snappy"), 0
        self.writer.write_table(table)
        self.nbytes += table.nbytes
        return {"data/chunk_index": self.chunk, "data/file_index": self.file}

    def close(self) -> None:
        if self.writer is not None:
            self.writer.close()
            self.writer = None


class _VideoFiles:
    """Appends episodes' frames to ``videos/KEY/chunk-C/file-F.mp4`` as lerobot encodes them, opening the next file
    past :data:`VIDEO_FILE_MB`; returns where each episode went (its ``videos/KEY/...`` episode columns)."""

    def __init__(self, root: Path, av: Any, fps: float):
        self.root, self.av, self.fps, self.out, self.stream = root, av, fps, None, None
        self.chunk, self.file, self.nbytes, self.frames = 0, 0, 0, 0

    def _mux(self, packets: Any) -> None:
        for packet in packets:
            self.nbytes += packet.size
            self.out.mux(packet)

    def write(self, rgb: np.ndarray) -> dict[str, Any]:
        if self.out is not None and self.nbytes > VIDEO_FILE_MB * 2**20:
            self.close()
            self.chunk, self.file = (self.chunk + 1, 0) if self.file == CHUNK_SIZE - 1 else (self.chunk, self.file + 1)
        if self.out is None:
            path = self.root / VIDEO_PATH.format(video_key=IMAGE_KEY, chunk_index=self.chunk, file_index=self.file)
            path.parent.mkdir(parents=True, exist_ok=True)
            self.out = self.av.open(str(path), "w")
            rate = Fraction(self.fps).limit_denominator(1000)  # PyAV takes a rational frame rate
            self.stream = self.out.add_stream(VIDEO_CODEC["codec"], rate, options=VIDEO_CODEC["options"])
            self.stream.pix_fmt, self.stream.height, self.stream.width = VIDEO_CODEC["pix_fmt"], *rgb.shape[1:3]
            self.nbytes = self.frames = 0
        start = self.frames
        for im in rgb:
            self._mux(self.stream.encode(self.av.VideoFrame.from_ndarray(np.ascontiguousarray(im), format="rgb24")))
        self.frames += len(rgb)
        key = f"videos/{IMAGE_KEY}"
        return {f"{key}/chunk_index": self.chunk, f"{key}/file_index": self.file,
                f"{key}/from_timestamp": start / self.fps, f"{key}/to_timestamp": self.frames / self.fps}

    def close(self) -> None:
        if self.out is not None:
            self._mux(self.stream.encode())
            self.out.close()
            self.out = None


def export_lerobot(src: Source, out: Path, *, overwrite: bool = False, task: str = TASK, video: bool = False,
                   progress: bool = False) -> dict[str, Any]:
    """Write ``src`` as a LeRobotDataset v3.0 folder at ``out`` (built in a temp folder, then renamed); ``video``:
    the wrist images as an AV1 video (lossy) rather than embedded PNGs."""
    pa, pq = require("pyarrow"), require("pyarrow.parquet")
    av = require("av") if video else None
    out = Path(out)
    check_out(out, "lerobot", overwrite)
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(dir=out.parent, prefix=f".tmp-{out.name}-"))
    os.chmod(tmp, default_mode(folder=True))
    learner = learner_queried(src)
    feats = features(src, learner, video)
    fps = lerobot_fps(src)
    try:
        with ArtifactFolder(tmp, "export"):
            files, rows, total = _DataFiles(tmp, pq), [], 0
            videos = _VideoFiles(tmp, av, fps) if video else None
            try:
                for i, (label, ep) in enumerate(episodes_bar(src, progress)):
                    a = step_arrays(ep, learner)
                    n = len(a["action"])
                    cols = _columns(a, i, total, fps, feats)
                    where = files.write(_arrow_table(pa, cols, feats)) | (videos.write(a["rgb"]) if videos else {})
                    stats = _stats(cols, feats, a["rgb"])
                    rows.append({"episode_index": i, "tasks": [task], "length": n, **where,
                                 "dataset_from_index": total, "dataset_to_index": total + n,
                                 "meta/episodes/chunk_index": 0, "meta/episodes/file_index": 0,
                                 **{f"stats/{k}/{f}": v for k, s in stats.items() for f, v in s.items()},
                                 "source": label, "seed": int(ep.info.get("seed", -1)),
                                 "success": bool(ep.info.get("success", False)), "_stats": stats})
                    total += n
            finally:
                files.close()
                if videos:
                    videos.close()
            _write_meta(tmp, pa, pq, rows, feats, task, fps, total, export_meta(src, "lerobot") | {"video": video})
        replace_into(tmp, out)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return {"episodes": len(src.episodes), "frames": total, "out": str(out)}


def _write_meta(root: Path, pa: Any, pq: Any, rows: list[dict[str, Any]], feats: dict[str, dict[str, Any]],
                task: str, fps: float, total: int, ours: dict[str, Any]) -> None:
    meta = root / "meta"
    meta.mkdir()
    n_eps = len(rows)
    info = {"codebase_version": CODEBASE_VERSION, "robot_type": "grasp_s2r_sim_iiwa", "total_episodes": n_eps,
            "total_frames": total, "total_tasks": 1, "chunks_size": CHUNK_SIZE, "data_files_size_in_mb": DATA_FILE_MB,
            "video_files_size_in_mb": VIDEO_FILE_MB, "fps": fps, "splits": {"train": f"0:{n_eps}"}, "data_path": DATA_PATH,
            "video_path": VIDEO_PATH if ours["video"] else None, "features": feats, "grasp_s2r": ours}
    (meta / "info.json").write_text(json.dumps(info, indent=4, allow_nan=False))
    pq.write_table(_tasks_table(pa, [task]), meta / "tasks.parquet")
    if not rows:
        return
    stats = [r.pop("_stats") for r in rows]
    path = root / EPISODES_PATH.format(chunk_index=0, file_index=0)
    path.parent.mkdir(parents=True)
    pq.write_table(pa.Table.from_pylist(rows), path)
    (meta / "stats.json").write_text(json.dumps(aggregate_stats(stats), indent=4, allow_nan=False))
