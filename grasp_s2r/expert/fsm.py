"""Finite-state-machine expert with privileged state: reset / approach / grasp (descend, close, lift).

Every call recomputes the phase from the world state, so the expert can label any state a learner
reaches (DAgger needs exactly that). After a miss or a knocked sphere the phase falls back to
approach or descent, chosen from where the sphere is now.

Observable-consistent mode (``act(pv, sphere_in_view)`` with a bool): while the sphere is in the
camera's view the expert acts as above; while it is not, it acts as an agent without the sphere's
privileged position could: back to where the sphere was last seen (RETURN), then a search (SEARCH:
rise to a height where the camera sees most of the table, then an expanding square spiral), and the
normal phases again once the sphere is in view. Its only memory is per episode (the last seen
position, the search's progress), cleared by :meth:`Expert.reset`. ``act(pv)`` alone keeps no memory
and always reads the sphere's position (the behaviour of datasets made before this mode).
"""

from __future__ import annotations

import enum
from dataclasses import dataclass
from typing import Literal, get_args

import numpy as np

from grasp_s2r.sim.config import SceneConfig
from grasp_s2r.sim.env import ACTION_DIM, Privileged


class Phase(enum.IntEnum):
    """Expert phase; RESET, APPROACH and the three GRASP sub-phases (DESCEND, CLOSE, LIFT); RETURN and SEARCH
    only while the sphere is out of view in the observable-consistent mode. New members go at the end: datasets
    store the int8 codes."""

    RESET = 0
    APPROACH = 1
    DESCEND = 2
    CLOSE = 3
    LIFT = 4
    RETURN = 5
    """Out of view: back to the point above where the sphere was last seen."""
    SEARCH = 6
    """Out of view and not where it was last seen (or never seen): rise, then sweep a square spiral."""


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


LearnerSees = Literal["mask", "sphere"]
LEARNER_SEES: tuple[str, ...] = get_args(LearnerSees)
"""Values of :attr:`SearchConfig.learner_sees`."""


@dataclass(frozen=True)
class SearchConfig:
    """What the expert does while the sphere is out of view (observable-consistent mode; metres).

    Kept apart from :class:`ExpertConfig`, which datasets record: adding it changed no recorded config. A DAgger run
    records its own (``DaggerConfig.search_height_m``)."""

    return_tol_m: float = 0.01
    """RETURN is over once the TCP is this close (horizontally) above the last seen position, at or below the
    approach's hover height: the sphere would be in view from there (nominal episodes see it in every frame from there
    down)."""
    search_height_m: float = 0.22
    """SEARCH sweeps with the TCP this high above the table (0.18 at an episode's start). At 0.22 the camera sees
    about 0.36 m x 0.39 m of table and the sphere 2-3 px wide; lower, less table and a wider sphere, which the
    segmenter finds more often on busy tables."""
    sweep_spacing_m: float = 0.08
    """The square spiral's legs grow by this much (under a quarter of the patch seen at 0.22 m)."""
    sweep_rings: int = 2
    """Rings of the spiral before it starts over (with the workspace clip, 2 cover every reachable spot)."""
    view_offset_per_m: tuple[float, float] = (-0.06 / 0.22, 0.01 / 0.22)
    """Centre of the patch of table seen, from the TCP (x, y), per metre of TCP height: the camera sits 4.5 cm along
    +x on the palm and looks back under the fingers (-0.06, 0.01 at 0.22 m). The spiral is centred on the view,
    not on the TCP."""
    waypoint_tol_m: float = 0.01
    """A sweep waypoint is reached within this distance."""
    first_look_height_m: float = 0.0
    """A sphere never seen this episode is first looked for from this height above the middle of where spheres
    spawn (at 0.11 m the camera sees about 0.2 m square, the whole spawn area, the sphere 5 px wide), then the spiral
    at ``search_height_m``; 0: no first look."""
    learner_sees: LearnerSees = "mask"
    """When the learner counts as seeing the sphere (the expert then acts on its position, else RETURN / SEARCH):
    "mask": its input mask has any pixel (a false detection alone counts); "sphere": its mask touches the sphere's
    true pixels (a false detection alone is labelled as nothing seen)."""

    def __post_init__(self) -> None:
        if self.learner_sees not in LEARNER_SEES:
            raise ValueError(f"learner_sees must be one of {', '.join(LEARNER_SEES)}, got {self.learner_sees!r}")
        if min(self.search_height_m, self.sweep_spacing_m) <= 0 or self.sweep_rings < 1 or self.first_look_height_m < 0:
            raise ValueError(f"need search_height_m > 0, sweep_spacing_m > 0, sweep_rings >= 1 and "
                             f"first_look_height_m >= 0, got {self.search_height_m}, {self.sweep_spacing_m}, "
                             f"{self.sweep_rings}, {self.first_look_height_m}")

    @property
    def view_offset_m(self) -> tuple[float, float]:
        return self.view_offset_at(self.search_height_m)

    def view_offset_at(self, tcp_height_m: float) -> tuple[float, float]:
        """Centre of the patch of table seen from ``tcp_height_m``, from the TCP (x, y)."""
        return (self.view_offset_per_m[0] * tcp_height_m, self.view_offset_per_m[1] * tcp_height_m)

    def tcp_xy_viewing(self, point_xy_m, tcp_height_m: float) -> np.ndarray:
        """TCP (x, y) from which the camera's view, ``tcp_height_m`` above the table, is centred on ``point_xy_m``."""
        return np.asarray(point_xy_m, dtype=float) - np.asarray(self.view_offset_at(tcp_height_m))


