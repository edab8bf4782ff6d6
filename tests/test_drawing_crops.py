"""``drawing.crop_around``: the window a failure picture shows around a 2-4 px sphere."""

from __future__ import annotations

import numpy as np

from grasp_s2r.drawing import crop_around


def _scene(cy: int, cx: int) -> tuple[np.ndarray, np.ndarray]:
    rgb = np.zeros((64, 64, 3), np.uint8)
    rgb[..., 0] = np.arange(64)[:, None]  # red = row, green = column: a crop says where it came from
    rgb[..., 1] = np.arange(64)[None, :]
    mask = np.zeros((64, 64), bool)
    mask[cy - 1:cy + 2, cx - 1:cx + 2] = True
    return rgb, mask


def test_the_window_is_centred_on_the_sphere():
    rgb, mask = _scene(30, 40)
    crop = crop_around(rgb, mask, 16)
    assert crop.shape == (16, 16, 3)
    assert crop[8, 8, 0] == 30 and crop[8, 8, 1] == 40
    assert crop_around(mask, mask, 16)[7:10, 7:10].all()  # the sphere sits in the middle


def test_at_the_border_the_edge_repeats_and_the_size_holds():
    rgb, mask = _scene(1, 62)
    crop = crop_around(rgb, mask, 16)
    assert crop.shape == (16, 16, 3)
    assert crop[0, 0, 0] == 0 and crop[-1, -1, 1] == 63  # rows above 0 and columns past 63 repeat the edge


def test_no_sphere_shows_the_middle_of_the_image():
    rgb, _ = _scene(30, 40)
    crop = crop_around(rgb, np.zeros((64, 64), bool), 8)
    assert crop[4, 4, 0] == 32 and crop[4, 4, 1] == 32
