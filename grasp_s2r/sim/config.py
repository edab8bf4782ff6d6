"""Configuration of the grasping scene: one place for every geometric and physical fact.

All lengths are metres, angles degrees unless the name says otherwise. Frames: ``world`` has +z up
and its origin on the floor under the robot base; the table top is at ``table_height_m``.
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass, field
from typing import Any

from grasp_s2r.configs import OMITTED_AT_DEFAULT, from_dict, to_dict


@dataclass(frozen=True)
class CameraConfig:
    """Wrist (eye-in-hand) camera, rigidly mounted on the gripper palm."""

    width_px: int = 64
    """Image width in pixels."""
    height_px: int = 64
    """Image height in pixels."""
    fov_deg: float = 60.0
    """Vertical field of view."""
    near_m: float = 0.01
    """Near clipping plane."""
    far_m: float = 1.5
    """Far clipping plane."""
    mount_offset_palm_m: tuple[float, float, float] = (0.045, 0.0, -0.005)
    """Camera position in the palm frame (palm +z points from the flange towards the fingertips)."""
    look_at_palm_m: tuple[float, float, float] = (0.0, 0.0, 0.16)
    """Point in the palm frame the optical axis passes through (below the fingertips)."""
    sphere_shadow: bool = field(default=False, metadata=OMITTED_AT_DEFAULT)
    """Draw the sphere's cast and contact shadows on the table (:mod:`grasp_s2r.sim.shadow`), which TinyRenderer's
    shadow map does not draw for a sphere this small. Off: the scene every shipped figure was measured in."""

    def __post_init__(self) -> None:
        if self.width_px < 8 or self.height_px < 8:
            raise ValueError(f"camera resolution must be at least 8x8 px, got {self.width_px}x{self.height_px}")
        if not 5.0 <= self.fov_deg <= 150.0:
            raise ValueError(f"camera fov_deg must be in [5, 150], got {self.fov_deg}")

    def widened(self, margin_px: int) -> CameraConfig:
        """The same camera seeing ``margin_px`` more pixels beyond each edge of its image: ``width_px + 2 margin``
        by ``height_px + 2 margin`` pixels of the same size, the field of view widened to match (a pinhole), so that
        its central ``width_px`` x ``height_px`` pixels are this camera's image."""
        if margin_px < 0:
            raise ValueError(f"margin_px must be >= 0, got {margin_px}")
        if margin_px == 0:
            return self
        half = math.tan(math.radians(self.fov_deg) / 2) * (self.height_px + 2 * margin_px) / self.height_px
        return dataclasses.replace(self, width_px=self.width_px + 2 * margin_px, height_px=self.height_px + 2 * margin_px,
                                   fov_deg=math.degrees(2 * math.atan(half)))


@dataclass(frozen=True)
class RandomizationConfig:
    """Domain randomization, sampled once per episode from the episode seed."""

    sphere_color: bool = True
    """Random sphere RGB (saturated, any hue) instead of the nominal red."""
    table_texture: bool = True
    """Random table colour and procedural texture (noise / stripes / checker)."""
    light_direction: bool = True
    """Random light direction over the upper hemisphere."""
    camera_jitter_m: float = 0.004
    """Max absolute jitter of the camera mount position, per axis."""
    camera_jitter_deg: float = 2.0
    """Max absolute jitter of the look-at direction, per axis (as an angle)."""
    arm_start_jitter_m: float = 0.03
    """Max absolute jitter of the initial gripper position, per axis."""


