"""Shared fixtures: small real environments and datasets (no mocks: PyBullet and torch run here)."""

from __future__ import annotations

import signal

import numpy as np
import pytest

from grasp_s2r.sim.config import EnvConfig
from grasp_s2r.sim.env import GraspEnv


@pytest.fixture
def rng() -> np.random.Generator:
    return np.random.default_rng(0)

@pytest.fixture(scope="module")
def env():
    e = GraspEnv(EnvConfig())
    yield e
    e.close()

@pytest.fixture(scope="session")
def shipped_gt_episodes():
    """Four recorded real episodes (PyBullet; seeds 300-303) of the shipped controller on ground-truth masks: the
    approaches and lifts the mask filter's rules are checked on (``tests/test_held.py``, ``tests/test_near.py``)."""
    import torch

    from grasp_s2r.agent import default_controller_path
    from grasp_s2r.control.policy import Policy
    from grasp_s2r.runtime.masks import GroundTruthMasks
    from grasp_s2r.runtime.pool import RolloutPool
    from grasp_s2r.runtime.records import EpisodeRequest
    from grasp_s2r.sim.config import control_env_config

    torch.set_num_threads(1)
    policy = Policy.load(default_controller_path(), "cpu")[0]
    with RolloutPool(control_env_config(), 2) as pool:
        return pool.run([EpisodeRequest(seed=300 + i) for i in range(4)], policy, GroundTruthMasks(), progress=False)

@pytest.fixture(autouse=True, scope="session")
def ctrl_c_as_from_a_terminal():
    """Commands the tests interrupt get Ctrl-C's default disposition, as a command typed in a terminal has it. A test
    run started in the background by a non-interactive shell inherits SIGINT *ignored*, and so would its children;
    a Python-level handler here is reset to the default in every child that execs."""
    if signal.getsignal(signal.SIGINT) is signal.SIG_IGN:
        signal.signal(signal.SIGINT, signal.default_int_handler)
    yield
