"""Batched closed-loop rollouts: env worker processes + one predictor (the GA3C idea).

Each worker process owns one :class:`GraspEnv` (its own PyBullet DIRECT client, created inside the
process; the "spawn" start method, never fork) and the FSM expert. Per control step every worker
sends its observation (RGB, ground-truth mask, proprio) and the expert's label, computed there from
privileged state. The main process batches the observations of all active workers into one
segmenter call and one controller call on the device, mixes learner and expert actions with
probability β (the expert's), and sends each worker the action to execute.

This module is what both ``grasp-s2r dagger`` (data, per-round evaluation) and ``grasp-s2r eval``
run. It does not import torch: workers start fast and stay small.
"""

from __future__ import annotations

import dataclasses
import multiprocessing as mp
import time
import traceback
from collections import deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol, Self

import numpy as np
from tqdm import tqdm

from grasp_s2r.agent import SegmenterMasks, learner_step, reads_memory
from grasp_s2r.control.conditions import Condition, EpisodeHooks
from grasp_s2r.control.memory import EpisodeMemory
from grasp_s2r.expert.fsm import Expert, ExpertConfig
from grasp_s2r.interrupts import children_ignore_interrupts, ignore_interrupts_in_child
from grasp_s2r.sim.config import EnvConfig
from grasp_s2r.sim.env import ACTION_DIM, PROPRIO_NAMES, STATE_NAMES, GraspEnv

if TYPE_CHECKING:
    from grasp_s2r.control.policy import Policy

_MIX_STREAM, _HOOK_STREAM, _DROPOUT_STREAM = 1, 2, 5
"""Per-episode random streams: ``default_rng([seed, stream])`` (mixture coin; condition hooks; mask dropout)."""


def mix_actions(
    expert: np.ndarray, learner: np.ndarray | None, beta: float, rng: np.random.Generator,
) -> tuple[np.ndarray, np.ndarray]:
    """DAgger's mixture policy for N states: each row is the expert's action with probability ``beta``.

    expert, learner: (N, 4); learner may be None only when ``beta >= 1``. Returns (executed (N, 4),
    from_expert bool (N,)). beta = 1 executes only the expert, beta = 0 only the learner.
    """
    expert = np.asarray(expert, dtype=float).reshape(-1, ACTION_DIM)
    from_expert = rng.random(len(expert)) < beta
    if learner is None:
        if not from_expert.all():
            raise ValueError(f"a learner action is needed when beta < 1 (beta = {beta})")
        return expert.copy(), from_expert
    learner = np.asarray(learner, dtype=float).reshape(-1, ACTION_DIM)
    return np.where(from_expert[:, None], expert, learner), from_expert


@dataclass(frozen=True)
class EpisodeRequest:
    """One episode to run."""

    seed: int
    """Episode seed: the env's randomization and both per-episode random streams derive from it."""
    beta: float = 0.0
    """Probability that the expert's action is executed at a step (1: expert only, 0: learner only)."""
    condition: Condition = field(default_factory=Condition)
    """Visual / dynamics condition applied in the worker."""
    blind_start_steps: int = 0
    """The controller's input mask is blank for this many first steps (a simulated missed detection, for
    training); the expert, its labels and the recorded ground truth are unaffected."""


@dataclass
class EpisodeRecord:
    """A finished episode: summary, and the per-step arrays when they were recorded."""

    request: EpisodeRequest
    success: bool
    length: int
    """Number of actions taken (labelled steps)."""
    info: dict[str, Any]
    """Seed, success, length, condition, beta, randomization params, condition events."""
    arrays: dict[str, np.ndarray]
    """Time-first, T = length: rgb uint8 (T, H, W, 3), sphere_mask bool (T, H, W) (ground truth of the
    image shown), input_mask bool (T, H, W) (what the controller saw), proprio float32 (T, 5),
    action float32 (T, 4) (the expert's label), learner_action float32 (T, 4) (NaN where not
    queried), executed_action float32 (T, 4), from_expert bool (T,), phase int8 (T,),
    state float64 (T, 36). Empty when not recorded."""


class MaskSource(Protocol):
    """Maps a batch of camera images to the controller's input masks."""

    kind: str
    """"gt" or "predicted"."""

    def __call__(self, rgb: np.ndarray, gt_mask: np.ndarray) -> np.ndarray:
        """rgb uint8 (N, H, W, 3), gt_mask bool (N, H, W) -> bool (N, H, W)."""
        ...


class GroundTruthMasks:
    """The simulator's (or the composite's) ground-truth sphere mask."""

    kind = "gt"

    def __call__(self, rgb: np.ndarray, gt_mask: np.ndarray) -> np.ndarray:
        return np.asarray(gt_mask, dtype=bool)


