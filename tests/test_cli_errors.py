"""Expected failures of the CLI end as one line ``grasp-s2r CMD: error: ...`` with exit 2; worker counts are capped
and the cap is reported truthfully (real commands, real files)."""

from __future__ import annotations

import os

import pytest
import torch

from grasp_s2r.cli import main


def _run(capsys, *argv: str) -> tuple[int, str, str]:
    try:
        code = main(list(argv))
    except SystemExit as e:  # argparse errors exit through the parser
        code = int(e.code)
    captured = capsys.readouterr()
    return code, captured.out, captured.err


@pytest.mark.skipif(torch.cuda.is_available(), reason="needs a machine without CUDA")
@pytest.mark.parametrize("command", [["eval-vision"], ["train-vision", "--steps", "1"], ["calibrate-vision"],
                                     ["eval", "--policy", "x.pt"], ["dagger", "--out", "d"]])
def test_cuda_asked_for_without_cuda_is_one_line(command, capsys, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    code, _, err = _run(capsys, *command, "--device", "cuda")
    assert code == 2
    assert err.startswith(f"grasp-s2r {command[0]}: error: argument --device: 'cuda' asked for")
    assert len(err.strip().splitlines()) == 1 and "Traceback" not in err
    assert not any(tmp_path.iterdir())  # nothing written


def test_unknown_device_is_one_line(capsys):
    code, _, err = _run(capsys, "eval-vision", "--device", "tpu9")
    assert code == 2 and "unknown torch device 'tpu9'" in err and len(err.strip().splitlines()) == 1


def test_unusable_out_folder_is_one_line(capsys):
    code, _, err = _run(capsys, "train-vision", "--out", "/proc/grasp_s2r_nope/run", "--steps", "1", "--threads", "1",
                        "--no-progress")
    assert code == 2
    assert err.startswith("grasp-s2r train-vision: error: cannot use /proc/grasp_s2r_nope")
    assert len(err.strip().splitlines()) == 1


def test_collect_caps_workers_and_says_so(capsys, tmp_path):
    code, out, err = _run(capsys, "collect", "--episodes", "2", "--workers", "1000", "--out", str(tmp_path / "d"))
    assert code == 0
    speed = next(line for line in out.splitlines() if line.startswith("speed"))
    used = min(2, os.cpu_count() or 1)
    assert f"with {used} worker(s)" in speed
    assert "--workers 1000 capped at" in err  # said on stderr before the run
