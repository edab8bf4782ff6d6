"""A low look: the arm goes down to where the camera sees the spawn area with the sphere wider, then the controller
acts again.

The shipped controller searches from high up (it learned the observable expert's search at 0.22 m), where the sphere
is 2-3 px wide and on busy tables the segmenter rarely finds it. From 8 cm above the middle of where spheres spawn the
camera sees nearly all of that area (96 of the first 100 seeds' spheres; the others hide under the fingers at its
edge) with the sphere about 5 px wide. :class:`LowLook` moves the TCP there, fingers open, by proprioception alone,
at the episode's start (``at_start``) and/or each time the mask filter gives up a spot of the table as a lure
(``after_spot``: a hovered or re-closed spot, ``control.hovered``), and hands back to the controller once there
(within ``tol_m``) or after ``max_steps`` steps; with ``dwell_steps`` it then stays while the filtered mask is empty,
circling the look point at ``dwell_radius_m`` (the sphere on other pixels, seen from a little aside), for up to that
many steps, and hands back on the first mask that shows something. Everything it reads is what a robot has: the TCP's position
(kinematics) and the scene's spawn area. The shipped filter looks from 8 cm after each spot, not at the start, which
cost other conditions on validation episodes (docs/control.md, *Low look*). Numpy only; run by
:class:`~grasp_s2r.control.parallax.ParallaxFilter` (its :meth:`action`), so what is evaluated is what ``GraspAgent``
deploys.
"""

from __future__ import annotations

import numpy as np

from grasp_s2r.control.wrist_geometry import TCP_INDEX
from grasp_s2r.expert.fsm import ExpertConfig, SearchConfig, action_towards
from grasp_s2r.sim.config import SceneConfig


class LowLook:
    """One episode's low looks; :meth:`action` before the controller's action is executed."""

    def __init__(self, scene: SceneConfig, height_m: float, at_start: bool, after_spot: bool,
                 tol_m: float = 0.01, max_steps: int = 12, dwell_steps: int = 0, dwell_radius_m: float = 0.015):
        if height_m <= 0 or tol_m <= 0 or max_steps < 1 or not (at_start or after_spot):
            raise ValueError(f"a low look needs height_m > 0, tol_m > 0, max_steps >= 1 and a trigger; got "
                             f"{height_m}, {tol_m}, {max_steps}, at_start={at_start}, after_spot={after_spot}")
        if dwell_steps < 0 or dwell_radius_m < 0:
            raise ValueError(f"dwell_steps and dwell_radius_m must be >= 0, got {dwell_steps}, {dwell_radius_m}")
        self.scene, self.height_m, self.at_start, self.after_spot = scene, height_m, at_start, after_spot
        self.tol_m, self.max_steps = tol_m, max_steps
        self.dwell_steps, self.dwell_radius_m = dwell_steps, dwell_radius_m
        self.target = np.array([*SearchConfig().tcp_xy_viewing(scene.spawn_center_world_m, height_m), height_m])
        """TCP (x, y, height above the table), m: the camera's view centred on the spawn area's middle."""
        self.gain = ExpertConfig().gain
        self.reset()

    def reset(self) -> None:
        """A new episode: a look pending where ``at_start``."""
        self.left = self.max_steps if self.at_start else 0
        """Steps the current look may still take on its way (0: there, or given up)."""
        self.dwell_left = self.dwell_steps if self.at_start else 0
        """Steps the current look may still dwell at the look point while the mask is empty (0: the controller
        acts once the look is there)."""
        self._spots = 0
        """Spots given up so far (a new one starts a look where ``after_spot``)."""
        self.looks = 0
        """Looks started this episode."""

    def action(self, proprio: np.ndarray, spots_given_up: int, mask_empty: bool = True) -> np.ndarray | None:
        """float64 (ACTION_DIM,): the look's action for this step, or None where the controller acts.
        ``mask_empty``: this step's filtered mask shows nothing (read only while dwelling)."""
        if self.after_spot and spots_given_up > self._spots:
            self.left, self.dwell_left = self.max_steps, self.dwell_steps
        self._spots = spots_given_up
        tcp = np.asarray(proprio, dtype=float)[TCP_INDEX]
        if self.left > 0 and np.linalg.norm(self.target - tcp) < self.tol_m:
            self.left = 0
        if self.left > 0:
            if self.left == self.max_steps:
                self.looks += 1
            self.left -= 1
            return action_towards(tcp, self.target, False, self.gain, self.scene.max_action_step_m)  # fingers open
        if self.dwell_left <= 0 or not mask_empty:
            self.dwell_left = 0
            return None
        self.dwell_left -= 1
        turn = 2 * np.pi * (self.dwell_steps - self.dwell_left) / 8  # an eighth of the circle a step
        point = self.target + self.dwell_radius_m * np.array([np.cos(turn), np.sin(turn), 0.0])
        return action_towards(tcp, point, False, self.gain, self.scene.max_action_step_m)
