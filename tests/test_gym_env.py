import gymnasium as gym
import numpy as np
from gymnasium.utils.env_checker import check_env

import grasp_s2r


def test_registered_env_passes_check_env():
    env = gym.make(grasp_s2r.GYM_ENV_ID)
    try:
        check_env(env.unwrapped, skip_render_check=True)
        obs, info = env.reset(seed=3)
        assert obs["rgb"].shape == (64, 64, 3) and info["sphere_mask"].shape == (64, 64)
        obs, reward, terminated, _truncated, info = env.step(np.zeros(4, np.float32))
        assert reward == 0.0 and not terminated
    finally:
        env.close()
