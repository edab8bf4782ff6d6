"""Finite-state-machine expert with privileged state: reset / approach / grasp (descend, close, lift).

The expert keeps no memory: every call recomputes the phase from the world state, so it can label
any state a learner reaches (DAgger needs exactly that). After a miss or a knocked sphere the phase
falls back to approach or descent, chosen from where the sphere is now.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass

import numpy as np

from grasp_s2r.sim.config import SceneConfig
from grasp_s2r.sim.env import ACTION_DIM, Privileged


class Phase(enum.IntEnum):
    """Expert phase; RESET, APPROACH and the three GRASP sub-phases (DESCEND, CLOSE, LIFT)."""

    RESET = 0
    APPROACH = 1
    DESCEND = 2
    CLOSE = 3
    LIFT = 4


@dataclass(frozen=True)
class ExpertConfig:
    """Thresholds of the expert FSM (metres)."""

    hover_above_sphere_m: float = 0.06
    """Approach goes to this height above the grasp point, straight above the sphere."""
    grasp_offset_m: float = 0.0015
    """The TCP closes this far above the sphere centre (fingertips stay off the table)."""
    descend_cone_base_m: float = 0.004
    """Horizontal error allowed when descending, at the grasp height ..."""
    descend_cone_slope: float = 0.25
    """... growing by this much per metre of height above the grasp point."""
    close_xy_tol_m: float = 0.0035
    """Close when the sphere centre is this close to the TCP axis ..."""
    close_z_tol_m: float = 0.004
    """... and the TCP is this close to the grasp height."""
    lift_height_m: float = 0.12
    """Lift the held sphere to this height above its resting height."""
    gain: float = 0.9
    """Fraction of the remaining error commanded in one step (before clipping)."""


class Expert:
    """``act(privileged) -> (action (4,), phase)``; stateless."""

    def __init__(self, scene: SceneConfig, config: ExpertConfig | None = None):
        self.scene = scene
        self.config = config or ExpertConfig()

    def phase(self, pv: Privileged) -> Phase:
        c = self.config
        tcp, sphere = pv.tcp_pos_world_m, pv.sphere_pos_world_m
        err_xy = float(np.linalg.norm(sphere[:2] - tcp[:2]))
        above_grasp = tcp[2] - (sphere[2] + c.grasp_offset_m)
        if pv.gripper_closed and pv.held:
            return Phase.LIFT
        in_zone = err_xy < c.close_xy_tol_m and abs(above_grasp) < c.close_z_tol_m
        if in_zone and (pv.gripper_closed or pv.finger_gap_m > 0.9 * 2 * self.scene.finger_open_m):
            return Phase.CLOSE
        if pv.gripper_closed or pv.finger_gap_m < 0.9 * 2 * self.scene.finger_open_m:
            # closed on nothing, or the sphere slipped away while closing: open and back off
            return Phase.RESET
        if err_xy < c.descend_cone_base_m + c.descend_cone_slope * max(above_grasp, 0.0):
            return Phase.DESCEND
        return Phase.APPROACH

    def act(self, pv: Privileged) -> tuple[np.ndarray, Phase]:
        c, s = self.config, self.scene
        phase = self.phase(pv)
        tcp, sphere = pv.tcp_pos_world_m, pv.sphere_pos_world_m
        grasp_point = sphere + np.array([0.0, 0.0, c.grasp_offset_m])
        close = phase in (Phase.CLOSE, Phase.LIFT)
        if phase == Phase.LIFT:
            target = np.array([tcp[0], tcp[1], pv.sphere_rest_z_m + c.lift_height_m])
        elif phase == Phase.CLOSE:
            target = grasp_point
        elif phase == Phase.RESET:
            target = tcp + np.array([0.0, 0.0, 0.5 * s.max_action_step_m])
        elif phase == Phase.DESCEND:
            target = grasp_point
        else:  # APPROACH: to the point above the sphere; rise first when low and off target
            hover_z = grasp_point[2] + c.hover_above_sphere_m
            target = np.array([sphere[0], sphere[1], hover_z])
            if tcp[2] < hover_z - 0.01:
                target[:2] = tcp[:2] + 0.3 * (sphere[:2] - tcp[:2])
        action = np.zeros(ACTION_DIM)
        action[:3] = np.clip(c.gain * (target - tcp) / s.max_action_step_m, -1.0, 1.0)
        action[3] = 1.0 if close else -1.0
        return action, phase
