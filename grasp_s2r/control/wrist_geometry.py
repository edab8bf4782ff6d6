"""Where the wrist camera looks, from the TCP's position alone: camera pixels <-> points of the table plane.

The gripper points straight down at every step (the env holds its orientation), so the camera's pose follows from
the TCP position: the palm link sits ``PALM_ABOVE_TCP_M`` above the TCP, and the camera is mounted on it as
``CameraConfig`` says, without the few millimetres and degrees of per-episode jitter the simulator adds. A robot
knows its TCP by kinematics, so what reads this (``control.parallax``, ``control.hovered``, ``control.near``) runs on a
real arm as in the simulator; :func:`table_warp` lines an earlier frame up with the current one on the table plane.
Numpy, and OpenCV for the warp.
"""

from __future__ import annotations

from dataclasses import dataclass

import cv2
import numpy as np

from grasp_s2r.sim.config import CameraConfig, SceneConfig
from grasp_s2r.sim.env import PROPRIO_NAMES

TCP_INDEX = [PROPRIO_NAMES.index(n) for n in ("tcp_x_world_m", "tcp_y_world_m", "tcp_z_above_table_m")]
"""Where the TCP's table-frame x, y and height above the table sit in the proprioception vector: what
:meth:`WristView.at` takes."""
FINGER_GAP_INDEX = PROPRIO_NAMES.index("finger_gap_m")
GRIPPER_CLOSED_INDEX = PROPRIO_NAMES.index("gripper_closed")
"""Where the finger gap (m) and the gripper's closed flag sit in it: the rest of what the mask filter's rules read
(``control.parallax``, ``control.hovered``, ``control.held``, ``control.near``)."""
PALM_ABOVE_TCP_M = 0.055
"""The palm link's origin above the TCP (the gripper points straight down): measured in the simulator."""


def fingers_open(proprio: np.ndarray, scene: SceneConfig) -> bool:
    """Whether the gripper is commanded open and its fingers are fully apart (proprio in ``PROPRIO_NAMES`` order):
    what the parallax votes and the rolling lead wait for (a held or closing sphere moves with the camera)."""
    return bool(proprio[GRIPPER_CLOSED_INDEX] < 0.5 and proprio[FINGER_GAP_INDEX] >= scene.fingers_open_gap_m)


_R_WORLD_PALM = np.diag([1.0, -1.0, -1.0])
"""Palm frame in the table frame with the gripper pointing down (palm +x = table +x, palm +z = table -z)."""


@dataclass(frozen=True)
class WristView:
    """The wrist camera's pose in the table frame (table top at z = 0), metres; ``forward``, ``right``, ``up``: unit
    axes of the image (image top = palm +x)."""

    camera: CameraConfig
    eye: np.ndarray
    forward: np.ndarray
    right: np.ndarray
    up: np.ndarray

    @classmethod
    def at(cls, tcp_above_table_m: np.ndarray, camera: CameraConfig) -> WristView:
        """The view from a TCP at table-frame x, y and height above the table top ``tcp_above_table_m`` (3,)."""
        palm = np.asarray(tcp_above_table_m, dtype=float) + np.array([0.0, 0.0, PALM_ABOVE_TCP_M])
        eye = palm + _R_WORLD_PALM @ np.asarray(camera.mount_offset_palm_m, dtype=float)
        target = palm + _R_WORLD_PALM @ np.asarray(camera.look_at_palm_m, dtype=float)
        forward = (target - eye) / np.linalg.norm(target - eye)
        right = np.cross(forward, _R_WORLD_PALM @ np.array([1.0, 0.0, 0.0]))
        right /= np.linalg.norm(right)
        return cls(camera, eye, forward, right, np.cross(right, forward))

    @property
    def _tan_half(self) -> tuple[float, float]:
        """tan of half the horizontal and vertical field of view."""
        t = float(np.tan(np.radians(self.camera.fov_deg) / 2))
        return t * self.camera.width_px / self.camera.height_px, t

    def table_xy(self, pixels: np.ndarray, plane_z_m: float = 0.0) -> tuple[np.ndarray, np.ndarray]:
        """Where the rays of image points (..., 2) (column, row; pixel centres at integers) meet the table plane
        (or the plane ``plane_z_m`` above it, e.g. that of the sphere's centre): float (..., 2) table (x, y) in
        metres, and bool (...) whether they meet it in front of the camera."""
        px = np.asarray(pixels, dtype=float)
        tx, ty = self._tan_half
        h, w = self.camera.height_px, self.camera.width_px
        xs = (2 * (px[..., 0] + 0.5) / w - 1) * tx
        ys = (1 - 2 * (px[..., 1] + 0.5) / h) * ty
        rays = self.forward + xs[..., None] * self.right + ys[..., None] * self.up
        with np.errstate(divide="ignore", invalid="ignore"):
            reach = (plane_z_m - self.eye[2]) / rays[..., 2]
        ahead = np.isfinite(reach) & (reach > 0)
        return self.eye[:2] + np.where(ahead, reach, 0.0)[..., None] * rays[..., :2], ahead

    def pixel_table_xy(self) -> tuple[np.ndarray, np.ndarray]:
        """:meth:`table_xy` of every pixel: float (H, W, 2), bool (H, W)."""
        cols, rows = np.meshgrid(np.arange(self.camera.width_px), np.arange(self.camera.height_px))
        return self.table_xy(np.stack([cols, rows], -1))

    def table_pixel(self, table_xy_m: np.ndarray) -> np.ndarray:
        """Image (column, row) in pixels (float, pixel centres at integers) of table points (..., 2); NaN behind
        the camera."""
        p = np.concatenate([np.asarray(table_xy_m, dtype=float), np.zeros(np.shape(table_xy_m)[:-1] + (1,))], -1)
        d = p - self.eye
        depth = d @ self.forward
        with np.errstate(divide="ignore", invalid="ignore"):
            x = np.where(depth > 0, (d @ self.right) / depth, np.nan)
            y = np.where(depth > 0, (d @ self.up) / depth, np.nan)
        tx, ty = self._tan_half
        h, w = self.camera.height_px, self.camera.width_px
        return np.stack([(x / tx + 1) * w / 2 - 0.5, (1 - y / ty) * h / 2 - 0.5], -1)


