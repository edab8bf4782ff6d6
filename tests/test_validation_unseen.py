"""Validation on tables no segmenter trained on (benchmarks/validation.py ``table-photo-unseen``): the photos of a
folder as the sim table, on the validation seeds; the held-out photos never enter it."""

from __future__ import annotations

import sys
from pathlib import Path

import cv2
import numpy as np
import pytest

BENCH = Path(__file__).resolve().parents[1] / "benchmarks"
sys.path.insert(0, str(BENCH))

import validation  # benchmarks/ is not a package: imported from its folder

from grasp_s2r.agent import default_controller_path
from grasp_s2r.control.policy import Policy
from grasp_s2r.runtime.conditions import CONDITIONS
from grasp_s2r.runtime.masks import make_mask_source
from grasp_s2r.runtime.pool import RolloutPool
from grasp_s2r.sim.config import control_env_config


def test_the_unseen_table_is_table_photo_with_the_folder_as_the_table(tmp_path):
    cond = validation.validation_condition(validation.UNSEEN_TABLE, str(tmp_path))
    held_out = CONDITIONS["table-photo"]
    assert cond.table_photos == str(tmp_path) and held_out.table_photos == "heldout"
    assert cond.name == validation.UNSEEN_TABLE and cond.backgrounds == held_out.backgrounds
    with pytest.raises(ValueError, match="needs a folder"):
        validation.validation_condition(validation.UNSEEN_TABLE)
    assert validation.validation_condition("nominal") is validation.TRAIN_PHOTO_CONDITIONS["nominal"]


def test_validation_episodes_run_on_a_folder_of_photos_as_the_table(tmp_path):
    rng = np.random.default_rng(0)
    for k in range(2):  # two plain photos: smooth colour fields with noise
        img = cv2.resize(rng.integers(0, 255, (6, 6, 3), dtype=np.uint8), (96, 96), interpolation=cv2.INTER_CUBIC)
        cv2.imwrite(str(tmp_path / f"table{k}.png"), img)
    policy = Policy.load(Path(default_controller_path()), "cpu")[0]
    with RolloutPool(control_env_config(), 1) as pool:
        out = validation.validate(pool, policy, make_mask_source("predicted", "", "cpu"), [validation.UNSEEN_TABLE],
                                  2, unseen_photos=str(tmp_path))
    row = out[validation.UNSEEN_TABLE]
    assert row["episodes"] == 2 and 0 <= row["successes"] <= 2 and row["ci_low"] <= row["ci_high"]


def test_a_folder_without_photos_is_refused_not_replaced(tmp_path):
    policy = Policy.load(Path(default_controller_path()), "cpu")[0]
    with RolloutPool(control_env_config(), 1) as pool, pytest.raises(Exception, match="needs at least 2 images"):
        validation.validate(pool, policy, make_mask_source("predicted", "", "cpu"), [validation.UNSEEN_TABLE], 1,
                            unseen_photos=str(tmp_path))
