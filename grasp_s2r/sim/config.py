"""Configuration of the grasping scene: one place for every geometric and physical fact.

All lengths are metres, angles degrees unless the name says otherwise. Frames: ``world`` has +z up
and its origin on the floor under the robot base; the table top is at ``table_height_m``.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any


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

    def __post_init__(self) -> None:
        if self.width_px < 8 or self.height_px < 8:
            raise ValueError(f"camera resolution must be at least 8x8 px, got {self.width_px}x{self.height_px}")
        if not 5.0 <= self.fov_deg <= 150.0:
            raise ValueError(f"camera fov_deg must be in [5, 150], got {self.fov_deg}")


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
    physics_hz: float = 240.0
    """Physics rate; ``physics_hz / control_hz`` substeps per env step."""
    max_action_step_m: float = 0.02
    """An action of 1.0 moves the TCP target this far along an axis in one env step."""
    max_episode_steps: int = 80
    """Step budget; an episode that has not succeeded by then has failed."""

    @property
    def sphere_radius_m(self) -> float:
        return self.sphere_diameter_m / 2.0

    @property
    def substeps(self) -> int:
        return max(1, round(self.physics_hz / self.control_hz))

    def __post_init__(self) -> None:
        if not 0.002 <= self.sphere_diameter_m <= 0.036:
            raise ValueError(
                f"sphere_diameter_m must be in [0.002, 0.036] (the open gripper is 4 cm wide), got {self.sphere_diameter_m}"
            )
        if self.max_episode_steps < 1:
            raise ValueError(f"max_episode_steps must be positive, got {self.max_episode_steps}")


@dataclass(frozen=True)
class EnvConfig:
    """Everything that defines an environment; saved next to every artifact made with it."""

    camera: CameraConfig = field(default_factory=CameraConfig)
    scene: SceneConfig = field(default_factory=SceneConfig)
    randomization: RandomizationConfig = field(default_factory=RandomizationConfig)

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> EnvConfig:
        def build(kind: type, values: dict[str, Any]) -> Any:
            names = {f.name for f in dataclasses.fields(kind)}
            unknown = set(values) - names
            if unknown:
                raise ValueError(f"unknown {kind.__name__} fields: {sorted(unknown)}")
            return kind(**{k: tuple(v) if isinstance(v, list) else v for k, v in values.items()})

        return cls(
            camera=build(CameraConfig, d.get("camera", {})),
            scene=build(SceneConfig, d.get("scene", {})),
            randomization=build(RandomizationConfig, d.get("randomization", {})),
        )

    def replace(self, **sections: Any) -> EnvConfig:
        return dataclasses.replace(self, **sections)
