"""The FSM expert really grasps, recomputes its phase from the world, and recovers."""

from __future__ import annotations

import numpy as np
import pybullet as pb
import pytest

from grasp_s2r.expert.fsm import Expert, Phase
from grasp_s2r.sim.env import GraspEnv


def run_expert(env, expert, seed, on_step=None):
    r = env.reset(seed)
    phases = []
    while not (r.terminated or r.truncated):
        action, phase = expert.act(env.privileged())
        phases.append(phase)
        if on_step is not None:
            on_step(env, len(phases), phase)
        r = env.step(action)
    return r.success, phases


def test_expert_grasps_and_lifts_in_seeded_episodes(env):
    expert = Expert(env.config.scene)
    for seed in range(5):
        success, phases = run_expert(env, expert, seed)
        assert success, f"seed {seed}: phases {[p.name for p in phases]}"
        # the sphere is really up there, between the fingers
        assert env.sphere_pos_world_m()[2] > env.config.scene.sphere_radius_m + env.config.scene.lift_success_m
        assert env.privileged().held
        assert phases[-1] == Phase.LIFT and Phase.CLOSE in phases


def test_phase_is_recomputed_from_the_world_state(env):
    expert = Expert(env.config.scene)
    env.reset(seed=4)
    sphere = env.sphere_pos_world_m()
    open_q = env.config.scene.finger_open_m
    env.robot.teleport(sphere + [0.06, 0.0, 0.1], open_q)
    assert expert.phase(env.privileged()) == Phase.APPROACH
    env.robot.teleport(sphere + [0.0, 0.0, 0.05], open_q)
    assert expert.phase(env.privileged()) == Phase.DESCEND
    env.robot.teleport(sphere + [0.0, 0.0, expert.config.grasp_offset_m], open_q)
    assert expert.phase(env.privileged()) == Phase.CLOSE
    env.robot.teleport(sphere + [0.05, 0.0, 0.05], 0.0)  # closed on nothing
    pv = env.privileged()
    assert expert.phase(pv) == Phase.RESET
    action, _ = expert.act(pv)
    assert action[3] < 0 and action[2] > 0  # open and back off upwards


def test_expert_recovers_after_the_sphere_is_knocked_away(env):
    expert = Expert(env.config.scene)
    knocked = {}

    def knock(env, step, phase):
        if phase == Phase.DESCEND and "at" not in knocked and env.privileged().tcp_pos_world_m[2] < 0.05:
            pos = env.sphere_pos_world_m() + [0.05, -0.03, 0.0]
            pb.resetBasePositionAndOrientation(env.sphere_uid, pos, [0, 0, 0, 1], physicsClientId=env.client)
            knocked["at"] = step

    success, phases = run_expert(env, expert, seed=8, on_step=knock)
    assert "at" in knocked and success
    after = phases[knocked["at"]:]
    assert Phase.APPROACH in after  # fell back to approach from the sphere's new position


def test_expert_success_rate_over_twenty_episodes(env):
    expert = Expert(env.config.scene)
    successes = [run_expert(env, expert, seed)[0] for seed in range(100, 120)]
    assert np.mean(successes) >= 0.9


def test_expert_grasps_and_lifts_under_the_dynamics_shift_condition():
    """The physics of issue 16 keeps the grasp under eval's dynamics-shift condition (3x sphere mass, 0.5x friction,
    action noise, one step of latency, applied by its EpisodeHooks): the expert grasps and lifts the sphere, and
    holds it while it lifts on. Not in every episode: the sphere can be batted away and roll off, with the physics
    of before too (96 % success over 500 episodes, either physics: docs/scene.md); at 96 %, 10 or more of 12
    succeed 99 % of the time. Its own env: the hooks change the sphere's mass and friction."""
    import dataclasses

    from grasp_s2r.runtime.conditions import CONDITIONS
    from grasp_s2r.runtime.episode_hooks import EpisodeHooks

    cond = dataclasses.replace(CONDITIONS["dynamics-shift"], backgrounds="")  # the expert does not look at images
    successes = 0
    with GraspEnv() as env:
        expert = Expert(env.config.scene)
        rest_z = env.config.scene.sphere_radius_m
        for seed in range(12):
            r = env.reset(seed)
            hooks = EpisodeHooks(env, cond, np.random.default_rng(seed))
            hooks.on_reset()
            assert pb.getDynamicsInfo(env.sphere_uid, -1, physicsClientId=env.client)[0] == pytest.approx(0.015)
            while not (r.terminated or r.truncated):
                r = env.step(hooks.before_step(expert.act(env.privileged())[0]))
            if not r.success:
                continue
            successes += 1
            assert env.sphere_pos_world_m()[2] >= rest_z + env.config.scene.lift_success_m
            for _ in range(10):  # the expert lifts on: the sphere stays between the fingers and goes up
                env.step(hooks.before_step(expert.act(env.privileged())[0]))
            assert env.privileged().held, f"seed {seed}: dropped while lifting on"
            assert env.sphere_pos_world_m()[2] > rest_z + 0.1
    assert successes >= 10
