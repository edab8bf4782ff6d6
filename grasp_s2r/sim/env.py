"""The grasping environment: one PyBullet DIRECT client per instance.

Action (4,) in [-1, 1]: TCP displacement (x, y, z) in the world frame, in units of
``scene.max_action_step_m``, and a gripper command (> 0 closes, <= 0 opens). Executed through IK at
``scene.control_hz``; no automatic grasp, no height hack.
"""

from __future__ import annotations

import dataclasses
import math
import os
import tempfile
from dataclasses import dataclass
from typing import Self

import cv2
import numpy as np
import pybullet as pb

from grasp_s2r.sim import c_output_silenced
from grasp_s2r.sim.camera import Frame, WristCamera, camera_pose_world
from grasp_s2r.sim.config import EnvConfig
from grasp_s2r.sim.randomization import (
    N_TABLE_TEXTURES,
    EpisodeParams,
    make_table_texture,
    sample_episode_params,
)
from grasp_s2r.sim.robot import GRIPPER_LINKS, PALM_LINK, Robot

ACTION_DIM = 4
PROPRIO_NAMES = ("tcp_x_world_m", "tcp_y_world_m", "tcp_z_above_table_m", "finger_gap_m", "gripper_closed")
PROPRIO_RANGES: dict[str, tuple[float, float]] = {
    "tcp_x_world_m": (-2.0, 2.0),
    "tcp_y_world_m": (-2.0, 2.0),
    "tcp_z_above_table_m": (-0.05, 2.0),
    "finger_gap_m": (-0.005, 0.2),
    "gripper_closed": (0.0, 1.0),
}
"""The readings a robot (or this simulator) can give, per ``PROPRIO_NAMES`` field: far wider than the trained
workspace (±16 cm around the spawn centre, up to 30 cm high, fingers 4 cm apart when open), so that ``GraspAgent``
refuses another unit (millimetres) and garbage, not an arm outside the workspace; a few millimetres below zero pass
(a calibration's error). The Gym wrapper's observation space is this box."""
STATE_NAMES = tuple(
    [f"q{i}" for i in range(9)] + [f"qd{i}" for i in range(9)]
    + ["sphere_x", "sphere_y", "sphere_z", "sphere_qx", "sphere_qy", "sphere_qz", "sphere_qw"]
    + ["sphere_vx", "sphere_vy", "sphere_vz", "sphere_wx", "sphere_wy", "sphere_wz"]
    + ["target_x", "target_y", "target_z", "gripper_closed", "step"]
)
"""Layout of the flat simulator state vector (float64) returned by :meth:`GraspEnv.get_state`."""
_TABLE_HALF_M = 0.5
_FREE_SPACE_MARGIN_M = 0.06
"""An env step runs at ``free_space_physics_hz`` when the robot is farther than this from the sphere and the
table and the sphere rests: in one control step the TCP moves at most 3.5 cm (2 cm along each axis) and a finger
closes at most 2 cm."""
_FINGERTIPS_BELOW_TCP_M = 0.005


@dataclass(frozen=True)
class Privileged:
    """World state the expert reads and the learner never sees."""

    tcp_pos_world_m: np.ndarray
    sphere_pos_world_m: np.ndarray
    sphere_rest_z_m: float
    finger_gap_m: float
    gripper_closed: bool
    touching: tuple[bool, bool]
    """Whether the (left, right) finger touches the sphere."""

    @property
    def held(self) -> bool:
        return all(self.touching)


@dataclass(frozen=True)
class StepResult:
    frame: Frame
    proprio: np.ndarray
    """float32 (len(PROPRIO_NAMES),)."""
    success: bool
    terminated: bool
    truncated: bool