def action_towards(tcp: np.ndarray, target: np.ndarray, close: bool, gain: float, max_step_m: float) -> np.ndarray:
    """The action (ACTION_DIM,) that moves the TCP a proportional step (``gain``, clipped to one full step of
    ``max_step_m`` per axis) towards ``target``, the gripper closing or opening: the expert's, and the low look's
    (``control.look``)."""
    action = np.zeros(ACTION_DIM)
    action[:3] = np.clip(gain * (np.asarray(target) - tcp) / max_step_m, -1.0, 1.0)
    action[3] = 1.0 if close else -1.0
    return action


def spiral_corners(rings: int) -> list[tuple[int, int]]:
    """Corners of a square spiral on the integer grid, from (0, 0) out to ``rings`` rings (legs 1, 1, 2, 2, ...:
    +x, +y, -x, -x, -y, -y, ...), ending on the outer ring."""
    corners, x, y = [(0, 0)], 0, 0
    directions = ((1, 0), (0, 1), (-1, 0), (0, -1))
    leg = 0
    while True:
        length = leg // 2 + 1
        dx, dy = directions[leg % 4]
        x, y = x + dx * length, y + dy * length
        if max(abs(x), abs(y)) > rings:  # the last leg runs along the outer ring to its corner
            x, y = max(-rings, min(rings, x)), max(-rings, min(rings, y))
            corners.append((x, y))
            return corners
        corners.append((x, y))
        leg += 1


