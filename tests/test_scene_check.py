"""The scene check: sim views with a folder's photos as the table, segmenters compared frame by frame on them, and
the picture of the views where they differ (``adapt``'s check, ``own_scene.py``'s per-frame figures)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import cv2
import numpy as np
import pytest

from grasp_s2r.runtime.conditions import load_photos
from grasp_s2r.sim.config import CameraConfig
from grasp_s2r.vision.evaluation import scene_check as sc
from grasp_s2r.vision.images.backgrounds import load_backgrounds

BENCH = Path(__file__).resolve().parents[1] / "benchmarks"
sys.path.insert(0, str(BENCH))

from scene_frames import degraded


@pytest.fixture(scope="module")
def views():
    return sc.photo_table_views(load_photos("heldout"), 40, seed=11)


def test_the_views_are_the_controllers_camera_on_the_photos_a_fifth_without_the_sphere(views):
    rgb, gt = views
    assert rgb.shape == (40, 64, 64, 3) and rgb.dtype == np.uint8 and gt.shape == (40, 64, 64) and gt.dtype == bool
    empty = ~gt.any(axis=(1, 2))
    assert 2 <= empty.sum() <= 16  # about a fifth (20 % of 40, drawn)
    again_rgb, again_gt = sc.photo_table_views(load_photos("heldout"), 5, seed=11)
    assert np.array_equal(again_rgb, rgb[:5]) and np.array_equal(again_gt, gt[:5])  # view i: seeds seed + i
    other, _ = sc.photo_table_views(load_photos("heldout"), 5, seed=12)
    assert not np.array_equal(other, rgb[:5])
    with pytest.raises(ValueError, match="n_views"):
        sc.photo_table_views(load_photos("heldout"), 0)
    with pytest.raises(ValueError, match="no photos"):
        sc.photo_table_views([], 3)


def test_the_figures_count_found_spheres_by_width_and_false_detections(views):
    _, gt = views
    perfect = sc.frame_figures(gt, gt)
    assert perfect["found_below_6px"] == perfect["found_6px_and_over"] == 1.0
    assert perfect["false_detection_rate"] == 0.0 and perfect["views"] == 40
    blind = sc.frame_figures(np.zeros_like(gt), gt)
    assert blind["found_below_6px"] == blind["found_6px_and_over"] == 0.0 and blind["false_detection_rate"] == 0.0
    lured = gt.copy()
    lured[:, 0, 0] = True  # one pixel off the sphere in every view (no sphere touches the image's corner)
    assert sc.frame_figures(lured, gt)["false_detection_rate"] == 1.0


def test_the_picture_shows_the_views_where_the_segmenters_differ_first(views, tmp_path):
    rgb, gt = views
    with_sphere = np.flatnonzero(gt.any(axis=(1, 2)))
    other = gt.copy()
    other[with_sphere[3]] = False  # the second segmenter misses one sphere the first finds
    assert list(sc.differing_views({"a": gt, "b": gt}, gt)) == []
    assert sc.save_scene_picture(rgb, gt, {"a": gt, "b": gt}, tmp_path / "none.png", "t") is None
    assert list(sc.differing_views({"a": gt, "b": other}, gt)) == [with_sphere[3]]
    both_miss = other.copy()
    both_miss[with_sphere[0]] = False
    lured = gt.copy()
    lured[with_sphere[0]] = False
    assert list(sc.differing_views({"a": lured, "b": both_miss}, gt)) == [with_sphere[3], with_sphere[0]]
    path = sc.save_scene_picture(rgb, gt, {"a": lured, "b": both_miss}, tmp_path / "p.png", "title")
    assert path is not None and path.stat().st_size > 1000
    table = sc.format_scene_table({"shipped": sc.frame_figures(gt, gt), "adapted": sc.frame_figures(other, gt)})
    assert "shipped" in table and "adapted" in table and "1.00" in table


def test_the_shipped_segmenter_is_measured_on_the_views(views):
    rgb, gt = views
    preds = sc.predict_views({"shipped": ""}, rgb)
    assert preds["shipped"].shape == gt.shape and preds["shipped"].dtype == bool
    figures = sc.frame_figures(preds["shipped"], gt)
    assert figures["found_6px_and_over"] > 0.5  # it sees most larger spheres on the held-out photos


def test_the_benchmark_runs_the_views_through_a_cameras_noise_and_jpeg_and_writes_both(views, tmp_path):
    rgb, gt = views
    noisy = degraded(rgb[:6], gt[:6])
    assert noisy.shape == rgb[:6].shape and noisy.dtype == np.uint8 and not np.array_equal(noisy, rgb[:6])
    assert np.array_equal(degraded(rgb[:6], gt[:6]), noisy)  # view i: seed i

    def bench(*args: str) -> subprocess.CompletedProcess:
        return subprocess.run([sys.executable, str(BENCH / "scene_frames.py"), *args], check=False,
                              capture_output=True, text=True, timeout=300)

    missing = bench("shipped", "--photos", str(tmp_path / "missing"), "--views", "4")
    assert missing.returncode != 0 and "does not exist" in missing.stderr
    photos = tmp_path / "photos"
    photos.mkdir()
    for k, img in enumerate(load_backgrounds("heldout")[:2]):
        cv2.imwrite(str(photos / f"p{k}.png"), img[:, :, ::-1])
    out = tmp_path / "frames.json"
    run = bench("shipped", "--photos", str(photos), "--views", "10", "--json", str(out))
    assert run.returncode == 0, run.stderr[-2000:]
    figures = json.loads(out.read_text())["figures"]["views"]
    assert set(figures) == {"clean", "noise_and_jpeg"} and figures["clean"]["shipped"]["views"] == 10


def test_the_views_make_a_table_of_every_photo_also_past_the_recipes_32():
    # GIVEN 40 photos: the first 32 red, the last 8 blue (PyBullet renders them as the table's texture)
    red, blue = np.zeros((48, 48, 3), np.uint8), np.zeros((48, 48, 3), np.uint8)
    red[..., 0], blue[..., 2] = 200, 200
    rgb, _ = sc.photo_table_views([red] * 32 + [blue] * 8, 60, seed=5)
    # THEN one texture a photo: blue tables in about 8 of 40 views, where the training recipe's 32 textures (the
    # first 32 photos) would show none
    top = rgb[:, :16].reshape(60, -1, 3).astype(float).mean(axis=1)  # the table above the fingers
    assert 3 <= int((top[:, 2] > top[:, 0]).sum()) <= 24


def test_views_seen_beyond_their_border_hold_the_views_in_their_middle(views):
    # GIVEN the same views seen 8 px beyond each edge (the camera widened: CameraConfig.widened)
    rgb, gt = views
    wide, wide_gt = sc.photo_table_views(load_photos("heldout"), 6, seed=11, margin_px=8)
    # THEN they are 80 px, their middle 64 px are the views (PyBullet's pinhole, the same pixels), and where the
    # frame's edge cuts the sphere the wide view shows more of it
    assert wide.shape == (6, 80, 80, 3) and wide_gt.shape == (6, 80, 80)
    assert np.abs(wide[:, 8:-8, 8:-8].astype(int) - rgb[:6]).mean() < 0.05
    assert np.array_equal(wide_gt[:, 8:-8, 8:-8], gt[:6])
    assert wide_gt.sum() >= gt[:6].sum()
    camera = CameraConfig()
    assert camera.widened(0) is camera and camera.widened(8).fov_deg > camera.fov_deg
    with pytest.raises(ValueError, match="margin_px"):
        camera.widened(-1)


def test_border_spheres_rows_of_the_view_beyond_the_border(tmp_path):
    def bench(*args: str) -> subprocess.CompletedProcess:
        return subprocess.run([sys.executable, str(BENCH / "border_spheres.py"), "shipped", *args], check=False,
                              capture_output=True, text=True, timeout=300)

    photos = tmp_path / "photos"
    photos.mkdir()
    for k, img in enumerate(load_backgrounds("heldout")[:2]):
        cv2.imwrite(str(photos / f"p{k}.png"), img[:, :, ::-1])
    bad = bench("--photos", str(photos), "--episodes", "0", "--margins", "8,x")
    assert bad.returncode != 0 and "--margins" in bad.stderr and len(bad.stderr.strip().splitlines()) == 1
    out = tmp_path / "border.json"
    run = bench("--photos", str(photos), "--views", "12", "--episodes", "0", "--margins", "8", "--json", str(out))
    assert run.returncode == 0, run.stderr[-2000:]
    rows = json.loads(out.read_text())["figures"]["rows"]
    assert list(rows) == ["shipped", "shipped, the view 8 px beyond the border"]
    # the same views and spheres counted in both rows
    assert ({k: v["n"] for k, v in rows["shipped"]["frames"].items()}
            == {k: v["n"] for k, v in rows["shipped, the view 8 px beyond the border"]["frames"].items()})