class PredictedMasks(SegmenterMasks):
    """The segmenter's masks (``agent.SegmenterMasks``): one batched forward pass over all workers' images."""

    def __init__(self, segmenter: Any, checkpoint: Path | None = None):
        super().__init__(segmenter)
        self.checkpoint = checkpoint
        """The file the segmenter was read from (what a remote backend ships to its actors)."""


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
    rgb, gt = hooks.observe(result.frame)
    return {
        "rgb": rgb, "sphere_mask": gt, "gripper_mask": result.frame.gripper_mask, "proprio": result.proprio,
        **labeller.label(env), "state": env.get_state(), "success": bool(result.success),
        "done": bool(result.terminated or result.truncated),
    }


class WorkerError(RuntimeError):
    """An env worker process failed (its traceback is the message) or died."""


def _worker(conn: Any, env_config: dict[str, Any], expert_config: dict[str, Any], observable: bool) -> None:
    """Env worker loop: ("reset", seed, condition dict) | ("step", action, learner saw the sphere) | ("close",).

    Ctrl-C (or a SIGTERM) reaches the whole process group: the worker ignores both and leaves when the
    main process closes its pipe (or dies), so an interrupt is handled in one place and leaves no orphan.
    An exception is sent to the main process (which raises it there) and ends the worker.
    """
    ignore_interrupts_in_child()
    env: GraspEnv | None = None
    hooks: EpisodeHooks | None = None
    try:
        env = GraspEnv(EnvConfig.from_dict(env_config))
        labeller = _Labeller(Expert(env.config.scene, ExpertConfig(**expert_config)), observable)
        while True:
            try:
                msg = conn.recv()
            except (EOFError, OSError):  # the main process closed the pipe or died: leave quietly
                return
            if msg[0] == "reset":
                result = env.reset(msg[1])
                hooks = EpisodeHooks(env, Condition.from_dict(msg[2]), np.random.default_rng([msg[1], _HOOK_STREAM]))
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


SUMMARY_KEYS = ("seed", "success", "length", "request_index", "condition")
"""What a record keeps of its info once ``on_episode`` has taken the episode."""


def hand_over(rec: EpisodeRecord, on_episode: Callable[[EpisodeRecord], None] | None) -> None:
    """Give a finished episode to ``on_episode`` (e.g. to write it); the record then keeps only its summary, so that
    a long run holds only the episodes in flight. Without ``on_episode`` the record is kept whole."""
    if on_episode is not None:
        on_episode(rec)
        rec.arrays, rec.info = {}, {k: rec.info[k] for k in SUMMARY_KEYS}
_STEP_KEYS = ("rgb", "sphere_mask", "gripper_mask", "input_mask", "proprio", "action", "learner_action", "executed_action",
              "from_expert", "phase", "state")
_DTYPES = {"rgb": np.uint8, "sphere_mask": bool, "gripper_mask": bool, "input_mask": bool, "proprio": np.float32, "action": np.float32,
           "learner_action": np.float32, "executed_action": np.float32, "from_expert": bool, "phase": np.int8,
           "state": np.float64}


def rollout_features(env: EnvConfig) -> dict[str, dict[str, Any]]:
    """Feature schema (per-step dtype and shape) of a recorded episode, for ``init_dataset``."""
    hw = [env.camera.height_px, env.camera.width_px]
    shapes = {"rgb": [*hw, 3], "sphere_mask": hw, "gripper_mask": hw, "input_mask": hw, "proprio": [len(PROPRIO_NAMES)],
              "action": [ACTION_DIM], "learner_action": [ACTION_DIM], "executed_action": [ACTION_DIM],
              "from_expert": [], "phase": [], "state": [len(STATE_NAMES)]}
    return {k: {"dtype": np.dtype(_DTYPES[k]).name, "shape": shapes[k]} for k in _STEP_KEYS}


class VisionUnavailable(RuntimeError):
    """Predicted masks were asked for but no segmenter can be loaded."""


def make_mask_source(kind: str, vision_checkpoint: str = "", device: Any = None) -> MaskSource:
    """``"gt"`` -> ground truth; ``"predicted"`` -> the segmenter of ``vision_checkpoint`` (or the packaged one)."""
    if kind == "gt":
        return GroundTruthMasks()
    if kind != "predicted":
        raise ValueError(f"masks must be 'predicted' or 'gt', got {kind!r}")
    try:
        from grasp_s2r.vision.segmenter import Segmenter, default_checkpoint_path
    except ImportError as e:
        raise VisionUnavailable(f"the vision module cannot be imported ({e}); use --masks gt") from None
    path = Path(vision_checkpoint) if vision_checkpoint else default_checkpoint_path()
    if not path.is_file():
        raise VisionUnavailable(
            f"no segmenter checkpoint at {path}: train one with 'grasp-s2r train-vision' and pass --vision, "
            "or use --masks gt")
    try:
        return PredictedMasks(Segmenter.load(path, device=device), path)
    except ValueError as e:  # the segmenter's CheckpointError
        raise VisionUnavailable(str(e)) from None


