"""A low look: the arm goes down to where the camera sees the spawn area with the sphere wider, then the controller
acts again.

The shipped controller searches from high up (it learned the observable expert's search at 0.22 m), where the sphere
is 2-3 px wide and on busy tables the segmenter rarely finds it. From 8 cm above the middle of where spheres spawn the
camera sees nearly all of that area (96 of the first 100 seeds' spheres; the others hide under the fingers at its
edge) with the sphere about 5 px wide. :class:`LowLook` moves the TCP there, fingers open, by proprioception alone,
at the episode's start (``at_start``) and/or each time the mask filter gives up a spot of the table as a lure
(``after_spot``: a hovered or re-closed spot, ``control.hovered``), and hands back to the controller once there
(within ``tol_m``) or after ``max_steps`` steps. With ``points=4`` the look is a scan: lower down, where one view
covers less of the area and the sphere is wider, it visits the views centred on the area's four quarters, nearest
first; with ``until_seen`` it hands back as soon as the filtered mask shows something. Everything it reads is what a
robot has: the TCP's position (kinematics), the filtered mask and the scene's spawn area. The shipped filter looks
from 8 cm after each spot, not at the start, which cost other conditions on validation episodes (docs/control.md,
*Low look*). Numpy only; run by :class:`~grasp_s2r.control.parallax.ParallaxFilter` (its :meth:`action`), so what is
evaluated is what ``GraspAgent`` deploys.
"""

from __future__ import annotations

import numpy as np

from grasp_s2r.control.wrist_geometry import TCP_INDEX
from grasp_s2r.expert.fsm import ExpertConfig, SearchConfig, action_towards
from grasp_s2r.sim.config import SceneConfig

LOOK_POINTS = (1, 4)
"""How many views a look visits: the spawn area's middle, or the middles of its four quarters."""


def look_targets(scene: SceneConfig, height_m: float, points: int) -> np.ndarray:
    """TCP (x, y, height above the table) (points, 3), m, of each view of a look, the views centred on the spawn
    area's middle (1) or on its quarters' middles (4, in a cycle around the area)."""
    if points not in LOOK_POINTS:
        raise ValueError(f"a look visits {' or '.join(map(str, LOOK_POINTS))} points, got {points}")
    centre = np.asarray(scene.spawn_center_world_m, dtype=float)
    q = scene.spawn_half_extent_m / 2
    views = [centre] if points == 1 else [centre + np.array(d) * q for d in ((1, 1), (1, -1), (-1, -1), (-1, 1))]
    search = SearchConfig()
    return np.array([[*search.tcp_xy_viewing(v, height_m), height_m] for v in views])


class LowLook:
    """One episode's low looks; :meth:`action` before the controller's action is executed."""

    def __init__(self, scene: SceneConfig, height_m: float, at_start: bool, after_spot: bool, points: int = 1,
                 until_seen: bool = False, tol_m: float = 0.01, max_steps: int = 12):
        if height_m <= 0 or tol_m <= 0 or max_steps < 1 or not (at_start or after_spot):
            raise ValueError(f"a low look needs height_m > 0, tol_m > 0, max_steps >= 1 and a trigger; got "
                             f"{height_m}, {tol_m}, {max_steps}, at_start={at_start}, after_spot={after_spot}")
        self.scene, self.height_m, self.at_start, self.after_spot = scene, height_m, at_start, after_spot
        self.until_seen, self.tol_m, self.max_steps = until_seen, tol_m, max_steps
        self.targets = look_targets(scene, height_m, points)
        """TCP (x, y, height above the table) (points, 3), m, of each view a look visits."""
        self.gain = ExpertConfig().gain
        self.reset()

    @property
    def target(self) -> np.ndarray:
        """TCP (3,), m: the (first) look point."""
        return self.targets[0]

    def reset(self) -> None:
        """A new episode: a look pending where ``at_start``."""
        self._queue: list[int] = []
        """Views (indices into ``targets``) the current look has still to visit, the current one first."""
        self.left = 0
        """Steps the current view may still take (0: the controller acts)."""
        self._spots = 0
        """Spots given up so far (a new one starts a look where ``after_spot``)."""
        self._taken = 0
        """Steps the current look has taken."""
        self.looks = 0
        """Looks started this episode."""
        self._pending = self.at_start

    def _start(self, tcp: np.ndarray) -> None:
        k = len(self.targets)
        first = int(np.argmin(np.linalg.norm(self.targets - tcp, axis=1)))
        self._queue = [(first + i) % k for i in range(k)]
        self.left, self._taken = self.max_steps, 0
        self.looks += 1

    def action(self, proprio: np.ndarray, spots_given_up: int, seen: bool = False) -> np.ndarray | None:
        """float64 (ACTION_DIM,): the look's action for this step, or None where the controller acts. ``seen``:
        this step's (filtered) mask shows something."""
        tcp = np.asarray(proprio, dtype=float)[TCP_INDEX]
        if self._pending or (self.after_spot and spots_given_up > self._spots):
            self._start(tcp)
        self._pending, self._spots = False, spots_given_up
        if self.until_seen and seen and self._taken > 0:
            self._queue = []
        while self._queue and (self.left <= 0 or np.linalg.norm(self.targets[self._queue[0]] - tcp) < self.tol_m):
            self._queue.pop(0)
            self.left = self.max_steps
        if not self._queue:
            self.left = 0
            return None
        self.left -= 1
        self._taken += 1
        return action_towards(tcp, self.targets[self._queue[0]], False, self.gain, self.scene.max_action_step_m)
