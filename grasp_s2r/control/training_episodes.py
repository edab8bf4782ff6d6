"""DAgger's training episodes: which condition each one plays, drawn from its seed.

A training episode may push the sphere once (``disturbance_prob``), start blind (the controller's first masks
blank, ``blind_start_prob``), start with the sphere out of view, show a training photo as the table, or blank
the mask mid-approach; each is an independent draw from its own stream of the episode seed, so a resumed or
re-run round plays the same episodes. Per-round evaluation episodes never take any of these.
"""

from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING, Any

import numpy as np

from grasp_s2r.control.mixing import Mixture
from grasp_s2r.runtime.conditions import CONDITIONS, Condition
from grasp_s2r.runtime.records import EpisodeRequest

if TYPE_CHECKING:
    from grasp_s2r.control.dagger_config import DaggerConfig

PUSH_STREAM, OUT_OF_VIEW_STREAM, TABLE_PHOTO_STREAM, DROPOUT_STREAM = 3, 6, 7, 8
"""Random streams of a training episode's condition: ``default_rng([seed, stream])`` (its mixture's: ``mixing``)."""


class TrainingEpisodes:
    """The requests of a run's training episodes (DAgger rollouts and BC demonstrations alike)."""

    def __init__(self, cfg: DaggerConfig):
        self.cfg = cfg
        self.condition = Condition(name="dagger-train", backgrounds=cfg.backgrounds, description="training episode")

    def request(self, seed: int, beta: float) -> EpisodeRequest:
        """Episode ``seed`` played by DAgger's mixture (:class:`~grasp_s2r.control.mixing.Mixture`): the expert's
        action executed with probability ``beta`` at each step, a blind start with ``blind_start_prob``."""
        cfg = self.cfg
        rng = np.random.default_rng([seed, PUSH_STREAM])
        condition = self.condition
        if rng.random() < cfg.disturbance_prob:
            condition = Condition(name="dagger-push", backgrounds=cfg.backgrounds,
                                  perturb_distance_m=cfg.disturbance_distance_m,
                                  perturb_below_m=float(rng.uniform(*cfg.disturbance_below_m)),
                                  description="training episode with a push")
        extra: dict[str, Any] = {}
        if cfg.out_of_view_prob and self._draw(seed, OUT_OF_VIEW_STREAM) < cfg.out_of_view_prob:
            extra["start_out_of_view_deg"] = CONDITIONS["start-out-of-view"].start_out_of_view_deg
        if cfg.table_photo_prob and self._draw(seed, TABLE_PHOTO_STREAM) < cfg.table_photo_prob:
            extra.update(backgrounds="", table_photos=cfg.backgrounds or "train")  # a folder, or the training photos
        if cfg.dropout_prob and self._draw(seed, DROPOUT_STREAM) < cfg.dropout_prob:
            extra["dropout_steps"] = CONDITIONS["dropout"].dropout_steps
        if extra:
            condition = dataclasses.replace(condition, **extra)
        mixture = Mixture(beta, cfg.blind_start_prob, cfg.blind_start_steps)  # the blind start is drawn from the seed
        return EpisodeRequest(seed=seed, condition=condition, actor=mixture)

    @staticmethod
    def _draw(seed: int, stream: int) -> float:
        return float(np.random.default_rng([seed, stream]).random())
