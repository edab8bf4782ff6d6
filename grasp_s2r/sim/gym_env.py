"""Gymnasium wrapper: ``gymnasium.make("grasp_s2r/Grasp-v0")``.

Observation: ``{"rgb": uint8 (H, W, 3), "proprio": float32 (5,)}`` (see ``PROPRIO_NAMES``; bounds ``PROPRIO_RANGES``).
Action: float32 (4,) in [-1, 1] (TCP displacement x, y, z and gripper; see ``grasp_s2r.sim.env``).
Reward: 1.0 on the step the sphere is held and lifted, else 0.0. ``info`` carries the GT mask.
"""

from __future__ import annotations

from typing import Any

import gymnasium as gym
import numpy as np

from grasp_s2r.sim.config import EnvConfig
from grasp_s2r.sim.env import ACTION_DIM, PROPRIO_NAMES, PROPRIO_RANGES, GraspEnv, StepResult

PROPRIO_LOW = np.array([PROPRIO_RANGES[name][0] for name in PROPRIO_NAMES], np.float32)
PROPRIO_HIGH = np.array([PROPRIO_RANGES[name][1] for name in PROPRIO_NAMES], np.float32)


class GraspGymEnv(gym.Env):
    metadata = {"render_modes": ["rgb_array"], "render_fps": 10}  # noqa: RUF012 (gymnasium's convention)

    def __init__(self, config: EnvConfig | None = None, render_mode: str | None = None):
        self.env = GraspEnv(config)
        cam = self.env.config.camera
        self.observation_space = gym.spaces.Dict({
            "rgb": gym.spaces.Box(0, 255, (cam.height_px, cam.width_px, 3), np.uint8),
            "proprio": gym.spaces.Box(PROPRIO_LOW, PROPRIO_HIGH, (len(PROPRIO_NAMES),), np.float32),
        })
        self.action_space = gym.spaces.Box(-1.0, 1.0, (ACTION_DIM,), np.float32)
        self.render_mode = render_mode
        self._last: StepResult | None = None

    def _obs(self, r: StepResult) -> dict[str, np.ndarray]:
        return {"rgb": r.frame.rgb, "proprio": r.proprio.astype(np.float32)}

    def _info(self, r: StepResult) -> dict[str, Any]:
        return {"sphere_mask": r.frame.sphere_mask, "success": r.success, "seed": self.env.seed}

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None):
        super().reset(seed=seed)
        episode_seed = int(self.np_random.integers(0, 2**31 - 1))
        self._last = self.env.reset(episode_seed)
        return self._obs(self._last), self._info(self._last)

    def step(self, action):
        self._last = r = self.env.step(np.asarray(action))
        return self._obs(r), float(r.success), r.terminated, r.truncated and not r.terminated, self._info(r)

    def render(self):
        return None if self._last is None else self._last.frame.rgb

    def close(self):
        self.env.close()
