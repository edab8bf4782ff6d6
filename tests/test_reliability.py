"""Reliability suite (issue 15, item 5): every bad input of every command is refused in one line, exit code 2, no
traceback, and nothing is written: neither into a folder of another kind nor anywhere where the input was refused.

The table ``CASES`` holds (command line, a substring of the expected error line). Each row runs
``grasp_s2r.cli.main`` in-process in a fresh, empty working directory (so default ``--out`` folders land there)
against shared artifacts made once per module with the real commands: a dataset, a DAgger run, a segmenter
training run, a segmenter evaluation, an end-to-end evaluation, a pipeline folder, plus files that are not what
they claim (text, random bytes, empty, truncated checkpoints, a pickle that would run code). After each row the
working directory must still be empty and the shared artifacts byte-for-byte as they were (same files, same
modification times). A few rows go through the real ``grasp-s2r`` executable. The probes of the issue's "Why"
table are re-run as tests at the end.
"""

from __future__ import annotations

import json
import os
import shlex
import shutil
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch

from grasp_s2r.cli import COMMANDS, main
from grasp_s2r.cpu import available_cores
from grasp_s2r.data.episodes import EpisodeDataset, finished_indices
from grasp_s2r.files import ARTIFACT_MARKER, ArtifactFolder, folder_kind
from grasp_s2r.vision.networks.segmenter import default_checkpoint_path

CASE_TIME_LIMIT_S = 60
"""A bad input must be refused before the work starts: a row still running after this fails."""
NO_CUDA = pytest.mark.skipif(torch.cuda.is_available(), reason="needs a machine without CUDA")


class _Payload:
    """Unpickling this calls ``os.system``: what a hostile checkpoint would do."""

    def __init__(self, marker: str):
        self.marker = marker

    def __reduce__(self):
        return os.system, (f"touch {self.marker}",)


def _png(path: Path, value: int = 128) -> None:
    import cv2
    import numpy as np

    path.parent.mkdir(parents=True, exist_ok=True)
    assert cv2.imwrite(str(path), np.full((32, 32, 3), value, np.uint8))


def _ok(*argv: str) -> None:
    code = main([str(a) for a in argv])
    assert code == 0, f"fixture command failed: {argv}"


@pytest.fixture(scope="module")
def assets(tmp_path_factory) -> dict[str, Path]:
    """Real artifacts of every kind and files that are not what they claim; nothing may ever change them."""
    return build_assets(tmp_path_factory.mktemp("assets"))


def build_assets(root: Path) -> dict[str, Path]:
    a: dict[str, Path] = {"root": root}
    # a pipeline folder (its marker, as `pipeline` writes it: a real run takes minutes) whose demos/ is a real
    # collect dataset (the first probe of the issue)
    a["pipe"] = root / "pipeline"
    with ArtifactFolder(a["pipe"], "pipeline"):
        pass
    a["ds"] = a["pipe"] / "demos"
    _ok("collect", "--episodes", "1", "--max-steps", "5", "--out", a["ds"])
    a["dg"] = root / "dagger"
    _ok("dagger", "--out", a["dg"], "--rounds", "1", "--episodes-per-round", "1", "--eval-episodes", "1",
        "--masks", "gt", "--no-bc", "--workers", "1", "--train-steps", "1", "--max-steps", "5", "--quiet")
    a["ctrl"] = a["dg"] / "policy.pt"
    a["tv"] = root / "vision"
    _ok("train-vision", "--out", a["tv"], "--steps", "1", "--batch-size", "2", "--val-every", "1", "--threads", "1",
        "--no-progress", "--image-size", "16", "--width", "4")
    a["seg16"] = a["tv"] / "model.pt"
    a["seg"] = root / "segmenter.pt"  # a copy of the shipped segmenter (calibrate-vision rewrites --model in place)
    shutil.copy(default_checkpoint_path(), a["seg"])
    a["ve"] = root / "vision-eval"
    _ok("eval-vision", "--model", a["seg16"], "--n-images", "2", "--threads", "1", "--out", a["ve"])
    a["er"] = root / "eval"
    _ok("eval", "--policy", a["ctrl"], "--masks", "gt", "--episodes", "1", "--conditions", "nominal", "--workers",
        "1", "--video", "0", "--quiet", "--out", a["er"])
    # files that are not what they claim
    a["txt"] = root / "notes.txt"
    a["txt"].write_text("not a checkpoint\n")
    a["corrupt"] = root / "corrupt.pt"
    a["corrupt"].write_bytes(os.urandom(4096))
    a["empty"] = root / "empty.pt"
    a["empty"].write_bytes(b"")
    a["trunc"] = root / "truncated.pt"
    a["trunc"].write_bytes(a["ctrl"].read_bytes()[:2000])
    a["pwned"] = root / "pwned"  # must never appear
    a["hostile"] = root / "hostile.pt"
    torch.save({"format": "grasp_s2r.controller", "format_version": 1, "payload": _Payload(str(a["pwned"]))},
               a["hostile"])
    a["foreign"] = root / "thesis"
    a["foreign"].mkdir()
    (a["foreign"] / "thesis.tex").write_text("mine")
    a["emptydir"] = root / "emptydir"
    a["emptydir"].mkdir()
    a["badmarker"] = root / "badmarker"
    a["badmarker"].mkdir()
    (a["badmarker"] / ARTIFACT_MARKER).write_text("{not json")
    a["baddata"] = root / "baddata"  # an eval-vision --data folder whose PNGs are corrupt
    for sub in ("images", "masks"):
        (a["baddata"] / sub).mkdir(parents=True)
        (a["baddata"] / sub / "a.png").write_bytes(b"\x89PNG\r\n\x1a\n garbage")
    a["photos1"] = root / "one-photo"  # backgrounds folders: too few photos, corrupt photos
    _png(a["photos1"] / "a.png")
    a["badphotos"] = root / "bad-photos"
    a["badphotos"].mkdir()
    for name in ("a.png", "b.jpg", "c.png"):
        (a["badphotos"] / name).write_bytes(b"not an image")
    a["photos"] = root / "two-photos"  # a usable folder (adapt's refusals of its other options)
    _png(a["photos"] / "a.png")
    _png(a["photos"] / "b.png")
    return a


