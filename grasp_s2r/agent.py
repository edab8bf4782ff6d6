"""``GraspAgent``: the trained system behind one call, for a real arm or any control loop outside the simulator.

One step: camera image (any size, any field of view at least the trained one) -> centre crop + resize to the
trained field of view -> segmenter -> sphere mask -> parallax filter (drops the detections that stay put in the
image as the camera moves: far away, not on the table; ``control.parallax``; and those at a table point the gripper
has closed over again and again, or stayed low over for long: ``control.hovered``; gives a sphere the closed gripper
holds its last mask where the segmenter loses it in the lift, ``control.held``, and one it loses for a frame just
under the open fingers, ``control.near``) -> controller (mask + proprioception) -> action; after each table point
given up, the filter's low look acts in the controller's place for a few steps (``control.look``).

Inputs of :meth:`GraspAgent.act`:

- ``rgb``: uint8 (H, W, 3), **RGB** order (OpenCV gives BGR: convert), from a camera mounted as the simulated wrist
  camera (``sim.config.CameraConfig``: on the palm, 4.5 cm off the gripper axis towards palm +x, looking at a point
  16 cm below the palm on the axis; image top = palm +x). The network was trained on 64 x 64 px images with a 60°
  vertical (and, square, horizontal) field of view; a segmenter trained with ``train-vision --margin-px M`` reads
  that view seen M px beyond each edge (``GraspAgent.segmenter_camera``), and the controller the view's mask. See
  :func:`fit_to_trained_view` for the crop rule.
- ``proprio``: float (5,) in SI units, in the order of ``PROPRIO_NAMES``::

      tcp_x_world_m        TCP x in the table frame, metres   (read by the parallax filter, and a controller of ``--tcp-xy``)
      tcp_y_world_m        TCP y in the table frame, metres   (read by the parallax filter, and a controller of ``--tcp-xy``)
      tcp_z_above_table_m  TCP height above the table top, metres (TCP: between the fingertip pads)
      finger_gap_m         distance between the two finger pads, metres (0.04 fully open; the held-sphere rule reads it)
      gripper_closed       1.0 if the last gripper command was "close", else 0.0 (read by the filter's rules too)

Output: ``AgentStep.action`` float64 (4,) in [-1, 1] (what ``GraspEnv.step`` takes): ``action[:3]`` is the TCP
displacement along the table frame's x, y, z (+z up; the gripper points straight down, palm +x = table +x) in
units of ``SceneConfig.max_action_step_m`` = 2 cm per step at 10 Hz (``AgentStep.delta_m`` gives it in metres);
``action[3] > 0`` closes the gripper, otherwise it opens. The sim moves the TCP target to the *measured* TCP +
delta (not the previous target), clipped to the workspace.

``GraspAgent.act_batch`` runs the project's one learner step (``learner.learner_step``), as the batched rollouts of
``grasp-s2r eval`` / ``grasp-s2r dagger`` do, so what is tested is what is deployed. This module imports torch only
when a network is loaded.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from importlib import resources
from pathlib import Path
from typing import Any

import cv2
import numpy as np

from grasp_s2r.agent_inputs import check_crop, check_vfov, one_proprio, proprio_rows, resolve_device, rgb_uint8
from grasp_s2r.control.memory import N_MEMORY, EpisodeMemory
from grasp_s2r.control.parallax import SHIPPED as SHIPPED_PARALLAX
from grasp_s2r.control.parallax import ParallaxConfig, ParallaxFilter
from grasp_s2r.control.wrist_geometry import PreviousFrame
from grasp_s2r.learner import AgentError, SegmenterMasks, learner_step, reads_gripper
from grasp_s2r.sim.config import CameraConfig, EnvConfig, SceneConfig

ACTION_NAMES = ("dx", "dy", "dz", "gripper")
"""Action components: TCP displacement (table frame, units of ``max_action_step_m``), gripper (> 0 closes)."""
CONTROLLER_FILE = "controller.pt"
"""Name of the controller shipped in ``grasp_s2r/weights/`` (see :func:`default_controller_path`)."""
NO_CONTROLLER = ("no controller ships with this install of grasp_s2r; train one with 'grasp-s2r pipeline --out runs/pipeline' "
                 "(writes runs/pipeline/dagger/policy.pt) or 'grasp-s2r dagger --out DIR' (writes DIR/policy.pt), "
                 "then GraspAgent.load(controller=PATH)")


# --- camera images of any size -> the trained view -----------------------------------------------------------
def fit_to_trained_view(rgb: np.ndarray, camera: CameraConfig, camera_vfov_deg: float | None = None) -> np.ndarray:
    """A camera image -> uint8 (camera.height_px, camera.width_px, 3) spanning the trained field of view.

    ``rgb``: uint8 (H, W, 3), or float in [0, 1] (scaled to uint8; :func:`agent_inputs.rgb_uint8`). With
    ``camera_vfov_deg`` (the vertical field of view of the camera that took it; square pixels, principal point at
    the centre), the centre crop keeps exactly the trained ``camera.fov_deg`` vertically and ``camera.width_px /
    camera.height_px`` times that horizontally: crop height = H * tan(fov / 2) / tan(camera_vfov / 2). Without it
    the image is taken to span the trained vertical field of view already: the crop is all rows, and the centred
    columns giving the trained aspect ratio. The crop is then resized (area averaging when shrinking, bilinear when
    enlarging). A camera that sees less than the trained field of view is refused (:class:`AgentError`): the network
    would see the sphere at the wrong scale; so is one whose crop is under a quarter of the trained image's side
    (:data:`agent_inputs.MIN_CROP_SHARE`).
    """
    img = rgb_uint8(rgb)
    h, w = img.shape[:2]
    out_h, out_w = camera.height_px, camera.width_px
    crop_h = float(h)
    if camera_vfov_deg is not None:
        if not 0.0 < camera_vfov_deg < 180.0:
            raise AgentError(f"camera_vfov_deg must be in (0, 180), got {camera_vfov_deg}")
        crop_h = h * math.tan(math.radians(camera.fov_deg) / 2) / math.tan(math.radians(camera_vfov_deg) / 2)
    crop_w = crop_h * out_w / out_h
    if crop_h > h + 0.5 or crop_w > w + 0.5:
        raise AgentError(f"this {w}x{h} image (vertical FOV {camera_vfov_deg or camera.fov_deg}°) does not cover the "
                         f"trained {camera.fov_deg}° x {out_w}:{out_h} view; use a camera with a wider field of view")
    ch, cw = min(h, max(1, round(crop_h))), min(w, max(1, round(crop_w)))
    check_crop((ch, cw), (out_h, out_w), (h, w))
    y0, x0 = (h - ch) // 2, (w - cw) // 2
    crop = img[y0:y0 + ch, x0:x0 + cw]
    if crop.shape[:2] == (out_h, out_w):
        return np.ascontiguousarray(crop)
    interp = cv2.INTER_AREA if ch > out_h else cv2.INTER_LINEAR
    return cv2.resize(crop, (out_w, out_h), interpolation=interp)


# --- the agent ----------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class AgentStep:
    """One action of :meth:`GraspAgent.act`, with what produced it."""

    action: np.ndarray
    """float64 (4,) in [-1, 1]: TCP displacement x, y, z (table frame, units of ``max_action_step_m``), gripper."""
    delta_m: np.ndarray
    """float64 (3,): the displacement in metres (``action[:3] * max_action_step_m``), table frame."""
    close_gripper: bool
    """``action[3] > 0``."""
    mask: np.ndarray
    """bool (h, w) at the trained resolution: the sphere mask the controller saw (for display)."""
    image: np.ndarray
    """uint8 (h, w, 3): the camera image after :func:`fit_to_trained_view` (what the segmenter saw: the view, and
    its margins for a segmenter trained with them, ``GraspAgent.segmenter_camera``)."""
    timings_ms: dict[str, float]
    """Wall time of ``preprocess``, ``segment``, ``filter`` (the parallax filter), ``control`` and ``total`` (ms)."""


@dataclass(frozen=True)
class AgentBatch:
    """N actions of :meth:`GraspAgent.act_batch` (the fields of :class:`AgentStep`, batch first)."""

    actions: np.ndarray
    delta_m: np.ndarray
    close_gripper: np.ndarray
    masks: np.ndarray
    images: np.ndarray
    timings_ms: dict[str, float]

    def __len__(self) -> int:
        return len(self.actions)

    def __getitem__(self, i: int) -> AgentStep:
        return AgentStep(action=self.actions[i], delta_m=self.delta_m[i], close_gripper=bool(self.close_gripper[i]),
                         mask=self.masks[i], image=self.images[i], timings_ms=self.timings_ms)


def default_controller_path() -> Path:
    """The shipped controller (``grasp_s2r/weights/controller.pt``: ``grasp-s2r dagger`` with
    ``dagger.LOST_SPHERE_RECIPE`` over the shipped segmenter's masks; docs/control.md gives the command)."""
    return Path(str(resources.files("grasp_s2r") / "weights" / CONTROLLER_FILE))


@dataclass
class GraspAgent:
    """Segmenter + controller + the trained camera: ``reset()`` at an episode's start, then ``act`` every 0.1 s."""

    segmenter: Any
    """``vision.segmenter.Segmenter``."""
    policy: Any
    """``control.policy.Policy``."""
    env: EnvConfig = field(default_factory=EnvConfig)
    """Scene and camera the controller was trained with (from its checkpoint): the trained view and action scale."""
    camera_vfov_deg: float | None = None
    """Vertical field of view of the camera whose images ``act`` gets (None: the trained one)."""
    steps: int = 0
    """Actions since the last :meth:`reset`."""
    blind_steps: int = 0
    """Consecutive steps whose mask was empty (the sphere not seen): a real loop may stop after too many."""
    memory: EpisodeMemory = field(default_factory=EpisodeMemory)
    """The episode's memory (last sighting, motion since), read by a controller with memory; cleared by reset."""
    parallax: ParallaxConfig | None = SHIPPED_PARALLAX
    """The parallax filter of :meth:`act`'s masks (``control.parallax``); None: the segmenter's masks as they are."""

    def __post_init__(self) -> None:
        check_vfov(self.camera_vfov_deg, self.segmenter_camera.fov_deg)  # now, not at the robot loop's first image
        self._far = None if self.parallax is None else ParallaxFilter(self.env.scene, self.env.camera, self.parallax)
        """:meth:`act`'s parallax filter: its spots of this episode."""
        self._previous = PreviousFrame(self.segmenter_camera) if getattr(self.segmenter, "reads_previous", False) \
            else None
        """:meth:`act`'s previous frame, for a segmenter that reads it."""

    @classmethod
    def load(cls, segmenter: str | Path | None = None, controller: str | Path | None = None,
             device: Any = None, camera_vfov_deg: float | None = None,
             gripper_head: str | Path | None = None,
             parallax: ParallaxConfig | None = SHIPPED_PARALLAX) -> GraspAgent:
        """Load the networks: ``segmenter`` (default: the shipped one), ``controller`` (default: the shipped one,
        if any: else :class:`AgentError` naming the command that trains one), on ``device`` (default: CUDA when
        present, else the CPU). ``camera_vfov_deg``: vertical FOV of your camera (see :func:`fit_to_trained_view`).
        ``gripper_head``: a gripper head trained on that segmenter (``grasp-s2r train-gripper``), for a controller
        that reads the fingers' mask; default: the shipped head when it was trained on the segmenter's file.
        ``parallax``: the filter of far-away detections (None: off)."""
        from grasp_s2r.control.policy import Policy, trained_scene
        from grasp_s2r.vision.networks.gripper import load_segmenter_with_head
        from grasp_s2r.vision.networks.segmenter import CheckpointError, default_checkpoint_path

        device = resolve_device(device)
        ctrl = Path(controller).expanduser() if controller is not None else default_controller_path()
        if controller is None and not ctrl.is_file():
            raise AgentError(NO_CONTROLLER)
        if ctrl.is_dir():
            inside = " (a DAgger run's is DIR/policy.pt)" if (ctrl / "policy.pt").is_file() else ""
            raise AgentError(f"controller {ctrl} is a folder, not a checkpoint file{inside}")
        try:
            policy, blob = Policy.load(ctrl, device)
        except FileNotFoundError:
            raise AgentError(f"no controller checkpoint at {ctrl}; {NO_CONTROLLER.split('; ', 1)[1]}") from None
        except ValueError as e:
            raise AgentError(str(e)) from None
        seg_path = Path(segmenter).expanduser() if segmenter is not None else default_checkpoint_path()
        try:
            seg = load_segmenter_with_head(seg_path, device=policy.device, head=gripper_head)
        except CheckpointError as e:
            raise AgentError(str(e)) from None
        if reads_gripper(policy) and not seg.has_gripper_head:
            raise AgentError(f"controller {ctrl} reads the gripper fingers' mask, and segmenter {seg_path} has no "
                             "gripper head (none shipped for it): pass gripper_head= (grasp-s2r train-gripper)")
        env = trained_scene(blob)
        return cls(segmenter=seg, policy=policy, env=env, camera_vfov_deg=camera_vfov_deg, parallax=parallax)

    @property
    def camera(self) -> CameraConfig:
        """The trained camera: resolution and field of view the images are brought to."""
        return self.env.camera

    @property
    def segmenter_camera(self) -> CameraConfig:
        """The camera of the images the segmenter reads: the trained view, widened by the pixels beyond each edge the
        segmenter was trained to see (``train-vision --margin-px``; 0: the view itself). :meth:`act`'s images are
        brought to it, so a segmenter with a margin needs a camera seeing at least that much."""
        return self.camera.widened(int(getattr(self.segmenter, "margin_px", 0)))

    @property
    def scene(self) -> SceneConfig:
        return self.env.scene

    def reset(self) -> None:
        """Start an episode: clears the step counters, the episode memory (where the sphere was last seen) and the
        parallax filter's spots."""
        self.steps = 0
        self.blind_steps = 0
        self.memory.reset()
        if self._far is not None:
            self._far.reset()
        if self._previous is not None:
            self._previous.reset()

    def act(self, rgb: np.ndarray, proprio: Sequence[float]) -> AgentStep:
        """One image (H, W, 3) and proprio (5,) (SI units, ``PROPRIO_NAMES`` order) -> :class:`AgentStep`.

        The action is taken to be executed as returned: it enters the episode memory (call :meth:`reset` at the
        start of every episode)."""
        p = one_proprio(proprio)[0]
        step = self.act_batch(rgb_uint8(rgb)[None], p[None], memory=self.memory.features()[None],
                              mask_filters=None if self._far is None else [self._far.filter],
                              previous_frames=None if self._previous is None else [self._previous])[0]
        override = None if self._far is None else self._far.action(p, step.action)
        if override is not None:  # the low look (control.look) or the rolling lead (control.lead)
            step = replace(step, action=override, delta_m=override[:3] * self.scene.max_action_step_m,
                           close_gripper=bool(override[3] > 0))
        self.memory.update(step.mask, p, step.action)
        self.blind_steps = 0 if step.mask.any() else self.blind_steps + 1
        return step

    def act_batch(self, rgb: np.ndarray | Sequence[np.ndarray], proprio: np.ndarray,
                  memory: np.ndarray | None = None,
                  mask_filters: Sequence[Callable[[np.ndarray, np.ndarray], np.ndarray] | None] | None = None,
                  previous_frames: Sequence[PreviousFrame] | None = None) -> AgentBatch:
        """N images (a sequence, or an array (N, H, W, 3)) and proprio (N, 5) -> :class:`AgentBatch`: one
        segmenter and one controller forward pass (the batched runtime's :func:`learner_step`). ``memory``
        float32 (N, N_MEMORY): each row's ``EpisodeMemory.features()``, needed by a controller with memory (the
        caller keeps one ``EpisodeMemory`` per stream and updates it with the executed action). ``mask_filters``: one
        per stream, e.g. the ``filter`` of a ``ParallaxFilter`` per stream (default: none; :meth:`act` uses the
        agent's own). ``previous_frames``: one ``control.wrist_geometry.PreviousFrame`` per stream, needed by a
        segmenter that reads the previous frame (``reads_previous``; :meth:`act` keeps the agent's own)."""
        t0 = time.perf_counter()
        proprio = proprio_rows(proprio)
        if len(rgb) != len(proprio):
            raise AgentError(f"{len(rgb)} images but {len(proprio)} proprio rows")
        n = len(proprio)
        if memory is not None:
            memory = np.asarray(memory, dtype=np.float32)
            if memory.shape != (n, N_MEMORY):
                raise AgentError(f"memory must be (N, {N_MEMORY}), one EpisodeMemory.features() row per stream; got "
                                 f"shape {memory.shape} for {n} streams")
        if mask_filters is not None and len(mask_filters) != n:
            raise AgentError(f"{len(mask_filters)} mask_filters for {n} streams: one per stream (None: unfiltered)")
        cam = self.segmenter_camera
        images = np.stack([fit_to_trained_view(im, cam, self.camera_vfov_deg) for im in rgb]) if len(rgb) \
            else np.zeros((0, cam.height_px, cam.width_px, 3), np.uint8)
        t1 = time.perf_counter()
        if memory is None and self.policy.cfg.memory:
            raise AgentError("this controller has memory: act_batch needs memory=(N, N_MEMORY) features, one "
                             "EpisodeMemory per stream (or use act, which keeps the agent's own)")
        previous = None
        if getattr(self.segmenter, "reads_previous", False):
            if previous_frames is None or len(previous_frames) != len(images):
                raise AgentError("this segmenter reads the previous frame: act_batch needs previous_frames=, one "
                                 "PreviousFrame per stream (or use act, which keeps the agent's own)")
            previous = np.stack([f.warped(im, p) for f, im, p in zip(previous_frames, images, proprio)])
        out = learner_step(SegmenterMasks(self.segmenter), self.policy, images, proprio, memory=memory,
                           mask_filters=mask_filters, previous=previous)
        total = 1e3 * (time.perf_counter() - t0)
        self.steps += len(images)
        actions = out.actions
        return AgentBatch(
            actions=actions, delta_m=actions[:, :3] * self.scene.max_action_step_m, close_gripper=actions[:, 3] > 0,
            masks=out.masks, images=images,
            timings_ms={"preprocess": 1e3 * (t1 - t0), "segment": out.mask_ms, "filter": out.filter_ms,
                        "control": out.control_ms,
                        "total": total},
        )