@dataclass(frozen=True)
class SceneConfig:
    """Geometry and physics of the scene."""

    sphere_diameter_m: float = 0.0137
    """Diameter of the target sphere (1.37 cm in the original work)."""
    sphere_mass_kg: float = 0.005
    """Mass of the sphere."""
    sphere_friction: float = 1.0
    """Lateral friction coefficient of the sphere."""
    finger_friction: float = 2.0
    """Lateral friction coefficient of the finger pads."""
    table_height_m: float = 0.0
    """Height of the table top in the world frame."""
    robot_base_world_m: tuple[float, float, float] = (-0.55, 0.0, 0.0)
    """Position of the arm's base (the table top is the floor under it)."""
    spawn_center_world_m: tuple[float, float] = (0.0, 0.0)
    """Centre of the region where the sphere is spawned (x, y)."""
    spawn_half_extent_m: float = 0.07
    """Sphere spawn region: a square of this half-extent around the spawn centre."""
    start_tcp_height_m: float = 0.18
    """Height of the tool centre point above the table when an episode starts."""
    workspace_half_extent_m: float = 0.16
    """The TCP target is clipped to this half-extent around the spawn centre (x, y)."""
    workspace_max_height_m: float = 0.30
    """The TCP target is clipped to this height above the table."""
    lift_success_m: float = 0.05
    """The sphere must be lifted this far above its resting height, held by the fingers."""
    finger_open_m: float = 0.02
    """Finger joint position when open; the gap between the pads is twice this."""
    finger_force_n: float = 10.0
    """Max force of each finger motor."""
    control_hz: float = 10.0
    """Control (policy) rate."""
    physics_hz: float = 40.0
    """Physics rate of an env step that may see a contact: ``physics_hz / control_hz`` substeps (240 before
    issue 16; docs/scene.md, *Physics and the cost of a step*). The motor gains are scaled to the substeps
    (``robot.substep_gain``), so an action moves the arm as far in one env step at any rate."""
    free_space_physics_hz: float = 10.0
    """Physics rate of an env step in which nothing can touch the sphere or the table (the gripper is farther from
    both than it can move in a step and the sphere rests): only the arm moves, its motors are exact velocity
    constraints, and one substep moves it exactly as the 4 of ``physics_hz`` do. 240 (no such steps) before
    issue 16."""
    constraint_solver: str = "dantzig"
    """PyBullet's constraint solver: ``"dantzig"`` (MLCP: solves this small scene's motors and contacts exactly) or
    ``"pgs"`` (PyBullet's default, 50 projected Gauss-Seidel iterations: too few to converge once the fingers squeeze
    the sphere, and at 40-80 Hz they squeeze through it; the solver before issue 16)."""
    contact_breaking_threshold: float = 0.5
    """PyBullet's ``contactBreakingThreshold``, which Bullet scales by each shape's size (3.4 mm for the sphere):
    bodies closer than that get a contact before they touch, so a closing finger meets the sphere in the substep
    it gets there, not one substep later and millimetres inside it (which bats the sphere away at 40-60 Hz).
    One number per process: each env sets its own before it simulates. 0.02 (Bullet's default) before issue 16."""
    deterministic_overlapping_pairs: bool = True
    """PyBullet's ``deterministicOverlappingPairs``: contacts are solved in an order that does not depend on what
    the env simulated before. Needed with the threshold above, which keeps pairs of bodies alive from one episode
    to the next: without it a seed would not give the same episode twice in one env. False before issue 16."""
    ik_iterations: int = 15
    """Iterations of PyBullet's damped-least-squares IK per env step (50 before issue 16). Its null-space pull to
    the rest pose leaves the solution 2 mm off the target however many are run; with 15, from the same state and
    action, the TCP lands 0.75 mm (median) from where the physics before issue 16 puts it."""
    max_action_step_m: float = 0.02
    """An action of 1.0 moves the TCP target this far along an axis in one env step."""
    max_episode_steps: int = 80
    """Step budget; an episode that has not succeeded by then has failed."""

    @property
    def sphere_radius_m(self) -> float:
        return self.sphere_diameter_m / 2.0

    @property
    def fingers_open_gap_m(self) -> float:
        """Finger gap (m) from which the fingers count as fully open: 90 % of the gap they open to."""
        return 0.9 * 2 * self.finger_open_m

    @property
    def substeps(self) -> int:
        return max(1, round(self.physics_hz / self.control_hz))

    @property
    def free_space_substeps(self) -> int:
        return max(1, round(self.free_space_physics_hz / self.control_hz))

    def with_pre_issue_16_physics(self) -> SceneConfig:
        """This scene with the physics every scene had before issue 16 (240 Hz, PGS; slower, for comparisons)."""
        return dataclasses.replace(self, physics_hz=240.0, **PRE_ISSUE_16_PHYSICS)

    def __post_init__(self) -> None:
        if not 0.002 <= self.sphere_diameter_m <= 0.036:
            raise ValueError(
                f"sphere_diameter_m must be in [0.002, 0.036] (the open gripper is 4 cm wide), got {self.sphere_diameter_m}"
            )
        if self.max_episode_steps < 1:
            raise ValueError(f"max_episode_steps must be positive, got {self.max_episode_steps}")
        if not self.physics_hz >= self.free_space_physics_hz >= self.control_hz > 0:
            raise ValueError("need physics_hz >= free_space_physics_hz >= control_hz > 0, got "
                             f"{self.physics_hz}, {self.free_space_physics_hz} and {self.control_hz}")
        if self.constraint_solver not in CONSTRAINT_SOLVERS:
            raise ValueError(f"constraint_solver must be one of {CONSTRAINT_SOLVERS}, got {self.constraint_solver!r}")
        if not self.contact_breaking_threshold > 0:
            raise ValueError(f"contact_breaking_threshold must be positive, got {self.contact_breaking_threshold}")
        if self.ik_iterations < 1:
            raise ValueError(f"ik_iterations must be positive, got {self.ik_iterations}")


