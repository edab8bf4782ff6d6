"""The observable-consistent expert: out of view it returns to where it last saw the sphere, searches, finds it
again and grasps; ``reset()`` clears its memory; ``act(pv)`` without the flag is the expert of before."""

from __future__ import annotations

import numpy as np
import pybullet as pb
import pytest

from grasp_s2r.expert.fsm import Expert, Phase, SearchConfig, spiral_corners
from grasp_s2r.sim.config import SceneConfig
from grasp_s2r.sim.env import Privileged

SPOTS = [(-0.11, 0.11), (0.11, -0.11), (0.11, 0.11), (-0.11, -0.11), (0.12, 0.0), (0.0, -0.12), (0.12, -0.06)]
"""Reachable table spots (the privileged expert grasps there) to hide the sphere at."""


def place_sphere(env, xy) -> None:
    s = env.config.scene
    pb.resetBasePositionAndOrientation(env.sphere_uid, [xy[0], xy[1], s.table_height_m + s.sphere_radius_m],
                                       [0, 0, 0, 1], physicsClientId=env.client)
    pb.resetBaseVelocity(env.sphere_uid, [0, 0, 0], [0, 0, 0], physicsClientId=env.client)


def hide_sphere(env, min_move_m=0.05, spots=SPOTS) -> tuple[float, float]:
    """Move the sphere to the first of ``spots`` the camera does not see now (and 5 cm away at least)."""
    old = env.sphere_pos_world_m()
    for xy in spots:
        if np.linalg.norm(np.asarray(xy) - old[:2]) < min_move_m:
            continue
        place_sphere(env, xy)
        if not env.render().sphere_mask.any():
            return xy
    pb.resetBasePositionAndOrientation(env.sphere_uid, old, [0, 0, 0, 1], physicsClientId=env.client)
    raise AssertionError("no spot out of view")


def run(env, expert, seed, before_step=None, blind=lambda step: False):
    """One episode with ``act(pv, sphere_in_view)`` from the GT mask of the frame the env returned.

    ``before_step(env, step)`` may move the sphere (then the frame is rendered again); ``blind(step)`` hides the
    sphere from the expert (a missed detection). Returns (success, phases, in_view flags)."""
    r = env.reset(seed)
    expert.reset()
    frame = r.frame
    phases, in_view = [], []
    while not (r.terminated or r.truncated):
        if before_step is not None and before_step(env, len(phases)):
            frame = env.render()
        seen = bool(frame.sphere_mask.any()) and not blind(len(phases))
        action, phase = expert.act(env.privileged(), seen)
        phases.append(phase)
        in_view.append(seen)
        r = env.step(action)
        frame = r.frame
    return r.success, phases, in_view


def test_sphere_teleported_out_of_view_mid_approach_is_found_and_grasped(env):
    expert = Expert(env.config.scene)
    moved = {}

    def teleport(env, step):
        if step == 3:
            moved["xy"] = hide_sphere(env)
            return True
        return False

    success, phases, in_view = run(env, expert, seed=3, before_step=teleport)
    assert "xy" in moved and success, [p.name for p in phases]
    lost = in_view.index(False)
    assert lost == 3 and all(in_view[:3])
    back = in_view.index(True, lost)
    assert set(phases[lost:back]) <= {Phase.RETURN, Phase.SEARCH} and Phase.SEARCH in phases[lost:back]
    assert phases[-1] == Phase.LIFT and all(in_view[back:])
    np.testing.assert_allclose(env.sphere_pos_world_m()[:2], moved["xy"], atol=0.03)  # the moved sphere, held up
    # measured: 10 steps out of view here (returns, rises, sees it); typical 10, at most ~25 (benchmark)
    assert back - lost <= 40 and len(phases) <= env.config.scene.max_episode_steps


