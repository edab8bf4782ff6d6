"""Named evaluation conditions: data (:class:`Condition`) plus the small hooks that apply them.

A condition changes what the camera shows (composite onto photos), the dynamics (sphere mass and
friction, action noise, latency), or moves the sphere (slowly, or once, mid-episode). The hooks run
inside the env worker process (:mod:`grasp_s2r.control.rollout`), next to the env they act on; the
expert labels whatever world results, so a condition can also be used to make DAgger data.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar

import numpy as np
import pybullet as pb

from grasp_s2r.sim.camera import Frame
from grasp_s2r.sim.env import ACTION_DIM, GraspEnv


@dataclass(frozen=True)
class Condition:
    """One evaluation condition; the defaults are raw sim renders and the training dynamics."""

    name: str = "sim-render"
    """Key in :data:`CONDITIONS`, used in reports."""
    description: str = "raw domain-randomized sim renders, training dynamics"
    """One line for the results table."""
    backgrounds: str = ""
    """Composite each frame onto photos: "" (raw sim render), "train", "heldout", or a folder of photos."""
    sphere_mass_scale: float = 1.0
    """Sphere mass = scene.sphere_mass_kg times this."""
    sphere_friction_scale: float = 1.0
    """Sphere lateral friction = scene.sphere_friction times this."""
    action_noise_std: float = 0.0
    """Gaussian noise added to the x, y, z action (action units, 1.0 = one max step)."""
    latency_steps: int = 0
    """The env executes the action chosen this many control steps earlier (zero action before)."""
    target_speed_m_s: float = 0.0
    """The sphere slides on the table at this speed, in a random direction, during the approach."""
    target_moves_above_m: float = 0.02
    """... as long as the TCP is this far or more above the sphere and no finger touches it."""
    perturb_distance_m: tuple[float, float] = (0.0, 0.0)
    """Once per episode the sphere is displaced by a distance drawn from this range (0: never) ..."""
    perturb_below_m: float = 0.03
    """... when the TCP first descends to this height above the sphere with the gripper open."""

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> Condition:
        return cls(**{k: tuple(v) if isinstance(v, list) else v for k, v in d.items()})


CONDITIONS: dict[str, Condition] = {
    c.name: c for c in (
        Condition(name="nominal", backgrounds="train",
                  description="training-distribution visuals: sim sphere and gripper on training photos"),
        Condition(name="heldout-backgrounds", backgrounds="heldout",
                  description="camera image composited live onto held-out real photos"),
        Condition(name="dynamics-shift", backgrounds="train", sphere_mass_scale=3.0, sphere_friction_scale=0.5,
                  action_noise_std=0.05, latency_steps=1,
                  description="sphere 3x mass, 0.5x friction, action noise 0.05, 1 step latency"),
        Condition(name="moving-target", backgrounds="train", target_speed_m_s=0.01,
                  description="the sphere slides at 1 cm/s in a random direction during the approach"),
        Condition(name="perturbation", backgrounds="train", perturb_distance_m=(0.03, 0.05),
                  description="the sphere is displaced 3-5 cm once, as the gripper descends onto it"),
        Condition(name="sim-render", backgrounds="",
                  description="raw domain-randomized sim renders (table, not photos) behind the sphere"),
    )
}
"""The named conditions of ``grasp-s2r eval`` (``heldout-backgrounds`` ... ``perturbation`` are the issue's)."""
PHOTO_SPLITS = ("train", "heldout")
"""Values of ``Condition.backgrounds`` naming the embedded photo sets; any other non-empty value is a folder."""


def resolve_condition(name: str, backgrounds_dir: str | None = None) -> Condition:
    """The condition called ``name``; ``backgrounds_dir`` replaces the held-out photos of ``heldout-backgrounds``."""
    if name not in CONDITIONS:
        raise KeyError(f"unknown condition {name!r}; known: {', '.join(CONDITIONS)}")
    cond = CONDITIONS[name]
    if backgrounds_dir and cond.backgrounds == "heldout":
        cond = dataclasses.replace(cond, backgrounds=str(backgrounds_dir))
    return cond


def load_photos(source: str) -> list[np.ndarray]:
    """Photos uint8 (H, W, 3) of an embedded split (``"train"``, ``"heldout"``), or all photos of a folder."""
    from grasp_s2r.vision.backgrounds import load_backgrounds  # only composited conditions need vision

    if source in PHOTO_SPLITS:
        photos = load_backgrounds(split=source)
    else:
        if not Path(source).is_dir():
            raise FileNotFoundError(f"backgrounds folder {source} does not exist")
        photos = [p for split in PHOTO_SPLITS for p in load_backgrounds(split=split, directory=Path(source))]
    if not photos:
        raise FileNotFoundError(f"no background photos in {source!r}")
    return photos


class EpisodeHooks:
    """Applies one condition to one episode of one env; lives in the env's worker process.

    Call order per episode: ``on_reset()`` after ``env.reset``, then per step ``observe(frame)``,
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

    def on_reset(self) -> None:
        env, c, s = self.env, self.cond, self.env.config.scene
        pb.changeDynamics(env.sphere_uid, -1, mass=s.sphere_mass_kg * c.sphere_mass_scale,
                          lateralFriction=s.sphere_friction * c.sphere_friction_scale, physicsClientId=env.client)
        angle = self.rng.uniform(0, 2 * np.pi)
        self.direction_xy = np.array([np.cos(angle), np.sin(angle)])
        if c.backgrounds:
            from grasp_s2r.vision.backgrounds import random_crop
            from grasp_s2r.vision.composite import composite_frame

            if c.backgrounds not in self._photo_cache:
                self._photo_cache[c.backgrounds] = load_photos(c.backgrounds)
            photos = self._photo_cache[c.backgrounds]
            cam = env.config.camera
            # one crop of one photo per episode: the background stays put while the arm moves
            self.photo = random_crop(photos[int(self.rng.integers(len(photos)))], (cam.height_px, cam.width_px),
                                     self.rng)
            self._composite = composite_frame

    def observe(self, frame: Frame) -> tuple[np.ndarray, np.ndarray]:
        """(rgb uint8 (H, W, 3), ground-truth sphere mask bool (H, W)) of what the camera shows."""
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
            angle = self.rng.uniform(0, 2 * np.pi)
            delta = self.rng.uniform(*c.perturb_distance_m) * np.array([np.cos(angle), np.sin(angle)])
            self.perturbed, event = True, "perturbation"
        if not delta.any():
            return
        s = env.config.scene
        lo = np.asarray(s.spawn_center_world_m) - s.workspace_half_extent_m + 0.02
        hi = np.asarray(s.spawn_center_world_m) + s.workspace_half_extent_m - 0.02
        new_xy = np.clip(pv.sphere_pos_world_m[:2] + delta, lo, hi)
        pb.resetBasePositionAndOrientation(env.sphere_uid, [*new_xy, pv.sphere_rest_z_m], [0, 0, 0, 1],
                                           physicsClientId=env.client)
        pb.resetBaseVelocity(env.sphere_uid, [0, 0, 0], [0, 0, 0], physicsClientId=env.client)
        if event:
            moved = [float(x) for x in new_xy - pv.sphere_pos_world_m[:2]]
            self.events.append({"event": event, "step": env.steps, "moved_xy_m": moved})