class Expert:
    """``act(privileged) -> (action (4,), phase)``: stateless.

    ``act(privileged, sphere_in_view)`` -> the same while the sphere is in view, RETURN / SEARCH while it is not;
    call :meth:`reset` at every episode's start in that mode (it clears the per-episode memory).
    """

    def __init__(self, scene: SceneConfig, config: ExpertConfig | None = None, search: SearchConfig | None = None):
        self.scene = scene
        self.config = config or ExpertConfig()
        self.search = search or SearchConfig()
        self.reset()

    def reset(self) -> None:
        """Forget the episode: the last seen position and the search's progress."""
        self.last_seen_world_m: np.ndarray | None = None
        """The sphere's position at the last call where it was in view (None: not seen this episode)."""
        self.returned = False
        """Whether RETURN reached the last seen position since the sphere was last in view."""
        self.waypoint = 0
        """Index of the sweep waypoint SEARCH is heading for."""

    def phase(self, pv: Privileged) -> Phase:
        c = self.config
        tcp, sphere = pv.tcp_pos_world_m, pv.sphere_pos_world_m
        err_xy = float(np.linalg.norm(sphere[:2] - tcp[:2]))
        above_grasp = tcp[2] - (sphere[2] + c.grasp_offset_m)
        if pv.gripper_closed and pv.held:
            return Phase.LIFT
        in_zone = err_xy < c.close_xy_tol_m and abs(above_grasp) < c.close_z_tol_m
        if in_zone and (pv.gripper_closed or pv.finger_gap_m > self.scene.fingers_open_gap_m):
            return Phase.CLOSE
        if pv.gripper_closed or pv.finger_gap_m < self.scene.fingers_open_gap_m:
            # closed on nothing, or the sphere slipped away while closing: open and back off
            return Phase.RESET
        if err_xy < c.descend_cone_base_m + c.descend_cone_slope * max(above_grasp, 0.0):
            return Phase.DESCEND
        return Phase.APPROACH

    def act(self, pv: Privileged, sphere_in_view: bool | None = None) -> tuple[np.ndarray, Phase]:
        """The action (4,) and phase for the state ``pv``.

        ``sphere_in_view`` None: from the privileged state alone, no memory. A bool (whether the current frame's
        ground-truth sphere mask is non-empty): True remembers the sphere's position and acts as with None; False
        acts from what an agent could know (its proprioception, where it last saw the sphere, its search so far).
        """
        if sphere_in_view is None:
            return self._act_privileged(pv)
        if sphere_in_view:
            self.last_seen_world_m = np.array(pv.sphere_pos_world_m, dtype=float)
            self.returned = False
            self.waypoint = 0
            return self._act_privileged(pv)
        return self._act_out_of_view(pv)

    def _act_privileged(self, pv: Privileged) -> tuple[np.ndarray, Phase]:
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
        return self._action(tcp, target, close), phase

    def _action(self, tcp: np.ndarray, target: np.ndarray, close: bool) -> np.ndarray:
        return action_towards(tcp, target, close, self.config.gain, self.scene.max_action_step_m)

    def _act_out_of_view(self, pv: Privileged) -> tuple[np.ndarray, Phase]:
        """The sphere is not in view: read only the TCP, the gripper, the scene's constants and the memory."""
        c, s = self.config, self.scene
        tcp, gap = pv.tcp_pos_world_m, pv.finger_gap_m
        d = s.sphere_diameter_m
        if pv.gripper_closed:
            if gap < 0.5 * d:  # closed on nothing: open and back off
                return self._action(tcp, tcp + [0.0, 0.0, 0.5 * s.max_action_step_m], False), Phase.RESET
            if gap > 1.5 * d:  # still closing: hold still
                return self._action(tcp, tcp, True), Phase.CLOSE
            # the fingers stopped about a sphere apart: holding it (hidden by the fingers)
            return self._action(tcp, np.array([tcp[0], tcp[1], pv.sphere_rest_z_m + c.lift_height_m]), True), Phase.LIFT
        if gap < s.fingers_open_gap_m:  # still opening: back off upwards
            return self._action(tcp, tcp + [0.0, 0.0, 0.5 * s.max_action_step_m], False), Phase.RESET
        if self.last_seen_world_m is not None and not self.returned:
            seen = self.last_seen_world_m
            hover_z = seen[2] + c.grasp_offset_m + c.hover_above_sphere_m
            if (np.linalg.norm(seen[:2] - tcp[:2]) < self.search.return_tol_m
                    and tcp[2] < hover_z + self.search.return_tol_m):
                self.returned = True  # looked where it was: not there
            else:  # as APPROACH does, towards the last seen position
                target = np.array([seen[0], seen[1], hover_z])
                if tcp[2] < hover_z - 0.01:
                    target[:2] = tcp[:2] + 0.3 * (seen[:2] - tcp[:2])
                return self._action(tcp, target, False), Phase.RETURN
        return self._action(tcp, self._search_target(tcp), False), Phase.SEARCH

    def search_waypoints(self) -> np.ndarray:
        """TCP (x, y) waypoints of the sweep (n, 2): a square spiral of the view's centre around the last seen
        position (the spawn centre if never seen), clipped to the workspace."""
        sc, s = self.search, self.scene
        centre = np.asarray(s.spawn_center_world_m, dtype=float)
        anchor = centre if self.last_seen_world_m is None else self.last_seen_world_m[:2]
        corners = np.array(spiral_corners(sc.sweep_rings), dtype=float)
        points = anchor + sc.sweep_spacing_m * corners - np.asarray(sc.view_offset_m)
        half = s.workspace_half_extent_m - 0.01
        points = np.clip(points, centre - half, centre + half)
        keep = np.ones(len(points), bool)
        keep[1:] = np.linalg.norm(np.diff(points, axis=0), axis=1) > 1e-9
        return points[keep]

    def _search_target(self, tcp: np.ndarray) -> np.ndarray:
        """SEARCH: rise straight up to the search height, then sweep the waypoints (starting over at the end). With
        ``first_look_height_m``, a sphere never seen this episode is first looked for from that height, straight there,
        with the camera's view centred on the middle of where spheres spawn."""
        sc = self.search
        waypoints = self.search_waypoints()
        self.waypoint %= len(waypoints)
        if sc.first_look_height_m > 0 and self.last_seen_world_m is None and self.waypoint == 0:
            look_xy = sc.tcp_xy_viewing(self.scene.spawn_center_world_m, sc.first_look_height_m)
            look = np.array([*look_xy, self.scene.table_height_m + sc.first_look_height_m])
            if np.linalg.norm(look - tcp) >= sc.waypoint_tol_m:
                return look
            self.waypoint = 1 % len(waypoints)
        z = self.scene.table_height_m + sc.search_height_m
        if tcp[2] < z - sc.waypoint_tol_m:
            return np.array([tcp[0], tcp[1], z])
        target = np.array([*waypoints[self.waypoint], z])
        if np.linalg.norm(target - tcp) < sc.waypoint_tol_m:
            self.waypoint = (self.waypoint + 1) % len(waypoints)
            target = np.array([*waypoints[self.waypoint], z])
        return target
