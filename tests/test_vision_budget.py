"""A segmenter run's steps fitted to a wall-time budget (``time_budget_s``, ``adapt --segmenter-minutes``): the fit,
its record, a resume that keeps it, and the runs it refuses."""

from __future__ import annotations

import json

import pytest
import torch

from grasp_s2r.adapt import AdaptConfig, segmenter_train_config
from grasp_s2r.vision.training.budget import RESERVE_SHARE, TIMED_STEPS, StepBudget, fitted_steps
from grasp_s2r.vision.training.train import SegmenterTrainConfig, TrainError, train


def test_the_steps_that_fit_are_the_time_left_over_the_time_a_step_never_more_than_asked():
    assert fitted_steps(100, 0.5, 450.0, 3000) == 100 + 900
    assert fitted_steps(100, 0.5, 450.2, 3000) == 1000  # whole steps only
    assert fitted_steps(100, 0.1, 10_000.0, 3000) == 3000  # the budget holds them all
    assert fitted_steps(100, 0.5, -20.0, 3000) == 100  # spent: none more


def test_the_budget_times_the_steps_of_its_window_and_keeps_a_reserve():
    budget = StepBudget(budget_s=1000.0, max_steps=5000, start_s=50.0, first_step=0)
    assert all(budget.after_step(s, 50.0 + s) is None for s in range(1, TIMED_STEPS[1]))
    # steps 20 -> 100 took 0.4 s each; 60 s spent since the run's start
    fit = budget.after_step(TIMED_STEPS[1], 50.0 + TIMED_STEPS[0] + 0.4 * (TIMED_STEPS[1] - TIMED_STEPS[0]) + 8.0)
    assert fit is not None and fit.seconds_per_step == pytest.approx(0.4 + 8.0 / 80)
    left = 1000.0 * (1 - RESERVE_SHARE) - fit.elapsed_s
    assert fit.steps == TIMED_STEPS[1] + int(left // (0.4 + 8.0 / 80)) and fit.max_steps == 5000
    assert budget.after_step(TIMED_STEPS[1] + 1, 200.0) is None  # fitted once
    # a resumed session times its own first steps
    resumed = StepBudget(budget_s=1000.0, max_steps=5000, start_s=0.0, first_step=300)
    assert resumed.after_step(TIMED_STEPS[1], 10.0) is None and resumed.timed == (320, 400)


def _tiny(**kw) -> SegmenterTrainConfig:
    return SegmenterTrainConfig(steps=TIMED_STEPS[1] + 20, batch_size=2, val_images=4, val_every=1000,
                                checkpoint_every=1000, crop_px=0, width=4, depth=2, **kw)


def test_a_run_over_its_budget_stops_at_its_fit_and_a_resume_keeps_it(tmp_path):
    torch.set_num_threads(1)
    out = tmp_path / "run"
    cfg = _tiny(time_budget_s=1.0)  # spent before the timed steps end (the workers alone start slower)
    model = train(cfg, out, progress=False)
    fit = json.loads((out / "run.json").read_text())["config"]["budget"]
    assert fit["steps"] == TIMED_STEPS[1] and fit["max_steps"] == cfg.steps and fit["budget_s"] == 1.0
    latest = torch.load(out / "checkpoint-latest.pt", weights_only=False)
    assert latest["step"] == TIMED_STEPS[1] and latest["config"]["budget"] == fit
    assert [row["step"] for row in latest["history"]] == [TIMED_STEPS[1]]  # the last step validates
    before = torch.load(model, weights_only=False)["state_dict"]
    train(cfg, out, resume=True, progress=False)  # the fit holds: nothing more to train
    assert torch.load(out / "checkpoint-latest.pt", weights_only=False)["step"] == TIMED_STEPS[1]
    assert json.loads((out / "run.json").read_text())["config"]["budget"] == fit
    after = torch.load(model, weights_only=False)["state_dict"]
    assert all(torch.equal(before[k], after[k]) for k in before)


def test_a_run_within_its_budget_trains_every_step_asked(tmp_path):
    torch.set_num_threads(1)
    cfg = _tiny(time_budget_s=3600.0)
    train(cfg, tmp_path / "run", progress=False)
    fit = json.loads((tmp_path / "run" / "run.json").read_text())["config"]["budget"]
    assert fit["steps"] == fit["max_steps"] == cfg.steps
    assert torch.load(tmp_path / "run" / "model.pt", weights_only=False)["step"] == cfg.steps


def test_a_budget_is_refused_where_it_cannot_fit_the_steps():
    with pytest.raises(TrainError, match="time_budget_s"):
        _tiny(time_budget_s=-1.0)
    with pytest.raises(TrainError, match="whole images"):
        SegmenterTrainConfig(time_budget_s=60.0)  # from random weights: crops, then whole images
    with pytest.raises(ValueError, match="segmenter_minutes"):
        AdaptConfig(photos="x", segmenter_minutes=-1)


def test_adapt_fits_its_fine_tune_to_its_minutes():
    assert segmenter_train_config(AdaptConfig(photos="x")).time_budget_s == AdaptConfig.segmenter_minutes * 60
    assert segmenter_train_config(AdaptConfig(photos="x", segmenter_minutes=0)).time_budget_s == 0


def test_a_run_stops_its_composite_worker_before_it_returns(tmp_path):
    # GIVEN a run whose composites a worker process makes (its loop stops on the last batch, the iterator not ended)
    import gc
    import multiprocessing as mp

    before = set(mp.active_children())
    cfg = SegmenterTrainConfig(steps=3, batch_size=4, val_images=8, val_every=3, checkpoint_every=3, crop_px=0,
                               workers=1)
    gc.disable()  # what is left must not hang on a garbage collection that happens to run
    try:
        train(cfg, tmp_path / "run", progress=False)
        left = set(mp.active_children()) - before
    finally:
        gc.enable()
    # THEN no worker of it is left running (one left would be killed at exit, with a traceback)
    assert not left
