"""A scripted search beside the learned controller: where the mask has shown nothing for a few steps, the arm
sweeps the table lower down, by proprioception alone; the controller acts whenever the mask shows anything.

The shipped controller learned its search from the observable expert, which rises to 0.22 m (the widest view) and
sweeps a square spiral there. At 0.22 m the sphere is 2-3 px wide and on busy tables the segmenter rarely finds it;
the expert sweeping at 0.11 m grasps more (``benchmarks/search_recipe.py``), and controllers trained to imitate that
lower sweep do not learn it: their inputs do not say where on the spiral they are. :class:`ScriptedSearch` runs the
expert's own RETURN and SEARCH (``expert.fsm.Expert.act_out_of_view``) on what a robot knows: its TCP position
(kinematics), the gripper, and where its own mask last showed something, projected through the wrist camera onto
the table plane (``control.wrist_geometry``). It takes over only while the gripper is open and the mask has been empty
for ``after_blind_steps`` steps; approach, grasp and lift stay the controller's.

Numpy only (the env worker processes never import torch). The same class runs in the batched rollouts
(``runtime.pool``) and in ``GraspAgent``, so what is evaluated is what is deployed.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from grasp_s2r.control.wrist_geometry import WristView
from grasp_s2r.expert.fsm import Expert, SearchConfig
from grasp_s2r.sim.config import CameraConfig, SceneConfig
from grasp_s2r.sim.env import PROPRIO_NAMES

_X, _Y, _Z, _GAP, _CLOSED = (PROPRIO_NAMES.index(n) for n in ("tcp_x_world_m", "tcp_y_world_m", "tcp_z_above_table_m",
                                                           "finger_gap_m", "gripper_closed"))


@dataclass(frozen=True)
class ScriptedSearchConfig:
    """When the scripted search takes over, and how it sweeps (``search``: the expert's search settings)."""

    after_blind_steps: int = 3
    """Steps the mask must have shown nothing before the search acts."""
    search: SearchConfig = field(default_factory=lambda: SearchConfig(search_height_m=0.11))

    def __post_init__(self) -> None:
        if self.after_blind_steps < 1:
            raise ValueError(f"after_blind_steps must be >= 1, got {self.after_blind_steps}")


class ScriptedSearch:
    """One episode's search; :meth:`action` before the controller's action is executed, :meth:`update` after."""

    def __init__(self, scene: SceneConfig, camera: CameraConfig, config: ScriptedSearchConfig | None = None):
        self.scene, self.camera = scene, camera
        self.config = config or ScriptedSearchConfig()
        self.expert = Expert(scene, search=self.config.search)
        self.reset()

    def reset(self) -> None:
        """A new episode: nothing seen, no search done."""
        self.expert.reset()
        self.blind_steps = 0

    def action(self, proprio: np.ndarray) -> np.ndarray | None:
        """float64 (4,): the search's action for this step, or None where the controller acts."""
        p = np.asarray(proprio, dtype=float)
        gripper_open = p[_CLOSED] < 0.5 and p[_GAP] >= 0.9 * 2 * self.scene.finger_open_m
        if self.blind_steps < self.config.after_blind_steps or not gripper_open:
            return None
        tcp = np.array([p[_X], p[_Y], p[_Z] + self.scene.table_height_m])
        return self.expert.act_out_of_view(tcp, float(p[_GAP]), False, self._sphere_rest_z_m)[0]

    @property
    def _sphere_rest_z_m(self) -> float:
        return self.scene.table_height_m + 0.5 * self.scene.sphere_diameter_m

    def update(self, input_mask: np.ndarray, proprio: np.ndarray) -> None:
        """After a step: the controller's input mask (H, W) and the proprio (5,) it was seen with."""
        mask = np.asarray(input_mask, dtype=bool)
        if not mask.any():
            self.blind_steps += 1
            return
        self.blind_steps = 0
        p = np.asarray(proprio, dtype=float)
        points, ahead = WristView.at(p[[_X, _Y, _Z]], self.camera).pixel_table_xy()
        seen = mask & ahead
        if seen.any():
            x, y = points[seen].mean(axis=0)
            self.expert.saw_at(np.array([x, y, self._sphere_rest_z_m]))
