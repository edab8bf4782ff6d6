"""The controller's optional TCP (x, y) input (``PolicyConfig.tcp_xy``): measured from the scene's spawn centre,
it changes what the controller does only where it is on, it round-trips, and runs without it keep their identity."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import numpy as np
import torch

from grasp_s2r.control.dagger_config import DaggerConfig
from grasp_s2r.control.policy import PROPRIO_INPUTS, TCP_XY_SCALE_M, Policy, PolicyConfig, select_proprio
from grasp_s2r.sim.config import EnvConfig, SceneConfig


def _inputs(x_m: float, y_m: float, n: int = 2) -> tuple[np.ndarray, np.ndarray]:
    masks = np.zeros((n, 64, 64), bool)
    masks[:, 20:24, 30:34] = True
    return masks, np.tile(np.array([x_m, y_m, 0.1, 0.04, 0.0], np.float32), (n, 1))


def test_the_xy_input_is_the_tcp_from_the_origin_over_the_scale():
    proprio = np.array([[0.05, -0.02, 0.1, 0.04, 0.0]], np.float32)
    plain = select_proprio(proprio)
    assert plain.shape == (1, len(PROPRIO_INPUTS))
    with_xy = select_proprio(proprio, PolicyConfig(tcp_xy=True, tcp_xy_origin_m=(0.01, 0.02)))
    np.testing.assert_array_equal(with_xy[:, :len(PROPRIO_INPUTS)], plain)
    np.testing.assert_allclose(with_xy[0, len(PROPRIO_INPUTS):], [0.04 / TCP_XY_SCALE_M, -0.04 / TCP_XY_SCALE_M],
                               rtol=1e-6)


def test_only_a_controller_with_the_input_acts_on_where_the_tcp_is():
    torch.manual_seed(0)
    masks, here = _inputs(0.0, 0.0)
    _, there = _inputs(0.1, -0.08)
    with_xy = Policy(PolicyConfig(tcp_xy=True), device="cpu")
    assert not np.allclose(with_xy.act(masks, here), with_xy.act(masks, there))
    without = Policy(PolicyConfig(), device="cpu")
    np.testing.assert_array_equal(without.act(masks, here), without.act(masks, there))


def test_a_tcp_xy_controller_round_trips(tmp_path: Path):
    policy = Policy(PolicyConfig(tcp_xy=True, tcp_xy_origin_m=(0.02, -0.01), memory=True), device="cpu")
    policy.save(tmp_path / "p.pt")
    loaded, _ = Policy.load(tmp_path / "p.pt", "cpu")
    assert loaded.cfg == policy.cfg
    masks, proprio = _inputs(0.03, 0.04)
    memory = np.zeros((2, 16), np.float32)
    np.testing.assert_array_equal(loaded.act(masks, proprio, memory), policy.act(masks, proprio, memory))


def test_a_run_measures_the_tcp_from_its_scene_and_runs_without_it_keep_their_identity():
    scene = SceneConfig(spawn_center_world_m=(0.03, -0.02))
    cfg = DaggerConfig(out="x", env=EnvConfig(scene=scene), policy=PolicyConfig(tcp_xy=True))
    assert cfg.policy.tcp_xy_origin_m == (0.03, -0.02)
    assert cfg.identity()["policy"]["tcp_xy_origin_m"] == [0.03, -0.02]
    plain = DaggerConfig(out="x").identity()["policy"]
    assert "tcp_xy" not in plain and "tcp_xy_origin_m" not in plain
    assert dataclasses.replace(DaggerConfig(out="x"), rounds=3).identity() == DaggerConfig(out="x").identity()
