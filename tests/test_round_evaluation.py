"""benchmarks/round_evaluation.py: which rounds it measures, which it picks, and a clear refusal of missing rounds."""

from __future__ import annotations

import argparse
import subprocess
import sys
from pathlib import Path

import pytest

from grasp_s2r.control.dagger_config import SHIPPED_EVAL_CONDITIONS

BENCH = Path(__file__).resolve().parents[1] / "benchmarks"
sys.path.insert(0, str(BENCH))

import round_evaluation  # benchmarks/ is not a package: imported from its folder


def test_round_ranges_parse_and_bad_ones_are_refused():
    assert round_evaluation.round_range("3-7") == [3, 4, 5, 6, 7]
    assert round_evaluation.round_range("5") == [5]
    for bad in ("7-3", "a-b", "-1-2", ""):
        with pytest.raises(argparse.ArgumentTypeError):
            round_evaluation.round_range(bad)


def test_the_pick_sums_the_recipes_conditions_only_and_ties_go_to_the_later_round():
    recipe = dict.fromkeys(SHIPPED_EVAL_CONDITIONS, 8)
    rows = {3: {**recipe, "table-photo-train": 0}, 4: {**recipe, "table-photo-train": 40},
            5: {**recipe, "start-out-of-view": 7, "table-photo-train": 40}}
    assert round_evaluation.best_round(rows) == 4  # 3 and 4 tie on the recipe's conditions; table-photo-train no vote
    rows[3]["nominal"] = 9
    assert round_evaluation.best_round(rows) == 3


def test_a_run_without_the_rounds_asked_for_is_refused_naming_them(tmp_path):
    (tmp_path / "run" / "checkpoints").mkdir(parents=True)
    out = subprocess.run([sys.executable, str(BENCH / "round_evaluation.py"), str(tmp_path / "run"), "--rounds", "2-3",
                          "--json", str(tmp_path / "r.json")], capture_output=True, text=True, check=False)
    assert out.returncode != 0
    assert "round-002.pt" in out.stderr and "round-003.pt" in out.stderr
    assert not (tmp_path / "r.json").exists()


def test_averaged_rounds_hold_the_mean_of_the_rounds_weights_and_say_which(tmp_path):
    import average_rounds
    import torch

    from grasp_s2r.control.policy import Policy, PolicyConfig

    (tmp_path / "checkpoints").mkdir()
    nets = []
    for r in (3, 4):
        torch.manual_seed(r)
        policy = Policy(PolicyConfig(memory=True), "cpu")
        policy.save(tmp_path / "checkpoints" / f"round-{r:03d}.pt", {"round": r, "kind": "dagger"})
        nets.append(policy.net.state_dict())
    out = average_rounds.average_rounds(tmp_path, [3, 4], tmp_path / "avg.pt")
    averaged, blob = Policy.load(out, "cpu")
    assert blob["averaged_rounds"] == [3, 4] and blob["round"] == 4 and averaged.cfg.memory
    for k, v in averaged.net.state_dict().items():
        assert torch.allclose(v, (nets[0][k].float() + nets[1][k].float()) / 2)
    with pytest.raises(FileNotFoundError, match="round-005.pt"):
        average_rounds.average_rounds(tmp_path, [3, 4, 5], tmp_path / "x.pt")
