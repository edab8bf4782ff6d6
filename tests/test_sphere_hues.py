"""``benchmarks/sphere_hues.py``: each view binned by its sphere's rendered colour, and the found shares per bin."""

import sys
from pathlib import Path

import cv2
import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))
import sphere_hues


def _disc_view(rgb_colour: tuple[int, int, int] | None) -> tuple[np.ndarray, np.ndarray]:
    """A 64 px view of a mid-grey table with a 6 px disc of ``rgb_colour`` (None: no sphere)."""
    img = np.full((64, 64, 3), 120, np.uint8)
    mask = np.zeros((64, 64), bool)
    if rgb_colour is not None:
        cv2.circle(img, (30, 40), 3, tuple(int(c) for c in rgb_colour), -1)
        mask = np.all(img == np.array(rgb_colour, np.uint8), axis=-1)
    return img, mask


def _hsv_rgb(hue_deg: float, sat: int = 200, val: int = 220) -> tuple[int, int, int]:
    px = cv2.cvtColor(np.array([[[round(hue_deg / 2) % 180, sat, val]]], np.uint8), cv2.COLOR_HSV2RGB)[0, 0]
    return tuple(int(c) for c in px)


def test_views_are_binned_by_the_spheres_mean_hue_around_the_circle_or_grey():
    colours = [_hsv_rgb(0), _hsv_rgb(60), _hsv_rgb(120), _hsv_rgb(180), _hsv_rgb(240), _hsv_rgb(300),
               _hsv_rgb(200, sat=30), None]
    views = [_disc_view(c) for c in colours]
    rgb, masks = np.stack([v[0] for v in views]), np.stack([v[1] for v in views])
    assert list(sphere_hues.hue_bins(rgb, masks)) == ["red", "yellow", "green", "cyan", "blue", "magenta", "grey", ""]


def test_a_sphere_half_just_below_and_half_just_above_0_degrees_is_red():
    """The circular mean: hues of 356 and 4 degrees average to 0 (red), not to 180 (cyan)."""
    img, mask = _disc_view(_hsv_rgb(356))
    img[mask & (np.arange(64)[None, :] >= 30)] = _hsv_rgb(4)
    assert sphere_hues.hue_bins(img[None], mask[None])[0] == "red"


def test_found_shares_per_bin_and_false_detections_on_sphere_free_views():
    views = [_disc_view(_hsv_rgb(0)), _disc_view(_hsv_rgb(10)), _disc_view(_hsv_rgb(120)), _disc_view(None),
             _disc_view(None)]
    rgb, masks = np.stack([v[0] for v in views]), np.stack([v[1] for v in views])
    bins = sphere_hues.hue_bins(rgb, masks)
    pred = masks.copy()
    pred[1] = False  # the second red sphere missed
    pred[3, 5:8, 5:8] = True  # one sphere-free view fired on
    f = sphere_hues.figures(pred, masks, bins)
    assert f["red"] == 0.5 and f["green"] == 1.0 and f["blue"] is None
    assert abs(f["all"] - 2 / 3) < 1e-9 and f["false_detection_rate"] == 0.5
