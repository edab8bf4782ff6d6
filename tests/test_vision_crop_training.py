"""Crop training and the CPU's precision: crops cut image and mask alike, bf16 only where the CPU multiplies bf16 and
it pays, and an interrupted crop-trained run resumes to the same weights as an uninterrupted one."""

from __future__ import annotations

import json
import time

import numpy as np
import pytest
import torch

from grasp_s2r import cpu
from grasp_s2r.train_speed import choose_precision
from grasp_s2r.vision.images.backgrounds import load_backgrounds
from grasp_s2r.vision.images.crops import CropConfig, CropDataset, crop_windows, cut, flatten_crops
from grasp_s2r.vision.images.dataset import TRAINING_DATA, CompositeDataset, env_config_for
from grasp_s2r.vision.networks.segmenter import read_checkpoint
from grasp_s2r.vision.training import train as train_module
from grasp_s2r.vision.training.train import SegmenterTrainConfig, TrainError, train

FLAGS = "fpu sse avx2 avx512f avx512bw"


def _cpuinfo(flags: str) -> str:
    return f"processor\t: 0\nmodel name\t: Test CPU\nflags\t\t: {flags}\n\nprocessor\t: 1\nflags\t\t: {flags}\n"


@pytest.fixture(scope="module")
def composites():
    ds = CompositeDataset(env_config=env_config_for(64), data=TRAINING_DATA, backgrounds=load_backgrounds("train"),
                          stream="train", seed=3, length=40)
    yield ds
    ds.close()


def test_crop_windows_stay_inside_and_sphere_crops_hold_the_sphere():
    rng = np.random.default_rng(0)
    cfg = CropConfig(size_px=32, per_composite=6, sphere_share=0.5)
    for _ in range(200):
        mask = np.zeros((64, 64), bool)
        r, c, rad = rng.integers(0, 64), rng.integers(0, 64), rng.integers(1, 6)
        yy, xx = np.ogrid[:64, :64]
        mask[(yy - r) ** 2 + (xx - c) ** 2 <= rad**2] = True
        corners = crop_windows(mask, cfg, rng)
        assert corners.shape == (6, 2) and corners.min() >= 0 and corners.max() <= 32
        crops = cut(mask, corners, 32)
        assert crops.shape == (6, 32, 32)
        assert all(crop.any() for crop in crops[:3]), "the first half of the crops is placed on the sphere"
        assert all(crop.sum() in (0, mask.sum()) for crop in crops), "no crop cuts the sphere"
    # without a sphere every crop is placed anywhere; a crop larger than the image is refused
    assert crop_windows(np.zeros((64, 64), bool), cfg, rng).shape == (6, 2)
    with pytest.raises(ValueError, match="does not fit"):
        crop_windows(np.zeros((16, 16), bool), cfg, rng)
    with pytest.raises(ValueError, match="multiple of 8"):
        CropConfig(size_px=20)


def test_crops_cut_image_and_mask_by_the_same_window(composites):
    cfg = CropConfig(size_px=32, per_composite=4, sphere_share=0.5)
    crops = CropDataset(composites, cfg)
    found_sphere = 0
    for i in range(12):
        rgb, mask = composites.sample(i)
        crop_rgb, crop_mask = crops.sample(i)
        assert crop_rgb.shape == (4, 32, 32, 3) and crop_mask.shape == (4, 32, 32) and crop_mask.dtype == bool
        # every crop is a window of the composite, the same window in image and mask
        for k in range(4):
            hits = [(r, c) for r in range(33) for c in range(33)
                    if np.array_equal(rgb[r:r + 32, c:c + 32], crop_rgb[k])]
            assert hits, "a crop is a window of its composite"
            assert any(np.array_equal(mask[r:r + 32, c:c + 32], crop_mask[k]) for r, c in hits)
        if mask.any():
            found_sphere += 1
            assert crop_mask[:2].any(axis=(1, 2)).all(), "the sphere crops show the sphere"
        # the same item twice: the same crops (an item depends on (seed, stream, index) only)
        again_rgb, again_mask = crops.sample(i)
        assert np.array_equal(again_rgb, crop_rgb) and np.array_equal(again_mask, crop_mask)
    assert found_sphere >= 6
    # as tensors, through a DataLoader batch, flattened to one batch of crops
    x, y = torch.utils.data.default_collate([crops[0], crops[1]])
    fx, fy = flatten_crops(x, y)
    assert fx.shape == (8, 3, 32, 32) and fy.shape == (8, 1, 32, 32)
    # items from crop_items on are whole composites
    tail = CropDataset(composites, cfg, crop_items=2)
    assert tail[2][0].shape == (3, 64, 64)


def test_cpu_flags_and_the_isa_cap():
    plain = cpu.parse_cpuinfo(_cpuinfo(FLAGS), cores=2)
    assert plain.name == "Test CPU" and not plain.bf16
    zen4 = cpu.parse_cpuinfo(_cpuinfo(FLAGS + " avx512_bf16"), cores=2)
    assert zen4.avx512_bf16 and not zen4.amx_bf16 and zen4.bf16
    spr = cpu.parse_cpuinfo(_cpuinfo(FLAGS + " avx512_bf16 amx_bf16 amx_tile amx_int8"), cores=2)
    assert spr.amx_bf16 and spr.bf16
    capped = cpu.parse_cpuinfo(_cpuinfo(FLAGS + " avx512_bf16 amx_bf16 amx_tile"), cores=2, isa_cap="avx512_core_bf16")
    assert capped.avx512_bf16 and not capped.amx_bf16 and "capped" in capped.describe()
    assert not cpu.parse_cpuinfo(_cpuinfo(FLAGS + " avx512_bf16 amx_bf16 amx_tile"), 2, isa_cap="AVX2").bf16
    assert cpu.split_cores(2, None) == (1, 1) and cpu.split_cores(1, None) == (0, 1)
    assert cpu.split_cores(8, None) == (1, 7) and cpu.split_cores(2, 0) == (0, 2) and cpu.split_cores(2, 3) == (3, 1)


