"""Wrist camera: pose from the palm link, one ``getCameraImage`` call, decoded masks."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pybullet as pb

from grasp_s2r.sim.config import CameraConfig
from grasp_s2r.sim.shadow import shade_sphere_shadow


@dataclass(frozen=True)
class Frame:
    """One wrist-camera image and its ground-truth masks."""

    rgb: np.ndarray
    """Colour image, uint8 (H, W, 3)."""
    sphere_mask: np.ndarray
    """Ground-truth target mask from the segmentation buffer, bool (H, W)."""
    gripper_mask: np.ndarray
    """Palm and finger pixels, bool (H, W)."""
    margin_px: int = 0
    """Pixels the camera saw beyond each edge of the controller's view (``CameraConfig.widened``): the view is the
    middle of these arrays (:meth:`view`). 0: the arrays are the view."""

    def view(self) -> Frame:
        """The frame cropped to the controller's view (itself when it has no margin)."""
        if not self.margin_px:
            return self
        rgb, sphere, gripper = (np.ascontiguousarray(crop_margin(a, self.margin_px))
                                for a in (self.rgb, self.sphere_mask, self.gripper_mask))
        return Frame(rgb=rgb, sphere_mask=sphere, gripper_mask=gripper)


def crop_margin(image: np.ndarray, margin_px: int, batched: bool = False) -> np.ndarray:
    """The middle of ``image`` with ``margin_px`` rows and columns cut off each edge: a frame of a camera widened by
    ``margin_px`` (``CameraConfig.widened``) back to its view. ``image``: (H, W, ...), or (N, H, W, ...) when
    ``batched``. A view of the array (no copy)."""
    a = np.asarray(image)
    if margin_px == 0:
        return a
    m = slice(margin_px, -margin_px)
    return a[:, m, m] if batched else a[m, m]


@dataclass(frozen=True)
class Lighting:
    """Light for TinyRenderer; passed explicitly on every call (PyBullet keeps it otherwise)."""

    direction: tuple[float, float, float] = (0.3, 0.2, 1.0)
    ambient: float = 0.6
    diffuse: float = 0.5
    specular: float = 0.1


def decode_segmentation(seg: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Split a buffer rendered with ER_SEGMENTATION_MASK_OBJECT_AND_LINKINDEX.

    Returns (object uid, link index), both int (H, W); background pixels have uid -1.
    """
    seg = np.asarray(seg, dtype=np.int64)
    background = seg < 0
    uid = np.where(background, -1, seg & 0xFFFFFF)
    link = np.where(background, -2, (seg >> 24) - 1)
    return uid, link


def camera_pose_world(
    palm_pos_world_m: np.ndarray, palm_quat_xyzw: np.ndarray, cfg: CameraConfig,
    mount_jitter_m: np.ndarray, look_jitter_m: np.ndarray,
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(eye, target, up) in the world for a camera rigidly mounted on the palm."""
    R_world_palm = np.array(pb.getMatrixFromQuaternion(palm_quat_xyzw)).reshape(3, 3)
    eye = palm_pos_world_m + R_world_palm @ (np.asarray(cfg.mount_offset_palm_m) + mount_jitter_m)
    target = palm_pos_world_m + R_world_palm @ (np.asarray(cfg.look_at_palm_m) + look_jitter_m)
    up = R_world_palm @ np.array([1.0, 0.0, 0.0])
    return eye, target, up


class WristCamera:
    """Renders what the wrist camera sees; the pose follows the palm link on every call."""

    def __init__(self, client: int, cfg: CameraConfig):
        self.client = client
        self.cfg = cfg
        self.projection = pb.computeProjectionMatrixFOV(
            fov=cfg.fov_deg, aspect=cfg.width_px / cfg.height_px, nearVal=cfg.near_m, farVal=cfg.far_m,
        )

    def render(
        self, eye: np.ndarray, target: np.ndarray, up: np.ndarray, lighting: Lighting,
        sphere_uid: int, robot_uid: int, gripper_links: tuple[int, ...], sphere_radius_m: float = 0.0,
    ) -> Frame:
        """The view from ``eye``; with ``cfg.sphere_shadow`` the sphere's shadows (radius ``sphere_radius_m``) drawn
        on the table's pixels (every pixel neither the sphere's nor the robot's)."""
        view = pb.computeViewMatrix(list(eye), list(target), list(up))
        w, h = self.cfg.width_px, self.cfg.height_px
        _, _, rgba, depth, seg = pb.getCameraImage(
            w, h, viewMatrix=view, projectionMatrix=self.projection,
            shadow=0, lightDirection=list(lighting.direction),
            lightAmbientCoeff=lighting.ambient, lightDiffuseCoeff=lighting.diffuse,
            lightSpecularCoeff=lighting.specular,
            flags=pb.ER_SEGMENTATION_MASK_OBJECT_AND_LINKINDEX,
            renderer=pb.ER_TINY_RENDERER, physicsClientId=self.client,
        )
        rgb = np.asarray(rgba, dtype=np.uint8).reshape(h, w, 4)[:, :, :3].copy()
        uid, link = decode_segmentation(np.asarray(seg).reshape(h, w))
        if self.cfg.sphere_shadow:
            if sphere_radius_m <= 0:
                raise ValueError("sphere_shadow needs the sphere's radius (sphere_radius_m > 0)")
            centre, _ = pb.getBasePositionAndOrientation(sphere_uid, physicsClientId=self.client)
            table = (uid >= 0) & (uid != sphere_uid) & (uid != robot_uid)
            rgb = shade_sphere_shadow(rgb, np.asarray(depth, dtype=np.float64).reshape(h, w), table, view,
                                      self.projection, np.asarray(centre), sphere_radius_m,
                                      np.asarray(lighting.direction), lighting.ambient, lighting.diffuse)
        return Frame(
            rgb=rgb,
            sphere_mask=uid == sphere_uid,
            gripper_mask=(uid == robot_uid) & np.isin(link, gripper_links),
        )