def _blanked_steps(request: EpisodeRequest) -> frozenset[int]:
    """Steps of an episode whose controller input mask is blanked (drawn from its seed: the same on every run)."""
    steps = set(range(request.blind_start_steps))
    lo, hi = request.condition.dropout_steps
    if hi > 0:
        rng = np.random.default_rng([request.seed, _DROPOUT_STREAM])
        start = int(rng.integers(request.condition.dropout_start_step[0], request.condition.dropout_start_step[1] + 1))
        steps |= set(range(start, start + int(rng.integers(lo, hi + 1))))
    return frozenset(steps)


class _Active:
    """Book-keeping of the episode running on one worker."""

    def __init__(self, request: EpisodeRequest, index: int, record: bool):
        self.request, self.index, self.record = request, index, record
        self.rng = np.random.default_rng([request.seed, _MIX_STREAM])
        self.steps: dict[str, list[np.ndarray]] = {k: [] for k in _STEP_KEYS}
        self.length = 0
        self.n_expert = 0
        self.blind_steps = 0
        """Consecutive steps with an empty controller input mask."""
        self.blank_steps = _blanked_steps(request)
        """Steps whose controller input mask is blank: the blind start, then the condition's dropout."""
        self.memory = EpisodeMemory()
        """The controller's memory of this episode (read only by a controller with memory)."""
        self.params: dict[str, Any] = {}


