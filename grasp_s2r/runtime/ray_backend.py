"""``--backend ray``: episodes on Ray actors, one per node, each running a local :class:`RolloutPool`.

Design (a cluster of CPU nodes, one learner):

- within a call of :meth:`RayRunner.run` the policy is fixed and every episode is defined by its request
  (its seed), so the driver cuts the requests into *shards* (about four per actor, for balance) and hands
  them to idle actors; there is no network round trip inside a control step;
- an actor owns one :class:`RolloutPool` of ``workers_per_actor`` env processes and its own copy of the
  segmenter and controller (shipped once per :meth:`run` as checkpoint bytes through Ray's object store,
  cached by content hash), batched across that node's envs exactly as on one machine;
- finished shards come back to the driver as :class:`EpisodeRecord` lists: the driver writes them
  (``on_episode``), so no shared file system is needed and each episode is written once, atomically, at
  its own index;
- an actor that dies (node lost, ``ray.kill``, SIGKILL) loses only its shard in flight: the shard is
  queued again, a replacement actor is started, and the run finishes with every episode exactly once.

The learner (DAgger's training between rounds) stays on the driver; the new checkpoint reaches the actors
with the next :meth:`run`.
"""

from __future__ import annotations

import dataclasses
import hashlib
import logging
import math
import os
import socket
import tempfile
from collections import deque
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any, Self

from tqdm import tqdm

from grasp_s2r.control.parallax import ParallaxConfig
from grasp_s2r.expert.fsm import ExpertConfig, SearchConfig
from grasp_s2r.runtime.backend_config import RAY_INSTALL_HINT, BackendUnavailable
from grasp_s2r.runtime.masks import GroundTruthMasks, MaskSource
from grasp_s2r.runtime.pool import RolloutPool
from grasp_s2r.runtime.records import EpisodeRecord, EpisodeRequest, hand_over
from grasp_s2r.sim.config import EnvConfig

if TYPE_CHECKING:
    from grasp_s2r.control.policy import Policy

SHARDS_PER_ACTOR = 4
"""Shards per actor and run: small enough to balance uneven actors and to lose little to a dead actor."""


def import_ray() -> Any:
    try:
        import ray
    except ImportError:
        raise BackendUnavailable(f"--backend ray needs Ray, which is not installed: {RAY_INSTALL_HINT}") from None
    return ray


REACH_TIMEOUT_S = 5.0
"""How long a cluster's ``host:port`` may take to accept a TCP connection before it is called unreachable (Ray
itself retries an unreachable address for minutes, silently)."""


def check_reachable(address: str, timeout_s: float = REACH_TIMEOUT_S) -> None:
    """Raise :class:`BackendUnavailable` unless ``address``, a cluster's ``host:port``, accepts a TCP connection
    within ``timeout_s``. Other forms ("auto", "ray://...", "local") are Ray's to judge: it answers them at once."""
    host, sep, port = address.rpartition(":")
    if not sep or "://" in address or not port.isdigit():
        return
    try:
        socket.create_connection((host.strip("[]") or "localhost", int(port)), timeout=timeout_s).close()
    except OSError as e:
        raise BackendUnavailable(f"cannot reach the Ray cluster at {address!r}: {e.strerror or e} (is `ray start "
                                 "--head` running there, and is this its GCS port, 6379 by default?)") from None


def start_ray(address: str = "", n_actors: int = 0) -> bool:
    """Join the Ray cluster at ``address`` ("": start a local runtime of this machine's cores, at least
    ``n_actors``) unless Ray is already initialized in this process; True when this call started it (its caller
    shuts it down). Raises :class:`BackendUnavailable` (one line) when it cannot."""
    ray = import_ray()
    if ray.is_initialized():
        return False
    if address:
        check_reachable(address)
    kw: dict[str, Any] = {"include_dashboard": False, "log_to_driver": False, "logging_level": logging.ERROR}
    try:
        if address:
            ray.init(address=address, **kw)
        else:  # Ray lowers its workers' priority (niceness 15) by default: the env steps are the job here
            ray.init(num_cpus=max(os.cpu_count() or 1, n_actors), _system_config={"worker_niceness": 0}, **kw)
    except (ConnectionError, RuntimeError, ValueError) as e:
        where = f"the Ray cluster at {address!r}" if address else "a local Ray runtime"
        raise BackendUnavailable(f"cannot start {where}: {str(e).splitlines()[0]}") from None
    return True


