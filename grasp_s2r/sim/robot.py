"""The KUKA iiwa arm with its parallel gripper, driven in Cartesian space through IK.

The robot owns no global state: every PyBullet call names the client it belongs to.
"""

from __future__ import annotations

from importlib import resources

import numpy as np
import pybullet as pb

from grasp_s2r.sim.config import SceneConfig

URDF_NAME = "iiwa_gripper.urdf"
ARM_JOINTS = tuple(range(7))
PALM_LINK = 7
FINGER_LEFT_LINK = 8
FINGER_RIGHT_LINK = 9
FINGER_JOINTS = (FINGER_LEFT_LINK, FINGER_RIGHT_LINK)
TCP_LINK = 10
GRIPPER_LINKS = (PALM_LINK, FINGER_LEFT_LINK, FINGER_RIGHT_LINK)
TCP_DOWN_QUAT_XYZW = tuple(pb.getQuaternionFromEuler([np.pi, 0.0, 0.0]))
"""Gripper pointing down: palm +z (towards the fingertips) is world -z; palm +x is world +x."""
_REST_POSE_RAD = (0.0, 0.55, 0.0, -1.45, 0.0, 1.15, 0.0)
_ARM_FORCE_N = 300.0
_ARM_POSITION_GAIN = 0.1
"""PyBullet's default position gain, which the arm motors had at 240 Hz (24 substeps per control step)."""
_FINGER_POSITION_GAIN = 0.05
_REFERENCE_SUBSTEPS = 24
"""The motor gains above are per substep at this many substeps per control step."""
_TCP_MIN_ABOVE_TABLE_M = 0.006
"""Lowest TCP target above the table: the fingertips sit 5 mm below the TCP."""


def urdf_path() -> str:
    return str(resources.files("grasp_s2r.sim") / "assets" / URDF_NAME)


def substep_gain(gain: float, substeps: int) -> float:
    """The position gain that makes ``substeps`` physics substeps close the share of a joint's error that
    :data:`_REFERENCE_SUBSTEPS` substeps close with ``gain``.

    PyBullet's position motor asks for the velocity ``gain * error / dt``: unhindered, each substep closes ``gain``
    of the error and ``n`` of them leave ``(1 - gain) ** n``. So an action moves the arm (and the fingers) as far in
    one control step at any physics rate.
    """
    if substeps == _REFERENCE_SUBSTEPS:
        return gain
    return 1.0 - (1.0 - gain) ** (_REFERENCE_SUBSTEPS / substeps)


