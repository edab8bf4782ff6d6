"""Batched closed-loop rollouts: env worker processes + one predictor (the GA3C idea).

Each worker process (:mod:`~grasp_s2r.runtime.worker`) owns one :class:`GraspEnv` (its own PyBullet DIRECT client,
created inside the process; the "spawn" start method, never fork) and the FSM expert. Per control step every worker
sends its observation (RGB, ground-truth mask, proprio) and the expert's label, computed there from
privileged state. The main process batches the observations of all active workers into one
segmenter call and one controller call on the device, asks each episode's actor (the learner, the expert, or
DAgger's mixture: ``runtime.records.Actor``) which action to execute, and sends it to the worker.

This is the package's one episode loop: ``collect`` (expert only), ``grasp-s2r dagger`` (data, per-round
evaluation) and ``grasp-s2r eval`` run it, locally or inside a Ray actor. It does not import torch: workers start fast and stay small.
"""

from __future__ import annotations

import dataclasses
import multiprocessing as mp
import time
from collections import deque
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any, Self

import numpy as np
from tqdm import tqdm

from grasp_s2r.control.memory import EpisodeMemory
from grasp_s2r.control.parallax import ParallaxConfig, ParallaxFilter
from grasp_s2r.control.wrist_geometry import PreviousFrame
from grasp_s2r.expert.fsm import ExpertConfig, SearchConfig
from grasp_s2r.interrupts import children_ignore_interrupts
from grasp_s2r.learner import learner_step, reads_gripper, reads_memory
from grasp_s2r.runtime.masks import MaskSource
from grasp_s2r.runtime.records import (
    DROPOUT_STREAM,
    STEP_DTYPES,
    STEP_KEYS,
    EpisodeRecord,
    EpisodeRequest,
    hand_over,
)
from grasp_s2r.runtime.worker import WorkerError, worker_main
from grasp_s2r.sim.config import EnvConfig

if TYPE_CHECKING:
    from grasp_s2r.control.policy import Policy


def dropout_steps(request: EpisodeRequest) -> frozenset[int]:
    """Steps of an episode whose controller input mask the condition's dropout blanks (drawn from its seed: the same
    on every run)."""
    lo, hi = request.condition.dropout_steps
    if hi <= 0:
        return frozenset()
    rng = np.random.default_rng([request.seed, DROPOUT_STREAM])
    start = int(rng.integers(request.condition.dropout_start_step[0], request.condition.dropout_start_step[1] + 1))
    return frozenset(range(start, start + int(rng.integers(lo, hi + 1))))


class _Active:
    """Book-keeping of the episode running on one worker."""

    def __init__(self, request: EpisodeRequest, index: int, record: bool, parallax: ParallaxFilter | None = None):
        self.request, self.index, self.record = request, index, record
        self.actor = request.actor.episode(request.seed)
        """Who acts at each step of this episode."""
        self.steps: dict[str, list[np.ndarray]] = {k: [] for k in STEP_KEYS}
        self.length = 0
        self.n_expert = 0
        self.blind_steps = 0
        """Consecutive steps with an empty controller input mask."""
        self.dropout_steps = dropout_steps(request)
        """Steps whose controller input mask the condition's dropout blanks."""
        self.memory = EpisodeMemory()
        """The controller's memory of this episode (read only by a controller with memory)."""
        self.params: dict[str, Any] = {}
        self.parallax = parallax
        """The filter of far-away detections (``control.parallax``), or None."""
        self.previous: PreviousFrame | None = None
        """The episode's previous frame, for a segmenter that reads it (``control.wrist_geometry``), or None."""


