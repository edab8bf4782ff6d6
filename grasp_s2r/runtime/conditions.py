"""Named evaluation conditions: data (:class:`Condition`); the hooks that apply them to an episode are
:mod:`grasp_s2r.runtime.episode_hooks`.

A condition changes what the camera shows (composite onto photos, or a photo as the sim table's texture), the
camera's mount (miscalibration), the dynamics (sphere mass and friction, action noise, latency), or moves the
sphere (out of the camera's view at the start; slowly, or once, mid-episode).
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from grasp_s2r.configs import from_dict, to_dict
from grasp_s2r.sim.config import RandomizationConfig

_FULL_JITTER = RandomizationConfig()
"""The scene's own camera mount jitter (4 mm / 2 deg), which ``camera-miscalibration`` draws from (the controller's
env has 1 mm / 0.5 deg)."""


@dataclass(frozen=True)
class Condition:
    """One evaluation condition; the defaults are raw sim renders and the training dynamics."""

    name: str = "sim-render"
    """Key in :data:`CONDITIONS`, used in reports."""
    description: str = "raw domain-randomized sim renders, training dynamics"
    """One line for the results table."""
    backgrounds: str = ""
    """Composite each frame onto photos: "" (raw sim render), "train", "heldout", or a folder of photos."""
    table_photos: str = ""
    """A photo as the sim table's texture (rendered, not composited): "" (the episode's procedural table),
    "train", "heldout", or a folder of photos. One of the set's crops per episode: 32 crops
    (``table_texture.N_PHOTO_TEXTURES``), or one a photo for a set of more photos (every photo of a folder is used)."""
    camera_jitter_m: float | None = None
    """The camera mount's position jitter (per axis, uniform) drawn for the episode instead of the env's own
    (``RandomizationConfig.camera_jitter_m``); None: the env's."""
    camera_jitter_deg: float | None = None
    """... and the look direction's jitter (per axis, an angle); None: the env's. Either set redraws both."""
    start_out_of_view_deg: float = 0.0
    """> 0: at reset the sphere moves to a reachable spot of the table where the wrist camera does not see it, its
    whole image at least this angle outside the field of view (0: where the episode put it)."""
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
    dropout_steps: tuple[int, int] = (0, 0)
    """The controller's input mask is blanked for a number of consecutive steps drawn from this range (0: never;
    missed detections), applied by the runtime in the main process ..."""
    dropout_start_step: tuple[int, int] = (2, 5)
    """... from a step drawn from this range (the approach)."""

    def to_dict(self) -> dict[str, Any]:
        return to_dict(self)

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> Condition:
        return from_dict(cls, d)


CONDITIONS: dict[str, Condition] = {
    c.name: c for c in (
        Condition(name="nominal", backgrounds="train",
                  description="the training distribution: the sim sphere and gripper composited on the training "
                              "photos"),
        Condition(name="heldout-backgrounds", backgrounds="heldout",
                  description="the camera image composited live onto photos the segmenter never trained on"),
        Condition(name="dynamics-shift", backgrounds="train", sphere_mass_scale=3.0, sphere_friction_scale=0.5,
                  action_noise_std=0.05, latency_steps=1,
                  description="sphere 3x mass, 0.5x friction, Gaussian action noise (sd 0.05 = 1 mm), one step of "
                              "latency"),
        Condition(name="moving-target", backgrounds="train", target_speed_m_s=0.01,
                  description="the sphere slides at 1 cm/s in a random direction while the TCP is 2 cm or more "
                              "above it (never seen in training)"),
        Condition(name="perturbation", backgrounds="train", perturb_distance_m=(0.03, 0.05),
                  description="the sphere is displaced 3-5 cm once (within the workspace, clear of the fingers where "
                              "a place allows), when the TCP first descends to 3 cm above it"),
        Condition(name="sim-render", backgrounds="",
                  description="raw domain-randomized sim renders: the sim table, no photo"),
        Condition(name="table-photo", table_photos="heldout",
                  description="a photo the segmenter never trained on is the sim table's texture: rendered, not "
                              "composited, so perspective and occlusion move with it"),
        Condition(name="start-out-of-view", backgrounds="train", start_out_of_view_deg=2.0,
                  description="the sphere starts on the table within reach, outside the wrist camera's view (2 deg "
                              "or more beyond its edge where a reachable spot allows): search needed"),
        Condition(name="camera-miscalibration", backgrounds="train", camera_jitter_m=_FULL_JITTER.camera_jitter_m,
                  camera_jitter_deg=_FULL_JITTER.camera_jitter_deg,
                  description="the camera mount jittered per episode by the scene's full 4 mm / 2 deg (the "
                              "controller trains with 1 mm / 0.5 deg)"),
        Condition(name="dropout", backgrounds="train", dropout_steps=(3, 10),
                  description="the controller's input mask is blank for 3-10 consecutive steps from step 2-5 "
                              "(missed detections)"),
    )
}
"""The named conditions of ``grasp-s2r eval`` (``heldout-backgrounds`` ... ``perturbation`` are issue 6's,
``table-photo`` ... ``camera-miscalibration`` issue 12's)."""
PHOTO_SPLITS = ("train", "heldout")
"""Values of ``Condition.backgrounds`` naming the embedded photo sets; any other non-empty value is a folder."""


def resolve_condition(name: str, backgrounds_dir: str | None = None) -> Condition:
    """The condition called ``name``; ``backgrounds_dir`` replaces the held-out photos (of ``heldout-backgrounds``
    and ``table-photo``)."""
    if name not in CONDITIONS:
        raise KeyError(f"unknown condition {name!r}; known: {', '.join(CONDITIONS)}")
    cond = CONDITIONS[name]
    if backgrounds_dir and cond.backgrounds == "heldout":
        cond = dataclasses.replace(cond, backgrounds=str(backgrounds_dir))
    if backgrounds_dir and cond.table_photos == "heldout":
        cond = dataclasses.replace(cond, table_photos=str(backgrounds_dir))
    return cond


def photo_names(source: str) -> list[str]:
    """The names of :func:`load_photos` ``(source)``'s photos, in its order (table texture ``k`` shows photo
    ``k % len``)."""
    from grasp_s2r.vision.images.backgrounds import split_names

    if source in PHOTO_SPLITS:
        return list(split_names()[source])
    split = split_names(Path(source))
    return [name for s in PHOTO_SPLITS for name in split[s]]


def load_photos(source: str) -> list[np.ndarray]:
    """Photos uint8 (H, W, 3) of an embedded split (``"train"``, ``"heldout"``), or all photos of a folder."""
    from grasp_s2r.vision.images.backgrounds import load_backgrounds  # only composited conditions need vision

    if source in PHOTO_SPLITS:
        photos = load_backgrounds(split=source)
    else:
        if Path(source).exists() and not Path(source).is_dir():
            raise ValueError(f"{source} is a file, not a folder of photos")
        if not Path(source).is_dir():
            raise FileNotFoundError(f"backgrounds folder {source} does not exist")
        from grasp_s2r.vision.images.corpus_manifest import is_corpus

        if is_corpus(source):  # its split holds the training photos: grasping tests take photos to test on
            raise ValueError(f"{source} is a corpus of training photos (grasp-s2r backgrounds), not photos to test on")
        photos = [p for split in PHOTO_SPLITS for p in load_backgrounds(split=split, directory=Path(source))]
    if not photos:
        raise FileNotFoundError(f"no background photos in {source!r}")
    return photos
