"""``grasp-s2r export DATASET --format lerobot|robomimic --out PATH``: episodes in the field's dataset formats.

DATASET is a ``grasp-s2r collect`` dataset (kind ``expert-demonstrations``), one DAgger round (``RUN/round-NNN``,
``RUN/bc-expert``) or a whole DAgger run folder (its rounds in order). Per step: the wrist image, proprio (5,
``PROPRIO_NAMES``), the expert's action label (4: TCP displacement x, y, z in units of 2 cm, gripper > 0 closes),
the simulator state (36, ``STATE_NAMES``); a sparse reward (1 on the last step of a successful episode) and done
(the last step). DAgger rounds add the learner's and the executed actions and which one was executed.

- ``robomimic``: one HDF5 file, ``data`` (attrs ``total``, ``env_args`` JSON) / ``demo_N`` (attr ``num_samples``) /
  ``obs/{robot0_eye_in_hand_image, proprio, sphere_mask[, input_mask]}``, ``actions``, ``rewards``, ``dones``,
  ``states`` (``next_obs`` with ``--next-obs``), filter keys ``mask/{train,valid,success}``.
- ``lerobot``: a LeRobotDataset v2.1 folder: ``meta/{info.json, episodes.jsonl, tasks.jsonl, episodes_stats.jsonl,
  stats.json}``, ``data/chunk-000/episode_000000.parquet`` with the images embedded as PNG (feature dtype
  ``image``, as LeRobot writes them) and the parquet schema's ``huggingface`` features, so that
  ``datasets.load_dataset("parquet")`` (what LeRobotDataset calls) decodes them.

Needs h5py / pyarrow: ``pip install -e ".[export]"``. Layouts: docs/export.md.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import tempfile
import warnings
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import cv2
import numpy as np

from grasp_s2r import GYM_ENV_ID, __version__
from grasp_s2r.data.episodes import DatasetError, Episode, EpisodeDataset
from grasp_s2r.files import ArtifactError, ArtifactFolder, folder_kind
from grasp_s2r.options import UsageError
from grasp_s2r.sim.config import EnvConfig
from grasp_s2r.sim.env import PROPRIO_NAMES, STATE_NAMES

FORMATS = ("lerobot", "robomimic")
ACTION_NAMES = ["dx", "dy", "dz", "gripper"]
TASK = "grasp the small sphere and lift it"
LEROBOT_VERSION = "v2.1"
CHUNK_SIZE = 1000
ROBOMIMIC_GYM_TYPE = 2
"""robomimic's ``EnvType.GYM_TYPE``."""
INSTALL_HINT = 'pip install -e ".[export]"'


class ExportError(ValueError):
    """A source that cannot be exported, an --out that may not be written, or a missing package; one line."""


@dataclass(frozen=True)
class Source:
    """The episodes to export, in order, with the scene they were made in."""

    path: Path
    kind: str
    """"expert-demonstrations", "dagger-round", "bc-expert" or "dagger-run"."""
    episodes: list[tuple[str, Episode]]
    """(label, episode): the label names its folder, e.g. ``round-001/episode-000003``."""
    env: EnvConfig


def _require(module: str) -> Any:
    import importlib

    try:
        return importlib.import_module(module)
    except ImportError:
        raise ExportError(f"this export needs the {module} package: {INSTALL_HINT}") from None


def _dataset_env(meta: dict[str, Any]) -> EnvConfig:
    cfg = meta.get("config", {})
    env = cfg.get("env") or cfg.get("run", {}).get("env")
    return EnvConfig.from_dict(env) if env else EnvConfig()


