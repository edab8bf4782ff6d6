"""The segmenter's operating point: break-even threshold arithmetic, the checkpoint's threshold, calibrate-vision."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from grasp_s2r.cli import main
from grasp_s2r.vision.images.backgrounds import split_names
from grasp_s2r.vision.networks.model import build_model
from grasp_s2r.vision.networks.segmenter import CheckpointError, Segmenter, make_checkpoint, read_checkpoint
from grasp_s2r.vision.training.calibrate import break_even_threshold, precision_recall_curve


def test_break_even_on_hand_made_probabilities():
    # GIVEN 4 target pixels (0.9, 0.8, 0.3, 0.2) and 4 background pixels (0.7, 0.25, 0.1, 0.05)
    proba = np.array([[0.9, 0.8, 0.3, 0.2, 0.7, 0.25, 0.1, 0.05]])
    target = np.array([[True] * 4 + [False] * 4])
    # WHEN the threshold is chosen where precision = recall
    threshold, precision, recall = break_even_threshold(proba, target)
    # THEN it keeps 0.3 and drops 0.25 (TP 3, FP 1, FN 1): the highest threshold with P = R = 0.75
    assert threshold == pytest.approx(0.299)
    assert precision == pytest.approx(0.75) and recall == pytest.approx(0.75)


def test_break_even_ignores_thresholds_that_find_nothing():
    # GIVEN a bad model: its target pixels (0.1, 0.2) score below its background pixels (0.8, 0.9)
    proba = np.array([0.1, 0.2, 0.8, 0.9])
    target = np.array([True, True, False, False])
    # THEN "P = R = 0" above 0.2 does not count: the closest pair is P 1/3, R 1/2 (keeping 0.2, 0.8, 0.9)
    threshold, precision, recall = break_even_threshold(proba, target)
    assert threshold == pytest.approx(0.199)
    assert precision == pytest.approx(1 / 3) and recall == pytest.approx(0.5)


def test_precision_recall_curve_matches_direct_counts():
    rng = np.random.default_rng(0)
    target = rng.random((6, 16, 16)) < 0.2
    proba = np.clip(np.where(target, rng.normal(0.7, 0.2, target.shape), rng.normal(0.3, 0.2, target.shape)), 0, 1)
    thresholds, precision, recall = precision_recall_curve(proba, target)
    for t in (0.1, 0.37, 0.5, 0.82):
        i = round(t * 1000)
        pred = proba > thresholds[i]
        assert precision[i] == pytest.approx((pred & target).sum() / pred.sum())
        assert recall[i] == pytest.approx((pred & target).sum() / target.sum())
    with pytest.raises(ValueError, match="empty"):
        precision_recall_curve(proba, np.zeros_like(target))


def _tiny_ckpt(path, **extra):
    torch.manual_seed(0)
    kwargs = {"width": 4, "depth": 1}
    ckpt = make_checkpoint(build_model("unet", **kwargs), architecture="unet", arch_kwargs=kwargs, input_hw=(16, 16),
                           background_split=split_names(), config={}, step=0, history=[])
    torch.save({**ckpt, **extra}, path)
    return path


def test_segmenter_uses_the_checkpoint_threshold(tmp_path):
    images = np.random.default_rng(1).integers(0, 256, size=(4, 16, 16, 3), dtype=np.uint8)
    plain = Segmenter.load(_tiny_ckpt(tmp_path / "plain.pt"), device="cpu")
    proba = plain.predict_proba(images)
    t = float(np.median(proba))  # a threshold that splits this untrained net's output
    calibrated = Segmenter.load(_tiny_ckpt(tmp_path / "cal.pt", threshold=t), device="cpu")
    assert plain.threshold == 0.5 and calibrated.threshold == pytest.approx(t)
    np.testing.assert_array_equal(calibrated.predict(images), proba > t)
    with pytest.raises(CheckpointError, match="threshold must be in"):
        Segmenter.load(_tiny_ckpt(tmp_path / "bad.pt", threshold=1.5))


def test_calibrate_vision_writes_the_break_even_threshold(tmp_path, capsys):
    src = _tiny_ckpt(tmp_path / "model.pt")
    out = tmp_path / "calibrated.pt"
    assert main(["calibrate-vision", "--model", str(src), "--out", str(out), "--n-images", "48"]) == 0
    assert "threshold 0.500 ->" in capsys.readouterr().out
    ckpt = read_checkpoint(out)
    cal = ckpt["threshold_calibration"]
    assert ckpt["threshold"] == cal["threshold"] and 0 < cal["threshold"] < 1
    assert cal["n_images"] == 48 and cal["photos"] == "train" and cal["stream"] == "val"
    assert "threshold" not in read_checkpoint(src)  # --out leaves the source alone
    # bad input: one line, exit 2
    assert main(["calibrate-vision", "--model", str(tmp_path / "missing.pt")]) == 2
    assert "does not exist" in capsys.readouterr().err


def test_calibrate_vision_tiles_sets_how_the_segmenter_predicts_and_calibrates_it_so(tmp_path, capsys):
    """``--tiles 32/16`` writes the tiling and the threshold of the tiled predictions; ``--tiles none`` takes it
    out; without ``--tiles`` the checkpoint's own stays; a bad ``--tiles`` is one line, exit 2, nothing written."""
    from grasp_s2r.vision.networks.segmenter import Tiling, default_checkpoint_path

    tiled, whole = tmp_path / "tiled.pt", tmp_path / "whole.pt"
    shipped = str(default_checkpoint_path())
    assert main(["calibrate-vision", "--model", shipped, "--out", str(tiled), "--n-images", "32",
                 "--tiles", "32/16"]) == 0
    assert "for 32 px tiles 16 apart" in capsys.readouterr().out
    ckpt = read_checkpoint(tiled)
    assert ckpt["tiling"] == {"size_px": 32, "stride_px": 16} == ckpt["threshold_calibration"]["tiling"]
    assert Segmenter.load(tiled).tiling == Tiling(32, 16)
    assert main(["calibrate-vision", "--model", shipped, "--out", str(whole), "--n-images", "32"]) == 0
    assert "for the whole image" in capsys.readouterr().out
    assert read_checkpoint(whole)["threshold"] != ckpt["threshold"]  # the tiled predictions' own break-even

    assert main(["calibrate-vision", "--model", str(tiled), "--n-images", "32"]) == 0  # kept
    assert read_checkpoint(tiled)["tiling"] == {"size_px": 32, "stride_px": 16}
    assert main(["calibrate-vision", "--model", str(tiled), "--n-images", "32", "--tiles", "none"]) == 0
    assert "tiling" not in read_checkpoint(tiled) and Segmenter.load(tiled).tiling is None
    assert main(["calibrate-vision", "--model", str(tiled), "--tiles", "32/16", "--threshold", "0.5"]) == 0
    assert "-> 0.500 for 32 px tiles 16 apart (as given)" in capsys.readouterr().out
    given = read_checkpoint(tiled)
    assert given["threshold"] == 0.5 and given["tiling"] == {"size_px": 32, "stride_px": 16}
    assert given["threshold_calibration"] == {"rule": "given", "tiling": given["tiling"], "threshold": 0.5}
    before = tiled.read_bytes()
    for bad in ("30/16", "32/40", "abc", "128"):
        assert main(["calibrate-vision", "--model", str(tiled), "--n-images", "32", "--tiles", bad]) == 2
        err = capsys.readouterr().err
        assert err.count("\n") == 1 and "tile" in err, err
    for bad, why in (("0", "threshold must be in (0, 1), got 0.0"), ("1", "threshold must be in (0, 1), got 1.0"),
                     ("-0.2", "threshold must be in (0, 1), got -0.2"), ("x", "invalid float value: 'x'")):
        with pytest.raises(SystemExit) as exit_:
            main(["calibrate-vision", "--model", str(tiled), "--threshold", bad])
        assert exit_.value.code == 2 and f"argument --threshold: {why}" in capsys.readouterr().err
    assert tiled.read_bytes() == before
