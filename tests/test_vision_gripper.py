"""The gripper head: the fingers' mask from the frozen shipped segmenter's features (``vision/gripper.py``), its
training data (the segmenter's composites with the fingers' mask carried through), its checkpoint, how it is
attached (mask sources, ``GraspAgent``) and ``grasp-s2r train-gripper``."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np
import pytest
import torch
from torch.nn import functional as F

from grasp_s2r.agent import AgentError, GraspAgent
from grasp_s2r.cli import main
from grasp_s2r.configs import to_dict
from grasp_s2r.control.policy import Policy, PolicyConfig
from grasp_s2r.learner import SegmenterMasks
from grasp_s2r.runtime.masks import make_mask_source, mask_source_identity
from grasp_s2r.vision.images.augment import AugmentConfig
from grasp_s2r.vision.images.backgrounds import load_backgrounds
from grasp_s2r.vision.images.composite import CompositeConfig
from grasp_s2r.vision.images.dataset import TRAINING_DATA, CompositeDataset, DataConfig, env_config_for
from grasp_s2r.vision.images.reshade import ReshadeConfig
from grasp_s2r.vision.networks.gripper import (
    GripperHead,
    GripperHeadError,
    attach_gripper_head,
    default_head_path,
    make_head_checkpoint,
    read_head_checkpoint,
    write_head_checkpoint,
)
from grasp_s2r.vision.networks.model import UNet
from grasp_s2r.vision.networks.segmenter import (
    CheckpointError,
    Segmenter,
    default_checkpoint_path,
    read_checkpoint,
    write_checkpoint,
)
from grasp_s2r.vision.training.gripper_train import GripperTrainConfig, evaluate_head, view_env_config

SHIPPED_VAL_IOU = 0.74
"""IoU of the shipped head on the first 64 validation composites (`evaluate_head`, measured: 0.746; 0.742 on all 256)."""
IOU_MARGIN = 0.05


@pytest.fixture(scope="module")
def shipped() -> Segmenter:
    return Segmenter.load(default_checkpoint_path(), device="cpu")


@pytest.fixture(scope="module")
def other_segmenter(tmp_path_factory) -> Path:
    """The shipped segmenter with another threshold: the same network in another file (another digest)."""
    ckpt = read_checkpoint(default_checkpoint_path())
    path = tmp_path_factory.mktemp("other") / "segmenter.pt"
    write_checkpoint({**ckpt, "threshold": 0.6}, path)
    return path


def _old_forward(net: UNet, x: torch.Tensor) -> torch.Tensor:
    """``UNet.forward`` as it was before ``features`` existed."""
    skips = []
    for i, block in enumerate(net.down):
        x = block(x if i == 0 else F.max_pool2d(x, 2))
        skips.append(x)
    skips.pop()
    for up, fuse in zip(net.up, net.fuse):
        x = fuse(torch.cat([up(x), skips.pop()], dim=1))
    return net.head(x)


def test_features_then_head_is_the_unchanged_forward(shipped):
    torch.manual_seed(0)
    x = torch.randn(3, 3, 64, 64)
    with torch.no_grad():
        for net in (shipped.model, UNet(width=8, depth=2).eval()):
            f = net.features(x)
            assert f.shape == (3, net.width, 64, 64)
            assert torch.equal(net.head(f), net(x))
            assert torch.equal(net(x), _old_forward(net, x))


def _head_file(path: Path, segmenter_sha256: str, **changes) -> GripperHead:
    torch.manual_seed(1)
    head = GripperHead(12, dilations=(1, 2))
    with torch.no_grad():  # non-trivial BatchNorm statistics
        for bn in (head.net[1], head.net[4]):
            bn.running_mean.uniform_(-0.5, 0.5)
            bn.running_var.uniform_(0.5, 2.0)
    ckpt = make_head_checkpoint(head, threshold=0.4, segmenter_sha256=segmenter_sha256,
                                config=to_dict(GripperTrainConfig(steps=3)), metrics={"val": {"iou": 0.5}})
    write_head_checkpoint({**ckpt, **changes}, path)
    return head.eval()


def test_a_head_round_trips_and_another_segmenters_head_or_file_is_refused(tmp_path, shipped, other_segmenter):
    digest = mask_source_identity("predicted")["segmenter_sha256"]
    assert shipped.checkpoint_sha256 == digest  # the digest the mask sources name a segmenter by
    head = _head_file(tmp_path / "head.pt", digest)
    assert read_head_checkpoint(tmp_path / "head.pt")["config"]["steps"] == 3
    seg = Segmenter.load(default_checkpoint_path(), device="cpu")
    assert attach_gripper_head(seg, tmp_path / "head.pt") == tmp_path / "head.pt"
    assert seg.has_gripper_head and seg.gripper_threshold == 0.4
    rgb = np.random.default_rng(0).integers(0, 256, (2, 64, 64, 3), dtype=np.uint8)
    from grasp_s2r.vision.networks.model import to_input_tensor

    with torch.no_grad():
        expected = torch.sigmoid(head(shipped.model.features(to_input_tensor(rgb))))[:, 0].numpy()
    np.testing.assert_allclose(seg.predict_gripper_proba(rgb), expected, atol=1e-6)
    np.testing.assert_array_equal(seg.predict(rgb), shipped.predict(rgb))  # the sphere's mask is untouched

    other = Segmenter.load(other_segmenter, device="cpu")
    with pytest.raises(GripperHeadError) as e:
        attach_gripper_head(other, tmp_path / "head.pt")
    assert digest in str(e.value) and other.checkpoint_sha256 in str(e.value) and "\n" not in str(e.value)
    assert not other.has_gripper_head
    with pytest.raises(GripperHeadError, match=r"is a grasp_s2r\.segmenter checkpoint, not a grasp_s2r\.gripper_head"):
        attach_gripper_head(seg, default_checkpoint_path())
    _head_file(tmp_path / "v2.pt", digest, format_version=2)
    with pytest.raises(GripperHeadError, match="format_version 2, this version reads 1"):
        read_head_checkpoint(tmp_path / "v2.pt")
    (tmp_path / "junk.pt").write_bytes(b"not a checkpoint")
    with pytest.raises(CheckpointError, match="unreadable or corrupt"):
        read_head_checkpoint(tmp_path / "junk.pt")


def test_predict_gripper_batches_single_images_and_other_sizes():
    seg = Segmenter.load(default_checkpoint_path(), device="cpu")
    assert not seg.has_gripper_head
    rgb = np.random.default_rng(1).integers(0, 256, (3, 64, 64, 3), dtype=np.uint8)
    with pytest.raises(CheckpointError, match="no gripper head"):
        seg.predict_gripper(rgb)
    attach_gripper_head(seg)  # the shipped one: it was trained on this file
    assert seg.has_gripper_head and seg.gripper_head_path == default_head_path()
    batch = seg.predict_gripper(rgb)
    assert batch.shape == (3, 64, 64) and batch.dtype == bool
    np.testing.assert_array_equal(seg.predict_gripper(rgb[1]), batch[1])
    big = np.random.default_rng(2).integers(0, 256, (2, 96, 128, 3), dtype=np.uint8)
    assert seg.predict_gripper(big).shape == (2, 96, 128)
    with pytest.raises(ValueError, match="expected uint8"):
        seg.predict_gripper(rgb.astype(np.float32))


def _geometric_only() -> DataConfig:
    """Composites on a black photo, hard edges, no shadow, no re-shading, every image warped (affine) and nothing
    else: the pasted pixels are the image's non-black pixels."""
    aug = AugmentConfig(color_jitter_prob=0.0, noise_prob=0.0, blur_prob=0.0, jpeg_prob=0.0, affine_prob=1.0,
                        affine_scale=(0.8, 1.3), affine_rotate_deg=15.0, affine_translate=0.1)
    return DataConfig(composite=CompositeConfig(edge_sigma_px=(0.0, 0.0), shadow_prob=0.0), augment=aug,
                      reshade=ReshadeConfig(prob=0.0))


