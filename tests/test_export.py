"""``grasp-s2r export``: robomimic HDF5 and LeRobotDataset v3.0 read back by layout, with pyarrow, pandas and Hugging
Face ``datasets`` (the libraries themselves load them in benchmarks/check_interop.py)."""

from __future__ import annotations

import io
import json
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from grasp_s2r.data.episodes import EpisodeDataset, init_dataset, write_episode
from grasp_s2r.expert.fsm import Expert
from grasp_s2r.export import EXPORT_FORMAT_VERSION, INSTALL_HINT, export_robomimic, read_source
from grasp_s2r.export_lerobot import QUANTILES, export_lerobot
from grasp_s2r.sim.config import EnvConfig, SceneConfig
from grasp_s2r.sim.env import PROPRIO_NAMES, STATE_NAMES, GraspEnv

h5py = pytest.importorskip("h5py")
pq = pytest.importorskip("pyarrow.parquet")

CLI = [sys.executable, "-m", "grasp_s2r"]
ENV = EnvConfig(scene=SceneConfig(max_episode_steps=20))


def _episode(env: GraspEnv, seed: int) -> tuple[dict[str, np.ndarray], dict]:
    expert, r = Expert(env.config.scene), env.reset(seed)
    steps: dict[str, list] = {k: [] for k in ("rgb", "sphere_mask", "gripper_mask", "proprio", "action", "phase",
                                              "state")}
    while not (r.terminated or r.truncated):
        a, phase = expert.act(env.privileged())
        for k, v in (("rgb", r.frame.rgb), ("sphere_mask", r.frame.sphere_mask),
                     ("gripper_mask", r.frame.gripper_mask), ("proprio", r.proprio),
                     ("action", a.astype(np.float32)), ("phase", np.int8(phase)), ("state", env.get_state())):
            steps[k].append(v)
        r = env.step(a)
    arrays = {k: np.stack(v) for k, v in steps.items()}
    return arrays, {"seed": seed, "length": len(arrays["action"]), "success": bool(r.success)}


def _write(root: Path, kind: str, config: dict, episodes: list[tuple[dict, dict]]) -> Path:
    from grasp_s2r.data.episodes import feature_schema

    init_dataset(root, config, feature_schema(episodes[0][0]), kind)
    for i, (arrays, info) in enumerate(episodes):
        write_episode(root, i, arrays, info)
    return root


@pytest.fixture(scope="module")
def sources(tmp_path_factory):
    """A collect-like dataset (3 expert episodes) and a DAgger run folder of 2 rounds (2 + 1 episodes)."""
    base = tmp_path_factory.mktemp("export")
    with GraspEnv(ENV) as env:
        eps = [_episode(env, s) for s in (3, 4, 5)]
    demos = _write(base / "demos", "expert-demonstrations", {"seed": 3, "env": ENV.to_dict()}, eps)
    run = base / "run"
    run.mkdir()
    (run / "run.json").write_text(json.dumps({"format": "grasp_s2r.dagger-run"}))
    for r, chunk in ((0, eps[:2]), (1, eps[2:])):
        rounds = []
        for arrays, info in chunk:
            a = {k: v for k, v in arrays.items() if k != "gripper_mask"}
            n = len(a["action"])
            learner = np.full((n, 4), np.nan, np.float32) if r == 0 else a["action"] * 0.5
            a |= {"input_mask": a["sphere_mask"][::-1].copy(), "learner_action": learner,
                  "executed_action": a["action"], "from_expert": np.arange(n) % 2 == r}
            rounds.append((a, {**info, "beta": 1.0 - r}))
        _write(run / f"round-{r:03d}", "dagger-round", {"run": {"env": ENV.to_dict()}, "round": r}, rounds)
    return {"demos": demos, "run": run, "eps": eps}