def _snapshot(root: Path) -> list[tuple[str, int, int]]:
    return sorted((p.relative_to(root).as_posix(), p.stat().st_size, p.stat().st_mtime_ns)
                  for p in root.rglob("*") if p.is_file())


# (command line with {placeholders} of ``assets``, substring of the error line); "new" is a fresh path in the
# working directory: it must not exist afterwards
C = "collect --out new"
T = "train-vision --out new --steps 1 --threads 1 --no-progress"
E = "eval-vision --out new --n-images 2 --threads 1"
G = "train-gripper --out new --threads 1 --no-progress"
K = "calibrate-vision --model {seg} --out new.pt --n-images 2"
D = "dagger --out new --rounds 1 --episodes-per-round 1 --eval-episodes 1 --masks gt --no-bc --workers 1 " \
    "--train-steps 1 --quiet"
DP = D.replace("--masks gt", "--masks predicted")
V = "eval --policy {ctrl} --masks gt --episodes 1 --conditions nominal --workers 1 --video 0 --quiet --out new"
VP = V.replace("--masks gt", "--masks predicted")
P = "pipeline --out new --workers 1"
POS = "expected a positive integer"
NONNEG = "expected a non-negative integer"

CASES = [
    # --- no command, unknown command
    ("", "the following arguments are required: COMMAND"),
    ("frobnicate", "invalid choice: 'frobnicate'"),
    # --- collect
    ("collect", "the following arguments are required: --out"),
    (f"{C} --episodes 0", f"{POS}, got 0"),
    (f"{C} --episodes -1", f"{POS}, got -1"),
    (f"{C} --episodes ten", f"{POS}, got 'ten'"),
    (f"{C} --episodes 1.5", f"{POS}, got '1.5'"),
    (f"{C} --episodes nan", f"{POS}, got 'nan'"),
    (f"{C} --workers 0", f"{POS}, got 0"),
    (f"{C} --workers -4", f"{POS}, got -4"),
    (f"{C} --seed -1", f"{NONNEG}, got -1"),
    (f"{C} --seed inf", f"{NONNEG}, got 'inf'"),
    (f"{C} --resolution 0", f"{POS}, got 0"),
    (f"{C} --resolution 4", "--resolution must be in [8, 1024], got 4"),
    (f"{C} --fov 0", "fov_deg must be in [5, 150], got 0.0"),
    (f"{C} --fov -30", "fov_deg must be in [5, 150]"),
    (f"{C} --fov nan", "fov_deg must be in [5, 150], got nan"),
    (f"{C} --fov inf", "fov_deg must be in [5, 150], got inf"),
    (f"{C} --fov wide", "invalid float value: 'wide'"),
    (f"{C} --sphere-diameter 0", "sphere_diameter_m must be in [0.002, 0.036]"),
    (f"{C} --sphere-diameter -0.01", "sphere_diameter_m must be in"),
    (f"{C} --sphere-diameter nan", "sphere_diameter_m must be in"),
    (f"{C} --sphere-diameter inf", "sphere_diameter_m must be in"),
    (f"{C} --max-steps 0", f"{POS}, got 0"),
    (f"{C} --frobnicate", "unrecognized arguments: --frobnicate"),
    (f"{C} --backend spark", "invalid choice: 'spark'"),
    (f"{C} --ray-actors 2", "--ray-address / --ray-actors need --backend ray"),
    (f"{C} --ray-actors -1", f"{NONNEG}, got -1"),
    ("collect --episodes 1 --out {dg}", "holds a DAgger run (grasp-s2r dagger), not an episode dataset"),
    ("collect --episodes 1 --out {tv}", "holds a segmenter training run"),
    ("collect --episodes 1 --out {ve}", "holds a segmenter evaluation"),
    ("collect --episodes 1 --out {er}", "holds an end-to-end evaluation"),
    ("collect --episodes 1 --out {pipe}", "holds a pipeline run"),
    ("collect --episodes 1 --out {foreign}", "holds files no grasp_s2r command wrote (thesis.tex)"),
    ("collect --episodes 1 --out {badmarker}", f"unreadable {ARTIFACT_MARKER}"),
    ("collect --episodes 1 --out {txt}", "exists and is not a folder"),
    ("collect --episodes 1 --out {txt}/sub", "is not a folder"),
    ("collect --episodes 1 --out /proc/grasp-s2r-test", "cannot use /proc/grasp-s2r-test"),
    ("collect --episodes 1 --max-steps 5 --seed 9 --out {ds}", "was made with another config (seed: stored 0, asked 9)"),
    # --- train-vision
    (f"{T} --steps 0", f"{POS}, got 0"),
    (f"{T} --batch-size 0", f"{POS}, got 0"),
    (f"{T} --batch-size -2", f"{POS}, got -2"),
    (f"{T} --lr 0", "--lr must be a positive number, got 0.0"),
    (f"{T} --lr -1", "--lr must be a positive number, got -1.0"),
    (f"{T} --lr nan", "--lr must be a positive number, got nan"),
    (f"{T} --lr inf", "--lr must be a positive number, got inf"),
    (f"{T} --lr fast", "invalid float value: 'fast'"),
    (f"{T} --arch resnet", "invalid choice: 'resnet'"),
    (f"{T} --width 0", f"{POS}, got 0"),
    (f"{T} --image-size 12", "--image-size must be in [16, 1024], got 12"),
    (f"{T} --image-size 20", "image size must be a multiple of 8 and at least 16, got 20"),
    (f"{T} --image-size 0", f"{POS}, got 0"),
    (f"{T} --val-every 0", f"{POS}, got 0"),
    (f"{T} --workers -1", "--workers must be in [0, 100000], got -1"),
    (f"{T} --workers many", "invalid int value: 'many'"),
    (f"{T} --threads 0", f"{POS}, got 0"),
    (f"{T} --amp maybe", "invalid choice: 'maybe'"),
    (f"{T} --seed x", f"{NONNEG}, got 'x'"),
    (f"{T} --seed -1", f"{NONNEG}, got -1"),
    (f"{T} --calibration-images -1", "--calibration-images must be in [0, 100000], got -1"),
    (f"{T} --recolor-prob 2", "background_recolor_prob must be in [0, 1], got 2.0"),
    (f"{T} --recolor-prob nan", "background_recolor_prob must be in [0, 1], got nan"),
    (f"{T} --camouflage-prob -0.5", "camouflage_prob must be in [0, 1], got -0.5"),
    (f"{T} --reshade-prob 1.5", "reshade probabilities must be in [0, 1]"),
    (f"{T} --distractor-prob nan", "distractor_prob must be in [0, 1], got nan"),
    (f"{T} --distractor-kinds ring,sphere", "--distractor-kinds: expected distinct kinds of ring, disc, ellipse"),
    (f"{T} --distractor-kinds hole,hole", "--distractor-kinds: expected distinct kinds of ring, disc, ellipse"),
    (f"{T} --photo-blob-prob 1.5", "photo_blob_prob must be in [0, 1], got 1.5"),
    (f"{T} --empty-view-prob -0.1", "empty_prob must be in [0, 1], got -0.1"),
    (f"{T} --blur-prob 1.5", "blur_prob must be in [0, 1], got 1.5"),
    (f"{T} --randconv-prob 1.5", "randconv_prob must be in [0, 1], got 1.5"),
    (f"{T} --randconv-prob nan", "randconv_prob must be in [0, 1], got nan"),
    (f"{T} --greyscale-prob 2", "greyscale_prob must be in [0, 1], got 2.0"),
    (f"{T} --jpeg-prob nan", "jpeg_prob must be in [0, 1], got nan"),
    (f"{T} --noise-prob -1", "noise_prob must be in [0, 1], got -1.0"),
    (f"{T} --hard-share 0", "hard_share must be in (0, 1], got 0.0"),
    (f"{T} --mix photo=x", "--mix: photo needs a number, got 'x'"),
    (f"{T} --mix sky=1", "--mix: unknown background kind 'sky'"),
    (f"{T} --mix photo=-1", "background mix weights must be finite, >= 0"),
    (f"{T} --mix photo=nan", "background mix weights must be finite, >= 0"),
    (f"{T} --mix photo=inf", "background mix weights must be finite, >= 0"),
    (f"{T} --mix photo=0,texture=0,flat=0,sim_table=0,photo_table=0", "with a positive sum"),
    (f"{T} --affine-scale 0,1", "--affine-scale: expected 0 < LO <= HI < inf, got '0,1'"),
    (f"{T} --affine-scale 2,1", "--affine-scale: expected 0 < LO <= HI < inf, got '2,1'"),
    (f"{T} --affine-scale 1,inf", "--affine-scale: expected 0 < LO <= HI < inf, got '1,inf'"),
    (f"{T} --affine-scale nan,nan", "--affine-scale: expected 0 < LO <= HI < inf"),
    (f"{T} --affine-scale x", "--affine-scale: expected LO,HI, got 'x'"),
    (f"{T} --init missing.pt", "missing.pt does not exist"),
    (f"{T} --init {{txt}}", "is unreadable or corrupt"),
    (f"{T} --init {{corrupt}}", "is unreadable or corrupt"),
    (f"{T} --init {{empty}}", "is unreadable or corrupt"),
    (f"{T} --init {{hostile}}", "is unreadable or corrupt"),
    (f"{T} --init {{ctrl}}", "is not a grasp_s2r.segmenter checkpoint"),
    (f"{T} --init {{seg}} --width 8", "this run is unet {{'width': 8, 'depth': 3}} at 64 px (a U-Net may start"),
    (f"{T} --backgrounds missing", "backgrounds folder missing does not exist"),
    (f"{T} --backgrounds {{txt}}", "is a file, not a folder of photos"),
    (f"{T} --backgrounds {{photos1}}", "needs at least 2 images"),
    (f"{T} --backgrounds {{badphotos}}", "cannot read background image"),
    pytest.param(f"{T} --device cuda", "'cuda' asked for, but this machine has no usable CUDA device", marks=NO_CUDA),
    (f"{T} --device tpu9", "unknown torch device 'tpu9'"),
    (f"{T} --resume", "--resume: new/checkpoint-latest.pt does not exist"),
    ("train-vision --steps 1 --out {ds}", "holds an episode dataset (grasp-s2r collect)"),
    ("train-vision --steps 1 --out {dg}", "holds a DAgger run"),
    ("train-vision --steps 1 --out {pipe}", "holds a pipeline run"),
    ("train-vision --steps 1 --out {foreign}", "holds files no grasp_s2r command wrote"),
    ("train-vision --steps 1 --out {txt}", "exists and is not a folder"),
    ("train-vision --steps 1 --no-progress --out {tv}", "already holds a run; pass --resume"),
    # --- eval-vision
    (f"{E} --model missing.pt", "checkpoint missing.pt does not exist"),
    (f"{E} --model {{txt}}", "is unreadable or corrupt (not a torch file: neither a zip archive nor a pickle)"),
    (f"{E} --model {{corrupt}}", "is unreadable or corrupt"),
    (f"{E} --model {{empty}}", "is unreadable or corrupt"),
    (f"{E} --model {{trunc}}", "is unreadable or corrupt"),
    (f"{E} --model {{hostile}}", "is unreadable or corrupt"),
    (f"{E} --model {{ctrl}}", "is not a grasp_s2r.segmenter checkpoint"),
    (f"{E} --model {{dg}}", "is a folder, not a checkpoint file"),
    (f"{E} --data missing", "missing is not a folder"),
    (f"{E} --data {{txt}}", "is not a folder"),
    (f"{E} --data {{emptydir}}", "images is not a folder"),
    (f"{E} --data {{ds}}", "images is not a folder"),
    (f"{E} --data {{baddata}}", "a.png (corrupt or not an image)"),
    (f"{E} --data {{baddata}} --suite sim", "--data DIR is evaluated as it is"),
    (f"{E} --suite moon", "--suite: unknown suite 'moon'"),
    (f"{E} --no-augment --suite sim", "--no-augment is --suite composites-clean"),
    (f"{E} --split test", "invalid choice: 'test'"),
    (f"{E} --n-images 0", f"{POS}, got 0"),
    (f"{E} --n-images -5", f"{POS}, got -5"),
    (f"{E} --n-images x", f"{POS}, got 'x'"),
    (f"{E} --seed x", f"{NONNEG}, got 'x'"),
    (f"{E} --seed -1", f"{NONNEG}, got -1"),
    (f"{E} --threshold nan", "threshold must be in (0, 1), got nan"),
    (f"{E} --threshold 0", "threshold must be in (0, 1), got 0.0"),
    (f"{E} --threshold 1", "threshold must be in (0, 1), got 1.0"),
    (f"{E} --threshold inf", "threshold must be in (0, 1), got inf"),
    (f"{E} --threshold -0.5", "threshold must be in (0, 1), got -0.5"),
    (f"{E} --threshold half", "invalid float value: 'half'"),
    (f"{E} --batch-size 0", f"{POS}, got 0"),
    (f"{E} --threads 0", f"{POS}, got 0"),
    pytest.param(f"{E} --device cuda", "'cuda' asked for, but this machine has no usable CUDA device", marks=NO_CUDA),
    (f"{E} --device tpu9", "unknown torch device 'tpu9'"),
    (f"{E} --backgrounds missing", "backgrounds folder missing does not exist"),
    (f"{E} --backgrounds {{photos1}}", "needs at least 2 images"),
    (f"{E} --backgrounds {{badphotos}}", "cannot read background image"),
    ("eval-vision --n-images 2 --threads 1 --out {ds}", "holds an episode dataset"),
    ("eval-vision --n-images 2 --threads 1 --out {tv}", "holds a segmenter training run"),
    ("eval-vision --n-images 2 --threads 1 --out {er}", "holds an end-to-end evaluation"),
    ("eval-vision --n-images 2 --threads 1 --out {txt}", "exists and is not a folder"),
    ("eval-vision --n-images 2 --threads 1 --out /proc/grasp-s2r-test", "/proc/grasp-s2r-test"),
    # --- train-gripper
    (f"{G} --steps 0", f"{POS}, got 0"),
    (f"{G} --batch-size -1", f"{POS}, got -1"),
    (f"{G} --lr 0", "lr must be a positive number, got 0.0"),
    (f"{G} --lr nan", "lr must be a positive number, got nan"),
    (f"{G} --threshold 1", "threshold must be in (0, 1), got 1.0"),
    (f"{G} --camera-jitter-mm -1", "camera jitter must be finite and >= 0, got -1 mm"),
    (f"{G} --dilations 1,x", "--dilations: expected positive integers D1,D2,..., got '1,x'"),
    (f"{G} --dilations 0", "dilations must be 1 to 8 integers in [1, 16], got (0,)"),
    (f"{G} --vision missing.pt", "no segmenter checkpoint at missing.pt"),
    (f"{G} --vision {{ctrl}}", "is not a grasp_s2r.segmenter checkpoint"),
    (f"{G} --vision {{corrupt}}", "is unreadable or corrupt"),
    ("train-gripper --steps 1 --out {dg}", "holds a DAgger run (grasp-s2r dagger), not a gripper head training run"),
    ("train-gripper --steps 1 --out {foreign}", "holds files no grasp_s2r command wrote (thesis.tex)"),
    ("train-gripper --steps 1 --out {txt}", "exists and is not a folder"),
    # --- calibrate-vision
    ("calibrate-vision", "the following arguments are required: --model"),
    ("calibrate-vision --model missing.pt --out new.pt", "checkpoint missing.pt does not exist"),
    ("calibrate-vision --model {txt} --out new.pt", "is unreadable or corrupt"),
    ("calibrate-vision --model {corrupt} --out new.pt", "is unreadable or corrupt"),
    ("calibrate-vision --model {hostile} --out new.pt", "is unreadable or corrupt"),
    ("calibrate-vision --model {ctrl} --out new.pt", "is not a grasp_s2r.segmenter checkpoint"),
    (f"{K} --n-images 0", f"{POS}, got 0"),
    (f"{K} --seed x", f"{NONNEG}, got 'x'"),
    (f"{K} --seed -3", f"{NONNEG}, got -3"),
    ("calibrate-vision --model {dg} --out new.pt", "is a folder, not a checkpoint file"),
    (f"{K} --backgrounds missing", "backgrounds folder missing does not exist"),
    (f"{K} --backgrounds {{photos1}}", "needs at least 2 images"),
    pytest.param(f"{K} --device cuda", "'cuda' asked for", marks=NO_CUDA),
    (f"{K} --device tpu9", "unknown torch device 'tpu9'"),
    ("calibrate-vision --model {seg} --n-images 2 --out {emptydir}", "--out {emptydir} is a folder"),
    ("calibrate-vision --model {seg} --n-images 2 --out {ds}/model.pt", "holds an episode dataset"),
    ("calibrate-vision --model {seg} --n-images 2 --out {er}/model.pt", "holds an end-to-end evaluation"),
    ("calibrate-vision --model {seg} --n-images 2 --out /proc/grasp-s2r-test/model.pt", "/proc/grasp-s2r-test"),
    # --- dagger
    ("dagger", "the following arguments are required: --out"),
    (f"{D} --rounds 0", f"{POS}, got 0"),
    (f"{D} --episodes-per-round 0", f"{POS}, got 0"),
    (f"{D} --episodes-per-round 100000", "--episodes-per-round must be in [1, 10000], got 100000"),
    (f"{D} --eval-episodes 0", f"{POS}, got 0"),
    (f"{D} --eval-conditions moon", "eval_conditions must be names from"),
    (f"{D} --eval-conditions ,", "eval_conditions must be names from"),
    (f"{D} --beta-schedule cosine", "invalid choice: 'cosine'"),
    (f"{D} --beta-rampdown 0", f"{POS}, got 0"),
    (f"{D} --beta-decay 2", "beta_decay must be in [0, 1], got 2.0"),
    (f"{D} --beta-decay nan", "beta_decay must be in [0, 1], got nan"),
    (f"{D} --beta-decay x", "invalid float value: 'x'"),
    (f"{D} --masks edges", "invalid choice: 'edges'"),
    (f"{D} --blind-start-prob 1.5", "must be in [0, 1]"),
    (f"{D} --blind-start-prob nan", "must be in [0, 1]"),
    (f"{D} --disturbance-prob -0.1", "must be in [0, 1]"),
    (f"{D} --blind-cutoff -1", f"{NONNEG}, got -1"),
    (f"{D} --out-of-view-prob 2", "out_of_view_prob must be in [0, 1]"),
    (f"{D} --table-photo-prob nan", "table_photo_prob must be in [0, 1]"),
    (f"{D} --dropout-prob -1", "dropout_prob must be in [0, 1]"),
    (f"{D} --backend spark", "invalid choice: 'spark'"),
    (f"{D} --ray-address auto", "--ray-address / --ray-actors need --backend ray"),
    (f"{D} --workers 0", f"{POS}, got 0"),
    (f"{D} --threads 0", f"{POS}, got 0"),
    (f"{D} --train-steps 0", f"{POS}, got 0"),
    (f"{D} --batch-size 0", f"{POS}, got 0"),
    (f"{D} --lr 0", "lr > 0"),
    (f"{D} --lr -1", "lr > 0"),
    (f"{D} --lr nan", "lr must be a positive number, got nan"),
    (f"{D} --lr inf", "lr must be a positive number, got inf"),
    (f"{D} --xyz-loss huber", "invalid choice: 'huber'"),
    (f"{D} --cnn-channels a,b", "--cnn-channels: expected positive integers C1,C2,..., got 'a,b'"),
    (f"{D} --cnn-channels 0", "--cnn-channels: expected positive integers C1,C2,..., got '0'"),
    (f"{D} --cnn-channels 8,-8", "--cnn-channels: expected positive integers C1,C2,..., got '8,-8'"),
    (f"{D} --cnn-channels 8,8,8,8,8,8,8,8", "divisible by 2**len(channels)"),
    (f"{D} --seed -1", f"{NONNEG}, got -1"),
    (f"{D} --camera-jitter-mm -1", "camera jitter must be finite and >= 0"),
    (f"{D} --camera-jitter-mm nan", "camera jitter must be finite and >= 0"),
    (f"{D} --camera-jitter-deg inf", "camera jitter must be finite and >= 0"),
    (f"{D} --resolution 4", "--resolution must be in [8, 1024], got 4"),
    (f"{D} --fov nan", "fov_deg must be in [5, 150], got nan"),
    (f"{D} --sphere-diameter 1", "sphere_diameter_m must be in"),
    (f"{D} --max-steps 0", f"{POS}, got 0"),
    pytest.param(f"{D} --device cuda", "'cuda' asked for", marks=NO_CUDA),
    (f"{DP} --vision missing.pt", "no segmenter checkpoint at missing.pt"),
    (f"{DP} --vision {{txt}}", "is unreadable or corrupt"),
    (f"{DP} --vision {{hostile}}", "is unreadable or corrupt"),
    (f"{DP} --vision {{ctrl}}", "is not a grasp_s2r.segmenter checkpoint"),
    (f"{DP} --gripper-input --vision {{seg16}}", "--gripper-input with predicted masks needs a segmenter that predicts"),
    (f"{D} --demos missing", "missing is not a grasp_s2r dataset (no meta.json)"),
    (f"{D} --demos {{txt}}", "is not a grasp_s2r dataset"),
    (f"{D} --demos {{tv}}", "is not a grasp_s2r dataset"),
    (f"{D} --demos {{ds}}", "were collected with another scene or camera than this run's"),
    ("dagger --out {ds}", "holds an episode dataset (grasp-s2r collect), not a DAgger run"),
    ("dagger --out {pipe}", "holds a pipeline run"),
    ("dagger --out {tv}", "holds a segmenter training run"),
    ("dagger --out {er}", "holds an end-to-end evaluation"),
    ("dagger --out {foreign}", "holds files no grasp_s2r command wrote"),
    ("dagger --out {txt}", "exists and is not a folder"),
    ("dagger --out /proc/grasp-s2r-test --masks gt --workers 1", "cannot use /proc/grasp-s2r-test"),
    ("dagger --out {dg} --masks gt --workers 1 --quiet", "holds a DAgger run with another config"),
    # --- eval
    (V.replace("{ctrl}", "missing.pt"), "no controller checkpoint at missing.pt"),
    (V.replace("{ctrl}", "{txt}"), "is not a readable controller checkpoint"),
    (V.replace("{ctrl}", "{corrupt}"), "is not a readable controller checkpoint"),
    (V.replace("{ctrl}", "{empty}"), "is not a readable controller checkpoint"),
    (V.replace("{ctrl}", "{trunc}"), "is not a readable controller checkpoint"),
    (V.replace("{ctrl}", "{hostile}"), "is not a readable controller checkpoint"),
    (V.replace("{ctrl}", "{seg}"), "is not a controller checkpoint (format 'grasp_s2r.segmenter')"),
    (V.replace("{ctrl}", "{dg}"), "no controller checkpoint at"),
    (f"{VP} --vision missing.pt", "no segmenter checkpoint at missing.pt"),
    (f"{VP} --vision {{txt}}", "is unreadable or corrupt"),
    (f"{VP} --vision {{ctrl}}", "is not a grasp_s2r.segmenter checkpoint"),
    (f"{V} --masks edges", "invalid choice: 'edges'"),
    (f"{V} --episodes 0", f"{POS}, got 0"),
    (f"{V} --episodes -1", f"{POS}, got -1"),
    (f"{V} --conditions moon", "unknown condition(s) moon"),
    (f"{V} --conditions ,", "no condition to evaluate"),
    (f"{V} --backgrounds missing", "--backgrounds missing is not a folder"),
    (f"{V} --backgrounds {{txt}}", "is not a folder"),
    (f"{V} --conditions heldout-backgrounds --backgrounds {{photos1}}", "needs at least 2 images"),
    (f"{V} --conditions heldout-backgrounds --backgrounds {{badphotos}}", "cannot read background image"),
    (f"{V} --video -1", f"{NONNEG}, got -1"),
    (f"{V} --workers 0", f"{POS}, got 0"),
    (f"{V} --threads 0", f"{POS}, got 0"),
    pytest.param(f"{V} --device cuda", "'cuda' asked for", marks=NO_CUDA),
    (f"{V} --device tpu9", "unknown torch device 'tpu9'"),
    (f"{V} --backend spark", "invalid choice: 'spark'"),
    (f"{V} --ray-actors 3", "--ray-address / --ray-actors need --backend ray"),
    (V.replace("--out new", "--out {ds}"), "holds an episode dataset"),
    (V.replace("--out new", "--out {tv}"), "holds a segmenter training run"),
    (V.replace("--out new", "--out {dg}"), "holds a DAgger run"),
    (V.replace("--out new", "--out {foreign}"), "holds files no grasp_s2r command wrote"),
    (V.replace("--out new", "--out {txt}"), "exists and is not a folder"),
    (V.replace("--out new", "--out /proc/grasp-s2r-test"), "cannot use /proc/grasp-s2r-test"),
    # --- pipeline
    (f"{P} --demo-episodes 0", f"{POS}, got 0"),
    (f"{P} --demo-episodes x", f"{POS}, got 'x'"),
    (f"{P} --vision-steps 0", f"{POS}, got 0"),
    (f"{P} --dagger-rounds 0", f"{POS}, got 0"),
    (f"{P} --eval-episodes 0", f"{POS}, got 0"),
    (f"{P} --workers 0", f"{POS}, got 0"),
    (f"{P} --backgrounds missing", "--backgrounds missing is not a folder"),
    (f"{P} --backgrounds {{txt}}", "is not a folder"),
    (f"{P} --backgrounds {{photos1}}", "needs at least 2 images"),
    (f"{P} --backgrounds {{badphotos}}", "cannot read background image"),
    (f"{P} --frobnicate", "unrecognized arguments: --frobnicate"),
    ("pipeline --out {ds}", "holds an episode dataset"),
    ("pipeline --out {dg}", "holds a DAgger run"),
    ("pipeline --out {tv}", "holds a segmenter training run"),
    ("pipeline --out {foreign}", "holds files no grasp_s2r command wrote"),
    ("pipeline --out {txt}", "exists and is not a folder"),
    ("pipeline --dagger-table-photo-prob nan --out new", "dagger_table_photo_prob must be in [0, 1], got nan"),
    ("pipeline --dagger-table-photo-prob 1.5 --out new", "dagger_table_photo_prob must be in [0, 1], got 1.5"),
    ("pipeline --out /proc/grasp-s2r-test", "cannot use /proc/grasp-s2r-test"),
    # --- adapt
    ("adapt --out new", "the following arguments are required: --photos"),
    ("adapt --photos '' --out new", "--photos: an empty path"),
    ("adapt --photos missing --out new", "--photos missing is not a folder of photos"),
    ("adapt --photos {txt} --out new", "is not a folder of photos"),
    ("adapt --photos {photos1} --out new", "needs at least 2 images"),
    ("adapt --photos {badphotos} --out new", "cannot read background image"),
    ("adapt --photos {photos} --table-photo-prob 1.5 --out new", "table_photo_prob must be in [0, 1], got 1.5"),
    ("adapt --photos {photos} --rounds 0 --out new", f"{POS}, got 0"),
    ("adapt --photos {photos} --out {ds}", "holds an episode dataset"),
    ("adapt --photos {photos} --out {foreign}", "holds files no grasp_s2r command wrote"),
    # --- export
    ("export {ds} --out new", "the following arguments are required: --format"),
    ("export --format lerobot --out new", "the following arguments are required: DATASET"),
    ("export {ds} --format parquet --out new", "invalid choice: 'parquet'"),
    ("export missing --format lerobot --out new", "missing is not a folder"),
    ("export {txt} --format robomimic --out new.hdf5", "is not a folder"),
    ("export {tv} --format lerobot --out new", "is neither an episode dataset"),
    ("export {emptydir} --format lerobot --out new", "is neither an episode dataset"),
    ("export {ds} --format lerobot --out {dg}", "is not an earlier lerobot export"),
    ("export {ds} --format lerobot --out {tv}", "is not an earlier lerobot export"),
    ("export {ds} --format robomimic --out {txt}", "is not an earlier robomimic export"),
    ("export {ds} --format robomimic --out {ds}", "is not an earlier robomimic export"),
    ("export {ds} --format lerobot --out /proc/grasp-s2r-test", "cannot use /proc/"),
    # --- backgrounds
    ("backgrounds", "the following arguments are required: --out"),
    ("backgrounds --out new --packages kde-wallpapers", "is reserved for an independent test"),
    ("backgrounds --out new --packages bogus", "no allowlist for bogus"),
    ("backgrounds --out {txt} --packages pybullet", "already exists; remove it or choose another --out"),
    ("backgrounds --out new --debs missing", "--debs missing is not a folder"),
    ("backgrounds --out new --allowlist {txt}", "not a JSON allowlist"),
    ("backgrounds --out new --format gif", "invalid choice: 'gif'"),
    # --- upgrade
    ("upgrade --out new", "the following arguments are required: DATASET"),
    ("upgrade {ds}", "the following arguments are required: --out"),
    ("upgrade missing --out new", "missing is not a grasp_s2r dataset"),
    ("upgrade {txt} --out new", "is not a grasp_s2r dataset"),
    ("upgrade {emptydir} --out new", "is not a grasp_s2r dataset"),
    ("upgrade {ds} --out new", "already has the current layout: nothing to upgrade"),
    ("upgrade {dg} --out new", "is not a grasp_s2r dataset"),
]


