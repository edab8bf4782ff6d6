"""A segmenter trained on the view seen beyond its edge (``train-vision --margin-px``): the camera widened, the
network's input the view and its margins, and such a network refusing frames of the view alone."""

from __future__ import annotations

import dataclasses
import json
import subprocess
import sys
from pathlib import Path

import cv2
import numpy as np
import pytest

from grasp_s2r.vision.images.backgrounds import load_backgrounds
from grasp_s2r.vision.images.dataset import env_config_for
from grasp_s2r.vision.networks.segmenter import Segmenter
from grasp_s2r.vision.training.train import SegmenterTrainConfig, TrainError, train

BENCH = Path(__file__).resolve().parents[1] / "benchmarks"


def test_a_run_with_a_margin_trains_on_the_wider_view_and_its_segmenter_reads_only_such_frames(tmp_path):
    photos = tmp_path / "photos"
    photos.mkdir()
    for k, img in enumerate(load_backgrounds("heldout")[:2]):
        cv2.imwrite(str(photos / f"p{k}.png"), img[:, :, ::-1])
    # GIVEN a run whose camera sees 8 px beyond each edge of the 64 px view
    cfg = SegmenterTrainConfig(steps=2, batch_size=2, val_images=4, val_every=2, checkpoint_every=2, crop_px=0,
                               workers=0, width=8, margin_px=8, calibration_images=0)
    assert cfg.input_px == 80
    camera = env_config_for(64, 8).camera
    assert (camera.width_px, camera.height_px) == (80, 80) and camera.fov_deg > env_config_for(64).camera.fov_deg
    # WHEN it trains
    seg = Segmenter.load(train(cfg, tmp_path / "run", progress=False), "cpu")
    # THEN its network reads 80 px frames, and a 64 px frame (the view alone) is refused, not resized
    assert seg.input_hw == (80, 80) and seg.margin_px == 8
    assert seg.predict(np.zeros((2, 80, 80, 3), np.uint8)).shape == (2, 80, 80)
    with pytest.raises(ValueError, match="8 px beyond the view"):
        seg.predict(np.zeros((2, 64, 64, 3), np.uint8))
    # AND a network without a margin reads frames of any size as before
    plain = Segmenter.load(train(dataclasses.replace(cfg, margin_px=0), tmp_path / "plain", progress=False), "cpu")
    assert plain.margin_px == 0 and plain.predict(np.zeros((1, 80, 80, 3), np.uint8)).shape == (1, 80, 80)
    # AND benchmarks/border_spheres.py measures it on the same views seen beyond their edge, and in episodes that
    # render the margins it reads
    out = tmp_path / "border.json"
    run = subprocess.run([sys.executable, str(BENCH / "border_spheres.py"), "shipped", str(tmp_path / "run" / "model.pt"),
                          "--photos", str(photos), "--views", "40", "--episodes", "2", "--json", str(out),
                          "--picture", str(tmp_path / "border.png")],
                         check=False, capture_output=True, text=True, timeout=300)
    assert run.returncode == 0, run.stderr[-2000:]
    rows = json.loads(out.read_text())["figures"]["rows"]
    # (and a picture of the views whose small sphere the border cuts: 40 views of these photos hold some)
    assert f"picture: {tmp_path / 'border.png'}" in run.stdout and (tmp_path / "border.png").stat().st_size > 0
    for name in ("shipped", str(tmp_path / "run" / "model.pt")):
        assert rows[name]["episodes"]["table-photo-unseen"]["episodes"] == 2
    with pytest.raises(TrainError, match="margin_px"):
        SegmenterTrainConfig(margin_px=-1)
    with pytest.raises(TrainError, match="multiple of 16"):
        SegmenterTrainConfig(unshuffle=2, margin_px=4)  # 72 px is not a multiple of 16
    # a deeper U-Net halves its input more often: its input and crops must divide by 2 ** depth
    with pytest.raises(TrainError, match="depth 5 with unshuffle 1 needs an input .* multiple of 32, got 72"):
        SegmenterTrainConfig(depth=5, margin_px=4)
    with pytest.raises(TrainError, match="depth 6 with unshuffle 1 needs crops a multiple of 64 px, got 32"):
        SegmenterTrainConfig(depth=6)
    with pytest.raises(TrainError, match="depth must be >= 1"):
        SegmenterTrainConfig(depth=0)
    assert SegmenterTrainConfig(depth=4).input_multiple_px == 16
