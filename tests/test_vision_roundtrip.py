"""Tiny train -> eval round trip through the real CLI (PyBullet renders, torch training): beats an untrained model."""

from __future__ import annotations

import csv
import json
import subprocess
import sys

import pytest
import torch

from grasp_s2r.cli import main
from grasp_s2r.vision.images.backgrounds import split_names
from grasp_s2r.vision.networks.model import build_model
from grasp_s2r.vision.networks.segmenter import Segmenter, make_checkpoint

# the photos-only compositor (what the held-out composites are made with): 120 steps are too few for the full mixture
TINY = ["--image-size", "32", "--batch-size", "16", "--width", "8", "--val-every", "40", "--lr", "0.01", "--threads", "1",
        "--no-progress", "--calibration-images", "64", "--mix", "photo=1,texture=0,flat=0,sim_table=0,photo_table=0",
        "--reshade-prob", "0"]
EVAL = ["--n-images", "96", "--seed", "5", "--threads", "1"]


@pytest.fixture(scope="module")
def trained(tmp_path_factory):
    out = tmp_path_factory.mktemp("vision") / "run"
    assert main(["train-vision", "--out", str(out), "--steps", "120", *TINY]) == 0
    return out


def test_a_checkpoint_gives_the_recipe_that_made_it(trained, tmp_path):
    """``recipe_of``: what a fine-tune from a checkpoint keeps is the composites' recipe its run recorded (here the
    photos-only mixture without re-shading of TINY, not the default recipe); a field the run predates takes its
    default; a checkpoint without a recipe, or no checkpoint, is refused in one line."""
    from grasp_s2r.vision.images.dataset import TRAINING_DATA
    from grasp_s2r.vision.images.synthetic import DISTRACTOR_KINDS
    from grasp_s2r.vision.training.train_config import TrainError, recipe_of

    data = recipe_of(trained / "model.pt")
    assert (data.mix.photo, data.mix.texture, data.mix.photo_table, data.reshade.prob) == (1.0, 0.0, 0.0, 0.0)
    assert data.augment == TRAINING_DATA.augment and data != TRAINING_DATA
    ckpt = torch.load(trained / "model.pt", map_location="cpu", weights_only=True)
    del ckpt["config"]["train"]["data"]["distractor_kinds"]
    torch.save(ckpt, tmp_path / "older.pt")
    assert recipe_of(tmp_path / "older.pt").distractor_kinds == DISTRACTOR_KINDS
    del ckpt["config"]["train"]["data"]
    torch.save(ckpt, tmp_path / "no-recipe.pt")
    with pytest.raises(TrainError, match="records no training recipe"):
        recipe_of(tmp_path / "no-recipe.pt")
    (tmp_path / "junk.pt").write_bytes(b"not a checkpoint")
    with pytest.raises(TrainError, match="junk.pt"):
        recipe_of(tmp_path / "junk.pt")


def _curve_rows(run) -> list[dict]:
    with open(run / "curve.csv") as f:
        return list(csv.DictReader(f))


def _eval(model, out) -> dict:
    assert main(["eval-vision", "--model", str(model), "--out", str(out), *EVAL]) == 0
    return json.loads((out / "metrics.json").read_text())["metrics"]


def test_trained_model_beats_untrained_on_heldout_composites(trained, tmp_path):
    # GIVEN an untrained network of the same architecture, saved in the same format
    untrained = tmp_path / "untrained.pt"
    torch.manual_seed(0)
    model = build_model("unet", width=8, depth=3)
    torch.save(make_checkpoint(model, architecture="unet", arch_kwargs={"width": 8, "depth": 3}, input_hw=(32, 32),
                               background_split=split_names(), config={}, step=0, history=[]), untrained)
    # WHEN both are evaluated on the same held-out-photo composites
    before = _eval(untrained, tmp_path / "before")
    after = _eval(trained / "model.pt", tmp_path / "after")
    # THEN the trained one is clearly better
    assert after["images"] == before["images"] == 96
    assert after["f1"] > (before["f1"] or 0.0) + 0.15, (before, after)
    assert after["iou"] > (before["iou"] or 0.0) + 0.08
    assert after["found_rate"] > (before["found_rate"] or 0.0) + 0.2