def _case_id(case) -> str:
    line = case.values[0] if hasattr(case, "values") else case[0]
    return line.replace("{", "").replace("}", "") or "<nothing>"


def _argv(line: str, assets: dict[str, Path]) -> list[str]:
    return shlex.split(line.format(**{k: str(v) for k, v in assets.items()}))


def _prefixes(argv: list[str], expected: str) -> tuple[str, ...]:
    if not argv or argv[0] not in COMMANDS:
        return ("grasp-s2r: error: ",)
    if "unrecognized arguments" in expected:  # argparse reports these from the top-level parser
        return (f"grasp-s2r {argv[0]}: error: ", "grasp-s2r: error: ")
    return (f"grasp-s2r {argv[0]}: error: ",)


class _TooSlow(Exception):
    pass


def _alarm(signum, frame):
    raise _TooSlow(f"not refused within {CASE_TIME_LIMIT_S} s: the input was not checked before the work")


def _call(argv: list[str], capsys) -> tuple[int, str, str]:
    old = signal.signal(signal.SIGALRM, _alarm)
    signal.alarm(CASE_TIME_LIMIT_S)
    try:
        try:
            code = main(argv)
        except SystemExit as e:  # argparse exits through the parser
            code = e.code if isinstance(e.code, int) else 2
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, old)
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def assert_refused(code: int, out: str, err: str, argv: list[str], expected: str) -> None:
    assert "Traceback" not in out + err, err
    assert code == 2, f"exit {code}; stderr: {err}"
    lines = err.strip().splitlines()
    assert len(lines) == 1, f"not one line: {err!r}"
    assert lines[0].startswith(_prefixes(argv, expected)), lines[0]
    assert expected in lines[0], lines[0]