def test_robomimic_reads_back_with_h5py_as_robomimic_does(sources, tmp_path):
    out = tmp_path / "demos.hdf5"
    res = export_robomimic(read_source(sources["demos"]), out)
    eps = sources["eps"]
    assert res == {"episodes": 3, "frames": sum(len(a["action"]) for a, _ in eps), "out": str(out)}
    with h5py.File(out, "r") as f:
        data = f["data"]
        demos = sorted(data.keys(), key=lambda k: int(k[5:]))  # robomimic's own ordering of demo keys
        assert demos == ["demo_0", "demo_1", "demo_2"] and data.attrs["total"] == res["frames"]
        env_args = json.loads(data.attrs["env_args"])  # robomimic's EnvUtils.get_env_type reads "type"
        assert env_args["env_name"] == "grasp_s2r/Grasp-v0" and env_args["type"] == 2 and "env_type" not in env_args
        block = json.loads(f.attrs["grasp_s2r"])
        assert block["format_version"] == EXPORT_FORMAT_VERSION
        assert block["source_config"]["seed"] == 3  # the config that made the episodes travels with them
        assert env_args["env_kwargs"] == {} and env_args["grasp_s2r"]["env"] == json.loads(json.dumps(ENV.to_dict()))
        assert env_args["grasp_s2r"]["proprio_names"] == list(PROPRIO_NAMES)
        for name, (arrays, info) in zip(demos, eps):
            d, n = data[name], len(arrays["action"])
            assert d.attrs["num_samples"] == n
            np.testing.assert_array_equal(d["obs/robot0_eye_in_hand_image"][()], arrays["rgb"])
            np.testing.assert_array_equal(d["obs/proprio"][()], arrays["proprio"])
            np.testing.assert_array_equal(d["obs/sphere_mask"][()], arrays["sphere_mask"])
            np.testing.assert_array_equal(d["actions"][()], arrays["action"])
            np.testing.assert_array_equal(d["states"][()], arrays["state"])
            assert d["states"].shape == (n, len(STATE_NAMES))
            assert d["dones"][()].tolist() == [0] * (n - 1) + [1]
            assert d["rewards"][()].tolist() == [0.0] * (n - 1) + [float(info["success"])]
            for k in ("robot0_eye_in_hand_image", "proprio", "sphere_mask"):  # SequenceDataset's load_next_obs
                np.testing.assert_array_equal(d[f"next_obs/{k}"][()][:-1], d[f"obs/{k}"][()][1:])
                np.testing.assert_array_equal(d[f"next_obs/{k}"][()][-1], d[f"obs/{k}"][()][-1])
            assert not {"learner_actions", "learner_queried"} & set(d)  # the learner was never queried
        assert [k.decode() for k in f["mask/train"][()]] + [k.decode() for k in f["mask/valid"][()]] == \
            ["demo_1", "demo_2", "demo_0"]
        assert len(f["mask/success"][()]) == sum(info["success"] for _, info in eps)


def _lerobot_episodes(out: Path, info: dict) -> list:
    """Each episode's rows, found the way LeRobotDataset finds them (meta/episodes: file, dataset_from/to_index)."""
    meta = pq.read_table(out / "meta/episodes/chunk-000/file-000.parquet").to_pylist()
    tables = []
    for ep in meta:
        table = pq.read_table(out / info["data_path"].format(chunk_index=ep["data/chunk_index"],
                                                            file_index=ep["data/file_index"]))
        first = table.column("index").to_pylist().index(ep["dataset_from_index"])
        tables.append(table.slice(first, ep["dataset_to_index"] - ep["dataset_from_index"]))
    return tables