def test_run_folder_artifacts(trained):
    for name in ("run.json", "checkpoint-latest.pt", "model.pt", "curve.csv", "curve.png", "composites.png"):
        assert (trained / name).is_file(), name
    cfg = json.loads((trained / "run.json").read_text())["config"]
    assert cfg["format_version"] == 1 and cfg["train"]["steps"] == 120
    assert cfg["background_split"] == split_names()
    rows = _curve_rows(trained)
    assert [int(r["step"]) for r in rows] == [40, 80, 120]
    seg = Segmenter.load(trained / "model.pt", device="cpu")
    assert seg.input_hw == (32, 32) and seg.config["step"] == 120 and seg.config["architecture"] == "unet"
    # the final model carries its break-even threshold, chosen on validation composites of the training photos
    cal = seg.config["threshold_calibration"]
    assert seg.threshold == cal["threshold"] and cal["n_images"] == 64 and cal["photos"] == "train"
    assert abs(cal["precision"] - cal["recall"]) < 0.1


def test_eval_reports_and_overrides_the_threshold(trained, tmp_path, capsys):
    assert main(["eval-vision", "--model", str(trained / "model.pt"), "--out", str(tmp_path / "own"), *EVAL]) == 0
    own = json.loads((tmp_path / "own" / "metrics.json").read_text())
    assert own["model"]["threshold"] == Segmenter.load(trained / "model.pt").threshold
    assert own["model"]["tiling"] is None
    assert main(["eval-vision", "--model", str(trained / "model.pt"), "--out", str(tmp_path / "low"), "--threshold",
                 "0.01", *EVAL]) == 0
    low = json.loads((tmp_path / "low" / "metrics.json").read_text())
    assert low["model"]["threshold"] == 0.01 and "(threshold 0.010)" in capsys.readouterr().out
    assert low["metrics"]["recall"] >= own["metrics"]["recall"]  # a lower threshold never loses a pixel
    with pytest.raises(SystemExit) as exit_:  # refused while parsing, as calibrate-vision's (options.threshold)
        main(["eval-vision", "--model", str(trained / "model.pt"), "--threshold", "1.5", *EVAL])
    err = capsys.readouterr().err
    assert exit_.value.code == 2 and "argument --threshold: threshold must be in (0, 1), got 1.5" in err, err


def test_resume_continues_and_guards(trained, capsys):
    # an existing run without --resume, and a resume with another config, are refused with one line
    assert main(["train-vision", "--out", str(trained), "--steps", "130", *TINY]) == 2
    assert "--resume" in capsys.readouterr().err
    other = [a if a != "8" else "6" for a in TINY]  # another --width
    assert main(["train-vision", "--out", str(trained), "--steps", "130", "--resume", *other]) == 2
    assert "width" in capsys.readouterr().err
    # a resume with more steps continues from step 120
    assert main(["train-vision", "--out", str(trained), "--steps", "130", "--resume", *TINY]) == 0
    rows = _curve_rows(trained)
    assert [int(r["step"]) for r in rows] == [40, 80, 120, 130]
    assert Segmenter.load(trained / "model.pt").config["step"] == 130


def test_a_run_shorter_than_its_validation_interval_resumes_with_more_steps(tmp_path):
    # GIVEN a 2-step run (its --val-every, 250 by default, capped at its steps: 2)
    out = tmp_path / "short"
    short = [a for a in TINY if a not in ("--val-every", "40")]
    assert main(["train-vision", "--out", str(out), "--steps", "2", *short]) == 0
    # WHEN resumed with more steps and the same options, THEN it continues (the interval it then asks differs)
    assert main(["train-vision", "--out", str(out), "--steps", "4", "--resume", *short]) == 0
    assert Segmenter.load(out / "model.pt").config["step"] == 4