def read_source(path: Path | str) -> Source:
    """The episodes of a dataset folder, or of every round of a DAgger run folder (:class:`ExportError` otherwise)."""
    path = Path(path)
    if not path.is_dir():
        raise ExportError(f"{path} is not a folder")
    try:
        if (path / "meta.json").is_file():
            ds = EpisodeDataset(path)
            return Source(path, ds.meta["kind"], [(f"{path.name}/{e.path.name}", e) for e in ds], _dataset_env(ds.meta))
        rounds = sorted(p for p in path.glob("round-[0-9][0-9][0-9]") if (p / "meta.json").is_file())
        if (path / "run.json").is_file() and rounds:
            sets = [EpisodeDataset(r) for r in rounds]
            eps = [(f"{r.name}/{e.path.name}", e) for r, ds in zip(rounds, sets) for e in ds]
            return Source(path, "dagger-run", eps, _dataset_env(sets[0].meta))
    except DatasetError as e:
        raise ExportError(str(e)) from None
    raise ExportError(f"{path} is neither an episode dataset (grasp-s2r collect, a DAgger round-NNN/) nor a DAgger "
                      "run folder")


def _arrays(ep: Episode) -> dict[str, np.ndarray]:
    """One episode's steps: the common features, plus the DAgger ones when present."""
    n = len(ep)
    out = {k: np.asarray(ep[k]) for k in ("rgb", "sphere_mask", "proprio", "action", "state", "phase")}
    names = ep.features()
    for k in ("input_mask", "learner_action", "executed_action", "from_expert"):
        if k in names:
            out[k] = np.asarray(ep[k])
    reward = np.zeros(n, np.float32)
    reward[-1] = float(bool(ep.info.get("success", False)))
    done = np.zeros(n, bool)
    done[-1] = True
    out["reward"], out["done"] = reward, done
    return out


# --- where the export goes ----------------------------------------------------------------------------------
def _check_out(out: Path, fmt: str, overwrite: bool) -> None:
    if not out.exists():
        return
    lerobot = fmt == "lerobot"
    ours = out.is_dir() and folder_kind(out) == "export" if lerobot else out.is_file() and _is_our_hdf5(out)
    if not ours:
        raise ExportError(f"{out} exists and is not an earlier {fmt} export of grasp-s2r; it is left untouched: "
                          "choose another --out")
    if not overwrite:
        raise ExportError(f"{out} holds an earlier export; pass --overwrite to replace it, or choose another --out")


def _is_our_hdf5(path: Path) -> bool:
    h5py = _require("h5py")
    try:
        with h5py.File(path, "r") as f:
            return "grasp_s2r" in f.attrs
    except OSError:
        return False


def _replace(tmp: Path, out: Path) -> None:
    if out.is_dir():
        shutil.rmtree(out)
    os.replace(tmp, out)


