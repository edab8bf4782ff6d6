"""``eval-vision --data DIR`` folder format and checkpoint errors, through the real CLI; the Segmenter API."""

from __future__ import annotations

import json

import cv2
import numpy as np
import pytest
import torch

from grasp_s2r.cli import main
from grasp_s2r.vision.evaluation.evaluate import EVAL_FORMAT_VERSION
from grasp_s2r.vision.images.backgrounds import split_names
from grasp_s2r.vision.images.folder import DataFolderError, load_folder
from grasp_s2r.vision.networks.model import build_model
from grasp_s2r.vision.networks.segmenter import CheckpointError, Segmenter, default_checkpoint_path, make_checkpoint


@pytest.fixture(scope="module")
def tiny_ckpt(tmp_path_factory):
    torch.manual_seed(0)
    kwargs = {"width": 4, "depth": 1}
    model = build_model("unet", **kwargs)
    path = tmp_path_factory.mktemp("ckpt") / "tiny.pt"
    torch.save(make_checkpoint(model, architecture="unet", arch_kwargs=kwargs, input_hw=(16, 16),
                               background_split=split_names(), config={"note": "test"}, step=0, history=[]), path)
    return path


def _write_pair(root, name, hw, target_box=None, image_ext=".png"):
    (root / "images").mkdir(parents=True, exist_ok=True)
    (root / "masks").mkdir(parents=True, exist_ok=True)
    img = np.random.default_rng(len(name)).integers(0, 256, size=(*hw, 3), dtype=np.uint8)
    mask = np.zeros(hw, np.uint8)
    if target_box is not None:
        y0, y1, x0, x1 = target_box
        mask[y0:y1, x0:x1] = 255
    cv2.imwrite(str(root / "images" / f"{name}{image_ext}"), img)
    cv2.imwrite(str(root / "masks" / f"{name}.png"), mask)


@pytest.fixture
def folder(tmp_path):
    root = tmp_path / "real"
    _write_pair(root, "big_jpeg", (48, 64), target_box=(8, 24, 16, 40), image_ext=".jpg")  # any size
    _write_pair(root, "small", (16, 16), target_box=(0, 4, 0, 4))
    _write_pair(root, "empty", (20, 20))  # all-zero mask: no target
    return root


def _eval(args, capsys) -> tuple[int, str]:
    code = main(["eval-vision", "--threads", "1", *args])
    return code, capsys.readouterr().err


def test_folder_is_read_and_resized(folder):
    names, images, masks = load_folder(folder, (16, 16))
    assert names == ["big_jpeg", "empty", "small"]
    assert images.shape == (3, 16, 16, 3) and images.dtype == np.uint8 and masks.shape == (3, 16, 16)
    assert masks[1].sum() == 0 and masks[2].sum() == 16
    assert 20 <= masks[0].sum() <= 40  # a 16x24 box in 48x64 px is a 5.3x6 box at 16x16, nearest-neighbour


def test_eval_on_folder_writes_json_and_overlays(folder, tiny_ckpt, tmp_path, capsys):
    out = tmp_path / "eval"
    code = main(["eval-vision", "--model", str(tiny_ckpt), "--data", str(folder), "--out", str(out),
                 "--save-overlays", "--threads", "1"])
    assert code == 0
    assert "pixel precision" in capsys.readouterr().out
    report = json.loads((out / "metrics.json").read_text())
    assert report["format"] == "grasp_s2r.vision_eval" and report["format_version"] == EVAL_FORMAT_VERSION
    assert report["source"]["kind"] == "folder"
    m = report["metrics"]
    assert (m["images"], m["target_images"], m["empty_images"]) == (3, 2, 1)
    _, _, masks = load_folder(folder, (16, 16))
    assert m["tp_px"] + m["fn_px"] == int(masks.sum())
    overlay = cv2.imread(str(out / "overlays.png"))
    assert overlay is not None and overlay.shape[0] > 16
    # again into the same folder without overlays: the earlier picture does not stay beside the new metrics.json
    assert main(["eval-vision", "--model", str(tiny_ckpt), "--data", str(folder), "--out", str(out),
                 "--threads", "1"]) == 0
    assert (out / "metrics.json").is_file() and not (out / "overlays.png").exists()


@pytest.mark.parametrize("breakage, message", [
    ("no_images", "no images"),
    ("image_without_mask", "has no mask"),
    ("mask_without_image", "has no image"),
    ("mask_other_size", "is 7x5 px but its image is"),
    ("corrupt_image", "cannot read"),
    ("no_folder", "is not a folder"),
])
def test_bad_folders_give_one_clear_line(folder, tiny_ckpt, tmp_path, capsys, breakage, message):
    if breakage == "no_images":
        for p in (folder / "images").iterdir():
            p.unlink()
    elif breakage == "image_without_mask":
        (folder / "masks" / "small.png").unlink()
    elif breakage == "mask_without_image":
        (folder / "images" / "small.png").unlink()
    elif breakage == "mask_other_size":
        cv2.imwrite(str(folder / "masks" / "small.png"), np.zeros((5, 7), np.uint8))
    elif breakage == "corrupt_image":
        (folder / "images" / "small.png").write_bytes(b"\x89PNG garbage")
    elif breakage == "no_folder":
        folder = tmp_path / "nowhere"
    with pytest.raises(DataFolderError, match=message):
        load_folder(folder, (16, 16))
    code, err = _eval(["--model", str(tiny_ckpt), "--data", str(folder), "--out", str(tmp_path / "o")], capsys)
    assert code == 2
    assert err.count("\n") == 1 and "error:" in err and message.split()[0] in err


@pytest.mark.parametrize("content, message", [
    (None, "does not exist"),
    (b"definitely not a checkpoint", "unreadable or corrupt"),
    ({"weights": 1}, "is not a grasp_s2r.segmenter checkpoint"),
    ({"format": "grasp_s2r.segmenter", "format_version": 99}, "format_version 99"),
])
def test_bad_checkpoints_give_one_clear_line(tmp_path, folder, capsys, content, message):
    path = tmp_path / "model.pt"
    if isinstance(content, bytes):
        path.write_bytes(content)
    elif content is not None:
        torch.save(content, path)
    with pytest.raises(CheckpointError, match=message):
        Segmenter.load(path)
    code, err = _eval(["--model", str(path), "--data", str(folder)], capsys)
    assert code == 2 and err.count("\n") == 1 and message.split()[0] in err


def test_segmenter_predict_shapes(tiny_ckpt):
    seg = Segmenter.load(tiny_ckpt, device="cpu")
    assert seg.input_hw == (16, 16) and seg.device.type == "cpu" and seg.config["architecture"] == "unet"
    batch = np.zeros((5, 16, 16, 3), np.uint8)
    assert seg.predict(batch).shape == (5, 16, 16) and seg.predict(batch).dtype == bool
    assert seg.predict(batch[0]).shape == (16, 16)
    assert seg.predict(np.zeros((2, 40, 24, 3), np.uint8)).shape == (2, 40, 24)  # other sizes: resized both ways
    with pytest.raises(ValueError, match="uint8"):
        seg.predict(batch.astype(np.float32))


def test_shipped_checkpoint_loads_and_records_its_origin():
    seg = Segmenter.load(default_checkpoint_path(), device="cpu")
    assert seg.input_hw == (64, 64)
    assert seg.config["format_version"] == 1 and seg.config["architecture"] in ("unet", "lraspp")
    assert seg.config["background_split"] == split_names()
    assert seg.config["config"]["train"]["image_size_px"] == 64
    assert seg.predict(np.zeros((64, 64, 3), np.uint8)).shape == (64, 64)
