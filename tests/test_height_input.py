"""A segmenter told the camera's height (``UNet(height=True)``, ``benchmarks/height_prior.py``): the height channel,
a network widened from the shipped one computing what it computed, the runtime handing each frame's TCP height to
it, and the experiment's composites carrying their view's true height (real PyBullet renders, the real shipped
weights)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import torch

from grasp_s2r.agent import SegmenterMasks, learner_step
from grasp_s2r.sim.env import PROPRIO_NAMES
from grasp_s2r.vision.images.backgrounds import load_backgrounds
from grasp_s2r.vision.images.dataset import env_config_for
from grasp_s2r.vision.networks.model import HEIGHT_REF_M, UNet, height_channel
from grasp_s2r.vision.networks.segmenter import Segmenter, default_checkpoint_path, read_checkpoint
from grasp_s2r.vision.networks.widen import load_widened
from grasp_s2r.vision.training.train_config import recipe_of

BENCH = Path(__file__).resolve().parents[1] / "benchmarks"
sys.path.insert(0, str(BENCH))

from height_prior import HeightComposites

TCP_Z = PROPRIO_NAMES.index("tcp_z_above_table_m")


@pytest.fixture(scope="module")
def shipped():
    return read_checkpoint(default_checkpoint_path())


def _height_segmenter(shipped, height_weight: float = 0.0, levels: int = 1) -> Segmenter:
    """The shipped network widened to read the height at its first ``levels`` encoder blocks; its first-layer
    height weights set to ``height_weight`` (0: as widened)."""
    model = UNet(**shipped["arch_kwargs"], height=levels)
    load_widened(model, shipped["state_dict"])
    with torch.no_grad():
        model.down[0][0].weight[:, 3] += height_weight
    return Segmenter(model, input_hw=tuple(shipped["input_hw"]), config={}, device=torch.device("cpu"))


def test_the_height_channel_is_each_image_s_log_height_over_the_reference():
    planes = height_channel(np.array([HEIGHT_REF_M, 0.2, 0.0]), (8, 6))
    assert planes.shape == (3, 1, 8, 6) and planes.dtype == torch.float32
    assert torch.all(planes[0] == 0)
    assert torch.allclose(planes[1], torch.full((1, 8, 6), float(np.log(4.0))))
    assert torch.allclose(planes[2], torch.full((1, 8, 6), float(np.log(0.003 / HEIGHT_REF_M))))  # clipped at 3 mm


@pytest.mark.parametrize("levels", [1, 4])
def test_a_network_widened_to_read_the_height_starts_as_the_shipped_one_at_every_height(shipped, levels):
    # GIVEN real composites and the shipped segmenter
    ds = HeightComposites(env_config=env_config_for(64), data=recipe_of(default_checkpoint_path()),
                          backgrounds=load_backgrounds("train"), stream="val", seed=0, length=8, reads_height=True)
    rgb = np.stack([ds.sample(i)[0] for i in range(8)])
    ds.close()
    plain = Segmenter.from_checkpoint(shipped, "cpu")
    # WHEN the shipped weights are widened to read the height, and asked at two heights
    seg = _height_segmenter(shipped, levels=levels)
    # THEN it reads the height at its first `levels` blocks, and its probabilities are the shipped ones whatever
    # the height; without heights it refuses
    assert sum(b[0].in_channels for b in seg.model.down) == sum(b[0].in_channels for b in plain.model.down) + levels
    expected = plain.predict_proba(rgb)
    for z in (0.01, 0.22):
        np.testing.assert_allclose(seg.predict_proba(rgb, np.full(8, z)), expected, atol=1e-5)
    assert seg.reads_height and not plain.reads_height
    with pytest.raises(ValueError, match="reads the camera's height"):
        seg.predict(rgb)
    with pytest.raises(ValueError, match="3 heights for 8 images"):
        seg.predict(rgb, np.full(3, 0.1))


def test_the_runtime_hands_each_frame_s_tcp_height_to_a_segmenter_that_reads_it(shipped):
    # GIVEN a height-reading segmenter whose height channel matters, and frames seen from two heights
    seg = _height_segmenter(shipped, height_weight=0.5)
    rng = np.random.default_rng(0)
    rgb = rng.integers(0, 255, (2, 64, 64, 3), dtype=np.uint8)
    rgb[1] = rgb[0]
    proprio = np.zeros((2, len(PROPRIO_NAMES)))
    proprio[:, TCP_Z] = (0.02, 0.2)
    # WHEN the runtime's step makes the masks (no controller queried)
    step = learner_step(SegmenterMasks(seg), None, rgb, proprio, query=[])
    # THEN each frame's mask is the segmenter's at that frame's own height
    for i in range(2):
        np.testing.assert_array_equal(step.masks[i], seg.predict(rgb[i], proprio[i, TCP_Z]))
    assert not np.array_equal(seg.predict_proba(rgb[:1], [0.02]), seg.predict_proba(rgb[:1], [0.2]))


def test_each_composite_carries_its_view_s_true_tcp_height(shipped):
    # GIVEN the recipe's composites without height noise
    ds = HeightComposites(env_config=env_config_for(64), data=recipe_of(default_checkpoint_path()),
                          backgrounds=load_backgrounds("train"), stream="val", seed=0, length=40, reads_height=True)
    items = [ds.sample_with_height(i) for i in range(40)]
    x, _ = ds[3]
    ds.close()
    z = np.array([i[2] for i in items])
    widths = np.array([np.sqrt(i[1].sum()) for i in items])
    # THEN the heights span the views' range, and a sphere seen from higher up is smaller
    assert z.min() > 0.004 and z.max() < 0.3 and z.max() / z.min() > 5
    shown = widths > 0
    assert np.corrcoef(np.log(z[shown]), np.log(widths[shown]))[0, 1] < -0.7
    # AND the item's fourth channel is its height's plane
    assert x.shape == (4, 64, 64)
    torch.testing.assert_close(x[3:], height_channel([z[3]], (64, 64))[0])


def test_a_fine_tune_with_the_height_writes_a_segmenter_that_reads_it(tmp_path):
    run = tmp_path / "hp"
    cmd = [sys.executable, str(BENCH / "height_prior.py"), "--out", str(run), "--steps", "2", "--val-images", "64"]
    subprocess.run(cmd, check=True, capture_output=True, text=True, timeout=600)
    ckpt = read_checkpoint(run / "model.pt")
    assert ckpt["arch_kwargs"]["height"] == 1 and ckpt["step"] == 2
    assert ckpt["config"]["height_prior"]["reads_height"] is True
    assert Segmenter.load(run / "model.pt", "cpu").reads_height
    assert (run / "val.json").is_file() and (run / "curve.csv").is_file()
    again = subprocess.run(cmd, check=False, capture_output=True, text=True, timeout=600)
    assert again.returncode != 0 and "exists" in again.stderr
