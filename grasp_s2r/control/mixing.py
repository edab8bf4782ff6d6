"""DAgger's mixture policy, a wrapper around the learner's actions: who acts at each step of a training episode.

At each step the expert's label is executed with probability β (the round's), else the learner's action; a
training episode may also start blind: the learner's first input masks are blank (a simulated missed detection;
the expert's labels and the recorded ground truth are unaffected). Both are drawn from the episode's seed, so a
re-run plays the same episode. The runtime asks this through its :class:`~grasp_s2r.runtime.records.Actor`
protocol and knows nothing of β.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from grasp_s2r.sim.env import ACTION_DIM

MIX_STREAM, BLIND_STREAM = 1, 4
"""Random streams of an episode's mixture: ``default_rng([seed, stream])`` (the per-step coin; the blind start)."""


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
class Mixture:
    """The actor of a DAgger training episode (:class:`~grasp_s2r.runtime.records.Actor`)."""

    beta: float
    """Probability that the expert's label is executed at a step (1: the expert alone, 0: the learner alone)."""
    blind_start_prob: float = 0.0
    """Probability that the episode starts blind."""
    blind_start_steps: tuple[int, int] = (2, 8)
    """Range (inclusive) of the number of blank first steps of a blind start."""

    @property
    def queries_learner(self) -> bool:
        return self.beta < 1

    @property
    def expert_share(self) -> float:
        return self.beta

    def episode(self, seed: int) -> MixtureEpisode:
        return MixtureEpisode(self, seed)


class MixtureEpisode:
    """One episode of a :class:`Mixture`: its coin and its blind start, drawn from the seed."""

    def __init__(self, mixture: Mixture, seed: int):
        self.beta = mixture.beta
        self.rng = np.random.default_rng([seed, MIX_STREAM])
        blind = np.random.default_rng([seed, BLIND_STREAM])
        lo, hi = mixture.blind_start_steps
        self.blind_steps = int(blind.integers(lo, hi + 1)) if blind.random() < mixture.blind_start_prob else 0
        """Blank first steps of this episode."""

    def blanks(self, step: int) -> bool:
        return step < self.blind_steps

    def choose(self, expert: np.ndarray, learner: np.ndarray | None) -> tuple[np.ndarray, bool]:
        executed, from_expert = mix_actions(expert, learner, self.beta, self.rng)
        return executed[0], bool(from_expert[0])
