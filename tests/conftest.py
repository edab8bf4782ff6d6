"""Shared fixtures: small real environments and datasets (no mocks: PyBullet and torch run here)."""

from __future__ import annotations

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
