"""Checkpoints are read with ``weights_only=True``: a pickle that would run code is refused, in one line, and runs
nothing; files that are not checkpoints are refused in one line through the CLI."""

from __future__ import annotations

import os

import pytest
import torch

from grasp_s2r.cli import main
from grasp_s2r.control.policy import Policy, read_policy_blob
from grasp_s2r.vision.networks.segmenter import CheckpointError, Segmenter


class _Payload:
    """Unpickling this calls ``os.system``: what a hostile checkpoint would do."""

    def __init__(self, marker: str):
        self.marker = marker

    def __reduce__(self):
        return os.system, (f"touch {self.marker}",)


@pytest.fixture
def hostile(tmp_path):
    marker = tmp_path / "pwned"
    path = tmp_path / "hostile.pt"
    torch.save({"format": "grasp_s2r.controller", "format_version": 1, "payload": _Payload(str(marker))}, path)
    return path, marker


def test_hostile_controller_checkpoint_is_refused_and_runs_nothing(hostile):
    path, marker = hostile
    with pytest.raises(ValueError, match="not a readable controller checkpoint"):
        Policy.load(path, device="cpu")
    with pytest.raises(ValueError, match="not a readable controller checkpoint"):
        read_policy_blob(path)
    assert not marker.exists()


def test_hostile_segmenter_checkpoint_is_refused_and_runs_nothing(hostile):
    path, marker = hostile
    with pytest.raises(CheckpointError):
        Segmenter.load(path, device="cpu")
    assert not marker.exists()


def test_saved_controller_still_loads(tmp_path):
    path = tmp_path / "policy.pt"
    Policy(device="cpu").save(path, {"metrics": {"success_rate": 0.5}, "config": {"rounds": 2}, "round": 1})
    policy, blob = Policy.load(path, device="cpu")
    assert blob["metrics"]["success_rate"] == 0.5 and isinstance(policy, Policy)


@pytest.mark.parametrize("content", [b"not a checkpoint\n", b""])
def test_eval_refuses_a_file_that_is_no_checkpoint_in_one_line(content, tmp_path, capsys):
    bad = tmp_path / "x.pt"
    bad.write_bytes(content)
    code = main(["eval", "--policy", str(bad), "--episodes", "1", "--out", str(tmp_path / "ev")])
    captured = capsys.readouterr()
    text = captured.out + captured.err
    assert code == 2
    assert "not a readable controller checkpoint" in text and "Traceback" not in text
    assert len(text.strip().splitlines()) == 1


def test_eval_refuses_a_hostile_checkpoint(hostile, tmp_path, capsys):
    path, marker = hostile
    code = main(["eval", "--policy", str(path), "--episodes", "1", "--out", str(tmp_path / "ev")])
    assert code == 2 and not marker.exists()
    assert "Traceback" not in capsys.readouterr().err
