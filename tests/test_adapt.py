"""``grasp-s2r adapt``: the segmenter fine-tuned (and the controller trained again) on your scene's photos, its record,
resume, bad input."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import cv2
import numpy as np
import pytest

from grasp_s2r.adapt import ADAPT_FORMAT_VERSION, SEGMENTER_LR, AdaptConfig, segmenter_train_config
from grasp_s2r.control.policy import Policy


def _scene(folder: Path, n: int = 3) -> Path:
    folder.mkdir(parents=True)
    rng = np.random.default_rng(0)
    for i in range(n):
        img = cv2.resize(rng.integers(0, 256, (12, 16, 3), dtype=np.uint8), (160, 120), interpolation=cv2.INTER_CUBIC)
        cv2.imwrite(str(folder / f"wall-{i}.png"), img)
    return folder


def _adapt(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "grasp_s2r", "adapt", *args], check=False, capture_output=True,
                          text=True, timeout=600)


def test_adapt_trains_a_controller_on_the_scene_and_resumes(tmp_path):
    photos = _scene(tmp_path / "scene")
    out = tmp_path / "adapted"
    args = ("--photos", str(photos), "--out", str(out), "--rounds", "1", "--episodes-per-round", "2",
            "--eval-episodes", "1", "--segmenter-steps", "0", "--no-progress")
    r = _adapt(*args)
    assert r.returncode == 0, r.stderr[-2000:]
    record = json.loads((out / "adapt.json").read_text())
    assert record["format_version"] == ADAPT_FORMAT_VERSION and record["config"]["photos"] == str(photos)
    assert record["segmenter"] == "shipped" and Path(record["controller"]).is_file()
    policy, _ = Policy.load(record["controller"], "cpu")
    assert policy.cfg.memory  # the shipped controller's recipe
    run = json.loads((out / "controller" / "run.json").read_text()) if (out / "controller" / "run.json").is_file() \
        else json.loads((out / "controller" / "config.json").read_text())
    assert str(photos.resolve()) in json.dumps(run)  # the run names the scene it was trained on
    before = (out / "controller" / "policy.pt").read_bytes()
    rounds = sorted(p.name for p in (out / "controller").glob("round-*"))
    again = _adapt(*args)
    assert again.returncode == 0, again.stderr[-2000:]
    assert (out / "controller" / "policy.pt").read_bytes() == before  # finished: the same controller, not retrained
    assert sorted(p.name for p in (out / "controller").glob("round-*")) == rounds

    # another adaptation in the same folder: refused before any stage runs
    other = _adapt(*args[:-3], "--segmenter-steps", "1", "--no-progress")
    assert other.returncode == 2 and "holds an adaptation" in other.stderr and "segmenter_steps" in other.stderr
    assert len(other.stderr.strip().splitlines()) == 1 and not (out / "segmenter").exists()
    # the same folder without --rounds (0: keep the shipped controller) would rename its controller: refused
    shipped = _adapt("--photos", str(photos), "--out", str(out), "--segmenter-steps", "1", "--no-progress")
    assert shipped.returncode == 2 and "--rounds 0" in shipped.stderr and not (out / "segmenter").exists()
    assert json.loads((out / "adapt.json").read_text())["controller"] == record["controller"]
    # a folder made before run.json: judged by its stages (a controller over the shipped segmenter's masks)
    (out / "run.json").unlink()
    legacy = _adapt(*args[:-3], "--segmenter-steps", "1", "--no-progress")
    assert legacy.returncode == 2 and "the shipped segmenter's masks" in legacy.stderr
    assert not (out / "segmenter").exists()
    assert _adapt(*args).returncode == 0 and (out / "run.json").is_file()


def test_adapt_by_default_fine_tunes_the_segmenter_and_keeps_the_shipped_controller(tmp_path):
    photos = _scene(tmp_path / "scene")
    out = tmp_path / "adapted"
    r = _adapt("--photos", str(photos), "--out", str(out), "--segmenter-steps", "2", "--check-views", "30",
               "--no-progress")
    assert r.returncode == 0, r.stderr[-2000:]
    record = json.loads((out / "adapt.json").read_text())
    assert record["controller"] == "shipped" and record["selected_round"] is None
    assert record["config"]["rounds"] == 0 and Path(record["segmenter"]).is_file()
    assert not (out / "controller").exists() and set(record["seconds"]) == {"segmenter"}
    assert "--vision" in r.stdout and "--policy" not in r.stdout  # the eval command it prints
    # the scene check: both segmenters on the same views of the photos it trained on, said so, and drawn
    check = record["scene_check"]
    assert check["trained_on"] and check["photos"] == str(photos.resolve()) and check["views"] == 30
    assert set(check["segmenters"]) == {"shipped", "adapted"}
    assert all(f["views"] == 30 and 0.0 <= f["false_detection_rate"] <= 1.0 for f in check["segmenters"].values())
    assert "trained on: flattering" in r.stdout and "found < 6 px" in r.stdout
    assert check["picture"] is None or Path(check["picture"]) == out / "scene_check.png"
    assert check["picture"] is None or (out / "scene_check.png").stat().st_size > 1000

    # photos kept back: the check runs on them; it is not part of the adaptation's identity (the fine-tune resumes
    # finished, not retrained)
    kept = _scene(tmp_path / "kept", n=2)
    model = (out / "segmenter" / "model.pt").read_bytes()
    fine_tune_s = record["seconds"]["segmenter"]
    again = _adapt("--photos", str(photos), "--out", str(out), "--segmenter-steps", "2", "--check-views", "10",
                   "--check-photos", str(kept), "--no-progress")
    assert again.returncode == 0, again.stderr[-2000:]
    check = json.loads((out / "adapt.json").read_text())["scene_check"]
    assert not check["trained_on"] and check["photos"] == str(kept.resolve()) and check["views"] == 10
    assert "never trained on" in again.stdout and (out / "segmenter" / "model.pt").read_bytes() == model
    # the re-run's stage resumed finished in no time: its seconds add to the fine-tune's, not replace them
    assert json.loads((out / "adapt.json").read_text())["seconds"]["segmenter"] >= fine_tune_s > 0
    assert "min in all" in again.stdout and "this run" in again.stdout
    off = _adapt("--photos", str(photos), "--out", str(out), "--segmenter-steps", "2", "--check-views", "0",
                 "--no-progress")
    assert off.returncode == 0 and json.loads((out / "adapt.json").read_text())["scene_check"] is None
    assert not (out / "scene_check.png").exists()  # no picture of an earlier check left beside a record without one


@pytest.mark.parametrize("photos, message", [
    ("missing", "is not a folder of photos"),
    ("one", "needs at least 2 images"),
])
def test_adapt_refuses_a_folder_it_cannot_use_before_writing(tmp_path, photos, message):
    if photos == "one":
        _scene(tmp_path / "one", n=1)
    r = _adapt("--photos", str(tmp_path / photos), "--out", str(tmp_path / "out"))
    assert r.returncode == 2 and message in r.stderr and len(r.stderr.strip().splitlines()) == 1
    assert not (tmp_path / "out").exists()
    scene = _scene(tmp_path / "scene")  # the same folders as photos for the scene check: refused the same way
    r = _adapt("--photos", str(scene), "--check-photos", str(tmp_path / photos), "--out", str(tmp_path / "out"))
    assert r.returncode == 2 and "--check-photos" in r.stderr and message in r.stderr
    assert len(r.stderr.strip().splitlines()) == 1 and not (tmp_path / "out").exists()


def test_adapt_config_refuses_bad_values():
    with pytest.raises(ValueError, match="table_photo_prob"):
        AdaptConfig(photos="x", table_photo_prob=1.5)
    with pytest.raises(ValueError, match="segmenter_steps"):
        AdaptConfig(photos="x", segmenter_steps=-1)
    with pytest.raises(ValueError, match="segmenter_lr"):
        AdaptConfig(photos="x", segmenter_lr=0.0)
    with pytest.raises(ValueError, match="adapt nothing"):
        AdaptConfig(photos="x", rounds=0, segmenter_steps=0)
    with pytest.raises(ValueError, match="check_views"):
        AdaptConfig(photos="x", check_views=-1)


def test_the_segmenter_fine_tune_starts_from_the_shipped_weights_on_whole_images():
    from grasp_s2r.vision.networks.segmenter import default_checkpoint_path

    train = segmenter_train_config(AdaptConfig(photos="x", segmenter_steps=1500, seed=3))
    assert train.init_checkpoint == str(default_checkpoint_path()) and train.crop_px == 0
    assert (train.steps, train.lr, train.seed, train.val_every) == (1500, SEGMENTER_LR, 3, 500)
    assert segmenter_train_config(AdaptConfig(photos="x", segmenter_lr=1e-3)).lr == 1e-3


def test_the_segmenter_fine_tune_trains_on_every_photo_of_the_scene_by_the_shipped_weights_recipe(tmp_path):
    """A folder of your own photos keeps one in five out of training by file name (for ``eval-vision --split
    heldout``); adapting to a scene trains on all of them (its test is other photos of the scene), by the recipe
    that made the shipped weights (their far views and distractors: a fine-tune without them undoes them)."""
    import dataclasses

    from grasp_s2r.vision.images.backgrounds import load_backgrounds, split_names
    from grasp_s2r.vision.networks.segmenter import default_checkpoint_path, read_checkpoint
    from grasp_s2r.vision.training.train import train

    photos = _scene(tmp_path / "scene", n=8)  # wall-7.png is held out by its name's hash
    assert split_names(photos)["heldout"] == ["wall-7.png"] and len(load_backgrounds("train", photos)) == 7
    assert split_names(photos, hold_out=False)["train"] == sorted(p.name for p in photos.iterdir())
    assert len(load_backgrounds("train", photos, hold_out=False)) == 8

    cfg = segmenter_train_config(AdaptConfig(photos=str(photos), segmenter_steps=1))
    shipped = read_checkpoint(default_checkpoint_path())["config"]["train"]["data"]
    assert cfg.hold_out_photos is False
    assert (cfg.data.view.far_view_prob, cfg.data.distractor_prob) == (shipped["view"]["far_view_prob"],
                                                                      shipped["distractor_prob"])
    assert cfg.data.mix.photo == shipped["mix"]["photo"] and cfg.data.reshade.prob == shipped["reshade"]["prob"]
    train(dataclasses.replace(cfg, val_images=4, batch_size=2), tmp_path / "seg", backgrounds_dir=photos,
          progress=False)
    split = json.loads((tmp_path / "seg" / "run.json").read_text())["identity"]["background_photos"]
    assert len(split["train"]) == 8 and split["heldout"] == []


def test_a_finished_segmenter_fine_tune_is_checked_against_the_adaptation_not_rewritten(tmp_path):
    """adapt resumes a finished segmenter stage without touching its bytes (the controller's run names them), but
    only when the run that made it is this adaptation's."""
    import dataclasses

    from grasp_s2r.vision.training.train import TrainError, check_run, train

    photos = _scene(tmp_path / "scene", n=3)
    cfg = dataclasses.replace(segmenter_train_config(AdaptConfig(photos=str(photos), segmenter_steps=1)),
                              val_images=4, batch_size=2)
    with pytest.raises(TrainError, match="holds no record"):
        check_run(cfg, tmp_path / "seg", backgrounds_dir=photos)
    model = train(cfg, tmp_path / "seg", backgrounds_dir=photos, progress=False)
    before = model.read_bytes()
    check_run(cfg, tmp_path / "seg", backgrounds_dir=photos)
    record = (tmp_path / "seg" / "run.json").read_bytes()
    check_run(dataclasses.replace(cfg, steps=5), tmp_path / "seg", backgrounds_dir=photos)  # steps: not identity
    assert (tmp_path / "seg" / "run.json").read_bytes() == record  # checked, not rewritten
    with pytest.raises(TrainError, match="seed"):
        check_run(dataclasses.replace(cfg, seed=1), tmp_path / "seg", backgrounds_dir=photos)
    _scene(tmp_path / "more", n=4)
    with pytest.raises(TrainError, match="background_photos"):
        check_run(cfg, tmp_path / "seg", backgrounds_dir=tmp_path / "more")
    assert model.read_bytes() == before


def test_the_recipe_benchmark_changes_only_the_settings_it_is_given():
    """``benchmarks/adapt_recipe.py``'s ``--set``: a field of the shipped weights' recipe or of one of its parts
    (a list a range), the rest as ``adapt`` trains; an unknown field or a value that is not JSON refused."""
    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))
    from adapt_recipe import with_settings

    data = segmenter_train_config(AdaptConfig(photos="p")).data
    changed = with_settings(data, ["distractor_prob=0", "mix.photo_table=0.5", "view.far_view_height_m=[0.1, 0.2]"])
    assert changed.distractor_prob == 0 and changed.mix.photo_table == 0.5
    assert changed.view.far_view_height_m == (0.1, 0.2) and changed.view.far_view_prob == data.view.far_view_prob
    assert changed.mix.photo == data.mix.photo and changed.augment == data.augment
    for bad in ("nothing=1", "mix.nothing=1", "distractor_prob", "mix.photo_table=half", "mix.photo.x=1"):
        with pytest.raises(ValueError, match="--set"):
            with_settings(data, [bad])