def test_the_table_is_big_and_covers_every_command():
    commands = {_case_id(c).split()[0] for c in CASES if _case_id(c) != "<nothing>"}
    assert commands >= set(COMMANDS)
    assert len(CASES) >= 60


@pytest.mark.parametrize("line, expected", CASES, ids=[_case_id(c) for c in CASES])
def test_bad_input_is_refused_in_one_line_and_writes_nothing(line, expected, assets, tmp_path, monkeypatch, capsys):
    work = tmp_path / "cwd"
    work.mkdir()
    monkeypatch.chdir(work)
    argv = _argv(line, assets)
    expected = expected.format(**{k: str(v) for k, v in assets.items()})
    before = _snapshot(assets["root"])
    code, out, err = _call(argv, capsys)
    assert_refused(code, out, err, argv, expected)
    assert sorted(p.name for p in work.iterdir()) == [], "something was created where the input was refused"
    assert _snapshot(assets["root"]) == before, "a shared artifact was changed"
    assert not assets["pwned"].exists(), "a hostile checkpoint ran code"


# --- the real entry point, as a user runs it ---------------------------------------------------------------------
ENTRY_POINT_CASES = [
    ("collect --out new --workers 0", f"{POS}, got 0"),
    ("eval --policy {txt} --masks gt --episodes 1 --out new", "is not a readable controller checkpoint"),
    ("dagger --out {ds}", "holds an episode dataset (grasp-s2r collect), not a DAgger run"),
    ("train-vision --out /proc/grasp-s2r-test/run --steps 1 --no-progress", "cannot use /proc/grasp-s2r-test"),
    ("eval-vision --threshold nan --out new", "threshold must be in (0, 1), got nan"),
    ("calibrate-vision --model {ctrl} --out new.pt", "is not a grasp_s2r.segmenter checkpoint"),
    ("pipeline --out {tv}", "holds a segmenter training run"),
]