def test_lerobot_folder_follows_the_v3_0_layout_and_reads_back(sources, tmp_path):
    from PIL import Image

    out = tmp_path / "lerobot"
    res = export_lerobot(read_source(sources["demos"]), out)
    eps = sources["eps"]
    info = json.loads((out / "meta" / "info.json").read_text())
    required = {"codebase_version", "robot_type", "total_episodes", "total_frames", "total_tasks", "chunks_size",
                "data_files_size_in_mb", "video_files_size_in_mb", "fps", "splits", "data_path", "video_path",
                "features"}
    assert required <= set(info) and info["codebase_version"] == "v3.0" and info["fps"] == 10
    assert isinstance(info["fps"], int) and info["grasp_s2r"]["format_version"] == EXPORT_FORMAT_VERSION
    assert info["data_path"] == "data/chunk-{chunk_index:03d}/file-{file_index:03d}.parquet"
    assert info["total_episodes"] == 3 and info["total_frames"] == res["frames"] and info["splits"] == {"train": "0:3"}
    feats = info["features"]
    for k in ("timestamp", "frame_index", "episode_index", "index", "task_index"):
        assert feats[k]["shape"] == [1]
    assert feats["observation.images.wrist"] == {"dtype": "image", "shape": [64, 64, 3],
                                                 "names": ["height", "width", "channel"]}
    assert feats["observation.state"]["names"] == list(PROPRIO_NAMES) and feats["action"]["shape"] == [4]
    assert not {"learner_action", "learner_queried"} & set(feats), "a collect dataset: the learner was never queried"
    assert sorted(p.relative_to(out).as_posix() for p in out.rglob("*.parquet")) == [
        "data/chunk-000/file-000.parquet", "meta/episodes/chunk-000/file-000.parquet", "meta/tasks.parquet"]
    episodes = pq.read_table(out / "meta/episodes/chunk-000/file-000.parquet").to_pylist()
    lengths = [len(a["action"]) for a, _ in eps]
    assert [e["length"] for e in episodes] == lengths and [e["episode_index"] for e in episodes] == [0, 1, 2]
    assert [e["dataset_to_index"] for e in episodes] == np.cumsum(lengths).tolist()
    assert {e["tasks"][0] for e in episodes} == {"grasp the small sphere and lift it"}
    stat_names = {"min", "max", "mean", "std", "count"} | {f"q{round(q * 100):02d}" for q in QUANTILES}
    assert {k for k in episodes[0] if k.startswith("stats/")} == {f"stats/{f}/{s}" for f in feats for s in stat_names}
    assert np.shape(episodes[0]["stats/observation.images.wrist/mean"]) == (3, 1, 1)
    np.testing.assert_allclose(episodes[1]["stats/action/max"], eps[1][0]["action"].max(0))
    stats = json.loads((out / "meta" / "stats.json").read_text())
    assert set(stats) == set(feats) and stats["index"]["count"] == [res["frames"]]
    np.testing.assert_allclose(stats["observation.state"]["mean"],
                               np.concatenate([a["proprio"] for a, _ in eps]).mean(0), rtol=1e-5)
    start = 0
    for ep, (table, (arrays, info_ep)) in enumerate(zip(_lerobot_episodes(out, info), eps)):
        assert set(table.column_names) == set(feats)
        cols = table.to_pydict()
        n = len(arrays["action"])
        rgb = np.stack([np.asarray(Image.open(io.BytesIO(c["bytes"]))) for c in cols["observation.images.wrist"]])
        np.testing.assert_array_equal(rgb, arrays["rgb"])
        np.testing.assert_array_equal(np.array(cols["observation.state"], np.float32), arrays["proprio"])
        np.testing.assert_array_equal(np.array(cols["action"], np.float32), arrays["action"])
        np.testing.assert_array_equal(np.array(cols["sim.state"]), arrays["state"])
        assert cols["frame_index"] == list(range(n)) and cols["episode_index"] == [ep] * n
        assert cols["index"] == list(range(start, start + n)) and cols["task_index"] == [0] * n
        np.testing.assert_allclose(cols["timestamp"], np.arange(n) / info["fps"], atol=1e-6)
        assert cols["next.done"] == [False] * (n - 1) + [True]
        assert cols["next.success"][-1] == info_ep["success"]
        start += n


def test_lerobot_tasks_read_back_with_pandas_as_lerobot_looks_them_up(sources, tmp_path):
    pd = pytest.importorskip("pandas")  # comes with Hugging Face datasets (the dev extra)

    out = tmp_path / "lerobot"
    export_lerobot(read_source(sources["demos"]), out, task="pick it up")
    tasks = pd.read_parquet(out / "meta" / "tasks.parquet")
    assert list(tasks.columns) == ["task_index"] and tasks.loc["pick it up"].task_index == 0
    assert tasks.iloc[0].name == "pick it up"  # LeRobotDataset.__getitem__'s item["task"]


def test_lerobot_video_holds_the_episodes_in_a_row_where_the_episode_rows_say(sources, tmp_path):
    av = pytest.importorskip("av")

    out = tmp_path / "video"
    export_lerobot(read_source(sources["demos"]), out, video=True)
    info = json.loads((out / "meta" / "info.json").read_text())
    ft = info["features"]["observation.images.wrist"]
    assert ft["dtype"] == "video" and ft["info"]["video.codec"] == "av1" and ft["info"]["video.fps"] == 10
    assert info["video_path"] == "videos/{video_key}/chunk-{chunk_index:03d}/file-{file_index:03d}.mp4"
    assert "observation.images.wrist" not in pq.read_table(out / "data/chunk-000/file-000.parquet").column_names
    episodes = pq.read_table(out / "meta/episodes/chunk-000/file-000.parquet").to_pylist()
    key = "videos/observation.images.wrist"
    lengths = [len(a["action"]) for a, _ in sources["eps"]]
    assert [e[f"{key}/from_timestamp"] * 10 for e in episodes] == pytest.approx(np.cumsum([0, *lengths[:-1]]))
    assert [e[f"{key}/to_timestamp"] * 10 for e in episodes] == pytest.approx(np.cumsum(lengths))
    with av.open(str(out / info["video_path"].format(video_key="observation.images.wrist", chunk_index=0,
                                                       file_index=0))) as f:
        frames = np.stack([fr.to_ndarray(format="rgb24") for fr in f.decode(video=0)])
    rgb = np.concatenate([a["rgb"] for a, _ in sources["eps"]])
    assert frames.shape == rgb.shape
    assert np.abs(frames.astype(float) - rgb).mean() < 10  # lossy (AV1, crf 30): a few levels of 255 on average