CONSTRAINT_SOLVERS = ("dantzig", "pgs")
"""Values of :attr:`SceneConfig.constraint_solver`."""
PRE_ISSUE_16_PHYSICS: dict[str, Any] = {
    "free_space_physics_hz": 240.0, "constraint_solver": "pgs", "contact_breaking_threshold": 0.02,
    "deterministic_overlapping_pairs": False, "ik_iterations": 50,
}
"""The physics of scenes saved before these fields existed (their ``physics_hz``, 240, is saved with them):
:meth:`EnvConfig.from_dict` gives them these values, so old checkpoints and datasets keep their dynamics."""


@dataclass(frozen=True)
class EnvConfig:
    """Everything that defines an environment; saved next to every artifact made with it."""

    camera: CameraConfig = field(default_factory=CameraConfig)
    scene: SceneConfig = field(default_factory=SceneConfig)
    randomization: RandomizationConfig = field(default_factory=RandomizationConfig)

    def to_dict(self) -> dict[str, Any]:
        return to_dict(self)

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> EnvConfig:
        """:func:`grasp_s2r.configs.from_dict`, with the physics of scenes saved before issue 16."""
        scene = dict(d.get("scene", {}))
        if set(scene) == {f.name for f in dataclasses.fields(SceneConfig)} - set(PRE_ISSUE_16_PHYSICS):
            # every field but the new ones: saved before issue 16, so it loads the physics it was made with
            scene = {**PRE_ISSUE_16_PHYSICS, **scene}
        return from_dict(cls, {**d, "scene": scene})

    def replace(self, **sections: Any) -> EnvConfig:
        return dataclasses.replace(self, **sections)

    def with_sphere_shadow(self, on: bool = True) -> EnvConfig:
        """This scene with the sphere's shadows drawn (``on``) or not (``CameraConfig.sphere_shadow``)."""
        return self.replace(camera=dataclasses.replace(self.camera, sphere_shadow=on))


CONTROL_CAMERA_JITTER_M = 0.001
"""Per-episode camera mount jitter of the controller's scene: a calibration tolerance."""
CONTROL_CAMERA_JITTER_DEG = 0.5
"""Per-episode camera look-at jitter of the controller's scene.

The scene default (4 mm, 2 deg, chosen for vision robustness) shifts where the TCP axis appears in the image by
up to ~8 mm per episode, more than the expert's 3.5 mm closing tolerance; a controller that sees only the mask
cannot tell, so it learns (and its demonstrations are collected) on a camera calibrated to these tolerances."""


def control_env_config(
    base: EnvConfig | None = None, camera_jitter_mm: float | None = None, camera_jitter_deg: float | None = None,
    camera_px: int | None = None,
) -> EnvConfig:
    """The controller's scene: ``base`` (default scene) with the controller's camera calibration tolerance (or the
    given jitter), and a square camera of ``camera_px`` (None: ``base``'s; the same field of view). The one camera
    preset of everything the controller learns from or is measured on."""
    base = base or EnvConfig()
    jitter_m = CONTROL_CAMERA_JITTER_M if camera_jitter_mm is None else camera_jitter_mm / 1000.0
    jitter_deg = CONTROL_CAMERA_JITTER_DEG if camera_jitter_deg is None else camera_jitter_deg
    rand = dataclasses.replace(base.randomization, camera_jitter_m=jitter_m, camera_jitter_deg=jitter_deg)
    camera = base.camera if camera_px is None else dataclasses.replace(base.camera, width_px=camera_px,
                                                                         height_px=camera_px)
    return base.replace(randomization=rand, camera=camera)
