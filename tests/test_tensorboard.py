"""``--tensorboard``: train-vision and dagger write event files with the expected tags, read back by TensorBoard."""

from __future__ import annotations

import csv
import io
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import torch

from grasp_s2r.cli import main
from grasp_s2r.tblog import INSTALL_HINT

pytest.importorskip("tensorboard")
from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

TINY = ["--image-size", "32", "--batch-size", "4", "--width", "8", "--threads", "1", "--no-progress"]


def _events(logdir: Path) -> EventAccumulator:
    acc = EventAccumulator(str(logdir), size_guidance={"scalars": 0, "images": 0})
    acc.Reload()
    return acc


def _png_shape(encoded: bytes) -> tuple[int, ...]:
    from PIL import Image

    return np.asarray(Image.open(io.BytesIO(encoded))).shape


def test_train_vision_logs_losses_metrics_and_pictures_into_the_run_folder(tmp_path):
    out = tmp_path / "run"
    assert main(["train-vision", "--out", str(out), "--steps", "6", "--val-every", "3", *TINY, "--tensorboard"]) == 0
    acc = _events(out / "tensorboard")
    assert {"train/loss", "train/lr", "val/precision", "val/recall", "val/iou"} <= set(acc.Tags()["scalars"])
    assert {"train/composites", "val/overlays"} <= set(acc.Tags()["images"])
    assert [e.step for e in acc.Scalars("train/loss")] == [1, 2, 3, 4, 5, 6]
    assert [e.step for e in acc.Scalars("val/iou")] == [3, 6]
    with open(out / "curve.csv") as f:
        curve = list(csv.DictReader(f))
    assert [e.value for e in acc.Scalars("val/precision")] == pytest.approx(
        [float(r["val_precision"]) for r in curve], nan_ok=True)
    overlay = acc.Images("val/overlays")[-1]
    assert overlay.step == 6 and _png_shape(overlay.encoded_image_string)[2] == 3 and overlay.width > 32 * 8


def test_without_the_option_nothing_is_logged_and_without_the_package_one_line(tmp_path):
    assert main(["train-vision", "--out", str(tmp_path / "off"), "--steps", "2", "--val-every", "2", *TINY]) == 0
    assert not (tmp_path / "off" / "tensorboard").exists()
    code = ("import sys; sys.modules['torch.utils.tensorboard'] = None; from grasp_s2r.cli import main; "
            f"sys.exit(main(['train-vision', '--out', {str(tmp_path / 'no')!r}, '--steps', '2', '--tensorboard']))")
    res = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=False)
    assert res.returncode == 2 and INSTALL_HINT in res.stderr and len(res.stderr.splitlines()) == 1, res.stderr
    assert not (tmp_path / "no").exists(), "refused before anything is written"


def test_dagger_logs_success_and_loss_per_round_and_rollout_overlays(tmp_path):
    from grasp_s2r.control.dagger import DaggerConfig, run_dagger
    from grasp_s2r.control.train import PolicyTrainConfig
    from grasp_s2r.sim.config import SceneConfig, control_env_config

    torch.set_num_threads(1)
    env = control_env_config().replace(scene=SceneConfig(max_episode_steps=25))
    cfg = DaggerConfig(out=str(tmp_path / "run"), rounds=2, episodes_per_round=2, eval_episodes=2, masks="gt",
                       workers=1, bc_baseline=False, train=PolicyTrainConfig(steps=20, batch_size=32), env=env)
    result = run_dagger(cfg, progress=False, tensorboard=tmp_path / "tb")
    acc = _events(tmp_path / "tb")
    scalars = set(acc.Tags()["scalars"])
    assert {"dagger/success_rate", "dagger/loss", "data/labels", "data/beta", "time/round_s"} <= scalars
    assert [e.step for e in acc.Scalars("dagger/success_rate")] == [0, 1]
    assert [e.value for e in acc.Scalars("dagger/success_rate")] == pytest.approx(
        [row["dagger_success_rate"] for row in result.rows])
    assert [e.step for e in acc.Images("rollouts/overlays")] == [0, 1]