def test_a_run_made_before_run_json_still_resumes_through_its_checkpoint(trained, tmp_path, capsys):
    """A run folder of an earlier grasp_s2r (its config only in checkpoint-latest.pt, no run.json) is checked against
    the checkpoint's config, then gets its run.json."""
    import shutil

    old = tmp_path / "old"
    shutil.copytree(trained, old)
    (old / "run.json").unlink()
    other = [a if a != "8" else "6" for a in TINY]
    assert main(["train-vision", "--out", str(old), "--steps", "130", "--resume", *other]) == 2
    assert "width" in capsys.readouterr().err and not (old / "run.json").exists()
    assert main(["train-vision", "--out", str(old), "--steps", "130", "--resume", *TINY]) == 0
    record = json.loads((old / "run.json").read_text())
    assert record["config"]["train"]["steps"] == 130 and "steps" not in record["identity"]


def test_console_script_reports_missing_checkpoint(tmp_path):
    proc = subprocess.run([sys.executable, "-m", "grasp_s2r.cli", "eval-vision", "--model", str(tmp_path / "no.pt")],
                          check=False, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 2
    expected = f"grasp-s2r eval-vision: error: checkpoint {tmp_path / 'no.pt'} does not exist"
    assert proc.stderr.strip().splitlines() == [expected]


def test_init_starts_from_a_checkpoint_and_refuses_another_network(trained, tmp_path, capsys):
    # GIVEN a finished run, WHEN a new run starts from its weights with a vanishing learning rate
    out = tmp_path / "finetune"
    assert main(["train-vision", "--out", str(out), "--steps", "1", "--init", str(trained / "model.pt"),
                 *[a if a != "0.01" else "1e-12" for a in TINY]]) == 0
    # THEN it holds the same weights and records where they came from
    a = dict(Segmenter.load(trained / "model.pt", device="cpu").model.named_parameters())
    b = dict(Segmenter.load(out / "model.pt", device="cpu").model.named_parameters())  # (BN statistics move)
    assert a.keys() == b.keys() and all(torch.allclose(a[k], b[k], atol=1e-6) for k in a)
    assert json.loads((out / "run.json").read_text())["config"]["train"]["init_checkpoint"] == str(trained / "model.pt")
    # a checkpoint of a wider network is refused with one line
    other = [a if a != "8" else "6" for a in TINY]
    assert main(["train-vision", "--out", str(tmp_path / "bad"), "--steps", "1", "--init", str(trained / "model.pt"),
                 *other]) == 2
    assert "not a wider one" in capsys.readouterr().err


def test_init_widens_a_narrower_unet(trained, tmp_path):
    # GIVEN a finished width-8 run, WHEN a width-12 run starts from it with a vanishing learning rate
    out = tmp_path / "wider"
    wider = [{"8": "12", "0.01": "1e-12"}.get(a, a) for a in TINY]
    assert main(["train-vision", "--out", str(out), "--steps", "1", "--init", str(trained / "model.pt"), *wider]) == 0
    # THEN the narrow weights sit at the front of every layer and nothing new flows into an old channel
    a = dict(Segmenter.load(trained / "model.pt", device="cpu").model.named_parameters())
    b = dict(Segmenter.load(out / "model.pt", device="cpu").model.named_parameters())
    assert a.keys() == b.keys() and b["down.0.0.weight"].shape[0] == 12
    for k, old in a.items():
        front = b[k][tuple(slice(0, n) for n in old.shape)]
        if not k.startswith("fuse.") or not k.endswith(".0.weight"):  # (a decoder block's skip half moves back)
            torch.testing.assert_close(front, old, atol=1e-6, rtol=0)
    assert b["head.weight"][0, 8:].abs().max() < 1e-6


def test_init_fine_tunes_a_unet_at_another_image_size(trained, tmp_path):
    # GIVEN a finished 32 px run, WHEN a 48 px run starts from it (a U-Net's weights fit any input size)
    out = tmp_path / "larger"
    larger = [{"32": "48", "0.01": "1e-12"}.get(a, a) for a in TINY]
    assert main(["train-vision", "--out", str(out), "--steps", "1", "--init", str(trained / "model.pt"), *larger]) == 0
    # THEN it holds the same weights and predicts at its own size
    a = dict(Segmenter.load(trained / "model.pt", device="cpu").model.named_parameters())
    seg = Segmenter.load(out / "model.pt", device="cpu")
    assert all(torch.allclose(a[k], p, atol=1e-6) for k, p in seg.model.named_parameters())
    assert seg.predict(torch.zeros(48, 48, 3, dtype=torch.uint8).numpy()).shape == (48, 48)


def test_init_reads_pixel_blocks_with_unshuffle(trained, tmp_path, capsys):
    # GIVEN a finished 32 px width-8 run, WHEN a 64 px run reading 2 x 2 pixel blocks starts from it
    out = tmp_path / "blocks"
    blocks = [{"32": "64", "0.01": "1e-12"}.get(a, a) for a in TINY]
    assert main(["train-vision", "--out", str(out), "--steps", "1", "--unshuffle", "2", "--init",
                 str(trained / "model.pt"), *blocks]) == 0
    # THEN its first conv reads each block with the plain weights over 4, its head repeats the plain logit, the rest
    # is the plain network's; it predicts 64 px masks
    a = dict(Segmenter.load(trained / "model.pt", device="cpu").model.named_parameters())
    seg = Segmenter.load(out / "model.pt", device="cpu")
    b = dict(seg.model.named_parameters())
    assert seg.model.unshuffle == 2 and a.keys() == b.keys()
    torch.testing.assert_close(b["down.0.0.weight"], a["down.0.0.weight"].repeat_interleave(4, dim=1) / 4,
                               atol=1e-6, rtol=0)
    torch.testing.assert_close(b["head.weight"], a["head.weight"].repeat(4, 1, 1, 1), atol=1e-6, rtol=0)
    assert all(torch.allclose(a[k], b[k], atol=1e-6) for k in a if k not in ("down.0.0.weight", "head.weight",
                                                                             "head.bias"))
    assert seg.predict(torch.zeros(64, 64, 3, dtype=torch.uint8).numpy()).shape == (64, 64)
    # a size or crop the blocks do not tile, and a plain run from a checkpoint of blocks, are refused in one line
    bad = [{"32": "40", "0.01": "1e-12"}.get(a, a) for a in TINY]
    assert main(["train-vision", "--out", str(tmp_path / "bad"), "--unshuffle", "2", *bad]) == 2
    assert "multiple of 16, got 40" in capsys.readouterr().err
    assert main(["train-vision", "--out", str(tmp_path / "bad2"), "--unshuffle", "2", "--crop-px", "24", *blocks]) == 2
    assert "crops a multiple of 16 px, got 24" in capsys.readouterr().err
    assert main(["train-vision", "--out", str(tmp_path / "bad3"), "--steps", "1", "--init", str(out / "model.pt"),
                 *blocks]) == 2
    assert "--init" in capsys.readouterr().err


def test_eval_reports_a_tiled_segmenter_as_tiled(trained, tmp_path):
    tiled = tmp_path / "tiled.pt"
    assert main(["calibrate-vision", "--model", str(trained / "model.pt"), "--out", str(tiled), "--tiles", "16/8",
                 "--threshold", "0.5"]) == 0
    assert main(["eval-vision", "--model", str(tiled), "--out", str(tmp_path / "ev"), *EVAL]) == 0
    report = json.loads((tmp_path / "ev" / "metrics.json").read_text())
    assert report["model"]["tiling"] == {"size_px": 16, "stride_px": 8} and report["model"]["threshold"] == 0.5