class RolloutPool:
    """K env worker processes; ``run(requests, ...)`` plays episodes with batched inference.

    Use as a context manager (workers are stopped on exit; they also exit if this process dies).
    This is the one episode loop of the package: ``collect`` (expert only, beta = 1), DAgger's rollouts
    and evaluations, and ``eval`` all run through it, locally or inside a Ray actor
    (:mod:`grasp_s2r.runtime.ray_backend`).
    """

    def __init__(self, env_config: EnvConfig, n_workers: int, expert_config: ExpertConfig | None = None,
                 observable_expert: bool = False, search: SearchConfig | None = None):
        """``observable_expert``: label states where the learner does not see the sphere as an agent without its
        position would act (return to where it was seen, search; see ``_Labeller``); False: privileged labels.
        ``search``: that agent's search (default :class:`SearchConfig`)."""
        if n_workers < 1:
            raise ValueError(f"n_workers must be positive, got {n_workers}")
        self.env_config = env_config
        self.expert_config = expert_config or ExpertConfig()
        self.observable_expert = observable_expert
        self.search = search or SearchConfig()
        ctx = mp.get_context("spawn")
        self.conns, self.procs = [], []
        try:
            with children_ignore_interrupts():
                for _ in range(n_workers):
                    parent, child = ctx.Pipe()
                    proc = ctx.Process(target=worker_main, daemon=True,
                                       args=(child, env_config.to_dict(), dataclasses.asdict(self.expert_config),
                                             observable_expert, dataclasses.asdict(self.search)))
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
        parallax: ParallaxConfig | None = None,
    ) -> list[EpisodeRecord]:
        """Play ``requests`` (in order of start) and return their records in request order.

        ``record(i)``: whether request i keeps its per-step arrays. ``on_episode`` is called as each
        episode finishes (e.g. to write it to disk); its records are then returned without their arrays,
        so that a long run holds only the episodes in flight.
        ``max_blind_steps``: end an episode (as a failure, ``info["stopped_blind"]``) once the
        controller's input mask has been empty for more than this many consecutive steps.
        ``parallax``: the controller's input masks lose the detections that stay put as the camera moves
        (:class:`~grasp_s2r.control.parallax.ParallaxFilter`, one per episode).

        A mask source whose ``margin_px`` > 0 (a segmenter trained with ``train-vision --margin-px``) gets frames
        rendered that far beyond each edge of the view (the conditions applied to all of it) and returns the view's
        masks; everything else (the controller, the filter, the records) sees the view, as without a margin.
        """
        if policy is None and any(r.actor.queries_learner for r in requests):
            raise ValueError("a policy is needed for episodes in which the learner acts")
        with_memory = reads_memory(policy)  # the memory is kept only for a controller that reads it
        with_fingers = reads_gripper(policy)  # and the fingers' masks stacked only for one that reads them
        reads_previous = bool(getattr(masks, "reads_previous", False))  # a segmenter that reads the previous frame
        margin_px = int(getattr(masks, "margin_px", 0))  # a segmenter that reads the view and its margins
        segmenter_camera = self.env_config.camera.widened(margin_px)
        segmenter_rgb = "segmenter_rgb" if margin_px else "rgb"  # the observation's image the mask source reads
        queue = deque(enumerate(requests))
        active: dict[int, _Active] = {}
        obs: dict[int, dict[str, Any]] = {}
        out: list[EpisodeRecord | None] = [None] * len(requests)
        bar = tqdm(total=len(requests), desc=desc, unit="ep", disable=not progress, leave=False)

        def start(worker: int) -> None:
            index, req = queue.popleft()
            far = None if parallax is None else ParallaxFilter(self.env_config.scene, self.env_config.camera, parallax)
            active[worker] = _Active(req, index, record(index), far)
            if reads_previous:
                active[worker].previous = PreviousFrame(segmenter_camera)
            self.conns[worker].send(("reset", req.seed, req.condition.to_dict(), margin_px))

        for w in range(min(len(self.conns), len(queue))):
            start(w)
        for w in list(active):
            obs[w] = self._recv(w)
            active[w].params = obs[w].pop("params")
        while active:
            ids = sorted(active)
            rgb = np.stack([obs[w][segmenter_rgb] for w in ids])
            gt = np.stack([obs[w]["sphere_mask"] for w in ids])
            proprio = np.stack([obs[w]["proprio"] for w in ids])
            # the learner's step, the one GraspAgent runs (learner.learner_step): one batched segmenter call (if
            # predicted) and one controller call for all workers
            blank = np.array([active[w].actor.blanks(active[w].length) or active[w].length in active[w].dropout_steps
                              for w in ids])
            query = [j for j, w in enumerate(ids) if active[w].request.actor.queries_learner]
            memory = np.stack([active[w].memory.features() for w in ids]) if with_memory else None
            gripper = np.stack([obs[w]["gripper_mask"] for w in ids]) if with_fingers else None
            filters = [None if active[w].parallax is None else active[w].parallax.filter for w in ids]
            previous = np.stack([active[w].previous.warped(rgb[j], proprio[j]) for j, w in enumerate(ids)]) \
                if reads_previous else None
            step = learner_step(masks, policy, rgb, proprio, gt_mask=gt, blank=blank, query=query, memory=memory,
                                gt_gripper=gripper, mask_filters=filters, previous=previous)
            input_masks, learner = step.masks, step.actions
            stopped = set()
            for j, w in enumerate(ids):
                ep, o = active[w], obs[w]
                ep.blind_steps = 0 if input_masks[j].any() else ep.blind_steps + 1
                if max_blind_steps is not None and ep.blind_steps > max_blind_steps:
                    stopped.add(w)  # this state is neither labelled nor acted on
                    continue
                saw = bool(input_masks[j].any() if self.search.learner_sees == "mask"
                           else (input_masks[j] & o["sphere_mask"]).any())
                if "action_unseen" in o and not saw:  # observable expert: the label of a state without the sphere
                    o["action"], o["phase"] = o["action_unseen"], o["phase_unseen"]
                lrn = learner[j] if ep.request.actor.queries_learner else None
                override = None if ep.parallax is None or lrn is None else ep.parallax.action(o["proprio"], lrn)
                if override is not None:  # the low look (control.look) or the rolling lead (control.lead)
                    lrn = override
                executed, from_expert = ep.actor.choose(o["action"], lrn)
                if with_memory:
                    ep.memory.update(input_masks[j], o["proprio"], executed)
                ep.length += 1
                ep.n_expert += int(from_expert)
                if ep.record:
                    step = {**o, "input_mask": input_masks[j], "learner_action": learner[j],
                            "executed_action": executed, "from_expert": from_expert}
                    for k in STEP_KEYS:
                        ep.steps[k].append(step[k])
                self.conns[w].send(("step", executed, saw))
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
            "seed": req.seed, "success": last["success"], "length": ep.length, "beta": req.actor.expert_share,
            "condition": req.condition.name, "expert_steps": ep.n_expert, "params": ep.params,
            "events": last.get("events", []), "request_index": ep.index,
            "final_sphere_pos_world_m": last.get("final_sphere_pos_world_m"),
            "stopped_blind": bool(last.get("stopped_blind", False)),
        }
        arrays = {}
        if ep.record:
            arrays = {k: np.asarray(np.stack(v), dtype=STEP_DTYPES[k]) for k, v in ep.steps.items()}
        return EpisodeRecord(request=req, success=last["success"], length=ep.length, info=info, arrays=arrays)