class RolloutPool:
    """K env worker processes; ``run(requests, ...)`` plays episodes with batched inference.

    Use as a context manager (workers are stopped on exit; they also exit if this process dies).
    This is the one episode loop of the package: ``collect`` (expert only, beta = 1), DAgger's rollouts
    and evaluations, and ``eval`` all run through it, locally or inside a Ray actor
    (:mod:`grasp_s2r.control.ray_backend`).
    """

    def __init__(self, env_config: EnvConfig, n_workers: int, expert_config: ExpertConfig | None = None,
                 observable_expert: bool = False):
        """``observable_expert``: label states where the learner does not see the sphere as an agent without its
        position would act (return to where it was seen, search; see ``_Labeller``); False: privileged labels."""
        if n_workers < 1:
            raise ValueError(f"n_workers must be positive, got {n_workers}")
        self.env_config = env_config
        self.expert_config = expert_config or ExpertConfig()
        self.observable_expert = observable_expert
        ctx = mp.get_context("spawn")
        self.conns, self.procs = [], []
        try:
            with children_ignore_interrupts():
                for _ in range(n_workers):
                    parent, child = ctx.Pipe()
                    proc = ctx.Process(target=_worker, daemon=True,
                                       args=(child, env_config.to_dict(), dataclasses.asdict(self.expert_config),
                                             observable_expert))
                    proc.start()
                    child.close()
                    self.conns.append(parent)
                    self.procs.append(proc)
        except BaseException:
            self.close()
            raise

    @property
    def n_workers(self) -> int:
        return len(self.procs)

    def close(self, timeout_s: float = 2.0) -> None:
        """Stop the workers: ask, wait up to ``timeout_s`` in all, then kill what is left."""
        for conn in self.conns:
            try:
                conn.send(("close",))
                conn.close()
            except (BrokenPipeError, OSError):
                pass
        deadline = time.monotonic() + timeout_s
        for proc in self.procs:
            proc.join(timeout=max(0.0, deadline - time.monotonic()))
        for proc in self.procs:
            if proc.is_alive():
                proc.kill()
                proc.join(timeout=1.0)
        self.conns, self.procs = [], []

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def run(
        self, requests: Sequence[EpisodeRequest], policy: Policy | None, masks: MaskSource, *,
        record: Callable[[int], bool] = lambda i: True,
        on_episode: Callable[[EpisodeRecord], None] | None = None,
        progress: bool = True, desc: str = "rollout", max_blind_steps: int | None = None,
    ) -> list[EpisodeRecord]:
        """Play ``requests`` (in order of start) and return their records in request order.

        ``record(i)``: whether request i keeps its per-step arrays. ``on_episode`` is called as each
        episode finishes (e.g. to write it to disk); its records are then returned without their arrays,
        so that a long run holds only the episodes in flight.
        ``max_blind_steps``: end an episode (as a failure, ``info["stopped_blind"]``) once the
        controller's input mask has been empty for more than this many consecutive steps.
        """
        if policy is None and any(r.beta < 1 for r in requests):
            raise ValueError("a policy is needed for episodes with beta < 1")
        with_memory = reads_memory(policy)  # the memory is kept only for a controller that reads it
        queue = deque(enumerate(requests))
        active: dict[int, _Active] = {}
        obs: dict[int, dict[str, Any]] = {}
        out: list[EpisodeRecord | None] = [None] * len(requests)
        bar = tqdm(total=len(requests), desc=desc, unit="ep", disable=not progress, leave=False)

        def start(worker: int) -> None:
            index, req = queue.popleft()
            active[worker] = _Active(req, index, record(index))
            self.conns[worker].send(("reset", req.seed, req.condition.to_dict()))

        for w in range(min(len(self.conns), len(queue))):
            start(w)
        for w in list(active):
            obs[w] = self._recv(w)
            active[w].params = obs[w].pop("params")
        while active:
            ids = sorted(active)
            rgb = np.stack([obs[w]["rgb"] for w in ids])
            gt = np.stack([obs[w]["sphere_mask"] for w in ids])
            proprio = np.stack([obs[w]["proprio"] for w in ids])
            # the learner's step, the one GraspAgent runs (agent.learner_step): one batched segmenter call (if
            # predicted) and one controller call for all workers
            blank = np.array([active[w].length in active[w].blank_steps for w in ids])
            query = [j for j, w in enumerate(ids) if active[w].request.beta < 1]
            memory = np.stack([active[w].memory.features() for w in ids]) if with_memory else None
            step = learner_step(masks, policy, rgb, proprio, gt_mask=gt, blank=blank, query=query, memory=memory)
            input_masks, learner = step.masks, step.actions
            stopped = set()
            for j, w in enumerate(ids):
                ep, o = active[w], obs[w]
                ep.blind_steps = 0 if input_masks[j].any() else ep.blind_steps + 1
                if max_blind_steps is not None and ep.blind_steps > max_blind_steps:
                    stopped.add(w)  # this state is neither labelled nor acted on
                    continue
                saw = bool(input_masks[j].any())
                if "action_unseen" in o and not saw:  # observable expert: the label of a state without the sphere
                    o["action"], o["phase"] = o["action_unseen"], o["phase_unseen"]
                lrn = None if ep.request.beta >= 1 else learner[j]
                executed, from_expert = mix_actions(o["action"], lrn, ep.request.beta, ep.rng)
                if with_memory:
                    ep.memory.update(input_masks[j], o["proprio"], executed[0])
                ep.length += 1
                ep.n_expert += int(from_expert[0])
                if ep.record:
                    step = {**o, "input_mask": input_masks[j], "learner_action": learner[j],
                            "executed_action": executed[0], "from_expert": from_expert[0]}
                    for k in _STEP_KEYS:
                        ep.steps[k].append(step[k])
                self.conns[w].send(("step", executed[0], saw))
            restarted = []
            for w in ids:
                if w in stopped:
                    obs[w] = {**obs[w], "success": False, "stopped_blind": True}
                else:
                    obs[w] = self._recv(w)
                    if not obs[w]["done"]:
                        continue
                rec = self._finish(active.pop(w), obs[w])
                out[rec.info["request_index"]] = rec
                hand_over(rec, on_episode)
                bar.update(1)
                if queue:
                    start(w)
                    restarted.append(w)
            for w in restarted:
                obs[w] = self._recv(w)
                active[w].params = obs[w].pop("params")
        bar.close()
        return [r for r in out if r is not None]

    def _recv(self, w: int) -> dict[str, Any]:
        """Worker ``w``'s reply; its exception is raised here (chained to a WorkerError holding its traceback)."""
        try:
            reply = self.conns[w].recv()
        except (EOFError, OSError):
            self.procs[w].join(timeout=1.0)
            raise WorkerError(f"env worker {w} died (exit code {self.procs[w].exitcode})") from None
        if "worker_error" in reply:
            raise reply["worker_error"] from WorkerError(f"in env worker {w}:\n{reply['traceback']}")
        return reply

    @staticmethod
    def _finish(ep: _Active, last: dict[str, Any]) -> EpisodeRecord:
        req = ep.request
        info = {
            "seed": req.seed, "success": last["success"], "length": ep.length, "beta": req.beta,
            "condition": req.condition.name, "expert_steps": ep.n_expert, "params": ep.params,
            "events": last.get("events", []), "request_index": ep.index,
            "final_sphere_pos_world_m": last.get("final_sphere_pos_world_m"),
            "stopped_blind": bool(last.get("stopped_blind", False)),
        }
        arrays = {}
        if ep.record:
            arrays = {k: np.asarray(np.stack(v), dtype=_DTYPES[k]) for k, v in ep.steps.items()}
        return EpisodeRecord(request=req, success=last["success"], length=ep.length, info=info, arrays=arrays)
