"""An env worker process: one :class:`GraspEnv` and the FSM expert, driven over a pipe by :class:`RolloutPool`.

Per control step the worker sends its observation (RGB, ground-truth mask, proprio) and the expert's label,
computed here from privileged state; it executes the action the main process sends back.
"""

from __future__ import annotations

import traceback
from typing import Any

import numpy as np

from grasp_s2r.expert.fsm import Expert, ExpertConfig, SearchConfig
from grasp_s2r.interrupts import ignore_interrupts_in_child
from grasp_s2r.runtime.conditions import Condition
from grasp_s2r.runtime.episode_hooks import EpisodeHooks
from grasp_s2r.runtime.records import HOOK_STREAM
from grasp_s2r.sim.camera import Frame
from grasp_s2r.sim.config import EnvConfig
from grasp_s2r.sim.env import GraspEnv


def _expert_memory(expert: Expert) -> tuple[Any, ...]:
    return (None if expert.last_seen_world_m is None else expert.last_seen_world_m.copy(), expert.returned,
            expert.waypoint)


def _set_expert_memory(expert: Expert, memory: tuple[Any, ...]) -> None:
    expert.last_seen_world_m, expert.returned, expert.waypoint = memory


class _Labeller:
    """The expert's label of a worker's current state.

    Privileged (``observable=False``): the expert always knows where the sphere is. Observable: where the learner
    does not see the sphere (its input mask is empty: out of view, a missed detection, a blanked step), the expert
    acts as an agent without that knowledge could (go back to where it was last seen, then search). Whether the
    learner sees it is known only in the main process, after segmentation; so the worker labels both cases and
    keeps the expert's memory of each, and the next "step" message says which one happened.
    """

    def __init__(self, expert: Expert, observable: bool):
        self.expert, self.observable = expert, observable
        self.pending: tuple[tuple[Any, ...], tuple[Any, ...]] | None = None

    def reset(self) -> None:
        self.expert.reset()
        self.pending = None

    def commit(self, learner_saw: bool | None) -> None:
        if self.pending is not None and learner_saw is not None:
            _set_expert_memory(self.expert, self.pending[0] if learner_saw else self.pending[1])
        self.pending = None

    def label(self, env: GraspEnv) -> dict[str, Any]:
        pv = env.privileged()
        if not self.observable:
            action, phase = self.expert.act(pv)
            return {"action": action, "phase": int(phase)}
        before = _expert_memory(self.expert)
        seen, seen_phase = self.expert.act(pv, True)
        after_seen = _expert_memory(self.expert)
        _set_expert_memory(self.expert, before)
        unseen, unseen_phase = self.expert.act(pv, False)
        self.pending = (after_seen, _expert_memory(self.expert))
        return {"action": seen, "phase": int(seen_phase), "action_unseen": unseen, "phase_unseen": int(unseen_phase)}


def _observation(env: GraspEnv, labeller: _Labeller, hooks: EpisodeHooks, result: Any) -> dict[str, Any]:
    """The step's observation: the view's rgb and masks; with a margin (``GraspEnv.set_view_margin``) also the
    whole frame's rgb, ``segmenter_rgb``, what a segmenter trained with that margin reads."""
    frame = result.frame
    rgb, gt = hooks.observe(frame)
    view = Frame(rgb=rgb, sphere_mask=gt, gripper_mask=frame.gripper_mask, margin_px=frame.margin_px).view()
    wide = {"segmenter_rgb": rgb} if frame.margin_px else {}
    return {
        "rgb": view.rgb, "sphere_mask": view.sphere_mask, "gripper_mask": view.gripper_mask,
        "proprio": result.proprio, **wide,
        **labeller.label(env), "state": env.get_state(), "success": bool(result.success),
        "done": bool(result.terminated or result.truncated),
    }


class WorkerError(RuntimeError):
    """An env worker process failed (its traceback is the message) or died."""


def worker_main(conn: Any, env_config: dict[str, Any], expert_config: dict[str, Any], observable: bool,
                search: dict[str, Any] | None = None) -> None:
    """Env worker loop: ("reset", seed, condition dict, margin px) | ("step", action, learner saw the sphere) |
    ("close",). The margin: pixels rendered beyond each edge of the view (``GraspEnv.set_view_margin``), for a
    segmenter trained with one.

    Ctrl-C (or a SIGTERM) reaches the whole process group: the worker ignores both and leaves when the
    main process closes its pipe (or dies), so an interrupt is handled in one place and leaves no orphan.
    An exception is sent to the main process (which raises it there) and ends the worker.
    """
    ignore_interrupts_in_child()
    env: GraspEnv | None = None
    hooks: EpisodeHooks | None = None
    try:
        env = GraspEnv(EnvConfig.from_dict(env_config))
        labeller = _Labeller(Expert(env.config.scene, ExpertConfig(**expert_config),
                                    SearchConfig(**(search or {}))), observable)
        while True:
            try:
                msg = conn.recv()
            except (EOFError, OSError):  # the main process closed the pipe or died: leave quietly
                return
            if msg[0] == "reset":
                env.set_view_margin(msg[3])
                result = env.reset(msg[1])
                hooks = EpisodeHooks(env, Condition.from_dict(msg[2]), np.random.default_rng([msg[1], HOOK_STREAM]))
                result = hooks.on_reset() or result  # a condition that changed the scene re-renders step 0
                labeller.reset()
                obs = _observation(env, labeller, hooks, result)
                obs["params"] = env.params.to_dict()
            elif msg[0] == "step":
                labeller.commit(msg[2])
                result = env.step(hooks.before_step(msg[1]))
                obs = _observation(env, labeller, hooks, result)
                if obs["done"]:
                    obs["events"] = hooks.events
                    obs["final_sphere_pos_world_m"] = env.sphere_pos_world_m().tolist()
            else:
                return
            try:
                conn.send(obs)
            except (BrokenPipeError, OSError):
                return
    except Exception as e:  # noqa: BLE001 - every failure goes to the main process, which raises it
        try:
            conn.send({"worker_error": e, "traceback": traceback.format_exc()})
        except Exception:  # noqa: BLE001 - unpicklable exception, or the pipe is gone
            try:
                conn.send({"worker_error": WorkerError(traceback.format_exc()), "traceback": ""})
            except Exception:  # noqa: BLE001, S110
                pass
    finally:
        if env is not None:
            env.close()