class Robot:
    """Arm + gripper in one PyBullet client; a Cartesian TCP target is tracked through IK."""

    def __init__(self, client: int, scene: SceneConfig):
        self.client = client
        self.scene = scene
        self.uid = pb.loadURDF(
            urdf_path(),
            basePosition=scene.robot_base_world_m,
            useFixedBase=True,
            flags=pb.URDF_USE_INERTIA_FROM_FILE,
            physicsClientId=client,
        )
        movable = [j for j in range(pb.getNumJoints(self.uid, physicsClientId=client))
                   if pb.getJointInfo(self.uid, j, physicsClientId=client)[2] != pb.JOINT_FIXED]
        assert tuple(movable) == ARM_JOINTS + FINGER_JOINTS, movable
        info = [pb.getJointInfo(self.uid, j, physicsClientId=client) for j in movable]
        self._lower = [i[8] for i in info]
        self._upper = [i[9] for i in info]
        self._ranges = [u - lo for u, lo in zip(self._upper, self._lower)]
        self._rest = list(_REST_POSE_RAD) + [scene.finger_open_m] * 2
        for link in (FINGER_LEFT_LINK, FINGER_RIGHT_LINK):
            pb.changeDynamics(self.uid, link, lateralFriction=scene.finger_friction,
                              spinningFriction=0.001, physicsClientId=client)
        # one motor command for the 9 joints: arm then fingers
        self._motor_joints = list(ARM_JOINTS + FINGER_JOINTS)
        self._motor_forces = [_ARM_FORCE_N] * len(ARM_JOINTS) + [scene.finger_force_n] * len(FINGER_JOINTS)
        self.substeps = scene.substeps
        """Physics substeps of the coming env step: the motor gains are scaled to them."""
        self._gains: dict[int, list[float]] = {}
        cx, cy = scene.spawn_center_world_m
        self._target_lo = np.array([cx - scene.workspace_half_extent_m, cy - scene.workspace_half_extent_m,
                                    scene.table_height_m + _TCP_MIN_ABOVE_TABLE_M])
        self._target_hi = np.array([cx + scene.workspace_half_extent_m, cy + scene.workspace_half_extent_m,
                                    scene.table_height_m + scene.workspace_max_height_m])
        self.tcp_target_world_m = np.zeros(3)
        self.gripper_closed = False

    # --- kinematics -------------------------------------------------------------------------
    def _ik(self, tcp_world_m: np.ndarray) -> list[float]:
        q = pb.calculateInverseKinematics(
            self.uid, TCP_LINK, list(tcp_world_m), TCP_DOWN_QUAT_XYZW,
            lowerLimits=self._lower, upperLimits=self._upper, jointRanges=self._ranges,
            restPoses=self._rest, maxNumIterations=self.scene.ik_iterations, residualThreshold=1e-5,
            physicsClientId=self.client,
        )
        return list(q[: len(ARM_JOINTS)])

    def teleport(self, tcp_world_m: np.ndarray, finger_q_m: float) -> None:
        """Put the arm at ``tcp_world_m`` instantly (reset), fingers at ``finger_q_m``, at rest."""
        for q, j in zip(self._rest, ARM_JOINTS):
            pb.resetJointState(self.uid, j, q, 0.0, physicsClientId=self.client)
        for _ in range(4):  # IK from the current pose converges in a few resets
            for q, j in zip(self._ik(tcp_world_m), ARM_JOINTS):
                pb.resetJointState(self.uid, j, q, 0.0, physicsClientId=self.client)
        for j in FINGER_JOINTS:
            pb.resetJointState(self.uid, j, finger_q_m, 0.0, physicsClientId=self.client)
        self.tcp_target_world_m = np.asarray(tcp_world_m, dtype=float).copy()
        self.gripper_closed = finger_q_m < self.scene.finger_open_m / 2
        self.apply_targets()

    def clip_target(self, tcp_world_m: np.ndarray) -> np.ndarray:
        return np.clip(tcp_world_m, self._target_lo, self._target_hi)

    def command(self, delta_tcp_world_m: np.ndarray, close: bool) -> None:
        """Move the TCP target to the measured TCP + ``delta_tcp_world_m`` (3,); open or close.

        Relative to the measured pose (not the previous target), so a blocked arm, pressing on
        the table or the sphere, does not wind up.
        """
        self.tcp_target_world_m = self.clip_target(self.tcp_pos_world_m() + delta_tcp_world_m)
        self.gripper_closed = bool(close)
        self.apply_targets()

    def apply_targets(self) -> None:
        """Arm motors to the IK solution of the TCP target, finger motors open or closed (one PyBullet call)."""
        finger_target = 0.0 if self.gripper_closed else self.scene.finger_open_m
        pb.setJointMotorControlArray(
            self.uid, self._motor_joints, pb.POSITION_CONTROL,
            targetPositions=self._ik(self.tcp_target_world_m) + [finger_target] * len(FINGER_JOINTS),
            forces=self._motor_forces, positionGains=self._motor_gains(self.substeps), physicsClientId=self.client,
        )

    def _motor_gains(self, substeps: int) -> list[float]:
        if substeps not in self._gains:
            self._gains[substeps] = ([substep_gain(_ARM_POSITION_GAIN, substeps)] * len(ARM_JOINTS)
                                     + [substep_gain(_FINGER_POSITION_GAIN, substeps)] * len(FINGER_JOINTS))
        return self._gains[substeps]

    # --- proprioception ---------------------------------------------------------------------
    def link_pose_world(self, link: int) -> tuple[np.ndarray, np.ndarray]:
        """(position (3,), quaternion xyzw (4,)) of a link frame in the world."""
        st = pb.getLinkState(self.uid, link, computeForwardKinematics=True, physicsClientId=self.client)
        return np.array(st[4]), np.array(st[5])

    def tcp_pos_world_m(self) -> np.ndarray:
        return self.link_pose_world(TCP_LINK)[0]

    def finger_q_m(self) -> np.ndarray:
        """Finger joint positions (2,); the gap between the pads is their sum."""
        return np.array([s[0] for s in pb.getJointStates(self.uid, FINGER_JOINTS, physicsClientId=self.client)])

    def finger_gap_m(self) -> float:
        return float(self.finger_q_m().sum())

    def touches(self, body: int, within_m: float = 0.001) -> tuple[bool, bool]:
        """Whether the (left, right) finger is within ``within_m`` of ``body``.

        Computed from the current geometry (``getClosestPoints``), not the contact cache of the
        last physics step, so it is right straight after a reset or a state restore.
        """
        return tuple(  # type: ignore[return-value]
            len(pb.getClosestPoints(self.uid, body, within_m, linkIndexA=link, physicsClientId=self.client)) > 0
            for link in (FINGER_LEFT_LINK, FINGER_RIGHT_LINK)
        )

    # --- state ------------------------------------------------------------------------------
    def joint_state(self) -> np.ndarray:
        """Positions then velocities of the 9 movable joints (18,)."""
        joints = ARM_JOINTS + FINGER_JOINTS
        st = pb.getJointStates(self.uid, joints, physicsClientId=self.client)
        return np.array([s[0] for s in st] + [s[1] for s in st])

    def set_joint_state(self, qv: np.ndarray) -> None:
        joints = ARM_JOINTS + FINGER_JOINTS
        n = len(joints)
        for i, j in enumerate(joints):
            pb.resetJointState(self.uid, j, float(qv[i]), float(qv[n + i]), physicsClientId=self.client)