def test_lerobot_parquet_decodes_with_hf_datasets_as_lerobot_loads_it(sources, tmp_path):
    import datasets  # Hugging Face's (the dev extra): a regular package wins over the repository's datasets/ folder

    assert hasattr(datasets, "load_dataset"), f"imported {datasets.__path__}, not Hugging Face datasets"
    out = tmp_path / "lerobot"
    export_lerobot(read_source(sources["demos"]), out)
    ds = datasets.load_dataset("parquet", data_dir=str(out / "data"), split="train", cache_dir=str(tmp_path / "hf"))
    assert isinstance(ds.features["observation.images.wrist"], datasets.Image)
    first = ds[0]
    np.testing.assert_array_equal(np.asarray(first["observation.images.wrist"]), sources["eps"][0][0]["rgb"][0])
    np.testing.assert_allclose(first["observation.state"], sources["eps"][0][0]["proprio"][0])
    assert len(ds) == json.loads((out / "meta" / "info.json").read_text())["total_frames"]


def test_a_dagger_run_exports_every_round_in_order_with_the_learner_actions(sources, tmp_path):
    src = read_source(sources["run"])
    assert src.kind == "dagger-run" and [label for label, _ in src.episodes] == [
        "round-000/episode-000000", "round-000/episode-000001", "round-001/episode-000000"]
    export_robomimic(src, tmp_path / "run.hdf5", next_obs=False)
    rnd = EpisodeDataset(sources["run"] / "round-001").episode(0)
    with h5py.File(tmp_path / "run.hdf5", "r") as f:
        d = f["data/demo_2"]
        np.testing.assert_array_equal(d["learner_actions"][()], rnd["learner_action"])
        assert d["learner_queried"][()].all() and not f["data/demo_0/learner_queried"][()].any()
        np.testing.assert_array_equal(f["data/demo_0/learner_actions"][()], 0.0)  # not queried: zeros, no NaN
        np.testing.assert_array_equal(d["obs/input_mask"][()], rnd["input_mask"])
        assert d.attrs["source"] == "round-001/episode-000000" and "next_obs" not in d
    export_lerobot(src, tmp_path / "lerobot")
    info = json.loads((tmp_path / "lerobot" / "meta" / "info.json").read_text())
    assert {"learner_action", "learner_queried", "executed_action", "from_expert"} <= set(info["features"])
    tables = _lerobot_episodes(tmp_path / "lerobot", info)
    first, last = tables[0].to_pydict(), tables[2].to_pydict()
    assert not any(first["learner_queried"]) and np.array(first["learner_action"]).tolist() == \
        np.zeros((len(first["index"]), 4)).tolist()
    assert all(last["learner_queried"])
    np.testing.assert_array_equal(np.array(last["learner_action"], np.float32), rnd["learner_action"])
    for table in tables:  # nothing a reader infers a type from is null or NaN
        assert all(table.column(k).null_count == 0 for k in table.column_names)
    assert "NaN" not in (tmp_path / "lerobot" / "meta" / "stats.json").read_text()
    export_lerobot(read_source(sources["run"] / "round-000"), tmp_path / "round0")  # the learner never queried
    info0 = json.loads((tmp_path / "round0" / "meta" / "info.json").read_text())
    assert not {"learner_action", "learner_queried"} & set(info0["features"]) and "from_expert" in info0["features"]


def _cli(*args: str, **kw) -> subprocess.CompletedProcess:
    return subprocess.run([*CLI, *args], capture_output=True, text=True, timeout=300, check=False, **kw)


