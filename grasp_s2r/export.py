"""``grasp-s2r export DATASET --format lerobot|robomimic --out PATH``: episodes in the field's dataset formats.

DATASET is a ``grasp-s2r collect`` dataset (kind ``expert-demonstrations``), one DAgger round (``RUN/round-NNN``,
``RUN/bc-expert``) or a whole DAgger run folder (its rounds in order). Per step: the wrist image, proprio (5,
``PROPRIO_NAMES``), the expert's action label (4: TCP displacement x, y, z in units of 2 cm, gripper > 0 closes),
the simulator state (36, ``STATE_NAMES``); a sparse reward (1 on the last step of a successful episode) and done
(the last step). Recorded rollouts add the executed action and whether the expert's was executed, and the
learner's action where the learner was queried: zeros beside a ``learner_queried`` mask, the pair left out when no
step of the source was queried (a ``collect`` dataset), so that no column holds NaN.

- ``robomimic``: one HDF5 file, ``data`` (attrs ``total``, ``env_args`` JSON: ``env_name``, ``type``,
  ``env_kwargs``) / ``demo_N`` (attr ``num_samples``) / ``obs`` and ``next_obs`` (``--no-next-obs`` leaves it out)
  ``{robot0_eye_in_hand_image, proprio, sphere_mask[, input_mask]}``, ``actions``, ``rewards``, ``dones``,
  ``states``, filter keys ``mask/{train,valid,success}``.
- ``lerobot``: a LeRobotDataset v3.0 folder (:mod:`grasp_s2r.export_lerobot`).

Needs h5py / pyarrow (PyAV for ``--video``): ``pip install -e ".[export]"``. Layouts, and the commands that load them: docs/export.md.
"""

from __future__ import annotations

import json
import os
import shutil
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
from tqdm import tqdm

from grasp_s2r import GYM_ENV_ID, __version__
from grasp_s2r.artifacts import ARTIFACT_KINDS, enclosing_artifact, folder_kind
from grasp_s2r.data.episodes import DatasetError, Episode, EpisodeDataset
from grasp_s2r.files import default_mode
from grasp_s2r.sim.config import EnvConfig
from grasp_s2r.sim.env import PROPRIO_NAMES, STATE_NAMES

FORMATS = ("lerobot", "robomimic")
EXPORT_FORMAT_VERSION = 2
"""Of what this module writes (the ``grasp_s2r`` block of every export): 2 = robomimic ``env_args["type"]`` and
``next_obs`` by default, LeRobotDataset v3.0, learner actions as zeros beside ``learner_queried``; 1 (unmarked) =
``env_args["env_type"]``, LeRobotDataset v2.1, NaN learner actions."""
ACTION_NAMES = ["dx", "dy", "dz", "gripper"]
TASK = "grasp the small sphere and lift it"
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
    config: dict[str, Any] = field(default_factory=dict)
    """The config that made the episodes: the dataset's (``meta.json``), or the DAgger run's (``run.json``)."""
    features: dict[str, Any] = field(default_factory=dict)
    """The episodes' feature schema as their dataset recorded it (``meta.json``'s ``features``)."""

    def names(self, key: str) -> list[str]:
        """The entries of vector feature ``key`` ("proprio", "state") as the dataset recorded them: a dataset made by
        another version labels its own columns (this version's names where it recorded none)."""
        current = {"proprio": PROPRIO_NAMES, "state": STATE_NAMES}[key]
        return list(self.features.get(key, {}).get("names") or current)