# --- robomimic ----------------------------------------------------------------------------------------------
def export_robomimic(src: Source, out: Path, *, next_obs: bool = False, overwrite: bool = False) -> dict[str, Any]:
    """Write ``src`` as one robomimic HDF5 file at ``out`` (written to a temp file, then renamed)."""
    h5py = _require("h5py")
    out = Path(out)
    _check_out(out, "robomimic", overwrite)
    out.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp_name = tempfile.mkstemp(dir=out.parent, prefix=f".tmp-{out.name}-", suffix=".hdf5")
    os.close(fd)
    tmp = Path(tmp_name)
    total, success = 0, []
    try:
        with h5py.File(tmp, "w") as f:
            f.attrs["grasp_s2r"] = json.dumps({"format": "robomimic", "source": str(src.path), "kind": src.kind,
                                               "package_version": __version__})
            data = f.create_group("data")
            for i, (label, ep) in enumerate(src.episodes):
                a = _arrays(ep)
                demo = data.create_group(f"demo_{i}")
                obs = {"robot0_eye_in_hand_image": a["rgb"], "proprio": a["proprio"].astype(np.float32),
                       "sphere_mask": a["sphere_mask"].astype(np.uint8)}
                if "input_mask" in a:
                    obs["input_mask"] = a["input_mask"].astype(np.uint8)
                groups = {"obs": obs}
                if next_obs:
                    groups["next_obs"] = {k: np.concatenate([v[1:], v[-1:]]) for k, v in obs.items()}
                for name, group in groups.items():
                    g = demo.create_group(name)
                    for k, v in group.items():
                        g.create_dataset(k, data=v, compression="gzip" if v.ndim > 2 else None)
                    g["proprio"].attrs["names"] = json.dumps(list(PROPRIO_NAMES))
                demo.create_dataset("actions", data=a["action"].astype(np.float32))
                demo.create_dataset("rewards", data=a["reward"].astype(np.float64))
                demo.create_dataset("dones", data=a["done"].astype(np.int64))
                demo.create_dataset("states", data=a["state"].astype(np.float64))
                for k, name in (("learner_action", "learner_actions"), ("executed_action", "executed_actions"),
                                ("from_expert", "from_expert")):
                    if k in a:
                        demo.create_dataset(name, data=a[k])
                demo.attrs["num_samples"] = len(a["action"])
                demo.attrs["seed"] = int(ep.info.get("seed", -1))
                demo.attrs["success"] = bool(ep.info.get("success", False))
                demo.attrs["source"] = label
                total += len(a["action"])
                success.append(bool(ep.info.get("success", False)))
            data.attrs["total"] = total
            data.attrs["env_args"] = json.dumps({
                "env_name": GYM_ENV_ID, "env_type": ROBOMIMIC_GYM_TYPE, "env_kwargs": {},
                "grasp_s2r": {"env": src.env.to_dict(), "proprio_names": list(PROPRIO_NAMES),
                              "action_names": ACTION_NAMES, "state_names": list(STATE_NAMES),
                              "control_hz": src.env.scene.control_hz, "task": TASK},
            })
            names = [f"demo_{i}" for i in range(len(src.episodes))]
            valid = names[::10] if len(names) > 1 else []
            for key, demos in (("train", [n for n in names if n not in valid]), ("valid", valid),
                               ("success", [n for n, s in zip(names, success) if s])):
                f.create_dataset(f"mask/{key}", data=np.array(demos, dtype="S"))
        _replace(tmp, out)
    finally:
        tmp.unlink(missing_ok=True)
    return {"episodes": len(src.episodes), "frames": total, "out": str(out)}


# --- LeRobot ------------------------------------------------------------------------------------------------
def _value(dtype: str) -> dict[str, str]:
    return {"dtype": dtype, "_type": "Value"}


def _lerobot_features(src: Source, dagger: bool) -> dict[str, dict[str, Any]]:
    cam = src.env.camera
    vec = {"observation.state": ("float32", list(PROPRIO_NAMES)), "action": ("float32", ACTION_NAMES),
           "sim.state": ("float64", list(STATE_NAMES))}
    if dagger:
        vec |= {"learner_action": ("float32", ACTION_NAMES), "executed_action": ("float32", ACTION_NAMES)}
    feats: dict[str, dict[str, Any]] = {
        "observation.images.wrist": {"dtype": "image", "shape": [cam.height_px, cam.width_px, 3],
                                     "names": ["height", "width", "channel"]},
        **{k: {"dtype": d, "shape": [len(n)], "names": n} for k, (d, n) in vec.items()},
        "next.reward": {"dtype": "float32", "shape": [1], "names": None},
        "next.done": {"dtype": "bool", "shape": [1], "names": None},
        "next.success": {"dtype": "bool", "shape": [1], "names": None},
        "expert.phase": {"dtype": "int64", "shape": [1], "names": None},
    }
    if dagger:
        feats["from_expert"] = {"dtype": "bool", "shape": [1], "names": None}
    for k in ("timestamp", "frame_index", "episode_index", "index", "task_index"):
        feats[k] = {"dtype": "float32" if k == "timestamp" else "int64", "shape": [1], "names": None}
    return feats