def test_cli_exports_refuses_what_it_must_not_overwrite_and_says_so_in_one_line(sources, tmp_path):
    out = tmp_path / "x.hdf5"
    ok = _cli("export", str(sources["demos"]), "--format", "robomimic", "--out", str(out))
    assert ok.returncode == 0 and "3 episodes" in ok.stdout, ok.stderr
    again = _cli("export", str(sources["demos"]), "--format", "robomimic", "--out", str(out))
    assert again.returncode == 2 and "--overwrite" in again.stderr and len(again.stderr.splitlines()) == 1
    assert _cli("export", str(sources["demos"]), "--format", "robomimic", "--out", str(out), "--overwrite",
                "--no-next-obs").returncode == 0
    with h5py.File(out, "r") as f:
        assert "next_obs" not in f["data/demo_0"] and not json.loads(f.attrs["grasp_s2r"])["next_obs"]
    foreign = tmp_path / "mine"
    foreign.mkdir()
    (foreign / "notes.txt").write_text("keep me")
    bad = _cli("export", str(sources["demos"]), "--format", "lerobot", "--out", str(foreign), "--overwrite")
    assert bad.returncode == 2 and "untouched" in bad.stderr and (foreign / "notes.txt").read_text() == "keep me"
    lerobot = tmp_path / "lr"
    assert _cli("export", str(sources["run"]), "--format", "lerobot", "--out", str(lerobot)).returncode == 0
    assert _cli("export", str(sources["run"]), "--format", "lerobot", "--out", str(lerobot), "--overwrite").returncode == 0
    assert not list(tmp_path.glob(".tmp-*")), "no temporary file or folder is left behind"
    nodata = _cli("export", str(tmp_path), "--format", "lerobot", "--out", str(tmp_path / "y"))
    assert nodata.returncode == 2 and "neither an episode dataset" in nodata.stderr


def test_an_export_beside_its_dataset_is_written_and_one_inside_it_refused(sources, tmp_path):
    # GIVEN a dataset at runs/demos (docs/export.md's example: its parent then holds a dataset, no artifact itself)
    runs = tmp_path / "runs"
    shutil.copytree(sources["demos"], runs / "demos")
    # WHEN exported beside it, THEN written; WHEN inside it, THEN refused and nothing written there
    beside = _cli("export", str(runs / "demos"), "--format", "robomimic", "--out", str(runs / "demos.hdf5"))
    assert beside.returncode == 0 and (runs / "demos.hdf5").is_file(), beside.stderr
    inside = _cli("export", str(runs / "demos"), "--format", "robomimic", "--out", str(runs / "demos" / "x.hdf5"))
    assert inside.returncode == 2 and "lies inside" in inside.stderr and not (runs / "demos" / "x.hdf5").exists()


def test_a_dataset_without_a_finished_episode_is_refused_and_nothing_written(sources, tmp_path):
    # GIVEN a dataset whose run stopped before its first episode was written (its meta.json only)
    from grasp_s2r.data.episodes import feature_schema

    empty = tmp_path / "empty"
    init_dataset(empty, {"seed": 3, "env": ENV.to_dict()}, feature_schema(sources["eps"][0][0]),
                 "expert-demonstrations")
    # WHEN exported, THEN refused in one line and no (empty) file written
    r = _cli("export", str(empty), "--format", "robomimic", "--out", str(tmp_path / "x.hdf5"))
    assert r.returncode == 2 and "holds no finished episode yet" in r.stderr, r.stderr
    assert not (tmp_path / "x.hdf5").exists()


def test_without_h5py_or_pyarrow_the_command_names_the_extra_to_install(sources, tmp_path):
    for fmt, module in (("robomimic", "h5py"), ("lerobot", "pyarrow")):
        code = (f"import sys; sys.modules[{module!r}] = None; from grasp_s2r.cli import main; "
                f"sys.exit(main(['export', {str(sources['demos'])!r}, '--format', {fmt!r}, '--out', "
                f"{str(tmp_path / fmt)!r}]))")
        res = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=False)
        assert res.returncode == 2 and INSTALL_HINT in res.stderr and len(res.stderr.splitlines()) == 1, res.stderr
        assert not (tmp_path / fmt).exists()


def test_the_columns_are_labelled_with_the_names_their_dataset_recorded(sources, tmp_path):
    """A dataset made by another version (another proprio layout) keeps its own column names in both formats, not
    this version's ``PROPRIO_NAMES``."""
    demos = tmp_path / "demos"
    shutil.copytree(sources["demos"], demos)
    meta = json.loads((demos / "meta.json").read_text())
    theirs = [f"their_proprio_{i}" for i in range(len(PROPRIO_NAMES))]
    meta["features"]["proprio"]["names"] = theirs
    (demos / "meta.json").write_text(json.dumps(meta))
    export_robomimic(read_source(demos), tmp_path / "demos.hdf5")
    with h5py.File(tmp_path / "demos.hdf5", "r") as f:
        assert json.loads(f["data"].attrs["env_args"])["grasp_s2r"]["proprio_names"] == theirs
        assert json.loads(f["data/demo_0/obs/proprio"].attrs["names"]) == theirs
        assert json.loads(f["data"].attrs["env_args"])["grasp_s2r"]["state_names"] == list(STATE_NAMES)
    export_lerobot(read_source(demos), tmp_path / "lerobot")
    info = json.loads((tmp_path / "lerobot/meta/info.json").read_text())
    assert info["features"]["observation.state"]["names"] == theirs