class GraspEnv:
    """Arm, wrist camera, table and a tiny sphere; ``reset(seed)`` fully determines an episode."""

    def __init__(self, config: EnvConfig | None = None):
        self.config = config or EnvConfig()
        self.client = pb.connect(pb.DIRECT)
        s = self.config.scene
        pb.setTimeStep(1.0 / s.physics_hz, physicsClientId=self.client)
        if s.deterministic_overlapping_pairs:
            pb.setPhysicsEngineParameter(deterministicOverlappingPairs=1, physicsClientId=self.client)
        if s.constraint_solver == "dantzig":
            with c_output_silenced():  # PyBullet prints the switch
                pb.setPhysicsEngineParameter(constraintSolverType=pb.CONSTRAINT_SOLVER_LCP_DANTZIG,
                                             physicsClientId=self.client)
        pb.setGravity(0, 0, -9.81, physicsClientId=self.client)
        self._build_table()
        self.robot = Robot(self.client, s)
        r = s.sphere_radius_m
        self.sphere_uid = pb.createMultiBody(
            baseMass=s.sphere_mass_kg,
            baseCollisionShapeIndex=pb.createCollisionShape(pb.GEOM_SPHERE, radius=r, physicsClientId=self.client),
            baseVisualShapeIndex=pb.createVisualShape(pb.GEOM_SPHERE, radius=r, physicsClientId=self.client),
            basePosition=[0, 0, s.table_height_m + r], physicsClientId=self.client,
        )
        pb.changeDynamics(self.sphere_uid, -1, lateralFriction=s.sphere_friction, rollingFriction=1e-5,
                          spinningFriction=1e-4, physicsClientId=self.client)
        self.camera = WristCamera(self.client, self.config.camera)
        self.margin_px = 0
        """Pixels rendered beyond each edge of the camera's view (:meth:`set_view_margin`)."""
        self.params: EpisodeParams | None = None
        self.seed: int | None = None
        self.steps = 0

    def _build_table(self) -> None:
        s, c = self.config.scene, self.client
        h = _TABLE_HALF_M
        # The visible top is a textured quad (2 triangles: cheap to render); collision is a box.
        verts = [[-h, -h, 0], [h, -h, 0], [h, h, 0], [-h, h, 0]]
        vis = pb.createVisualShape(pb.GEOM_MESH, vertices=verts, indices=[0, 1, 2, 0, 2, 3],
                                   uvs=[[0, 0], [4, 0], [4, 4], [0, 4]], normals=[[0, 0, 1]] * 4,
                                   physicsClientId=c)
        col = pb.createCollisionShape(pb.GEOM_BOX, halfExtents=[h, h, 0.025],
                                      collisionFramePosition=[0, 0, -0.025], physicsClientId=c)
        self.table_uid = pb.createMultiBody(0, col, vis, basePosition=[0, 0, s.table_height_m], physicsClientId=c)
        pb.changeDynamics(self.table_uid, -1, lateralFriction=0.8, physicsClientId=c)
        self._textures = []
        with tempfile.TemporaryDirectory(prefix="grasp_s2r_tex_") as tmp:
            for i in range(N_TABLE_TEXTURES):
                path = os.path.join(tmp, f"table_{i:02d}.png")
                cv2.imwrite(path, make_table_texture(i))
                self._textures.append(pb.loadTexture(path, physicsClientId=c))
            path = os.path.join(tmp, "plain.png")
            cv2.imwrite(path, np.full((4, 4, 3), 255, np.uint8))
            self._plain_texture = pb.loadTexture(path, physicsClientId=c)

    def set_view_margin(self, margin_px: int) -> None:
        """Render ``margin_px`` more pixels beyond each edge of ``config.camera``'s view from now on
        (``CameraConfig.widened``): the frames a segmenter trained with a margin reads (``train-vision --margin-px``).
        Each :class:`Frame` says its margin; ``Frame.view()`` is the view itself, as with no margin."""
        if margin_px != self.margin_px:
            self.camera = WristCamera(self.client, self.config.camera.widened(margin_px))  # ValueError if < 0
            self.margin_px = int(margin_px)

    # --- episode ----------------------------------------------------------------------------
    def reset(self, seed: int, params: EpisodeParams | None = None) -> StepResult:
        """Start the episode of ``seed`` (its randomization drawn from the seed unless given)."""
        self._own_contact_threshold()
        self.seed = int(seed)
        self.params = params or sample_episode_params(self.config, np.random.default_rng(self.seed))
        self._apply_visuals(self.params)
        s, p = self.config.scene, self.params
        sphere = [p.sphere_xy_world_m[0], p.sphere_xy_world_m[1], s.table_height_m + s.sphere_radius_m]
        pb.resetBasePositionAndOrientation(self.sphere_uid, sphere, [0, 0, 0, 1], physicsClientId=self.client)
        pb.resetBaseVelocity(self.sphere_uid, [0, 0, 0], [0, 0, 0], physicsClientId=self.client)
        cx, cy = s.spawn_center_world_m
        start = np.array([cx, cy, s.table_height_m + s.start_tcp_height_m]) + np.array(p.start_tcp_offset_m)
        self.robot.teleport(start, s.finger_open_m)
        self.steps = 0
        return self._result()

    def _apply_visuals(self, p: EpisodeParams) -> None:
        c = self.client
        pb.changeVisualShape(self.sphere_uid, -1, rgbaColor=[*p.sphere_rgb, 1], physicsClientId=c)
        tex = self._plain_texture if p.table_texture < 0 else self._textures[p.table_texture]
        pb.changeVisualShape(self.table_uid, -1, rgbaColor=[*p.table_rgb, 1], textureUniqueId=tex, physicsClientId=c)

    def step(self, action: np.ndarray) -> StepResult:
        a = np.clip(np.asarray(action, dtype=float).reshape(-1), -1.0, 1.0)
        if a.shape != (ACTION_DIM,):
            raise ValueError(f"action must have shape ({ACTION_DIM},), got {np.shape(action)}")
        if self.params is None:
            raise RuntimeError("call reset(seed) before step()")
        s = self.config.scene
        substeps = s.substeps if self.contact_possible() else s.free_space_substeps
        if substeps != self.robot.substeps:
            pb.setTimeStep(1.0 / (s.control_hz * substeps), physicsClientId=self.client)
            self.robot.substeps = substeps  # the motor gains follow
        self.robot.command(a[:3] * s.max_action_step_m, close=a[3] > 0)
        self._own_contact_threshold()
        for _ in range(substeps):
            pb.stepSimulation(physicsClientId=self.client)
        self.steps += 1
        return self._result()

    def contact_possible(self) -> bool:
        """Whether the coming env step may see a contact (the gripper near the sphere or the table) or a moving
        sphere, and so runs at ``physics_hz``; otherwise only the arm moves, at ``free_space_physics_hz``."""
        s = self.config.scene
        if s.free_space_substeps == s.substeps:
            return True
        # the gripper, pointing down, is the lowest part of the arm
        if self.robot.tcp_pos_world_m()[2] - s.table_height_m < _FREE_SPACE_MARGIN_M + _FINGERTIPS_BELOW_TCP_M:
            return True
        pos, _ = pb.getBasePositionAndOrientation(self.sphere_uid, physicsClientId=self.client)
        vel, _ = pb.getBaseVelocity(self.sphere_uid, physicsClientId=self.client)
        if abs(pos[2] - s.table_height_m - s.sphere_radius_m) > 0.001 or math.hypot(*vel) > 0.005:
            return True  # held, falling, rolling or sliding
        return len(pb.getClosestPoints(self.robot.uid, self.sphere_uid, _FREE_SPACE_MARGIN_M,
                                       physicsClientId=self.client)) > 0

    def _own_contact_threshold(self) -> None:
        """Bullet's contact breaking threshold is one number for the whole process: set this env's before its
        physics runs (another env in the process may use another)."""
        pb.setPhysicsEngineParameter(contactBreakingThreshold=self.config.scene.contact_breaking_threshold,
                                     physicsClientId=self.client)

    def _result(self) -> StepResult:
        s = self.config.scene
        sphere_z = self.sphere_pos_world_m()[2]
        lifted = sphere_z - (s.table_height_m + s.sphere_radius_m) >= s.lift_success_m
        success = bool(lifted and all(self.robot.touches(self.sphere_uid)))  # = is_success(), contacts only if lifted
        fell = sphere_z < s.table_height_m - 0.05
        return StepResult(
            frame=self.render(), proprio=self.proprio(), success=success,
            terminated=success or fell, truncated=self.steps >= s.max_episode_steps,
        )

    # --- observation ------------------------------------------------------------------------
    def render(self) -> Frame:
        palm_pos, palm_quat = self.robot.link_pose_world(PALM_LINK)
        p = self.params
        eye, target, up = camera_pose_world(
            palm_pos, palm_quat, self.config.camera,
            np.asarray(p.camera_mount_jitter_m), np.asarray(p.camera_look_jitter_m),
        )
        frame = self.camera.render(eye, target, up, p.lighting, self.sphere_uid, self.robot.uid, GRIPPER_LINKS,
                                   self.config.scene.sphere_radius_m)
        return dataclasses.replace(frame, margin_px=self.margin_px) if self.margin_px else frame

    def proprio(self) -> np.ndarray:
        tcp = self.robot.tcp_pos_world_m()
        return np.array(
            [tcp[0], tcp[1], tcp[2] - self.config.scene.table_height_m, self.robot.finger_gap_m(),
             float(self.robot.gripper_closed)], dtype=np.float32,
        )

    def sphere_pos_world_m(self) -> np.ndarray:
        return np.array(pb.getBasePositionAndOrientation(self.sphere_uid, physicsClientId=self.client)[0])

    def privileged(self) -> Privileged:
        s = self.config.scene
        return Privileged(
            tcp_pos_world_m=self.robot.tcp_pos_world_m(), sphere_pos_world_m=self.sphere_pos_world_m(),
            sphere_rest_z_m=s.table_height_m + s.sphere_radius_m, finger_gap_m=self.robot.finger_gap_m(),
            gripper_closed=self.robot.gripper_closed, touching=self.robot.touches(self.sphere_uid),
        )

    def is_success(self) -> bool:
        pv = self.privileged()
        lifted = pv.sphere_pos_world_m[2] - pv.sphere_rest_z_m >= self.config.scene.lift_success_m
        return bool(lifted and pv.held)

    # --- state capture ----------------------------------------------------------------------
    def get_state(self) -> np.ndarray:
        """Flat simulator state, float64 (len(STATE_NAMES),); with the seed it re-renders the step."""
        pos, orn = pb.getBasePositionAndOrientation(self.sphere_uid, physicsClientId=self.client)
        lin, ang = pb.getBaseVelocity(self.sphere_uid, physicsClientId=self.client)
        return np.concatenate([
            self.robot.joint_state(), pos, orn, lin, ang, self.robot.tcp_target_world_m,
            [float(self.robot.gripper_closed), float(self.steps)],
        ])

    def set_state(self, state: np.ndarray) -> None:
        """Restore a state from :meth:`get_state` (the episode's params must already be applied)."""
        state = np.asarray(state, dtype=float)
        if state.shape != (len(STATE_NAMES),):
            raise ValueError(f"state must have shape ({len(STATE_NAMES)},), got {state.shape}")
        self._own_contact_threshold()
        self.robot.set_joint_state(state[:18])
        pb.resetBasePositionAndOrientation(self.sphere_uid, state[18:21], state[21:25], physicsClientId=self.client)
        pb.resetBaseVelocity(self.sphere_uid, state[25:28], state[28:31], physicsClientId=self.client)
        self.robot.tcp_target_world_m = state[31:34].copy()
        self.robot.gripper_closed = bool(state[34] > 0.5)
        self.robot.apply_targets()
        self.steps = int(state[35])

    def close(self) -> None:
        if self.client >= 0 and pb.isConnected(self.client):
            pb.disconnect(self.client)
        self.client = -1

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