def _columns(a: dict[str, np.ndarray], ep_index: int, start: int, fps: float, dagger: bool) -> dict[str, Any]:
    n = len(a["action"])
    png = [cv2.imencode(".png", cv2.cvtColor(im, cv2.COLOR_RGB2BGR))[1].tobytes() for im in a["rgb"]]
    cols: dict[str, Any] = {
        "observation.images.wrist": [{"bytes": b, "path": None} for b in png],
        "observation.state": a["proprio"].astype(np.float32), "action": a["action"].astype(np.float32),
        "sim.state": a["state"].astype(np.float64), "next.reward": a["reward"].astype(np.float32),
        "next.done": a["done"], "next.success": a["done"] & (a["reward"] > 0),
        "expert.phase": a["phase"].astype(np.int64),
    }
    if dagger:
        cols |= {"learner_action": a["learner_action"].astype(np.float32),
                 "executed_action": a["executed_action"].astype(np.float32), "from_expert": a["from_expert"]}
    cols |= {"timestamp": (np.arange(n) / fps).astype(np.float32), "frame_index": np.arange(n, dtype=np.int64),
             "episode_index": np.full(n, ep_index, np.int64), "index": np.arange(start, start + n, dtype=np.int64),
             "task_index": np.zeros(n, np.int64)}
    return cols


def _stats(cols: dict[str, Any], feats: dict[str, dict[str, Any]], rgb: np.ndarray) -> dict[str, Any]:
    """LeRobot's per-episode stats: min, max, mean, std, count per feature (images: per channel in [0, 1])."""
    out = {}
    for k, ft in feats.items():
        if ft["dtype"] == "image":
            x = rgb.astype(np.float64).transpose(0, 3, 1, 2) / 255.0  # (T, C, H, W), reduced over T, H, W
            s = {f: getattr(np, f)(x, axis=(0, 2, 3), keepdims=True)[0] for f in ("min", "max", "mean", "std")}
        else:
            x = np.asarray(cols[k], dtype=np.float64).reshape(len(rgb), -1)
            with warnings.catch_warnings():  # all-NaN columns (actions the learner was not asked for) -> 0
                warnings.simplefilter("ignore", RuntimeWarning)
                s = {f: getattr(np, f"nan{f}")(x, axis=0) for f in ("min", "max", "mean", "std")}
            s = {f: np.nan_to_num(v) for f, v in s.items()}
        out[k] = {f: v.tolist() for f, v in s.items()} | {"count": [len(rgb)]}
    return out


def _aggregate(stats: list[dict[str, Any]]) -> dict[str, Any]:
    out = {}
    for k in stats[0]:
        n = np.array([s[k]["count"][0] for s in stats], float)
        means = np.array([s[k]["mean"] for s in stats])
        w = (n / n.sum()).reshape(-1, *[1] * (means.ndim - 1))
        mean = (w * means).sum(0)
        var = (w * (np.array([s[k]["std"] for s in stats]) ** 2 + (means - mean) ** 2)).sum(0)
        out[k] = {"min": np.min([s[k]["min"] for s in stats], 0).tolist(),
                  "max": np.max([s[k]["max"] for s in stats], 0).tolist(), "mean": mean.tolist(),
                  "std": np.sqrt(var).tolist(), "count": [int(n.sum())]}
    return out


def _arrow_table(pa: Any, cols: dict[str, Any], feats: dict[str, dict[str, Any]]) -> Any:
    arrays, hf = {}, {}
    for k, ft in feats.items():
        v = cols[k]
        if ft["dtype"] == "image":
            arrays[k] = pa.array(v, type=pa.struct([("bytes", pa.binary()), ("path", pa.string())]))
            hf[k] = {"_type": "Image"}
        elif ft["shape"] == [1]:
            arrays[k] = pa.array(np.asarray(v).reshape(-1))
            hf[k] = _value(ft["dtype"])
        else:
            flat = pa.array(np.ascontiguousarray(v).reshape(-1))
            arrays[k] = pa.FixedSizeListArray.from_arrays(flat, ft["shape"][0])
            hf[k] = {"feature": _value(ft["dtype"]), "length": ft["shape"][0], "_type": "Sequence"}
    table = pa.table(arrays)
    return table.replace_schema_metadata({"huggingface": json.dumps({"info": {"features": hf}})})


