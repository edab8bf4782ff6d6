"""The shipped controller: it loads with the shipped segmenter, has memory, acts from a plain loop of images, and
`grasp-s2r eval` without --policy runs the whole shipped system."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np

from grasp_s2r.agent import GraspAgent, default_controller_path
from grasp_s2r.cli import main
from grasp_s2r.control.policy import read_policy_blob
from grasp_s2r.sim.config import EnvConfig
from grasp_s2r.sim.env import GraspEnv


def test_shipped_controller_is_in_the_package_and_records_its_recipe() -> None:
    blob = read_policy_blob(default_controller_path())
    assert blob["policy_config"]["memory"] is True
    cfg = blob["config"]
    assert cfg["observable_expert"] and cfg["masks"] == "predicted" and cfg["vision_checkpoint"] == ""


def test_agent_loads_the_shipped_system_and_grasps_from_a_plain_loop() -> None:
    agent = GraspAgent.load(device="cpu")
    assert agent.policy.cfg.memory
    env = GraspEnv(EnvConfig())
    successes = 0
    try:
        for seed in (900_001, 900_002, 900_003):
            r = env.reset(seed)
            agent.reset()
            while not (r.terminated or r.truncated):
                step = agent.act(r.frame.rgb, r.proprio)
                assert step.action.shape == (4,) and np.all(np.abs(step.action) <= 1.0)
                r = env.step(step.action)
            successes += bool(r.success)
    finally:
        env.close()
    assert successes >= 2


def test_eval_without_policy_runs_the_shipped_system(tmp_path: Path, capsys) -> None:
    out = tmp_path / "eval"
    rc = main(["eval", "--episodes", "4", "--conditions", "nominal,start-out-of-view", "--workers", "2",
               "--video", "0", "--out", str(out), "--quiet"])
    assert rc == 0, capsys.readouterr().err
    results = json.loads((out / "eval.json").read_text())
    assert results["config"]["policy"] == str(default_controller_path())
    assert sum(c["successes"] for c in results["conditions"].values()) >= 6
