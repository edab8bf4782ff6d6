"""How episodes are spread (:class:`BackendConfig`) and the error of a backend that cannot start: the leaf that
both runners (:mod:`~grasp_s2r.runtime.backend`, :mod:`~grasp_s2r.runtime.ray_backend`) import."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal, get_args

Backend = Literal["local", "ray"]
BACKENDS: tuple[str, ...] = get_args(Backend)
RAY_INSTALL_HINT = 'pip install -e ".[ray]"'


class BackendUnavailable(RuntimeError):
    """The backend asked for cannot start here (Ray not installed, no cluster at the address...)."""


@dataclass(frozen=True)
class BackendConfig:
    """How rollouts are spread; never part of a run's identity (results do not depend on it)."""

    backend: Backend = "local"
    """"local": worker processes on this machine; "ray": Ray actors (a local runtime or a cluster)."""
    ray_address: str = ""
    """Ray cluster to join ("auto": the one ``ray start`` made on this node; "": start a local runtime)."""
    ray_actors: int = 0
    """Ray actors (0: one per alive node of the cluster)."""

    def __post_init__(self) -> None:
        if self.backend not in BACKENDS:
            raise ValueError(f"backend must be one of {', '.join(BACKENDS)}, got {self.backend!r}")
        if self.ray_actors < 0:
            raise ValueError(f"ray_actors must be >= 0, got {self.ray_actors}")
        if self.backend == "local" and (self.ray_address or self.ray_actors):
            raise ValueError("--ray-address / --ray-actors need --backend ray")
