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

@pytest.fixture(autouse=True, scope="session")
def ctrl_c_as_from_a_terminal():
    """Commands the tests interrupt get Ctrl-C's default disposition, as a command typed in a terminal has it. A test
    run started in the background by a non-interactive shell inherits SIGINT *ignored*, and so would its children;
    a Python-level handler here is reset to the default in every child that execs."""
    if signal.getsignal(signal.SIGINT) is signal.SIG_IGN:
        signal.signal(signal.SIGINT, signal.default_int_handler)
    yield
