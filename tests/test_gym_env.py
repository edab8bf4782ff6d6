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


def test_an_expert_grasp_stays_inside_the_observation_space():
    """The space the wrapper declares is the one table of bounds ``GraspAgent`` checks a robot's readings against
    (``PROPRIO_RANGES``, by name), and every observation of a whole grasp (down to the table, fingers closed on the
    sphere, lifted) lies in it."""
    from grasp_s2r.expert.fsm import Expert
    from grasp_s2r.sim.env import PROPRIO_NAMES, PROPRIO_RANGES

    env = gym.make(grasp_s2r.GYM_ENV_ID)
    try:
        space = env.observation_space["proprio"]
        np.testing.assert_allclose(np.stack([space.low, space.high], 1),
                                   [PROPRIO_RANGES[name] for name in PROPRIO_NAMES], rtol=1e-6)
        inner = env.unwrapped.env
        expert = Expert(inner.config.scene)
        obs, _ = env.reset(seed=5)
        seen, done, reward = [obs], False, 0.0
        while not done:
            action, _phase = expert.act(inner.privileged())
            obs, reward, terminated, truncated, _ = env.step(action.astype(np.float32))
            seen.append(obs)
            done = terminated or truncated
        assert reward == 1.0, "the expert's grasp should succeed"
        outside = [i for i, o in enumerate(seen) if not env.observation_space.contains(o)]
        assert not outside, f"observations outside the space at steps {outside[:5]}: {seen[outside[0]]['proprio']}"
    finally:
        env.close()