def table_warp(image_then: np.ndarray, then: WristView, now: WristView) -> tuple[np.ndarray, np.ndarray]:
    """``image_then`` (H, W[, C]), taken from ``then``, as the camera at ``now`` would see it if everything in it lay
    on the table plane: float32 (H, W[, C]) sampled bilinearly, and bool (H, W) where the table point of a pixel of
    ``now`` was inside the earlier image. Table pixels of the two images then line up; what stands above the table
    (the sphere, 1.37 cm tall) or far below it is displaced by the parallax of its height, which the difference
    ``image_now - warped`` shows (``benchmarks/plane_parallax.py``)."""
    xy, ahead = now.pixel_table_xy()
    pix = then.table_pixel(xy)
    map_x = np.where(ahead, pix[..., 0], -1.0).astype(np.float32)
    map_y = np.where(ahead, pix[..., 1], -1.0).astype(np.float32)
    h, w = then.camera.height_px, then.camera.width_px
    inside = ahead & (map_x >= 0) & (map_x <= w - 1) & (map_y >= 0) & (map_y <= h - 1)
    warped = cv2.remap(np.asarray(image_then, np.float32), map_x, map_y, cv2.INTER_LINEAR,
                       borderMode=cv2.BORDER_REPLICATE)
    return warped, inside


class PreviousFrame:
    """One episode's previous frame, warped onto each new one through the table plane (:func:`table_warp`): what a
    segmenter that reads the previous frame (``Segmenter.reads_previous``) takes beside the image. At the episode's
    first frame, and where the table point of a pixel was outside the previous image, the image's own pixels stand
    in (no difference: nothing to read there)."""

    def __init__(self, camera: CameraConfig):
        self.camera = camera
        self._rgb: np.ndarray | None = None
        self._view: WristView | None = None

    def reset(self) -> None:
        self._rgb = self._view = None

    def warped(self, rgb: np.ndarray, proprio: np.ndarray) -> np.ndarray:
        """The previous frame warped onto ``rgb`` uint8 (H, W, 3), seen from the TCP of ``proprio`` (5,): uint8
        (H, W, 3); then ``rgb`` becomes the previous frame."""
        rgb = np.asarray(rgb, np.uint8)
        view = WristView.at(np.asarray(proprio, dtype=float)[TCP_INDEX], self.camera)
        out = rgb
        if self._rgb is not None and self._rgb.shape == rgb.shape:
            warped, inside = table_warp(self._rgb, self._view, view)
            out = np.where(inside[..., None], np.clip(np.rint(warped), 0, 255), rgb).astype(np.uint8)
        self._rgb, self._view = rgb.copy(), view
        return out
