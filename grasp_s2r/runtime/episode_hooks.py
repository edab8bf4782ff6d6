"""The hooks that apply an evaluation condition (:class:`~grasp_s2r.runtime.conditions.Condition`) to one episode.

They run inside the env worker process (:mod:`grasp_s2r.runtime.pool`), next to the env they act on: what the camera
shows (composite onto photos, or a photo as the sim table's texture), the camera's mount (miscalibration), the
dynamics (sphere mass and friction, action noise, latency), and the sphere's place (out of the camera's view at the start; moved slowly, or
once, mid-episode). The expert labels whatever world results, so a condition can also be used to make DAgger data.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any, ClassVar

import numpy as np
import pybullet as pb

from grasp_s2r.runtime.conditions import Condition, load_photos
from grasp_s2r.sim.camera import Frame, camera_pose_world
from grasp_s2r.sim.env import ACTION_DIM, GraspEnv, StepResult
from grasp_s2r.sim.randomization import EpisodeParams, sample_camera_jitter
from grasp_s2r.sim.robot import ARM_JOINTS, FINGER_JOINTS, PALM_LINK
from grasp_s2r.sim.table_texture import N_PHOTO_TEXTURES, env_photo_textures, set_table_texture

PERTURB_FINGER_CLEARANCE_M = 0.005
"""A displaced sphere lands at least this far, seen from above, from both fingers (beyond its radius): a finger
coming down on the sphere's edge would flick it away, and with the sphere's near-zero rolling resistance it rolls out
of the workspace -- a kick, not the displacement the condition names."""
PERTURB_MAX_DRAWS = 32
"""Displacements drawn at most until one lands clear of the fingers (else the last one drawn is taken)."""


_OUT_OF_VIEW_CANDIDATES = 1024
"""Sphere places drawn at once by ``start_out_of_view_deg``; the first far enough outside the view is taken."""
_OUT_OF_VIEW_ARM_STARTS = 4
"""Arm starts tried at most by ``start_out_of_view_deg`` (the episode's, then ones drawn again)."""
_TABLE_EDGE_MARGIN_M = 0.02
"""Spots the hooks move the sphere to stay this far inside the TCP's workspace square (reachable)."""
_WRIST_LIMIT_MARGIN_RAD = 0.16
"""The arm's last joint keeps the gripper at its fixed world yaw as the arm swings; in the workspace's +x / -y corner
it nears its limit at the grasp pose and the arm, tracking its TCP target through IK, stalls ~3 mm short of the
sphere (measured: the expert fails there, and only there). A new sphere place needs that joint this far from its
limits with the TCP on the sphere (IK from the rest pose, as ``Robot.teleport``)."""
_OUT_OF_VIEW_REACH_CHECKS = 64
"""Candidates checked for reach at most (each an IK teleport of the arm, a few ms)."""


def outside_view_deg(env: GraspEnv, points_world_m: np.ndarray, mount_jitter_m: np.ndarray | None = None,
                     look_jitter_m: np.ndarray | None = None) -> np.ndarray:
    """How far (degrees) the image of a sphere at each point (N, 3) lies outside the wrist camera's field of view in
    the env's current pose: > 0 outside (its whole disc; behind the camera counts as far outside), < 0 in view.

    The camera's mount jitter defaults to the episode's (``env.params``).
    """
    cam, p = env.config.camera, env.params
    mount = np.asarray(p.camera_mount_jitter_m if mount_jitter_m is None else mount_jitter_m)
    look = np.asarray(p.camera_look_jitter_m if look_jitter_m is None else look_jitter_m)
    palm_pos, palm_quat = env.robot.link_pose_world(PALM_LINK)
    eye, target, up = camera_pose_world(palm_pos, palm_quat, cam, mount, look)
    forward = (target - eye) / np.linalg.norm(target - eye)
    right = np.cross(forward, up)
    right /= np.linalg.norm(right)
    image_up = np.cross(right, forward)
    d = np.atleast_2d(points_world_m) - eye
    depth = d @ forward
    half_v = np.deg2rad(cam.fov_deg) / 2
    half_h = np.arctan(np.tan(half_v) * cam.width_px / cam.height_px)
    beyond = np.maximum(np.abs(np.arctan2(d @ right, depth)) - half_h, np.abs(np.arctan2(d @ image_up, depth)) - half_v)
    radius = np.arcsin(np.clip(env.config.scene.sphere_radius_m / np.linalg.norm(d, axis=1), 0.0, 1.0))
    return np.rad2deg(beyond - radius)


class EpisodeHooks:
    """Applies one condition to one episode of one env; lives in the env's worker process.

    Call order per episode: ``on_reset()`` after ``env.reset`` (it returns the first step's result again when the
    condition changed what the camera sees: use that one), then per step ``observe(frame)``,
    ``before_step(action) -> executed action``, ``env.step``.
    """

    _photo_cache: ClassVar[dict[str, list[np.ndarray]]] = {}
    """Photos per source, loaded once per worker process."""

    def __init__(self, env: GraspEnv, condition: Condition, rng: np.random.Generator):
        self.env, self.cond, self.rng = env, condition, rng
        self.pending: list[np.ndarray] = [np.zeros(ACTION_DIM)] * condition.latency_steps
        self.direction_xy = np.zeros(2)
        self.perturbed = False
        self.events: list[dict[str, Any]] = []
        self.photo: np.ndarray | None = None
        self._composite: Callable[..., tuple[np.ndarray, np.ndarray]] | None = None
        self._first_frame: Frame | None = None

    @classmethod
    def _photos(cls, source: str) -> list[np.ndarray]:
        if source not in cls._photo_cache:
            cls._photo_cache[source] = load_photos(source)
        return cls._photo_cache[source]

    def on_reset(self) -> StepResult | None:
        """Apply the condition to the episode ``env.reset`` just started.

        Returns the first step's result again, re-rendered, when the condition changed what the camera sees (its
        mount, the sphere's place, the table's texture): observe that one, not ``env.reset``'s (``observe`` swaps
        its frame in either way). None when ``env.reset``'s result stands. A changed mount or sphere place is
        written into ``env.params`` (``env.reset(seed, env.params)`` starts the same episode); the table photo and
        the sphere's new place are also recorded in ``events``.
        """
        env, c, s = self.env, self.cond, self.env.config.scene
        pb.changeDynamics(env.sphere_uid, -1, mass=s.sphere_mass_kg * c.sphere_mass_scale,
                          lateralFriction=s.sphere_friction * c.sphere_friction_scale, physicsClientId=env.client)
        angle = self.rng.uniform(0, 2 * np.pi)
        self.direction_xy = np.array([np.cos(angle), np.sin(angle)])
        result = None
        if c.camera_jitter_m is not None or c.camera_jitter_deg is not None:
            r = env.config.randomization
            mount, look = sample_camera_jitter(
                self.rng, r.camera_jitter_m if c.camera_jitter_m is None else c.camera_jitter_m,
                r.camera_jitter_deg if c.camera_jitter_deg is None else c.camera_jitter_deg)
            result = env.reset(env.seed, dataclasses.replace(
                env.params, camera_mount_jitter_m=tuple(float(x) for x in mount),
                camera_look_jitter_m=tuple(float(x) for x in look)))
        if c.start_out_of_view_deg > 0:
            result = self._start_out_of_view()
        if c.table_photos:
            photos = self._photos(c.table_photos)
            ids = env_photo_textures(env, c.table_photos, photos, n=max(N_PHOTO_TEXTURES, len(photos)))
            k = int(self.rng.integers(len(ids)))
            set_table_texture(env, ids[k])
            result = StepResult(frame=env.render(), proprio=env.proprio(), success=False, terminated=False,
                                truncated=False)
            self.events.append({"event": "table-photo", "step": 0, "texture": k})
        if c.backgrounds:
            from grasp_s2r.vision.images.backgrounds import random_crop
            from grasp_s2r.vision.images.composite import composite_frame

            photos = self._photos(c.backgrounds)
            cam = env.camera.cfg  # the camera rendered: the view, and its margins when the env renders them
            # one crop of one photo per episode: the background stays put while the arm moves
            self.photo = random_crop(photos[int(self.rng.integers(len(photos)))], (cam.height_px, cam.width_px),
                                     self.rng)
            self._composite = composite_frame
        self._first_frame = None if result is None else result.frame
        return result

    def _start_out_of_view(self) -> StepResult:
        """Move the sphere (a new start, ``env.params``) to a reachable table spot the camera does not see.

        Candidates are drawn uniformly over the reachable table; the first one far enough outside the view is taken.
        When no reachable spot is that far outside the view from the arm's start (6 % of the eval seeds), the arm's
        start offset is drawn again (within the env's own ``arm_start_jitter_m``), a few times at most; after that the
        spot farthest outside the view.
        """
        env, c, s = self.env, self.cond, self.env.config.scene
        half = s.workspace_half_extent_m - _TABLE_EDGE_MARGIN_M
        z = s.table_height_m + s.sphere_radius_m
        best: tuple[float, EpisodeParams] | None = None
        for attempt in range(_OUT_OF_VIEW_ARM_STARTS):
            if attempt > 0:
                start = self.rng.uniform(-1, 1, size=3) * env.config.randomization.arm_start_jitter_m
                env.reset(env.seed, dataclasses.replace(env.params, start_tcp_offset_m=tuple(float(v) for v in start)))
            xy = np.asarray(s.spawn_center_world_m) + self.rng.uniform(-half, half, size=(_OUT_OF_VIEW_CANDIDATES, 2))
            # the arm's start does not depend on the sphere: the camera's pose now is the new episode's
            outside = outside_view_deg(env, np.column_stack([xy, np.full(len(xy), z)]))
            far = np.flatnonzero(outside >= c.start_out_of_view_deg)  # in random order (the candidates are i.i.d.)
            params = env.params
            for i in np.concatenate([far, np.argsort(-outside)])[:_OUT_OF_VIEW_REACH_CHECKS]:
                if self._reachable(xy[i]):  # (moves the arm: a reset puts it back)
                    if best is None or outside[i] > best[0]:
                        best = (float(outside[i]), dataclasses.replace(
                            params, sphere_xy_world_m=tuple(float(v) for v in xy[i])))
                    break
            if best is not None and best[0] >= c.start_out_of_view_deg:
                break
        params = env.params if best is None else best[1]  # None: nothing reachable (a scene unlike the default one)
        result = env.reset(env.seed, params)
        outside_deg = float(outside_view_deg(env, np.array([*params.sphere_xy_world_m, z]))[0])
        self.events.append({"event": "start-out-of-view", "step": 0, "sphere_xy_world_m": list(params.sphere_xy_world_m),
                            "outside_view_deg": outside_deg, "arm_starts": attempt + 1,
                            "in_view": bool(result.frame.view().sphere_mask.any())})
        return result

    def _reachable(self, xy: np.ndarray) -> bool:
        """Whether the arm can grasp a sphere at ``xy``: its wrist joint keeps a margin to its limits there."""
        env, s = self.env, self.env.config.scene
        env.robot.teleport(np.array([*xy, s.table_height_m + s.sphere_radius_m]), s.finger_open_m)
        j = ARM_JOINTS[-1]
        q = env.robot.joint_state()[j]
        lo, hi = pb.getJointInfo(env.robot.uid, j, physicsClientId=env.client)[8:10]
        return min(q - lo, hi - q) >= _WRIST_LIMIT_MARGIN_RAD

    def observe(self, frame: Frame) -> tuple[np.ndarray, np.ndarray]:
        """(rgb uint8 (H, W, 3), ground-truth sphere mask bool (H, W)) of what the camera shows: the whole frame,
        its margins included when the env renders them (``GraspEnv.set_view_margin``; the photos are composited
        onto all of it).

        The first call after an ``on_reset`` that re-rendered the first frame shows that frame, whatever it is given.
        """
        if self._first_frame is not None:
            frame, self._first_frame = self._first_frame, None
        if self._composite is None:
            return frame.rgb, frame.sphere_mask
        rgb, mask = self._composite(frame, self.photo, self.rng)
        return rgb, mask

    def before_step(self, action: np.ndarray) -> np.ndarray:
        """Move the sphere if the condition says so; return the action the env really executes."""
        c = self.cond
        self._move_sphere()
        a = np.asarray(action, dtype=float).copy()
        if c.action_noise_std > 0:
            a[:3] += self.rng.normal(0.0, c.action_noise_std, size=3)
        if c.latency_steps > 0:
            self.pending.append(a)
            a = self.pending.pop(0)
        return a

    def _move_sphere(self) -> None:
        c, env = self.cond, self.env
        if c.target_speed_m_s <= 0 and c.perturb_distance_m[1] <= 0:
            return
        pv = env.privileged()
        on_table = abs(pv.sphere_pos_world_m[2] - pv.sphere_rest_z_m) < 0.003
        height_m = pv.tcp_pos_world_m[2] - pv.sphere_pos_world_m[2]
        free = on_table and not any(pv.touching)
        delta, event = np.zeros(2), None
        if c.target_speed_m_s > 0 and free and height_m >= c.target_moves_above_m:
            delta = self.direction_xy * c.target_speed_m_s / env.config.scene.control_hz
        if (c.perturb_distance_m[1] > 0 and not self.perturbed and free and not pv.gripper_closed
                and height_m <= c.perturb_below_m):
            delta = self._perturbation_xy_m(pv.sphere_pos_world_m[:2]) - pv.sphere_pos_world_m[:2]
            self.perturbed, event = True, "perturbation"
        if not delta.any():
            return
        new_xy = self._clip_to_workspace(pv.sphere_pos_world_m[:2] + delta)
        pb.resetBasePositionAndOrientation(env.sphere_uid, [*new_xy, pv.sphere_rest_z_m], [0, 0, 0, 1],
                                           physicsClientId=env.client)
        pb.resetBaseVelocity(env.sphere_uid, [0, 0, 0], [0, 0, 0], physicsClientId=env.client)
        if event:
            moved = [float(x) for x in new_xy - pv.sphere_pos_world_m[:2]]
            self.events.append({"event": event, "step": env.steps, "moved_xy_m": moved})

    def _clip_to_workspace(self, xy_world_m: np.ndarray) -> np.ndarray:
        s = self.env.config.scene
        lo = np.asarray(s.spawn_center_world_m) - s.workspace_half_extent_m + 0.02
        hi = np.asarray(s.spawn_center_world_m) + s.workspace_half_extent_m - 0.02
        return np.clip(xy_world_m, lo, hi)

    def _perturbation_xy_m(self, sphere_xy_world_m: np.ndarray) -> np.ndarray:
        """Where the ``perturbation`` puts the sphere: a distance drawn from ``perturb_distance_m`` in a uniform
        direction, clipped to the workspace, drawn again (up to :data:`PERTURB_MAX_DRAWS` times) while it would lie
        under a finger (:data:`PERTURB_FINGER_CLEARANCE_M`)."""
        c = self.cond
        for _ in range(PERTURB_MAX_DRAWS):
            angle = self.rng.uniform(0, 2 * np.pi)
            delta = self.rng.uniform(*c.perturb_distance_m) * np.array([np.cos(angle), np.sin(angle)])
            xy = self._clip_to_workspace(sphere_xy_world_m + delta)
            if self._clear_of_fingers(xy):
                break
        return xy

    def _clear_of_fingers(self, xy_world_m: np.ndarray) -> bool:
        """Whether a sphere at this table point lies, seen from above, at least the clearance away from both
        fingers' bounding boxes (they move down onto what lies under them)."""
        env = self.env
        radius_m = env.config.scene.sphere_diameter_m / 2 + PERTURB_FINGER_CLEARANCE_M
        for link in FINGER_JOINTS:
            lo, hi = (np.asarray(v)[:2] for v in pb.getAABB(env.robot.uid, link, physicsClientId=env.client))
            gap_xy = np.maximum(np.maximum(lo - xy_world_m, 0.0), np.maximum(xy_world_m - hi, 0.0))
            if np.hypot(*gap_xy) < radius_m:
                return False
        return True