def test_sample_is_unchanged_and_the_fingers_mask_follows_the_augmentation():
    photos = load_backgrounds("train")
    env = view_env_config(64, GripperTrainConfig())
    a, b = (CompositeDataset(env_config=env, data=TRAINING_DATA, backgrounds=photos, stream="val", seed=0, length=64)
            for _ in range(2))
    for i in range(12):
        rgb, mask = a.sample(i)
        rgb2, mask2, fingers = b.sample_with_gripper(i)
        np.testing.assert_array_equal(rgb, rgb2)
        np.testing.assert_array_equal(mask, mask2)
        assert not (fingers & mask).any()  # the sphere in front of a finger hides it
    a.close(), b.close()

    black = [np.zeros((200, 200, 3), np.uint8)]
    ds = CompositeDataset(env_config=env_config_for(64), data=_geometric_only(), backgrounds=black, stream="val",
                          seed=0, length=64)
    on_pasted, fingers_px, moved = 0, 0, 0
    for i in range(0, 64, 4):
        rgb, _, fingers = ds.sample_with_gripper(i)
        pasted = rgb.max(axis=2) > 0
        on_pasted += int((fingers & pasted).sum())
        fingers_px += int(fingers.sum())
        moved += not np.array_equal(fingers, ds.frame(i // 4).gripper_mask)
    ds.close()
    assert fingers_px > 2000 and moved >= 14  # fingers in view, and warped
    assert on_pasted / fingers_px > 0.97  # the mask lies on the pasted finger pixels (bilinear rims aside)


def test_a_few_training_steps_lower_the_loss_and_the_cli_writes_a_head_that_attaches(tmp_path, capsys):
    out = tmp_path / "gripper"
    argv = ["train-gripper", "--out", str(out), "--steps", "30", "--batch-size", "8", "--lr", "0.01",
            "--val-images", "8", "--heldout-images", "8", "--threads", "1", "--no-progress"]
    assert main(argv) == 0
    assert {"gripper_head.pt", "metrics.json", "overlays.png"} <= {p.name for p in out.iterdir()}
    metrics = json.loads((out / "metrics.json").read_text())
    losses = [row["train_loss"] for row in metrics["history"]]
    assert losses[-1] < losses[0] - 0.05, losses
    assert {"precision", "recall", "iou"} <= set(metrics["val"]) and metrics["heldout"]["images"] == 8
    ckpt = read_head_checkpoint(out / "gripper_head.pt")
    assert ckpt["metrics"]["val"] == metrics["val"] and ckpt["config"]["steps"] == 30
    seg = Segmenter.load(default_checkpoint_path(), device="cpu")
    attach_gripper_head(seg, out / "gripper_head.pt")
    assert seg.predict_gripper(np.zeros((64, 64, 3), np.uint8)).shape == (64, 64)
    capsys.readouterr()
    assert main(argv) == 2  # the folder holds a head
    assert "already holds a gripper head" in capsys.readouterr().err


@pytest.mark.parametrize("args, expected", [
    (["--vision", "missing.pt"], "no segmenter checkpoint at missing.pt"),
    (["--steps", "0"], "expected a positive integer, got 0"),
    (["--lr", "0"], "lr must be a positive number, got 0.0"),
    (["--out", "{foreign}"], "holds files no grasp_s2r command wrote"),
])
def test_cli_refuses_bad_input_in_one_line(args, expected, tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "thesis").mkdir()
    (tmp_path / "thesis" / "thesis.tex").write_text("mine")
    args = [a.replace("{foreign}", str(tmp_path / "thesis")) for a in args]
    try:
        code = main(["train-gripper", "--out", str(tmp_path / "new"), *args])
    except SystemExit as e:
        code = e.code
    err = capsys.readouterr().err.strip()
    assert code == 2 and len(err.splitlines()) == 1 and expected in err, err
    assert not (tmp_path / "new").exists()


def test_the_shipped_head_finds_the_fingers_on_validation_composites():
    """The shipped head, measured again on the first 64 of the validation composites it reports on."""
    ckpt = read_head_checkpoint(default_head_path())
    assert ckpt["segmenter_sha256"] == mask_source_identity("predicted")["segmenter_sha256"]
    figures = evaluate_head(cfg=GripperTrainConfig(val_images=64, heldout_images=16))
    assert figures["val"]["iou"] >= SHIPPED_VAL_IOU - IOU_MARGIN, figures
    assert figures["heldout"]["iou"] >= SHIPPED_VAL_IOU - 2 * IOU_MARGIN, figures


def _gripper_controller(path: Path) -> Path:
    torch.manual_seed(0)
    Policy(PolicyConfig(gripper=True), device="cpu").save(path)
    return path


def test_mask_sources_and_the_agent_attach_the_shipped_head(tmp_path, other_segmenter):
    source = make_mask_source("predicted", device="cpu")
    assert source.segmenter.has_gripper_head
    rgb = np.random.default_rng(3).integers(0, 256, (2, 64, 64, 3), dtype=np.uint8)
    assert source.gripper(rgb).shape == (2, 64, 64)
    ctrl = _gripper_controller(tmp_path / "ctrl.pt")
    agent = GraspAgent.load(controller=ctrl, device="cpu")
    assert agent.segmenter.has_gripper_head
    batch = agent.act_batch(rgb, np.zeros((2, 5), np.float32))
    assert np.isfinite(batch.actions).all()

    # another segmenter: the shipped head is not attached, and what needs it says so in one line
    other = make_mask_source("predicted", str(other_segmenter), device="cpu")
    assert not other.segmenter.has_gripper_head and other.segmenter.gripper_head is None
    with pytest.raises(AgentError, match="does not predict") as e:
        SegmenterMasks(other.segmenter).gripper(rgb)
    assert "\n" not in str(e.value)
    with pytest.raises(AgentError, match="has no gripper head"):
        GraspAgent.load(segmenter=other_segmenter, controller=ctrl, device="cpu")
    copy = tmp_path / "copy.pt"  # a copy of the shipped file is the same segmenter
    shutil.copy(default_checkpoint_path(), copy)
    assert make_mask_source("predicted", str(copy), device="cpu").segmenter.has_gripper_head


def test_a_hostile_head_checkpoint_is_refused_and_runs_nothing(tmp_path):
    import os

    class Payload:
        def __reduce__(self):
            return os.system, (f"touch {tmp_path / 'pwned'}",)

    torch.save({"format": "grasp_s2r.gripper_head", "format_version": 1, "payload": Payload()}, tmp_path / "h.pt")
    with pytest.raises(GripperHeadError, match="unreadable or corrupt"):
        read_head_checkpoint(tmp_path / "h.pt")
    assert not (tmp_path / "pwned").exists()
