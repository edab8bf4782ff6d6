"""The controller's learning-rate schedule over a DAgger round: constant (the default, as runs before it) or cosine."""

from __future__ import annotations

import itertools

import numpy as np
import pytest
import torch

from grasp_s2r.control.dagger import DaggerConfig
from grasp_s2r.control.memory import N_MEMORY
from grasp_s2r.control.policy import Policy, PolicyConfig
from grasp_s2r.control.train import LabelSet, PolicyTrainConfig, fit, lr_scheduler


def _lrs(cfg: PolicyTrainConfig) -> list[float]:
    opt = torch.optim.Adam([torch.nn.Parameter(torch.zeros(1))], lr=cfg.lr)
    schedule = lr_scheduler(opt, cfg)
    lrs = []
    for _ in range(cfg.steps):
        lrs.append(opt.param_groups[0]["lr"])
        opt.step()
        if schedule is not None:
            schedule.step()
    return lrs


def test_cosine_falls_from_the_rate_to_nothing_over_the_round_and_constant_stays():
    lrs = _lrs(PolicyTrainConfig(steps=100, lr=2e-3, lr_schedule="cosine"))
    assert lrs[0] == pytest.approx(2e-3)
    assert lrs[50] == pytest.approx(1e-3, rel=0.01)
    assert lrs[-1] < 2e-3 * 0.001
    assert all(a >= b for a, b in itertools.pairwise(lrs))
    assert _lrs(PolicyTrainConfig(steps=100, lr=2e-3)) == [2e-3] * 100


def test_an_unknown_schedule_is_refused():
    with pytest.raises(ValueError, match="lr_schedule must be one of"):
        PolicyTrainConfig(lr_schedule="step")


def test_runs_made_before_the_schedule_keep_their_identity_and_cosine_is_another_run():
    constant, cosine = DaggerConfig(out="r"), DaggerConfig(out="r", train=PolicyTrainConfig(lr_schedule="cosine"))
    assert "lr_schedule" not in constant.identity()["train"]
    assert cosine.identity()["train"]["lr_schedule"] == "cosine"
    assert constant.identity() != cosine.identity()


def _labels(n: int = 256) -> LabelSet:
    """Labels of a learnable rule: move toward the mask's centroid, close when the mask is large."""
    rng = np.random.default_rng(0)
    masks = np.zeros((n, 64, 64), bool)
    actions = np.zeros((n, 4), np.float32)
    for i in range(n):
        y, x, r = rng.integers(8, 56), rng.integers(8, 56), rng.integers(1, 8)
        masks[i, y - r:y + r, x - r:x + r] = True
        actions[i] = [(x - 32) / 320, (y - 32) / 320, -0.01, 1.0 if r > 4 else -1.0]
    proprio = rng.uniform(0, 0.2, (n, 5)).astype(np.float32)
    return LabelSet(masks, proprio, actions, np.zeros((n, N_MEMORY), np.float32))


def test_fit_with_either_schedule_learns_and_the_schedules_give_other_weights():
    labels, out = _labels(), {}
    for schedule in ("constant", "cosine"):
        torch.manual_seed(0)
        policy = Policy(PolicyConfig(), "cpu")
        null = float(np.mean(np.abs(labels.actions[:, :3]))) + 0.5 * np.log(2)  # nothing moved, gripper undecided
        loss = fit(policy, labels, PolicyTrainConfig(steps=300, batch_size=64, lr_schedule=schedule),
                   np.random.default_rng(0), progress=False)
        assert np.isfinite(loss)
        out[schedule] = (loss, [p.detach().clone() for p in policy.net.parameters()])
        assert loss < 0.2 * null
    assert any(not torch.equal(a, b) for a, b in zip(out["constant"][1], out["cosine"][1]))


def test_the_dagger_command_sets_the_schedule():
    import argparse

    from grasp_s2r.commands import dagger as command
    from grasp_s2r.options import config_from_options

    p = argparse.ArgumentParser()
    command.add_arguments(p)
    args = p.parse_args(["--out", "r", "--lr-schedule", "cosine"])
    cfg = config_from_options(DaggerConfig, args, command.OPTIONS)
    assert cfg.train.lr_schedule == "cosine"
    assert config_from_options(DaggerConfig, p.parse_args(["--out", "r"]), command.OPTIONS).train.lr_schedule == \
        "constant"
