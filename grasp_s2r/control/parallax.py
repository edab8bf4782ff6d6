"""Parallax: a detection that stays put in the image while the camera moves is not on the table; drop it.

The arm translates the wrist camera without turning it (the gripper always points straight down), so a point of
the table plane moves across the image by an amount the TCP's motion predicts (``control.wrist_geometry``), while
anything far away, a wall or a scene behind the table, stays on the same pixel. The segmenter's false detections
on a photographed backdrop are of that second kind: the controller follows such a lure, it never comes nearer, and
the episode is spent hovering under it. :class:`ParallaxFilter` tracks the mask's blobs from step to step: where the
table point under a blob would have moved at least ``min_shift_px`` and the blob stayed within ``match_px`` of
where it was (and nothing appeared where the table point went), the spot gets a vote for "far away"; where the blob
went where the table point went, a vote for "on the table". A spot with ``votes`` more far-away votes than table
votes is taken out of every later mask of the episode (image coordinates: it stays put).

Votes are cast only while the gripper is open: a held sphere moves with the camera too. With ``hover_steps`` and
``hover_closes`` set it also drops the lures that lie on the table once the gripper has hovered over them, or closed
over them again and again (:mod:`grasp_s2r.control.hovered`). With ``held_steps`` set a sphere the closed gripper
holds keeps its last mask where the segmenter loses it in the lift (:mod:`grasp_s2r.control.held`), and with
``near_steps`` set a sphere seen large just under the open fingers (:mod:`grasp_s2r.control.near`). With
``look_height_m`` set the arm looks again from low down, by proprioception, after each spot it gives up (its
:meth:`ParallaxFilter.action`; :mod:`grasp_s2r.control.look`), and with ``lead_frames`` set a sphere rolling on the
table has its step added to the controller's action (:mod:`grasp_s2r.control.lead`). The shipped filter
(:data:`SHIPPED`) runs every rule but the look at the start. Numpy and OpenCV only; the same class runs in the
batched rollouts (``runtime.pool``) and in ``GraspAgent``.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

import cv2
import numpy as np

from grasp_s2r.control.held import HeldSphere
from grasp_s2r.control.hovered import HoveredSpots
from grasp_s2r.control.lead import RollingLead
from grasp_s2r.control.look import LowLook
from grasp_s2r.control.near import NearSphere
from grasp_s2r.control.wrist_geometry import TCP_INDEX, WristView, fingers_open
from grasp_s2r.sim.config import CameraConfig, SceneConfig


@dataclass(frozen=True)
class ParallaxConfig:
    """When a spot of the mask counts as far away (pixels of the camera's image)."""

    min_shift_px: float = 3.0
    """A step votes only where the table point under the blob would have moved at least this far."""
    match_px: float = 1.5
    """A blob within this distance of a position is there."""
    votes: int = 3
    """Far-away votes, beyond the table votes, that take a spot out of the mask."""
    hover_steps: int = 0
    """Hovered spots (``control.hovered``): after this many steps of the open gripper below ``hover_height_m``
    within ``hover_radius_m`` of one table point since it last closed, detections there leave the mask; 0: off."""
    hover_height_m: float = 0.04
    """TCP height above the table (m) below which a step counts as hovering."""
    hover_radius_m: float = 0.02
    """Table distance (m): a stay's extent, and how near a hovered spot a blob's centroid is dropped."""
    hover_closes: int = 0
    """Re-closed spots (``control.hovered``): after this many closes of the gripper begun within ``hover_radius_m``
    of one table point, detections there leave the mask; 0: off."""
    held_steps: int = 0
    """Held sphere (``control.held``): while the closed gripper holds something, up to this many empty masks in a
    row get the last non-empty mask back; 0: off."""
    held_min_gap_m: float = 0.004
    """Finger gap (m) at or above which the closed gripper holds something (closed on nothing, the fingers meet)."""
    held_disjoint: bool = False
    """With ``held_steps``: a mask that does not touch the last one while the gripper holds something counts as
    empty too (the segmenter fired beside the held sphere it missed)."""
    near_steps: int = 0
    """Near sphere (``control.near``): while the open gripper's TCP is below ``near_height_m``, up to this many empty
    masks in a row get the last non-empty one back, moved with the table, where it covered at least ``near_min_px``
    pixels; 0: off."""
    near_height_m: float = 0.05
    """TCP height above the table (m) below which the near sphere's rule acts."""
    near_min_px: int = 20
    """Pixels the last mask must cover for the near sphere's rule to give it back."""
    look_height_m: float = 0.0
    """Low look (``control.look``): the arm goes to this TCP height above the table, the view centred on the spawn
    area, before the controller acts (``look_at_start``) and/or after each spot given up as a lure
    (``look_after_spot``); 0: off."""
    look_at_start: bool = False
    """A low look at the episode's start."""
    look_after_spot: bool = False
    """A low look after each hovered or re-closed spot is given up."""
    look_dwell_steps: int = 0
    """Steps a low look stays at its point, circling it, while the filtered mask is empty (``control.look``); 0: it
    hands back on arrival."""
    lead_frames: int = 0
    """Rolling lead (``control.lead``): where the sphere's centroid moved on a straight line over this many
    consecutive frames (fingers open, TCP low), its step is added to the controller's x, y action; 0: off."""
    lead_steps: float = 1.0
    """Steps of the sphere's motion the rolling lead adds."""

    def __post_init__(self) -> None:
        if self.min_shift_px < 2 * self.match_px:
            raise ValueError(f"min_shift_px ({self.min_shift_px}) must be at least twice match_px ({self.match_px}): "
                             "else a blob that moved as the table does also counts as staying put")
        if self.votes < 1:
            raise ValueError(f"votes must be >= 1, got {self.votes}")
        if self.hover_steps < 0 or self.hover_closes < 0:
            raise ValueError(f"hover_steps and hover_closes must be >= 0 (0: off), got {self.hover_steps}, "
                             f"{self.hover_closes}")
        if self.look_height_m < 0 or (self.look_height_m > 0 and not (self.look_at_start or self.look_after_spot)):
            raise ValueError(f"look_height_m must be >= 0 (0: off), and a look needs look_at_start or "
                             f"look_after_spot; got {self.look_height_m}")
        if self.look_dwell_steps < 0:
            raise ValueError(f"look_dwell_steps must be >= 0 (0: off), got {self.look_dwell_steps}")
        if self.lead_frames < 0 or self.lead_frames == 1 or self.lead_steps <= 0:
            raise ValueError(f"lead_frames must be 0 (off) or >= 2 and lead_steps > 0, got {self.lead_frames}, "
                             f"{self.lead_steps}")
        if self.held_steps < 0 or self.near_steps < 0:
            raise ValueError(f"held_steps and near_steps must be >= 0 (0: off), got {self.held_steps}, "
                             f"{self.near_steps}")


SHIPPED = ParallaxConfig(hover_steps=16, hover_closes=6, held_steps=3, held_disjoint=True, near_steps=1,
                         look_height_m=0.08, look_after_spot=True, lead_frames=3)
"""The filter ``GraspAgent`` and ``grasp-s2r eval`` run: 3 votes; a table point hovered over for 16 low steps, or
closed over 6 times, given up, and each time the arm looks again from 8 cm above the spawn area; the held sphere's
last mask for up to 3 frames that lose it (empty, or off it), the near sphere's for 1; a sphere rolling on the table
over 3 frames has its step added to the controller's. Chosen on validation episodes
(``benchmarks/parallax_filter.py``, docs/control.md): the held sphere (and a mask off it counted as lost), the
re-closed spots and the near sphere each raised a condition and lowered none; the hovered steps with the low look
turned 14 failures into grasps and 3 grasps into failures over 12 validation conditions of 300 episodes, the rolling
lead 16 and 1."""


def scaled_parallax(config: ParallaxConfig, factor: float) -> ParallaxConfig:
    """``config``'s pixel settings for a camera ``factor`` times as wide in pixels (the same field of view): its
    distances times ``factor``, its areas times ``factor`` squared; its settings were chosen on the default camera
    (``CameraConfig``, 64 px). The rolling lead's settings are in metres and stay."""
    if factor <= 0:
        raise ValueError(f"factor must be positive, got {factor}")
    return replace(config, min_shift_px=config.min_shift_px * factor, match_px=config.match_px * factor,
                   near_min_px=max(1, round(config.near_min_px * factor**2)))


class ParallaxFilter:
    """One episode's spots; ``filter(mask, proprio)`` at every step returns the mask without the far-away ones."""

    def __init__(self, scene: SceneConfig, camera: CameraConfig, config: ParallaxConfig | None = None):
        self.scene, self.camera = scene, camera
        self.config = c = config or ParallaxConfig()
        self.hovered = (HoveredSpots(camera, c.hover_height_m, c.hover_radius_m, c.hover_steps, c.hover_closes)
                        if c.hover_steps or c.hover_closes else None)
        """The spots the open gripper hovered low over (``control.hovered``), or None where they are off."""
        self.held = HeldSphere(c.held_steps, c.held_min_gap_m, c.held_disjoint) if c.held_steps else None
        """The held sphere's last mask (``control.held``), or None where it is off."""
        self.near = NearSphere(camera, c.near_steps, c.near_height_m, c.near_min_px) if c.near_steps else None
        """The near sphere's last mask (``control.near``), or None where it is off."""
        self.look = (LowLook(scene, c.look_height_m, c.look_at_start, c.look_after_spot,
                             dwell_steps=c.look_dwell_steps) if c.look_height_m > 0 else None)
        """The low looks (``control.look``), or None where they are off."""
        self.lead = RollingLead(scene, camera, c.lead_frames, c.lead_steps) if c.lead_frames else None
        """The rolling sphere's lead (``control.lead``), or None where it is off."""
        self.reset()

    def reset(self) -> None:
        """A new episode: no spot seen."""
        self.spots = np.zeros((0, 2))
        """Image (column, row) of each spot that has had a vote."""
        self.score = np.zeros(0, dtype=int)
        """Far-away votes minus table votes of each spot."""
        self._previous: tuple[np.ndarray, np.ndarray] | None = None
        """The last step's blob centroids (K, 2) and their table points (K, 2)."""
        self._mask_empty = True
        """The last filtered mask showed nothing (the low look's dwell reads it)."""
        if self.hovered is not None:
            self.hovered.reset()
        if self.held is not None:
            self.held.reset()
        if self.near is not None:
            self.near.reset()
        if self.look is not None:
            self.look.reset()
        if self.lead is not None:
            self.lead.reset()

    def action(self, proprio: np.ndarray, controller_action: np.ndarray | None = None) -> np.ndarray | None:
        """The action to execute instead of the controller's this step (after :meth:`filter` of the same step): the
        low look's, or ``controller_action`` with the rolling lead added; None where the controller's stands."""
        look = None if self.look is None else self.look.action(proprio, self.spots_given_up(), self._mask_empty)
        if look is not None or self.lead is None or controller_action is None:
            return look
        return self.lead.adjust(controller_action)

    def spots_given_up(self) -> int:
        """Table spots given up so far this episode (hovered or re-closed): each new one starts a low look."""
        return 0 if self.hovered is None else len(self.hovered.spots)

    @property
    def far_spots(self) -> np.ndarray:
        """Image (column, row) of the spots taken out of the mask (K, 2)."""
        return self.spots[self.score >= self.config.votes]

    def _vote(self, spot: np.ndarray, far: bool) -> None:
        near = np.hypot(*(self.spots - spot).T) <= self.config.match_px if len(self.spots) else np.zeros(0, bool)
        if near.any():
            self.score[np.argmax(near)] += 1 if far else -1
        else:
            self.spots = np.vstack([self.spots, spot])
            self.score = np.append(self.score, 1 if far else -1)

    def filter(self, mask: np.ndarray, proprio: np.ndarray) -> np.ndarray:
        """This step's mask bool (H, W) without the blobs on far-away spots (and on hovered spots where
        ``hover_steps`` is set; with the held sphere's last mask where ``held_steps`` is set); updates the spots."""
        mask = self._without_far(mask, proprio)
        if self.hovered is not None:
            mask = self.hovered.filter(mask, proprio)
        if self.held is not None:
            mask = self.held.filter(mask, proprio)
        if self.near is not None:
            mask = self.near.filter(mask, proprio)
        if self.lead is not None:
            self.lead.update(mask, proprio)
        self._mask_empty = not mask.any()
        return mask

    def _without_far(self, mask: np.ndarray, proprio: np.ndarray) -> np.ndarray:
        mask = np.asarray(mask, dtype=bool)
        if not mask.any():  # nothing to vote on now, nor next step
            self._previous = None
            return mask
        p = np.asarray(proprio, dtype=float)
        gripper_open = fingers_open(p, self.scene)
        view = WristView.at(p[TCP_INDEX], self.camera)
        n, labels, _, centroids = cv2.connectedComponentsWithStats(mask.astype(np.uint8), connectivity=8)
        now = np.asarray(centroids[1:n], dtype=float).reshape(-1, 2)
        c = self.config
        if gripper_open and self._previous is not None:
            for before, table_xy in zip(*self._previous):
                went = view.table_pixel(table_xy)
                if not np.isfinite(went).all() or np.hypot(*(went - before)) < c.min_shift_px:
                    continue
                stayed = bool((np.hypot(*(now - before).T) <= c.match_px).any())
                followed = bool((np.hypot(*(now - went).T) <= c.match_px).any())
                if stayed != followed:
                    self._vote(before, far=stayed)
        points, on_table = view.table_xy(now)
        self._previous = (now[on_table], points[on_table]) if gripper_open else None
        far = self.far_spots
        if not len(far):
            return mask
        drop = [k + 1 for k, centre in enumerate(now) if (np.hypot(*(far - centre).T) <= c.match_px).any()]
        return mask & ~np.isin(labels, drop) if drop else mask
