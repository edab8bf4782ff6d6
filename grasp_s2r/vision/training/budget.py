"""A segmenter run's steps fitted to a wall-time budget (``SegmenterTrainConfig.time_budget_s``; ``grasp-s2r adapt
--segmenter-minutes``).

How many steps fit in some minutes is the CPU's to say: ``adapt``'s 3000 steps take 10-11 minutes on 2 cores of an
Intel Xeon and 18-20 on an AMD EPYC with AVX2 only. A run with a budget times its own steps, as they run (the
composites made in the worker, the step, this machine as loaded now), over :data:`TIMED_STEPS` of its first steps,
then cuts its steps to what fits in the budget from the run's start, :data:`RESERVE_SHARE` of it kept for the
validations and the final write; never more than ``steps``. The learning rate's cosine then decays over the fitted
steps (the warm-up, 100 steps, is over by then). The fit is recorded in the run's config (``run.json`` and every
checkpoint, ``budget``), so a resume keeps it; the steps are then as fixed as any run's.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass

TIMED_STEPS = (20, 100)
"""The steps of a session that are timed (from the end of the first to the end of the second, counted from the
session's first step): after the first ones, which wait for the workers' start."""
RESERVE_SHARE = 0.04
"""Share of the budget not spent on steps: the validations, the final checkpoint, start-up not yet seen."""


@dataclass(frozen=True)
class BudgetFit:
    """The fit of a run's steps to its budget, as recorded in its config (``budget``)."""

    budget_s: float
    """The budget, seconds of wall time from the run's start."""
    seconds_per_step: float
    """The steps' time as measured over :data:`TIMED_STEPS`."""
    measured_at_step: int
    """The step at which the fit was made."""
    elapsed_s: float
    """Seconds since the run's start at that step."""
    max_steps: int
    """The run's ``steps`` before the fit (the most it may run)."""
    steps: int
    """The fitted steps: what the run trains."""

    def to_dict(self) -> dict[str, float | int]:
        return asdict(self)

    def describe(self) -> str:
        capped = " (all of them)" if self.steps == self.max_steps else f" of at most {self.max_steps}"
        return (f"{self.seconds_per_step:.3f} s a step, {self.elapsed_s:.0f} s spent at step {self.measured_at_step}: "
                f"{self.steps} steps{capped} fit in {self.budget_s / 60:.1f} min")


def steps_of_run(run_config: dict) -> int:
    """The steps a run trains, from its config (``run.json``'s): fitted to its budget, or as asked."""
    return int(run_config.get("budget", run_config["train"])["steps"])


def fitted_steps(step: int, seconds_per_step: float, seconds_left: float, max_steps: int) -> int:
    """Steps in all when ``step`` are done and ``seconds_left`` of the budget remain at ``seconds_per_step``: at
    least ``step`` (none more when the budget is spent), at most ``max_steps``."""
    if seconds_per_step <= 0:
        return max_steps
    more = math.floor(max(0.0, seconds_left) / seconds_per_step)
    return max(step, min(max_steps, step + more))


class StepBudget:
    """Times a session's steps and fits the run's steps to ``budget_s`` once :data:`TIMED_STEPS` are done.

    ``start_s``: ``time.perf_counter()`` at the run's start (the budget's clock); ``first_step``: the session's first
    step (a resumed run that stopped before its fit times its own)."""

    def __init__(self, budget_s: float, max_steps: int, start_s: float, first_step: int = 0):
        self.budget_s, self.max_steps, self.start_s = budget_s, max_steps, start_s
        self.timed = (first_step + TIMED_STEPS[0], first_step + TIMED_STEPS[1])
        self._timer_s: float | None = None

    def after_step(self, step: int, now_s: float) -> BudgetFit | None:
        """Call after each step (``step`` done, at ``now_s``); the fit at the end of the timed steps, else None."""
        if step == self.timed[0]:
            self._timer_s = now_s
        if step != self.timed[1] or self._timer_s is None:
            return None
        per_step = (now_s - self._timer_s) / (self.timed[1] - self.timed[0])
        elapsed = now_s - self.start_s
        left = self.budget_s * (1.0 - RESERVE_SHARE) - elapsed
        return BudgetFit(budget_s=self.budget_s, seconds_per_step=round(per_step, 4), measured_at_step=step,
                         elapsed_s=round(elapsed, 2), max_steps=self.max_steps,
                         steps=fitted_steps(step, per_step, left, self.max_steps))
