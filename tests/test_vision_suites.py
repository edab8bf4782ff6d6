"""Test suites of ``eval-vision`` and the training mixture's ingredients, on the real renderer (PyBullet) and photos."""

from __future__ import annotations

import dataclasses
import json

import numpy as np
import pytest

from grasp_s2r.cli import main
from grasp_s2r.vision.images.augment import NO_AUGMENT
from grasp_s2r.vision.images.backgrounds import load_backgrounds
from grasp_s2r.vision.images.dataset import TRAINING_DATA, BackgroundMix, CompositeDataset, DataConfig, env_config_for
from grasp_s2r.vision.images.reshade import ReshadeConfig, reshade, sphere_normals
from grasp_s2r.vision.images.simviews import SimViewSampler, ViewConfig
from grasp_s2r.vision.testsets.suites import SUITES, SuiteError, resolve_suites, suite_images

HW = (64, 64)


def test_every_suite_is_seeded_labelled_and_has_sphere_free_images():
    for name in SUITES:
        # WHEN a suite is made twice with the same seed, and once with another
        images, masks = suite_images(name, HW, n_images=60, seed=3)
        again, _ = suite_images(name, HW, n_images=60, seed=3)
        other, _ = suite_images(name, HW, n_images=60, seed=4)
        # THEN it is reproducible, the seed matters, and it holds spheres and sphere-free images
        assert images.shape == (60, *HW, 3) and images.dtype == np.uint8 and masks.shape == (60, *HW), name
        np.testing.assert_array_equal(images, again)
        assert not np.array_equal(images, other), name
        area = masks.sum(axis=(1, 2))
        assert (area > 0).sum() >= 40, name
        assert (area == 0).any() or name != "sim", name


def test_val_split_uses_training_photos_and_other_images():
    heldout, _ = suite_images("painted", HW, n_images=20, seed=1, split="heldout")
    val, _ = suite_images("painted", HW, n_images=20, seed=1, split="val")
    assert not np.array_equal(heldout, val)
    with pytest.raises(SuiteError, match="unknown split"):
        suite_images("painted", HW, n_images=2, seed=1, split="test")


def test_composites_suite_is_the_photo_compositor_unchanged():
    # the ``composites-clean`` suite = the held-out stream of the photos-only compositor, item for item
    images, masks = suite_images("composites-clean", HW, n_images=8, seed=2)
    ds = CompositeDataset(env_config=env_config_for(64), data=DataConfig(augment=NO_AUGMENT),
                          backgrounds=load_backgrounds("heldout"), stream="heldout", seed=2, length=8)
    for i in range(8):
        rgb, mask = ds.sample(i)
        np.testing.assert_array_equal(rgb, images[i])
        np.testing.assert_array_equal(mask, masks[i])
    ds.close()


def test_sphere_circle_projection_matches_the_rendered_mask():
    sampler = SimViewSampler(env_config_for(64), ViewConfig(empty_prob=0.0))
    errors = []
    for i in range(80):
        frame = sampler.render(i, np.random.default_rng(i))
        ys, xs = np.nonzero(frame.sphere_mask)
        if len(xs) < 8 or xs.min() == 0 or ys.min() == 0 or xs.max() == 63 or ys.max() == 63:
            continue  # cut by the border: the centroid is not the centre
        cx, cy, r = sampler.sphere_circle_px()
        errors.append((xs.mean() + 0.5 - cx, ys.mean() + 0.5 - cy, np.sqrt(len(xs) / np.pi) - r))
    sampler.close()
    errors = np.abs(np.array(errors))
    assert len(errors) > 30
    assert np.median(errors[:, 0]) < 0.3 and np.median(errors[:, 1]) < 0.3 and np.median(errors[:, 2]) < 0.3


def test_reshade_changes_only_sphere_pixels(rng):
    normals = sphere_normals((16, 16), (8.0, 8.0, 4.0))
    np.testing.assert_allclose(np.linalg.norm(normals, axis=-1), 1.0, atol=1e-5)
    assert normals[8, 8, 2] > 0.95  # the centre faces the camera
    img = rng.integers(0, 256, size=(16, 16, 3), dtype=np.uint8)
    yy, xx = np.mgrid[0:16, 0:16]
    mask = (xx + 0.5 - 8) ** 2 + (yy + 0.5 - 8) ** 2 < 16
    out = reshade(img, mask, (8.0, 8.0, 4.0), np.random.default_rng(1), ReshadeConfig(prob=1.0))
    np.testing.assert_array_equal(out[~mask], img[~mask])
    assert not np.array_equal(out[mask], img[mask])
    again = reshade(img, mask, (8.0, 8.0, 4.0), np.random.default_rng(1), ReshadeConfig(prob=1.0))
    np.testing.assert_array_equal(out, again)
    with pytest.raises(ValueError, match="gamma"):
        ReshadeConfig(gamma=(1.2, 0.8))


def _dataset(data: DataConfig) -> CompositeDataset:
    return CompositeDataset(env_config=env_config_for(64), data=data, backgrounds=load_backgrounds("train"),
                            stream="train", seed=0, length=100)


