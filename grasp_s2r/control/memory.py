"""The controller's memory of one episode: where the sphere was last seen, and how the camera moved since.

A memoryless controller that loses the sphere (too small, occluded, a missed detection, pushed out of view)
has nothing to act on; the expert's labels then point at a sphere it cannot see. :class:`EpisodeMemory` keeps,
per episode, a handful of numbers the controller gets next to the current mask (``PolicyConfig.memory``):

- the mask moments (:func:`mask_moments_np`: visible, centroid, spread, size) of the last frame where the
  sphere was seen, and the TCP height then (the pixel-to-metre scale of that view);
- the TCP displacement commanded since then (sum of the executed x, y, z actions, in action units: one unit
  is ``SceneConfig.max_action_step_m``), and the number of steps since (capped);
- whether the sphere was seen at all this episode, and the previous executed action.

With these the controller can dead-reckon where the sphere is relative to the camera (go back to where it was
seen; search once that fails). The same class computes the features while recording training labels from an
episode's arrays (:func:`episode_memory_features`) and while acting (the runtime and ``GraspAgent`` keep one per
episode), so what is trained is what runs. Numpy only: the env worker processes never import torch.
"""

from __future__ import annotations

import numpy as np

from grasp_s2r.sim.env import ACTION_DIM, PROPRIO_NAMES

N_MOMENTS = 6
"""visible, centroid x, centroid y (image coordinates in [-1, 1]), 4 std x, 4 std y, 4 sqrt(area fraction)."""
N_MEMORY = N_MOMENTS + 1 + 3 + 1 + 1 + ACTION_DIM
"""Features of :meth:`EpisodeMemory.features`."""
DISPLACEMENT_SCALE = 0.1
"""Summed action units are multiplied by this (10 full steps -> 1)."""
STEPS_SCALE, STEPS_CAP = 0.05, 40
"""Steps since the sphere was seen, capped, times this."""
Z_SCALE = 1 / 0.2
"""TCP height above the table (m) times this, as in the controller's proprio inputs."""
_Z_INDEX = PROPRIO_NAMES.index("tcp_z_above_table_m")


def mask_moments_np(mask: np.ndarray) -> np.ndarray:
    """Moments of bool masks (..., H, W) -> float32 (..., N_MOMENTS); all zero where a mask is empty.

    The same definition as ``control.policy.mask_moments`` (which runs inside the network, in torch).
    """
    m = np.asarray(mask, dtype=np.float32)
    h, w = m.shape[-2:]
    area = m.sum(axis=(-2, -1))
    safe = np.maximum(area, 1.0)
    ys = np.linspace(-1.0, 1.0, h, dtype=np.float32)[:, None]
    xs = np.linspace(-1.0, 1.0, w, dtype=np.float32)[None, :]
    cx = (m * xs).sum(axis=(-2, -1)) / safe
    cy = (m * ys).sum(axis=(-2, -1)) / safe
    sx = np.sqrt(np.maximum((m * (xs - cx[..., None, None]) ** 2).sum(axis=(-2, -1)) / safe, 0))
    sy = np.sqrt(np.maximum((m * (ys - cy[..., None, None]) ** 2).sum(axis=(-2, -1)) / safe, 0))
    out = np.stack([(area > 0).astype(np.float32), cx, cy, 4 * sx, 4 * sy, 4 * np.sqrt(area / (h * w))], axis=-1)
    return out.astype(np.float32)


class EpisodeMemory:
    """One episode's memory; :meth:`features` before acting, :meth:`update` after (see the module docstring)."""

    def __init__(self) -> None:
        self.reset()

    def reset(self) -> None:
        """A new episode: nothing seen, nothing done."""
        self.last_seen = np.zeros(N_MOMENTS, np.float32)
        self.z_last_seen = 0.0
        self.displacement = np.zeros(3, np.float32)
        self.steps_since = STEPS_CAP
        self.seen = False
        self.previous_action = np.zeros(ACTION_DIM, np.float32)

    def features(self) -> np.ndarray:
        """float32 (N_MEMORY,): the memory as the controller reads it at the coming step."""
        return np.concatenate([
            self.last_seen, [self.z_last_seen * Z_SCALE], self.displacement * DISPLACEMENT_SCALE,
            [min(self.steps_since, STEPS_CAP) * STEPS_SCALE], [float(self.seen)], self.previous_action,
        ]).astype(np.float32)

    def update(self, input_mask: np.ndarray, proprio: np.ndarray, executed_action: np.ndarray) -> None:
        """After a step: the controller's input mask (H, W) and proprio (5,) of that step, the action executed."""
        moments = mask_moments_np(input_mask)
        action = np.asarray(executed_action, dtype=np.float32).reshape(ACTION_DIM)
        if moments[0] > 0:
            self.last_seen, self.seen, self.steps_since = moments, True, 0
            self.z_last_seen = float(np.asarray(proprio)[_Z_INDEX])
            self.displacement = np.zeros(3, np.float32)
        else:
            self.steps_since = min(self.steps_since + 1, STEPS_CAP)
        self.displacement = self.displacement + np.clip(action[:3], -1.0, 1.0)
        self.previous_action = action


def episode_memory_features(input_mask: np.ndarray, proprio: np.ndarray, executed_action: np.ndarray) -> np.ndarray:
    """float32 (T, N_MEMORY): the memory the controller had at each step of a recorded episode (time first)."""
    memory = EpisodeMemory()
    out = np.zeros((len(input_mask), N_MEMORY), np.float32)
    for t in range(len(input_mask)):
        out[t] = memory.features()
        memory.update(input_mask[t], proprio[t], executed_action[t])
    return out