def _timed_step(bf16_seconds: float, fp32_seconds: float):
    calls = []

    def step(model, bf16):
        calls.append(bf16)
        time.sleep(bf16_seconds if bf16 else fp32_seconds)
    return step, calls


def test_bf16_is_chosen_only_where_the_cpu_multiplies_bf16_and_it_pays(monkeypatch):
    model = torch.nn.Linear(2, 2)
    cpu_device = torch.device("cpu")
    # a CPU without AVX-512 BF16 or AMX: fp32, and the step is never probed
    monkeypatch.setattr(cpu, "cpu_info", lambda: cpu.parse_cpuinfo(_cpuinfo(FLAGS), 2))
    monkeypatch.setattr("grasp_s2r.train_speed.cpu_info", cpu.cpu_info)
    step, calls = _timed_step(0.001, 0.02)
    chosen = choose_precision("auto", cpu_device, model, step)
    assert not chosen.bf16 and calls == [] and "neither" in chosen.reason
    # with bf16 in hardware: bf16 where the probed step is faster, fp32 where it is slower
    monkeypatch.setattr("grasp_s2r.train_speed.cpu_info",
                        lambda: cpu.parse_cpuinfo(_cpuinfo(FLAGS + " avx512_bf16"), 2))
    step, calls = _timed_step(0.005, 0.02)
    assert choose_precision("auto", cpu_device, model, step).bf16 and True in calls and False in calls
    step, _ = _timed_step(0.02, 0.005)
    slower = choose_precision("auto", cpu_device, model, step)
    assert not slower.bf16 and "probed" in slower.reason
    # forced either way; a bad value refused
    assert choose_precision("on", cpu_device).bf16 and not choose_precision("off", cpu_device).bf16
    with pytest.raises(ValueError, match="amp must be one of"):
        choose_precision("fast", cpu_device)


TINY = {"image_size_px": 32, "crop_px": 16, "crops_per_composite": 2, "batch_size": 4, "width": 4, "steps": 8, "full_size_share": 0.25,
            "val_every": 2, "checkpoint_every": 2, "val_images": 8, "workers": 0}


def test_an_interrupted_crop_trained_run_resumes_to_the_same_weights(tmp_path, monkeypatch):
    cfg = SegmenterTrainConfig(**{**TINY, "val_every": 4})  # checkpoints at 2, 4, ...; curve rows at 4 and 8
    assert cfg.crop_steps == 6
    torch.set_num_threads(1)
    straight = train(cfg, tmp_path / "straight", amp="off", threads=1, progress=False)

    # GIVEN the same run interrupted (Ctrl-C) right after its step-2 checkpoint, inside the crop phase and
    # between two rows of its curve
    real_write = train_module.write_checkpoint
    interrupted = []

    def write_then_interrupt(ckpt, path):
        real_write(ckpt, path)
        if ckpt["step"] == 2 and not interrupted:
            interrupted.append(ckpt["step"])
            raise KeyboardInterrupt
    monkeypatch.setattr(train_module, "write_checkpoint", write_then_interrupt)
    with pytest.raises(KeyboardInterrupt):
        train(cfg, tmp_path / "resumed", amp="off", threads=1, progress=False)
    at_stop = read_checkpoint(tmp_path / "resumed" / "checkpoint-latest.pt")
    assert at_stop["step"] == 2 and at_stop["history"] == [] and len(at_stop["progress"]["losses_since_row"]) == 2
    monkeypatch.setattr(train_module, "write_checkpoint", real_write)
    # WHEN it is resumed: the rest of the crops, then the whole-image phase
    with pytest.raises(TrainError, match="already holds a run"):
        train(cfg, tmp_path / "resumed", amp="off", threads=1, progress=False)
    resumed = train(cfg, tmp_path / "resumed", resume=True, amp="off", threads=1, progress=False)
    # THEN it ends with the weights of the uninterrupted run, and its identity holds the crop settings
    a, b = read_checkpoint(straight)["state_dict"], read_checkpoint(resumed)["state_dict"]
    assert a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a)
    assert all(v.is_contiguous() for v in b.values())
    # its curve goes on as if it had not stopped: each row's loss averages the same steps, and its training time
    # counts the steps before the stop
    rows, rows_straight = read_checkpoint(resumed)["history"], read_checkpoint(straight)["history"]
    assert [r["step"] for r in rows] == [r["step"] for r in rows_straight] == [4, 8]
    assert [r["train_loss"] for r in rows] == pytest.approx([r["train_loss"] for r in rows_straight], rel=1e-6)
    assert at_stop["progress"]["elapsed_s"] < rows[0]["elapsed_s"] < rows[1]["elapsed_s"]
    # each session is on record: where it started, its precision and cores
    sessions = json.loads((tmp_path / "resumed" / "runtime.json").read_text())["sessions"]
    assert [(x["from_step"], x["precision"], x["workers"], x["threads"]) for x in sessions] == [(0, "fp32", 0, 1),
                                                                                                (2, "fp32", 0, 1)]
    # a resume with other crop settings is refused, naming the field
    with pytest.raises(TrainError, match="crop_px: stored 16, asked 8"):
        train(SegmenterTrainConfig(**{**TINY, "crop_px": 8}), tmp_path / "resumed", resume=True, amp="off",
              threads=1, progress=False)