def require(module: str) -> Any:
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
            return _with_episodes(Source(path, ds.meta["kind"], [(f"{path.name}/{e.path.name}", e) for e in ds],
                                         _dataset_env(ds.meta), ds.meta.get("config", {}),
                                         ds.meta.get("features", {})))
        rounds = sorted(p for p in path.glob("round-[0-9][0-9][0-9]") if (p / "meta.json").is_file())
        if (path / "run.json").is_file() and rounds:
            sets = [EpisodeDataset(r) for r in rounds]
            eps = [(f"{r.name}/{e.path.name}", e) for r, ds in zip(rounds, sets) for e in ds]
            return _with_episodes(Source(path, "dagger-run", eps, _dataset_env(sets[0].meta), _run_config(path),
                                         sets[0].meta.get("features", {})))
    except DatasetError as e:
        raise ExportError(str(e)) from None
    raise ExportError(f"{path} is neither an episode dataset (grasp-s2r collect, a DAgger round-NNN/) nor a DAgger "
                      "run folder")


def learner_queried(src: Source) -> bool:
    """Whether the learner was queried on any step of ``src``: else its action columns are left out."""
    return any("learner_action" in ep.features() and np.isfinite(np.asarray(ep["learner_action"])).all(1).any()
               for _, ep in src.episodes)


def episodes_bar(src: Source, progress: bool) -> Any:
    """``src.episodes`` with a progress bar on stderr when ``progress``."""
    return tqdm(src.episodes, unit="ep", desc="export", disable=not progress)


def _with_episodes(source: Source) -> Source:
    """``source``, unless it holds no finished episode (a run stopped before its first was written): an empty export
    would say nothing."""
    if not source.episodes:
        raise ExportError(f"{source.path} holds no finished episode yet: nothing to export")
    return source


def _run_config(run: Path) -> dict[str, Any]:
    """A DAgger run folder's config (its ``run.json``), or {} where it cannot be read."""
    try:
        return dict(json.loads((run / "run.json").read_text()).get("config", {}))
    except (OSError, ValueError, AttributeError):
        return {}


def export_meta(src: Source, fmt: str) -> dict[str, Any]:
    """The ``grasp_s2r`` block of an export: its format and version, where it came from, the scene config and the
    config that made its episodes (``source_config``)."""
    return {"format": fmt, "format_version": EXPORT_FORMAT_VERSION, "source": str(src.path), "kind": src.kind,
            "package_version": __version__, "env": src.env.to_dict(), "source_config": src.config}


def step_arrays(ep: Episode, learner: bool) -> dict[str, np.ndarray]:
    """One episode's steps: the common features, the rollout ones when present; with ``learner``, the learner's
    action (zeros where it was not queried) and ``learner_queried``."""
    n = len(ep)
    out = {k: np.asarray(ep[k]) for k in ("rgb", "sphere_mask", "proprio", "action", "state", "phase")}
    names = ep.features()
    for k in ("input_mask", "executed_action", "from_expert"):
        if k in names:
            out[k] = np.asarray(ep[k])
    if learner:
        la = np.asarray(ep["learner_action"], np.float32) if "learner_action" in names else np.full((n, 4), np.nan)
        queried = np.isfinite(la).all(1)
        out["learner_action"] = np.where(queried[:, None], la, 0.0).astype(np.float32)
        out["learner_queried"] = queried
    reward = np.zeros(n, np.float32)
    reward[-1] = float(bool(ep.info.get("success", False)))
    done = np.zeros(n, bool)
    done[-1] = True
    out["reward"], out["done"] = reward, done
    return out


# --- where the export goes ----------------------------------------------------------------------------------
def check_out(out: Path, fmt: str, overwrite: bool) -> None:
    if not out.exists():
        if (inside := enclosing_artifact(out)) is not None:
            raise ExportError(f"--out {out} lies inside {inside[0]}, which holds "
                              f"{ARTIFACT_KINDS.get(inside[1], inside[1])}; write the export elsewhere")
        return
    lerobot = fmt == "lerobot"
    ours = out.is_dir() and folder_kind(out) == "export" if lerobot else out.is_file() and _is_our_hdf5(out)
    if not ours:
        raise ExportError(f"{out} exists and is not an earlier {fmt} export of grasp-s2r; it is left untouched: "
                          "choose another --out")
    if not overwrite:
        raise ExportError(f"{out} holds an earlier export; pass --overwrite to replace it, or choose another --out")