def test_sphere_never_seen_at_the_start_is_searched_for_and_grasped(env):
    """Hidden at the start behind the gripper (the fingers hide that spot from the camera even from the search
    height): rising alone does not show it, the sweep does."""
    expert = Expert(env.config.scene)
    hidden, tcp_at = {}, []

    def hide_at_start(env, step):
        tcp_at.append(env.privileged().tcp_pos_world_m)
        if step == 0:
            hidden["xy"] = hide_sphere(env, min_move_m=0.0, spots=[(-0.12, -0.12)])
            return True
        return False

    success, phases, in_view = run(env, expert, seed=11, before_step=hide_at_start)
    assert not in_view[0] and success, [p.name for p in phases]
    first_seen = in_view.index(True)
    assert set(phases[:first_seen]) == {Phase.SEARCH}  # nothing to return to: it searches from the start
    assert Phase.RETURN not in phases
    assert np.linalg.norm(tcp_at[first_seen][:2] - tcp_at[0][:2]) > 0.03  # found along the sweep
    assert first_seen <= 45  # measured: 27 steps (45 for the whole episode)
    np.testing.assert_allclose(env.sphere_pos_world_m()[:2], hidden["xy"], atol=0.03)  # the arm drifts as it lifts


def test_search_rises_then_sweeps_the_spiral_inside_the_workspace(env):
    """Sphere where the camera never sees it: SEARCH throughout, up to the search height, then every waypoint of
    the spiral in order, then over again; the TCP stays inside the workspace."""
    s = env.config.scene
    expert = Expert(s)
    env.reset(5)
    expert.reset()
    place_sphere(env, (0.45, 0.45))  # on the table, out of the arm's (and the camera's) reach
    waypoints = expert.search_waypoints()
    assert len(waypoints) == len(spiral_corners(expert.search.sweep_rings))
    headed, tcps = [], []
    for _ in range(130):
        frame = env.render()
        assert not frame.sphere_mask.any()
        action, phase = expert.act(env.privileged(), False)
        assert phase == Phase.SEARCH
        headed.append(expert.waypoint)
        tcps.append(env.privileged().tcp_pos_world_m)
        env.step(action)
    order = [w for i, w in enumerate(headed) if i == 0 or w != headed[i - 1]]
    assert order[:len(waypoints) + 1] == [*range(len(waypoints)), 0]  # all of them, in order, then over again
    loop = headed.index(0, headed.index(len(waypoints) - 1))  # first step back at waypoint 0
    assert 60 <= loop <= 130  # measured: 106 steps (4 of them rising from the start height)
    tcps = np.array(tcps)
    z = s.table_height_m + expert.search.search_height_m
    assert tcps[0][2] < z - 0.02 and abs(tcps[10:, 2] - z).max() < 0.015
    assert np.abs(tcps[:, :2] - s.spawn_center_world_m).max() <= s.workspace_half_extent_m + 0.005


def test_missed_detections_mid_descent_still_end_in_a_grasp(env):
    """The mask blanked for 6 steps while descending (the sphere is still there): already above the last seen
    position, the expert searches (rises) until the mask is back, then descends again and grasps."""
    expert = Expert(env.config.scene)
    success, phases, in_view = run(env, expert, seed=7, blind=lambda step: 5 <= step < 11)
    assert success and not any(in_view[5:11])
    assert Phase.RETURN in phases[5:11] or Phase.SEARCH in phases[5:11]


R = 0.0137 / 2
SCENE = SceneConfig(sphere_diameter_m=0.0137, finger_open_m=0.02, max_action_step_m=0.02)
SPHERE = (0.031, -0.042, R)
RECORDED = [  # (tcp, sphere, finger gap, closed, touching, phase, action), computed by the expert before this mode
    ((0.05, -0.03, 0.08), SPHERE, 0.04, False, (False, False), Phase.APPROACH,
     [-0.8550000000000002, -0.5400000000000001, -0.5242500000000003, -1.0]),
    ((0.08, -0.01, 0.03), SPHERE, 0.04, False, (False, False), Phase.APPROACH, [-0.6615000000000002, -0.432, 1.0, -1.0]),
    ((0.033, -0.04, 0.05), SPHERE, 0.04, False, (False, False), Phase.DESCEND,
     [-0.09000000000000008, -0.09000000000000008, -1.0, -1.0]),
    ((0.0315, -0.0415, R + 0.002), SPHERE, 0.04, False, (False, False), Phase.CLOSE,
     [-0.02250000000000002, -0.02250000000000002, -0.02250000000000002, 1.0]),
    ((0.031, -0.042, 0.03), (0.031, -0.042, 0.025), 0.0137, True, (True, True), Phase.LIFT, [0.0, 0.0, 1.0, 1.0]),
    ((0.06, 0.0, 0.04), SPHERE, 0.001, True, (False, False), Phase.RESET, [0.0, 0.0, 0.4500000000000001, -1.0]),
]