@pytest.mark.parametrize("line, expected", ENTRY_POINT_CASES, ids=[c[0].split()[0] for c in ENTRY_POINT_CASES])
def test_real_entry_point_refuses_in_one_line(line, expected, assets, tmp_path):
    exe = shutil.which("grasp-s2r")
    command = [exe] if exe else [sys.executable, "-m", "grasp_s2r"]
    argv = _argv(line, assets)
    before = _snapshot(assets["root"])
    r = subprocess.run([*command, *argv], capture_output=True, text=True, timeout=120, cwd=tmp_path, check=False)
    assert_refused(r.returncode, r.stdout, r.stderr, argv, expected)
    assert list(tmp_path.iterdir()) == []
    assert _snapshot(assets["root"]) == before


# --- the probes of issue 15's "Why" table ------------------------------------------------------------------------
def test_probe_dagger_into_a_pipelines_demos_folder_is_refused_untouched(assets, capsys):
    demos = assets["pipe"] / "demos"
    assert folder_kind(demos) == "dataset" and folder_kind(assets["pipe"]) == "pipeline"
    before = _snapshot(assets["pipe"])
    code, out, err = _call(["dagger", "--out", str(demos)], capsys)
    assert_refused(code, out, err, ["dagger"], "holds an episode dataset (grasp-s2r collect), not a DAgger run")
    assert _snapshot(assets["pipe"]) == before
    assert not (demos / "run.json").exists() and not (demos / "checkpoints").exists()


