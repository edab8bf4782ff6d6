"""``benchmarks/episode_frames.py``: the shipped segmenter fine-tuned with frames of recorded episodes (real PyBullet
episodes of the expert, real composites, a real torch step)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from grasp_s2r.cli import main
from grasp_s2r.data.episodes import EpisodeDataset
from grasp_s2r.vision.networks.segmenter import Segmenter, default_checkpoint_path, read_checkpoint

BENCH = Path(__file__).resolve().parents[1] / "benchmarks"
sys.path.insert(0, str(BENCH))

from episode_frames import episode_frames, wrong_frames


@pytest.fixture(scope="module")
def episodes(tmp_path_factory):
    out = tmp_path_factory.mktemp("frames") / "demos"
    assert main(["collect", "--episodes", "2", "--out", str(out), "--workers", "1", "--masks", "gt"]) == 0
    return out


def test_every_nth_frame_of_every_episode_with_its_true_mask(episodes):
    ds = EpisodeDataset(episodes)
    rgb, masks = episode_frames([episodes], every=3)
    lengths = [len(ds.episode(i)["rgb"]) for i in range(len(ds))]
    assert len(rgb) == len(masks) == sum(-(-n // 3) for n in lengths)
    first = ds.episode(0)
    np.testing.assert_array_equal(rgb[1], first["rgb"][3])
    np.testing.assert_array_equal(masks[1], first["sphere_mask"][3])
    assert masks.dtype == bool and masks.any()


def test_a_fine_tune_with_episode_frames_writes_a_segmenter_that_records_them(episodes, tmp_path):
    run = tmp_path / "run"
    cmd = [sys.executable, str(BENCH / "episode_frames.py"), str(episodes), "--out", str(run), "--steps", "2",
           "--share", "0.5"]
    proc = subprocess.run(cmd, check=False, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-2000:]
    ckpt = read_checkpoint(run / "model.pt")
    assert ckpt["step"] == 2 and ckpt["config"]["episode_frames"]["share"] == 0.5
    assert ckpt["config"]["episode_frames"]["frames"] > 0
    assert Segmenter.load(run / "model.pt", device="cpu").predict(np.zeros((64, 64, 3), np.uint8)).shape == (64, 64)
    # an existing folder is refused, nothing overwritten
    again = subprocess.run(cmd, check=False, capture_output=True, text=True, timeout=120)
    assert again.returncode == 2 and "exists" in again.stderr


def test_the_frames_the_shipped_segmenter_gets_wrong():
    """A sphere it does not touch, and a blob it marks away from the sphere, are wrong; a sphere it finds and an empty
    view it leaves empty are not (real predictions of the shipped segmenter)."""
    segmenter = Segmenter.load(default_checkpoint_path(), device="cpu")
    grey = np.full((64, 64, 3), 128, np.uint8)
    disc = np.zeros((64, 64), bool)
    disc[np.hypot(*np.mgrid[-30:34, -30:34]) <= 3.5] = True  # a 7 px disc at (30, 30)
    red = grey.copy()
    red[disc] = (220, 30, 30)
    assert segmenter.predict(red)[disc].any() and not segmenter.predict(grey).any()  # the premise
    rgb = np.stack([red, grey, grey, red])
    masks = np.stack([disc, disc, np.zeros_like(disc), np.roll(disc, 20, axis=1)])
    np.testing.assert_array_equal(wrong_frames(segmenter, rgb, masks, batch=3), [False, True, False, True])