def privileged(tcp, sphere=SPHERE, gap=0.04, closed=False, touching=(False, False)) -> Privileged:
    return Privileged(np.array(tcp, float), np.array(sphere, float), R, gap, closed, touching)


@pytest.mark.parametrize("case", RECORDED, ids=[c[5].name for c in RECORDED])
def test_act_without_the_flag_is_the_expert_of_before(case):
    tcp, sphere, gap, closed, touching, phase, action = case
    pv = privileged(tcp, sphere, gap, closed, touching)
    expert = Expert(SCENE)
    a, p = expert.act(pv)
    assert p == phase
    np.testing.assert_allclose(a, action, rtol=1e-12, atol=1e-15)
    # in view: the same action; it only remembers where the sphere is
    a_seen, p_seen = expert.act(pv, True)
    assert p_seen == phase and np.array_equal(a_seen, a)
    np.testing.assert_array_equal(expert.last_seen_world_m, sphere)
    # without the flag the memory is neither read nor written
    expert.act(privileged((0.15, 0.15, 0.1), sphere=(-0.1, -0.1, R)), False)
    memory = (expert.last_seen_world_m.copy(), expert.returned, expert.waypoint)
    a_again, p_again = expert.act(pv)
    assert p_again == phase and np.array_equal(a_again, a)
    assert np.array_equal(expert.last_seen_world_m, memory[0]) and (expert.returned, expert.waypoint) == memory[1:]


def test_reset_clears_the_memory():
    expert = Expert(SCENE)
    seen_at = privileged((0.0, 0.0, 0.15))
    far = privileged((0.12, 0.1, 0.12))
    assert expert.act(far, False)[1] == Phase.SEARCH  # never seen: search
    expert.act(seen_at, True)
    assert expert.last_seen_world_m is not None
    action, phase = expert.act(far, False)
    assert phase == Phase.RETURN and action[0] < 0 and action[1] < 0  # back towards where it was seen
    above_seen = privileged((SPHERE[0], SPHERE[1], 0.06))
    assert expert.act(above_seen, False)[1] == Phase.SEARCH and expert.returned  # looked there: search
    expert.reset()
    assert expert.last_seen_world_m is None and not expert.returned and expert.waypoint == 0
    assert expert.act(far, False)[1] == Phase.SEARCH


def test_out_of_view_gripper_states_are_read_from_proprioception():
    expert = Expert(SCENE)
    tcp = (0.03, -0.04, 0.03)
    lift = expert.act(privileged(tcp, gap=0.0137, closed=True), False)  # fingers stopped a sphere apart: held
    assert lift[1] == Phase.LIFT and lift[0][3] > 0 and lift[0][2] > 0
    missed = expert.act(privileged(tcp, gap=0.001, closed=True), False)  # closed on nothing: open, back off
    assert missed[1] == Phase.RESET and missed[0][3] < 0 and missed[0][2] > 0
    closing = expert.act(privileged(tcp, gap=0.035, closed=True), False)  # still closing: hold still, closed
    assert closing[1] == Phase.CLOSE and closing[0][3] > 0 and not closing[0][:3].any()
    opening = expert.act(privileged(tcp, gap=0.02, closed=False), False)  # still opening: back off
    assert opening[1] == Phase.RESET and opening[0][3] < 0


def test_search_config_is_checked_and_the_spiral_grows():
    for bad in ({"sweep_spacing_m": 0.0}, {"search_height_m": -0.1}, {"sweep_rings": 0}, {"first_look_height_m": -1}):
        with pytest.raises(ValueError):
            SearchConfig(**bad)
    # the view's offset from the TCP scales with the height: (-0.06, 0.01) at 0.22 m
    assert SearchConfig().view_offset_m == pytest.approx((-0.06, 0.01))
    assert SearchConfig(search_height_m=0.11).view_offset_m == pytest.approx((-0.03, 0.005))
    corners = spiral_corners(2)
    assert corners[0] == (0, 0) and max(max(abs(x), abs(y)) for x, y in corners) == 2
    rings = [max(abs(x), abs(y)) for x, y in corners]
    assert rings == sorted(rings)
