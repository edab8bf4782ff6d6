"""Episode seed ranges of the control commands: one place, never overlapping.

``grasp-s2r collect`` uses seeds from 0 up (its ``--seed``), so DAgger's training seeds, which
also start at 0, may share episodes with a demonstration set — both are training data. The seeds
that measure a policy (per-round evaluation, ``grasp-s2r eval``) are never used for training.
"""

DAGGER_TRAIN_BASE = 0
"""Round r, episode i of DAgger: seed ``DAGGER_TRAIN_BASE + r * ROUND_STRIDE + i``."""
ROUND_STRIDE = 10_000
"""Seed distance between consecutive DAgger rounds (the most episodes a round can have)."""
BC_EXPERT_BASE = 500_000
"""Extra expert episodes of the behavior-cloning baseline: seed ``BC_EXPERT_BASE + i``."""
DAGGER_EVAL_BASE = 900_000
"""Per-round success evaluation of DAgger and BC (the same episodes every round): ``DAGGER_EVAL_BASE + i``."""
TEST_BASE = 2_000_000
"""``grasp-s2r eval``: episode i of every condition uses seed ``TEST_BASE + i``."""


def dagger_train_seed(round_index: int, episode: int) -> int:
    if not 0 <= episode < ROUND_STRIDE:
        raise ValueError(f"a DAgger round holds at most {ROUND_STRIDE} episodes, got index {episode}")
    return DAGGER_TRAIN_BASE + round_index * ROUND_STRIDE + episode