def test_probe_eval_with_a_text_file_as_policy(assets, tmp_path, capsys):
    x = tmp_path / "x.pt"
    x.write_text("hello\n")
    code, out, err = _call(["eval", "--policy", str(x)], capsys)
    assert_refused(code, out, err, ["eval"], f"{x} is not a readable controller checkpoint")


def test_probe_hostile_checkpoints_run_nothing_anywhere(assets, tmp_path, capsys):
    """Controller (--policy), segmenter (--vision, --model, --init) and DAgger's own round checkpoints."""
    for argv in (["eval", "--policy", str(assets["hostile"]), "--masks", "gt", "--out", str(tmp_path / "e")],
                 ["eval-vision", "--model", str(assets["hostile"]), "--out", str(tmp_path / "v")],
                 ["train-vision", "--init", str(assets["hostile"]), "--out", str(tmp_path / "t")]):
        code, out, err = _call(argv, capsys)
        assert code == 2 and "Traceback" not in err and len(err.strip().splitlines()) == 1, err
    # a DAgger run whose round-0 checkpoint was replaced: resuming it for one more round reads that file
    run = tmp_path / "dagger"
    dagger = ["dagger", "--out", str(run), "--episodes-per-round", "1", "--eval-episodes", "1", "--masks", "gt",
              "--no-bc", "--workers", "1", "--train-steps", "1", "--max-steps", "5", "--quiet"]
    _ok(*dagger, "--rounds", "1")
    capsys.readouterr()
    shutil.copy(assets["hostile"], run / "checkpoints" / "round-000.pt")
    code, out, err = _call([*dagger, "--rounds", "2"], capsys)
    assert_refused(code, out, err, ["dagger"], "is not a readable controller checkpoint")
    assert not assets["pwned"].exists()


