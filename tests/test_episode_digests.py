"""Issue 25, item 3: episodes are verified, not trusted. Each finished episode records its array files' sizes and
sha256 in its info.json (written last); a truncated or bit-flipped array is found by collect's resume (named and
collected again, the dataset ends byte-identical) and refused in one line by every reader (the dataset API,
export, dagger --demos, upgrade). Episodes written before the digests are checked by sizes. Real collect runs."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import numpy as np
import pytest

from grasp_s2r.cli import main
from grasp_s2r.data.episodes import DatasetError, EpisodeDataset, episode_damage, finished_indices

SMALL = ("--episodes", "3", "--max-steps", "5", "--resolution", "16", "--workers", "1")


def _tree(root: Path) -> dict[str, bytes]:
    return {p.relative_to(root).as_posix(): p.read_bytes() for p in sorted(root.rglob("*"))
            if p.is_file() and not p.name.startswith(".grasp_s2r")}


@pytest.fixture(scope="module")
def pristine(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("ds") / "demos"
    assert main(["collect", "--out", str(root), *SMALL]) == 0
    return root


def _truncate(f: Path) -> None:
    f.write_bytes(f.read_bytes()[:-100])


def _flip(f: Path) -> None:
    data = bytearray(f.read_bytes())
    data[len(data) // 2] ^= 0x10
    f.write_bytes(bytes(data))


DAMAGE = {"truncated": (_truncate, "has"), "bit-flipped": (_flip, "differs from its recorded sha256")}


def test_each_episode_records_sizes_and_digests_and_is_readable_by_others(pristine):
    ep = pristine / "episode-000001"
    info = json.loads((ep / "info.json").read_text())
    assert set(info["arrays"]) == {p.stem for p in ep.glob("*.npy")}
    assert all(a["bytes"] == (ep / f"{k}.npy").stat().st_size for k, a in info["arrays"].items())
    assert ep.stat().st_mode & 0o777 == 0o777 & ~_umask()  # not mkdtemp's 0700
    assert episode_damage(ep) is None


def _umask() -> int:
    m = os.umask(0)
    os.umask(m)
    return m


@pytest.mark.parametrize("damage", DAMAGE)
@pytest.mark.parametrize("feature", ["rgb", "action"])
def test_damage_is_found_by_resume_and_redone_byte_identical(pristine, tmp_path, capsys, damage, feature):
    ds = tmp_path / "demos"
    shutil.copytree(pristine, ds)
    how, why = DAMAGE[damage]
    how(ds / "episode-000001" / f"{feature}.npy")
    with pytest.raises(DatasetError, match=rf"episode-000001 is damaged: {feature}.npy {why}"):
        EpisodeDataset(ds)
    capsys.readouterr()
    assert main(["collect", "--out", str(ds), *SMALL]) == 0
    out = capsys.readouterr().out
    assert f"damaged     episode-000001: {feature}.npy {why}" in out and "collected again" in out
    assert "(1 new this run)" in out
    assert _tree(ds) == _tree(pristine)


def test_readers_refuse_a_damaged_dataset_in_one_line(pristine, tmp_path, capsys):
    ds = tmp_path / "demos"
    shutil.copytree(pristine, ds)
    _flip(ds / "episode-000002" / "rgb.npy")
    before = _tree(tmp_path)
    lines = [
        ["export", str(ds), "--format", "robomimic", "--out", str(tmp_path / "x.hdf5")],
        ["dagger", "--out", str(tmp_path / "run"), "--demos", str(ds), "--rounds", "1", "--episodes-per-round", "3",
         "--masks", "gt", "--no-bc", "--quiet", "--max-steps", "5", "--resolution", "16"],
        ["upgrade", str(ds), "--out", str(tmp_path / "up")],
    ]
    for argv in lines:
        assert main(argv) == 2, argv
        err = capsys.readouterr().err.strip().splitlines()
        assert len(err) == 1 and "episode-000002 is damaged: rgb.npy differs from its recorded sha256" in err[0], err
    assert _tree(tmp_path) == before  # nothing written


def test_old_episodes_without_digests_are_checked_by_sizes(pristine, tmp_path):
    ds = tmp_path / "demos"
    shutil.copytree(pristine, ds)
    for i in finished_indices(ds):  # as grasp_s2r wrote them before the digests
        f = ds / f"episode-{i:06d}" / "info.json"
        f.write_text(json.dumps({k: v for k, v in json.loads(f.read_text()).items() if k != "arrays"}))
    assert len(EpisodeDataset(ds)) == 3  # still readable
    _truncate(ds / "episode-000000" / "rgb.npy")
    with pytest.raises(DatasetError, match="episode-000000 is damaged: rgb.npy unreadable"):
        EpisodeDataset(ds)
    np.save(ds / "episode-000000" / "rgb.npy", np.zeros((1, 16, 16, 3), np.uint8))  # whole, but too short
    with pytest.raises(DatasetError, match=r"rgb.npy holds shape \(1, 16, 16, 3\) .* not \d+ steps whole"):
        EpisodeDataset(ds)


def test_a_damaged_round_of_a_dagger_run_is_refused_on_resume_and_by_export(tmp_path, capfd):
    run = tmp_path / "run"
    line = ["dagger", "--out", str(run), "--rounds", "1", "--episodes-per-round", "2", "--eval-episodes", "1",
            "--masks", "gt", "--no-bc", "--workers", "1", "--train-steps", "1", "--max-steps", "5", "--quiet"]
    assert main(line) == 0
    _truncate(run / "round-000" / "episode-000001" / "input_mask.npy")
    capfd.readouterr()
    for argv in (line[:4] + ["2"] + line[5:], ["export", str(run), "--format", "robomimic", "--out",
                                                 str(tmp_path / "x.hdf5")]):
        assert main(argv) == 2, argv
        err = capfd.readouterr().err.strip().splitlines()
        assert len(err) == 1 and "round-000/episode-000001 is damaged: input_mask.npy has" in err[0], err
    assert not (tmp_path / "x.hdf5").exists() and not (run / "round-001").exists()