def test_background_kinds_of_the_mixture():
    clean = DataConfig(augment=NO_AUGMENT)
    # sim table: the render itself, nothing pasted
    raw = _dataset(dataclasses.replace(clean, mix=BackgroundMix(photo=0.0, sim_table=1.0)))
    for i in (0, 5, 9):
        rgb, mask = raw.sample(i)
        frame = raw.frame(i // clean.renders_per_view)
        np.testing.assert_array_equal(rgb, frame.rgb)
        np.testing.assert_array_equal(mask, frame.sphere_mask)
    # photo as the table's texture: same view (pose, sphere) as the procedural table, another table
    photo_table = _dataset(dataclasses.replace(clean, mix=BackgroundMix(photo=0.0, photo_table=1.0)))
    for view in range(6):
        a, b = raw.frame(view), photo_table.frame(view)
        np.testing.assert_array_equal(a.sphere_mask, b.sphere_mask)
        table = ~(a.sphere_mask | a.gripper_mask)
        assert np.abs(a.rgb[table].astype(int) - b.rgb[table]).mean() > 5
    # flat colours and textures: pasted on, the label is the sphere mask
    for kind in ("flat", "texture"):
        ds = _dataset(dataclasses.replace(clean, mix=BackgroundMix(photo=0.0, **{kind: 1.0})))
        rgb, mask = ds.sample(0)
        np.testing.assert_array_equal(mask, ds.frame(0).sphere_mask)
        ds.close()
    raw.close()
    photo_table.close()


def test_training_recipe_is_not_the_evaluation_compositor():
    assert TRAINING_DATA.mix != DataConfig().mix and TRAINING_DATA.reshade.prob > 0
    assert DataConfig().mix == BackgroundMix(photo=1.0)  # evaluation composites: photos only
    with pytest.raises(ValueError, match="weights"):
        BackgroundMix(photo=0.0)


def test_resolve_suites():
    assert resolve_suites("all") == list(SUITES)
    assert resolve_suites("sim") == ["sim"]
    with pytest.raises(SuiteError, match="unknown suite 'nope'"):
        resolve_suites("nope")


def _run_cli(capsys, *args: str) -> tuple[int, str]:
    code = main(list(args))
    captured = capsys.readouterr()
    return code, captured.out + captured.err


def test_eval_vision_suite_all_through_the_cli(tmp_path, capsys):
    out = tmp_path / "ev"
    code, text = _run_cli(capsys, "eval-vision", "--suite", "all", "--n-images", "24", "--threads", "1",
                          "--out", str(out))
    assert code == 0, text
    report = json.loads((out / "metrics.json").read_text())
    assert list(report["suites"]) == list(SUITES)
    for row in report["suites"].values():
        assert row["images"] == 24 and row["predict_median_ms"] > 0
    for name in SUITES:
        assert name in text


def test_eval_vision_one_suite_and_val_split(tmp_path, capsys):
    code, text = _run_cli(capsys, "eval-vision", "--suite", "painted", "--split", "val", "--n-images", "16",
                          "--threads", "1", "--out", str(tmp_path / "p"))
    assert code == 0, text
    report = json.loads((tmp_path / "p" / "metrics.json").read_text())
    assert report["source"]["suite"] == "painted" and report["source"]["split"] == "val"


@pytest.mark.parametrize("args, message", [
    (["--suite", "bogus"], "unknown suite 'bogus'"),
    (["--suite", "sim", "--no-augment"], "cannot go with --suite sim"),
    (["--suite", "sim", "--data", "somewhere"], "--suite applies to the generated test suites only"),
])
def test_bad_suite_options_are_refused_in_one_line(args, message, capsys):
    code, text = _run_cli(capsys, "eval-vision", *args)
    assert code == 2
    assert message in text and "Traceback" not in text
    assert len(text.strip().splitlines()) == 1


@pytest.mark.parametrize("args, message", [
    (["--mix", "wood=1"], "unknown background kind 'wood'"),
    (["--mix", "photo=x"], "photo needs a number"),
    (["--mix", "photo=0,texture=0,flat=0,sim_table=0,photo_table=0"], "positive sum"),
    (["--affine-scale", "2,1"], "--affine-scale"),
    (["--reshade-prob", "1.5"], "reshade probabilities"),
    (["--empty-view-prob", "-1"], "--empty-view-prob must be in [0, 1], got -1.0"),
])
def test_bad_recipe_options_are_refused_in_one_line(args, message, tmp_path, capsys):
    code, text = _run_cli(capsys, "train-vision", "--out", str(tmp_path / "run"), "--steps", "1", *args)
    assert code == 2
    assert message in text and "Traceback" not in text
    assert not (tmp_path / "run").exists()


def test_paired_latency_alternates_the_two_segmenters_on_their_own_frames():
    import torch

    from grasp_s2r.vision.networks.segmenter import Segmenter, default_checkpoint_path
    from grasp_s2r.vision.testsets.suites import paired_latency_ms

    class Counting:  # the shipped segmenter, its calls and frame sizes recorded
        def __init__(self, calls: list):
            self.seg, self.calls = Segmenter.load(default_checkpoint_path(), device="cpu"), calls

        def predict(self, rgb):
            self.calls.append((id(self), rgb.shape))
            return self.seg.predict(rgb)

    calls: list = []
    a, b = Counting(calls), Counting(calls)
    frames_a, frames_b = np.zeros((3, 64, 64, 3), np.uint8), np.zeros((2, 96, 96, 3), np.uint8)
    threads = torch.get_num_threads()
    # WHEN two segmenters are timed side by side
    ms_a, ms_b = paired_latency_ms(a, frames_a, b, frames_b, repeats=10)
    # THEN their calls alternate (after the warm-up), each on its own frames one at a time, and the threads are back
    timed = calls[-20:]
    assert [c[0] for c in timed] == [id(a), id(b)] * 10
    assert {c[1] for c in timed[0::2]} == {(64, 64, 3)} and {c[1] for c in timed[1::2]} == {(96, 96, 3)}
    assert ms_a > 0 and ms_b > 0 and torch.get_num_threads() == threads