def export_lerobot(src: Source, out: Path, *, overwrite: bool = False, task: str = TASK) -> dict[str, Any]:
    """Write ``src`` as a LeRobotDataset v2.1 folder at ``out`` (built in a temp folder, then renamed)."""
    pa, pq = _require("pyarrow"), _require("pyarrow.parquet")
    out = Path(out)
    _check_out(out, "lerobot", overwrite)
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(dir=out.parent, prefix=f".tmp-{out.name}-"))
    dagger = bool(src.episodes) and "learner_action" in src.episodes[0][1].features()
    feats = _lerobot_features(src, dagger)
    fps = src.env.scene.control_hz
    data_path = "data/chunk-{episode_chunk:03d}/episode_{episode_index:06d}.parquet"
    try:
        with ArtifactFolder(tmp, "export"):
            episodes, stats, total = [], [], 0
            for i, (label, ep) in enumerate(src.episodes):
                a = _arrays(ep)
                cols = _columns(a, i, total, fps, dagger)
                path = tmp / data_path.format(episode_chunk=i // CHUNK_SIZE, episode_index=i)
                path.parent.mkdir(parents=True, exist_ok=True)
                pq.write_table(_arrow_table(pa, cols, feats), path)
                n = len(a["action"])
                episodes.append({"episode_index": i, "tasks": [task], "length": n, "source": label,
                                 "seed": int(ep.info.get("seed", -1)), "success": bool(ep.info.get("success", False))})
                stats.append(_stats(cols, feats, a["rgb"]))
                total += n
            n_eps = len(episodes)
            info = {"codebase_version": LEROBOT_VERSION, "robot_type": "grasp_s2r_sim_iiwa", "total_episodes": n_eps,
                    "total_frames": total, "total_tasks": 1, "total_videos": 0,
                    "total_chunks": -(-n_eps // CHUNK_SIZE), "chunks_size": CHUNK_SIZE, "fps": fps,
                    "splits": {"train": f"0:{n_eps}"}, "data_path": data_path, "video_path": None, "features": feats,
                    "grasp_s2r": {"source": str(src.path), "kind": src.kind, "package_version": __version__,
                                  "env": src.env.to_dict()}}
            meta = tmp / "meta"
            meta.mkdir()
            (meta / "info.json").write_text(json.dumps(info, indent=4, allow_nan=False))
            (meta / "tasks.jsonl").write_text(json.dumps({"task_index": 0, "task": task}) + "\n")
            (meta / "episodes.jsonl").write_text("".join(json.dumps(e) + "\n" for e in episodes))
            (meta / "episodes_stats.jsonl").write_text("".join(
                json.dumps({"episode_index": i, "stats": s}, allow_nan=False) + "\n" for i, s in enumerate(stats)))
            if stats:
                (meta / "stats.json").write_text(json.dumps(_aggregate(stats), indent=4, allow_nan=False))
        _replace(tmp, out)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return {"episodes": len(src.episodes), "frames": total, "out": str(out)}


# --- command ------------------------------------------------------------------------------------------------
def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("dataset", metavar="DATASET",
                   help="a 'grasp-s2r collect' dataset, a DAgger round (RUN/round-NNN) or a DAgger run folder")
    p.add_argument("--format", required=True, choices=FORMATS, help="lerobot (LeRobotDataset v2.1 folder) or "
                   "robomimic (one HDF5 file)")
    p.add_argument("--out", required=True, type=Path, help="the folder (lerobot) or .hdf5 file (robomimic) to write")
    p.add_argument("--overwrite", action="store_true", help="replace an earlier export at --out")
    p.add_argument("--next-obs", action="store_true", help="robomimic: also write next_obs (offline RL algorithms)")
    p.add_argument("--task", default=TASK, help="lerobot: the task text of every episode (default: %(default)r)")


def run(args: argparse.Namespace) -> int:
    try:
        src = read_source(Path(args.dataset))
        if args.format == "robomimic":
            res = export_robomimic(src, args.out, next_obs=args.next_obs, overwrite=args.overwrite)
        else:
            res = export_lerobot(src, args.out, overwrite=args.overwrite, task=args.task)
    except (ExportError, ArtifactError) as e:
        raise UsageError(str(e)) from None
    print(f"export: {res['episodes']} episodes, {res['frames']} frames from {src.path} ({src.kind}) -> {res['out']} "
          f"({args.format})")
    return 0