def _is_our_hdf5(path: Path) -> bool:
    h5py = require("h5py")
    try:
        with h5py.File(path, "r") as f:
            return "grasp_s2r" in f.attrs
    except OSError:
        return False


def replace_into(tmp: Path, out: Path) -> None:
    if out.is_dir():
        shutil.rmtree(out)
    os.replace(tmp, out)


# --- robomimic ----------------------------------------------------------------------------------------------
def export_robomimic(src: Source, out: Path, *, next_obs: bool = True, overwrite: bool = False,
                     progress: bool = False) -> dict[str, Any]:
    """Write ``src`` as one robomimic HDF5 file at ``out`` (written to a temp file, then renamed). ``next_obs``:
    the observations shifted by one step (the last repeated), which ``SequenceDataset`` loads by default."""
    h5py = require("h5py")
    out = Path(out)
    check_out(out, "robomimic", overwrite)
    out.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp_name = tempfile.mkstemp(dir=out.parent, prefix=f".tmp-{out.name}-", suffix=".hdf5")
    os.close(fd)
    tmp = Path(tmp_name)
    os.chmod(tmp, default_mode(folder=False))
    total, success, learner = 0, [], learner_queried(src)
    try:
        with h5py.File(tmp, "w") as f:
            f.attrs["grasp_s2r"] = json.dumps(export_meta(src, "robomimic") | {"next_obs": next_obs})
            data = f.create_group("data")
            for i, (label, ep) in enumerate(episodes_bar(src, progress)):
                a = step_arrays(ep, learner)
                demo = data.create_group(f"demo_{i}")
                _write_demo(demo, a, next_obs, src.names("proprio"))
                demo.attrs["seed"] = int(ep.info.get("seed", -1))
                demo.attrs["success"] = bool(ep.info.get("success", False))
                demo.attrs["source"] = label
                total += len(a["action"])
                success.append(bool(ep.info.get("success", False)))
            data.attrs["total"] = total
            data.attrs["env_args"] = json.dumps({
                "env_name": GYM_ENV_ID, "type": ROBOMIMIC_GYM_TYPE, "env_kwargs": {},
                "grasp_s2r": {"env": src.env.to_dict(), "proprio_names": src.names("proprio"),
                              "action_names": ACTION_NAMES, "state_names": src.names("state"),
                              "control_hz": src.env.scene.control_hz, "task": TASK},
            })
            names = [f"demo_{i}" for i in range(len(src.episodes))]
            valid = names[::10] if len(names) > 1 else []
            for key, demos in (("train", [n for n in names if n not in valid]), ("valid", valid),
                               ("success", [n for n, s in zip(names, success) if s])):
                f.create_dataset(f"mask/{key}", data=np.array(demos, dtype="S"))
        replace_into(tmp, out)
    finally:
        tmp.unlink(missing_ok=True)
    return {"episodes": len(src.episodes), "frames": total, "out": str(out)}


def _write_demo(demo: Any, a: dict[str, np.ndarray], next_obs: bool, proprio_names: list[str]) -> None:
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
        g["proprio"].attrs["names"] = json.dumps(proprio_names)
    demo.create_dataset("actions", data=a["action"].astype(np.float32))
    demo.create_dataset("rewards", data=a["reward"].astype(np.float64))
    demo.create_dataset("dones", data=a["done"].astype(np.int64))
    demo.create_dataset("states", data=a["state"].astype(np.float64))
    for k, name in (("learner_action", "learner_actions"), ("learner_queried", "learner_queried"),
                    ("executed_action", "executed_actions"), ("from_expert", "from_expert")):
        if k in a:
            demo.create_dataset(name, data=a[k])
    demo.attrs["num_samples"] = len(a["action"])