def test_probe_train_vision_out_under_proc(capsys, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    argv = ["train-vision", "--out", "/proc/x", "--steps", "1", "--threads", "1", "--no-progress"]
    code, out, err = _call(argv, capsys)
    assert_refused(code, out, err, argv, "cannot use /proc/x")


@NO_CUDA
def test_probe_eval_vision_cuda_without_cuda(capsys, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    code, out, err = _call(["eval-vision", "--device", "cuda"], capsys)
    assert_refused(code, out, err, ["eval-vision"], "'cuda' asked for, but this machine has no usable CUDA device")
    assert list(tmp_path.iterdir()) == []


def test_probe_collect_1000_workers_is_capped_and_says_so(tmp_path, capsys):
    code, out, err = _call(["collect", "--workers", "1000", "--episodes", "2", "--max-steps", "5", "--out",
                            str(tmp_path / "d")], capsys)
    assert code == 0, err
    used = min(2, os.cpu_count() or 1)
    speed = next(line for line in out.splitlines() if line.startswith("speed"))
    assert f"--workers 1000 capped at {min(1000, available_cores())} (the CPU cores" in err  # said before the run
    assert f"with {used} worker(s)" in speed
    assert "1000 worker(s)" not in out


@pytest.mark.parametrize("probe, expected", [
    ("eval-vision --n-images 2 --out new --data {baddata}", "(corrupt or not an image)"),
    ("collect --out new --episodes 0", f"{POS}, got 0"),
    ("collect --out new --workers 0", f"{POS}, got 0"),
    ("eval-vision --out new --threshold nan", "threshold must be in (0, 1), got nan"),
    ("eval --out new --masks gt --policy {seg}", "is not a controller checkpoint (format 'grasp_s2r.segmenter')"),
], ids=["corrupt-png", "episodes-0", "workers-0", "threshold-nan", "segmenter-as-policy"])
def test_probe_rows_that_were_already_one_line(probe, expected, assets, tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    argv = _argv(probe, assets)
    code, out, err = _call(argv, capsys)
    assert_refused(code, out, err, argv, expected)
    assert list(tmp_path.iterdir()) == []


def test_probe_collect_kill_9_then_rerun_resumes_intact(tmp_path):
    out = tmp_path / "demos"
    args = [sys.executable, "-m", "grasp_s2r", "collect", "--episodes", "30", "--max-steps", "20", "--workers", "2",
            "--out", str(out), "--seed", "11"]
    proc = subprocess.Popen(args, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline and (not out.exists() or len(finished_indices(out)) < 3):
        time.sleep(0.01)
    os.killpg(proc.pid, signal.SIGKILL)
    proc.wait()
    n_before = len(finished_indices(out))
    assert 3 <= n_before < 30, "the run must be killed mid-way for this test to mean anything"
    lock = json.loads((out / ".grasp_s2r.lock").read_text())  # the dead writer's lock: taken over on rerun
    assert lock["pid"] == proc.pid and lock["host"] == socket.gethostname()
    r = subprocess.run(args, capture_output=True, text=True, timeout=300, check=False)
    assert r.returncode == 0, r.stderr
    assert f"{30 - n_before} new" in r.stdout
    assert finished_indices(out) == list(range(30)) and not list(out.glob(".tmp-*"))
    assert all(len(e["action"]) == len(e) for e in EpisodeDataset(out))
    assert not (out / ".grasp_s2r.lock").exists()