@contextmanager
def ray_session(address: str = "", n_actors: int = 0) -> Iterator[None]:
    """``with ray_session(...):`` Ray started or joined (:func:`start_ray`) for the block, shut down after it if
    this started it: the commands connect first, so that an unreachable cluster writes nothing."""
    started = start_ray(address, n_actors)
    try:
        yield
    finally:
        if started:
            import_ray().shutdown()


def _policy_bytes(policy: Policy) -> bytes:
    with tempfile.TemporaryDirectory() as d:
        policy.save(Path(d) / "policy.pt")
        return (Path(d) / "policy.pt").read_bytes()


class _NodeRunner:
    """The Ray actor: one per node; a :class:`RolloutPool` and the models of the current run."""

    def __init__(self, env: dict[str, Any], expert: dict[str, Any], workers: int, torch_threads: int,
                 observable_expert: bool, search: dict[str, Any]):
        self.pool = RolloutPool(EnvConfig.from_dict(env), workers, ExpertConfig(**expert), observable_expert,
                                SearchConfig(**search))
        self.torch_threads = torch_threads
        self._cache: dict[str, Any] = {}

    def pid(self) -> int:
        return os.getpid()

    def _load(self, what: str, key: str, blob: bytes) -> Any:
        """The policy or segmenter of checkpoint bytes ``blob`` (content hash ``key``), loaded once per run."""
        if key not in self._cache:
            import torch

            torch.set_num_threads(self.torch_threads)
            self._cache = {k: v for k, v in self._cache.items() if not k.startswith(what)}
            with tempfile.TemporaryDirectory() as d:
                path = Path(d) / f"{what}.pt"
                path.write_bytes(blob)
                if what == "policy":
                    from grasp_s2r.control.policy import Policy

                    self._cache[key] = Policy.load(path)[0]
                else:
                    from grasp_s2r.runtime.masks import make_mask_source

                    self._cache[key] = make_mask_source("predicted", str(path))
        return self._cache[key]

    def run_shard(self, indexed: list[tuple[int, EpisodeRequest]], record: list[bool], policy_key: str,
                  policy_blob: bytes | None, masks_key: str, masks_blob: bytes | None,
                  max_blind_steps: int | None, parallax: dict | None = None) -> list[EpisodeRecord]:
        """Run a shard; the checkpoint bytes arrive as top-level arguments (Ray resolves those object refs)."""
        pol = self._load("policy", f"policy-{policy_key}", policy_blob) if policy_blob is not None else None
        msk = self._load("masks", f"masks-{masks_key}", masks_blob) if masks_blob is not None else GroundTruthMasks()
        recs = self.pool.run([r for _, r in indexed], pol, msk, record=lambda i: record[i], progress=False,
                             max_blind_steps=max_blind_steps,
                             parallax=None if parallax is None else ParallaxConfig(**parallax))
        for (index, _), rec in zip(indexed, recs, strict=True):
            rec.info["request_index"] = index
        return recs

    def close(self) -> None:
        self.pool.close()


