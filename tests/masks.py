"""Masks the filter tests draw on the wrist camera's image (``test_parallax``, ``test_held``, ``test_near``,
``test_blob_size``)."""

from __future__ import annotations

import numpy as np

from grasp_s2r.sim.config import CameraConfig


def disc(centre_colrow, radius_px: float, camera: CameraConfig | None = None) -> np.ndarray:
    """The pixels within ``radius_px`` of ``centre_colrow`` (column, row; sub-pixel), bool (height, width) of
    ``camera`` (default: the scene's)."""
    camera = camera or CameraConfig()
    rows, cols = np.mgrid[:camera.height_px, :camera.width_px]
    return np.hypot(cols - centre_colrow[0], rows - centre_colrow[1]) <= radius_px
