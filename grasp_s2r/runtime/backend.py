"""Where episodes run: ``--backend local`` (one :class:`RolloutPool` of worker processes on this machine) or
``--backend ray`` (one Ray actor per node, each running its own :class:`RolloutPool`).

Both are an *episode runner*: a context manager with ``run(requests, policy, masks, ...)`` returning one
:class:`~grasp_s2r.runtime.pool.EpisodeRecord` per request, in request order, and calling
``on_episode`` on this process as each one finishes. ``collect``, ``dagger`` and ``eval`` only see that
interface, so Ray is added once, here and in :mod:`grasp_s2r.runtime.ray_backend`.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager, nullcontext
from pathlib import Path
from typing import TYPE_CHECKING, Protocol, Self

from grasp_s2r.artifacts import ArtifactFolder
from grasp_s2r.expert.fsm import ExpertConfig, SearchConfig
from grasp_s2r.runtime.backend_config import (  # noqa: F401 - re-exported: the public names
    BACKENDS,
    RAY_INSTALL_HINT,
    Backend,
    BackendConfig,
    BackendUnavailable,
)
from grasp_s2r.runtime.masks import MaskSource
from grasp_s2r.runtime.pool import RolloutPool
from grasp_s2r.runtime.records import EpisodeRecord, EpisodeRequest
from grasp_s2r.sim.config import EnvConfig

if TYPE_CHECKING:
    from grasp_s2r.control.parallax import ParallaxConfig
    from grasp_s2r.control.policy import Policy

class EpisodeRunner(Protocol):
    """What ``collect``, ``dagger`` and ``eval`` run episodes on."""

    def __enter__(self) -> Self: ...

    def __exit__(self, *exc: object) -> None: ...

    def run(
        self, requests: Sequence[EpisodeRequest], policy: Policy | None, masks: MaskSource, *,
        record: Callable[[int], bool] = ..., on_episode: Callable[[EpisodeRecord], None] | None = None,
        progress: bool = True, desc: str = "rollout", max_blind_steps: int | None = None,
        parallax: ParallaxConfig | None = None,
    ) -> list[EpisodeRecord]: ...


def open_runner(cfg: BackendConfig, env: EnvConfig, workers: int, expert: ExpertConfig | None = None,
                torch_threads: int = 1, observable_expert: bool = False,
                search: SearchConfig | None = None) -> EpisodeRunner:
    """An episode runner for ``cfg`` with ``workers`` env processes (in all, or per Ray actor); a context manager.

    ``torch_threads``: CPU threads of each Ray actor's models (the local runner's models are this process's).
    ``observable_expert``, ``search``: see :class:`RolloutPool`.
    """
    if cfg.backend == "local":
        return RolloutPool(env, workers, expert, observable_expert, search)
    from grasp_s2r.runtime.ray_backend import RayRunner

    return RayRunner(env, workers_per_actor=workers, expert_config=expert, address=cfg.ray_address,
                     n_actors=cfg.ray_actors, torch_threads=torch_threads, observable_expert=observable_expert,
                     search=search)


@contextmanager
def connected(cfg: BackendConfig) -> Iterator[None]:
    """``with connected(cfg):`` the backend reachable for the block: Ray started or its cluster joined (and shut
    down after, if this started it), nothing for the local backend. Commands enter it before they write their
    ``--out``, so that Ray missing or an unreachable ``--ray-address`` is refused with nothing written
    (:class:`BackendUnavailable`); the runners opened inside use that runtime."""
    if cfg.backend == "local":
        yield
        return
    from grasp_s2r.runtime.ray_backend import ray_session

    with ray_session(cfg.ray_address, cfg.ray_actors):
        yield


@contextmanager
def claimed(out: Path | str | None, kind: str, backend: BackendConfig) -> Iterator[None]:
    """``with claimed(out, kind, backend):`` a command's ``--out`` judged first (a wrong folder refused before Ray
    starts), then the backend reached (:func:`connected`), then the folder claimed (``artifacts.ArtifactFolder``): an
    unreachable cluster writes nothing. ``out`` None: no folder (a run that writes none)."""
    folder = None if out is None else ArtifactFolder(Path(out), kind)
    if folder is not None:
        folder.check()
    with connected(backend), folder if folder is not None else nullcontext():
        yield