class RayRunner:
    """Episode runner on Ray actors (see the module docstring); a context manager like :class:`RolloutPool`."""

    def __init__(self, env_config: EnvConfig, workers_per_actor: int = 1, expert_config: ExpertConfig | None = None,
                 address: str = "", n_actors: int = 0, torch_threads: int = 1, observable_expert: bool = False,
                 search: SearchConfig | None = None):
        self.ray = ray = import_ray()
        self.observable_expert = observable_expert
        self.search = search or SearchConfig()
        self.env_config, self.workers_per_actor, self.torch_threads = env_config, workers_per_actor, torch_threads
        self.expert_config = expert_config or ExpertConfig()
        self._started = start_ray(address, n_actors)
        nodes = sum(1 for n in ray.nodes() if n.get("Alive"))
        self.n_actors = n_actors or max(1, nodes)
        self._actor_cls = ray.remote(num_cpus=1, max_restarts=0)(_NodeRunner)
        self.actors: list[Any] = []
        self.replaced = 0
        """Actors that died and were replaced during this runner's life."""
        try:
            self.actors = [self._new_actor() for _ in range(self.n_actors)]
            ray.get([a.pid.remote() for a in self.actors])  # fail here, not mid-run, if actors cannot start
        except BaseException:
            self.close()
            raise

    def _new_actor(self) -> Any:
        import dataclasses

        return self._actor_cls.options(scheduling_strategy="SPREAD").remote(
            self.env_config.to_dict(), dataclasses.asdict(self.expert_config), self.workers_per_actor,
            self.torch_threads, self.observable_expert, dataclasses.asdict(self.search))

    def actor_pids(self) -> list[int]:
        return self.ray.get([a.pid.remote() for a in self.actors])

    def close(self) -> None:
        """Kill the actors (their env processes exit with them); shut Ray down if this runner started it."""
        for a in self.actors:
            try:
                self.ray.kill(a, no_restart=True)
            except Exception:  # noqa: BLE001, S110 - already dead
                pass
        self.actors = []
        if self._started and self.ray.is_initialized():
            self.ray.shutdown()

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _ship(self, policy: Policy | None, masks: MaskSource) -> list[Any]:
        """[policy key, policy bytes ref, masks key, masks bytes ref] (None refs: no policy; ground-truth masks)."""
        pol: tuple[str, Any] = ("", None)
        msk: tuple[str, Any] = ("", None)
        if policy is not None:
            blob = _policy_bytes(policy)
            pol = (hashlib.sha1(blob).hexdigest(), self.ray.put(blob))
        if masks.kind == "predicted":
            checkpoint = getattr(masks, "checkpoint", None)
            if checkpoint is None:
                raise ValueError("--backend ray ships the segmenter to its actors as its checkpoint file; this "
                                 "mask source has none (make it with make_mask_source)")
            blob = Path(checkpoint).read_bytes()
            msk = (hashlib.sha1(blob).hexdigest(), self.ray.put(blob))
        return [*pol, *msk]

    def run(
        self, requests: Sequence[EpisodeRequest], policy: Policy | None, masks: MaskSource, *,
        record: Callable[[int], bool] = lambda i: True,
        on_episode: Callable[[EpisodeRecord], None] | None = None,
        progress: bool = True, desc: str = "rollout", max_blind_steps: int | None = None,
        parallax: ParallaxConfig | None = None,
    ) -> list[EpisodeRecord]:
        """Same contract as :meth:`RolloutPool.run`."""
        if policy is None and any(r.actor.queries_learner for r in requests):
            raise ValueError("a policy is needed for episodes in which the learner acts")
        ray, n = self.ray, len(requests)
        models = self._ship(policy, masks)
        size = max(1, math.ceil(n / (SHARDS_PER_ACTOR * len(self.actors))))
        shards = deque(list(range(i, min(i + size, n))) for i in range(0, n, size))
        out: list[EpisodeRecord | None] = [None] * n
        inflight: dict[Any, tuple[Any, list[int]]] = {}
        idle = list(self.actors)
        bar = tqdm(total=n, desc=f"{desc} (ray, {len(self.actors)} actors)", unit="ep", disable=not progress,
                   leave=False)
        try:
            while shards or inflight:
                while shards and idle:
                    actor, shard = idle.pop(), shards.popleft()
                    ref = actor.run_shard.remote([(i, requests[i]) for i in shard], [record(i) for i in shard],
                                                 *models, max_blind_steps,
                                                 None if parallax is None else dataclasses.asdict(parallax))
                    inflight[ref] = (actor, shard)
                ready, _ = ray.wait(list(inflight), num_returns=1)
                actor, shard = inflight.pop(ready[0])
                try:
                    recs = ray.get(ready[0])
                except (ray.exceptions.RayActorError, ray.exceptions.ActorUnavailableError):
                    idle.append(self._replace(actor))
                    shards.appendleft(shard)
                    tqdm.write(f"{desc}: a Ray actor died; its {len(shard)} episode(s) run again on another actor")
                    continue
                idle.append(actor)
                for rec in recs:
                    i = rec.info["request_index"]
                    if out[i] is not None:  # cannot happen: a shard's results arrive once; kept as a guard
                        continue
                    out[i] = rec
                    hand_over(rec, on_episode)
                    bar.update(1)
        finally:
            bar.close()
        return [r for r in out if r is not None]

    def _replace(self, dead: Any) -> Any:
        if self.replaced >= 3 * self.n_actors:
            raise BackendUnavailable(f"{self.replaced} Ray actors died in this run; giving up (see 'ray status')")
        self.replaced += 1
        self.actors.remove(dead)
        new = self._new_actor()
        self.actors.append(new)
        return new
