"""The shipped controller's recipe is written once: the candidates of benchmarks/controller_recipe.py run the
recipe of ``dagger.LOST_SPHERE_RECIPE`` through the ``grasp-s2r dagger`` command they print."""

from __future__ import annotations

import dataclasses
import sys
from pathlib import Path

BENCH = Path(__file__).resolve().parents[1] / "benchmarks"
sys.path.insert(0, str(BENCH))

import controller_recipe  # benchmarks/ is not a package: imported from its folder

from grasp_s2r.control.dagger import LOST_SPHERE_RECIPE


def test_every_candidate_command_runs_the_lost_sphere_recipe_with_its_budget_and_seed():
    for name, fields in controller_recipe.CANDIDATES.items():
        cfg = controller_recipe.config(controller_recipe.command(fields, f"runs/{name}"))
        assert cfg.out == f"runs/{name}" and not cfg.bc_baseline
        fingers = "--gripper-input" in fields.get("options", "")
        expected = {**LOST_SPHERE_RECIPE, **{k: v for k, v in fields.items() if k != "options"},
                    "policy": dataclasses.replace(LOST_SPHERE_RECIPE["policy"], gripper=fingers)}
        for key, value in expected.items():
            got = getattr(cfg, key)
            assert got == value, (name, key, got, value)
        assert cfg.env.randomization.camera_jitter_m == (0.004 if fingers else 0.001)
        assert dataclasses.replace(cfg, out="x") == dataclasses.replace(
            controller_recipe.config(controller_recipe.command(fields, "elsewhere")), out="x")
