"""Episodes for a segmenter trained with a margin (``train-vision --margin-px``): the env renders the view and its
margins, the conditions act on all of it, the segmenter reads it and the controller gets the view's mask -- in the
rollouts of ``eval`` / ``dagger`` and in ``GraspAgent``."""

from __future__ import annotations

import argparse
from pathlib import Path

import numpy as np
import pytest

from grasp_s2r.agent import AgentError, GraspAgent, default_controller_path
from grasp_s2r.commands import train_vision
from grasp_s2r.control.parallax import SHIPPED as SHIPPED_PARALLAX
from grasp_s2r.control.policy import Policy, trained_scene
from grasp_s2r.learner import SegmenterMasks
from grasp_s2r.runtime.conditions import CONDITIONS
from grasp_s2r.runtime.pool import RolloutPool
from grasp_s2r.runtime.records import EXPERT, EpisodeRequest
from grasp_s2r.sim.camera import crop_margin
from grasp_s2r.sim.config import EnvConfig
from grasp_s2r.sim.env import GraspEnv
from grasp_s2r.vision.evaluation.evaluate import VisionEvalConfig, evaluate_segmenter
from grasp_s2r.vision.networks.segmenter import Segmenter
from grasp_s2r.vision.testsets.suites import SuiteError
from grasp_s2r.vision.training.train import SegmenterTrainConfig, train
from grasp_s2r.vision.training.train_config import margin_of

MARGIN_PX = 8


TINY = {"steps": 2, "batch_size": 2, "val_images": 4, "val_every": 2, "checkpoint_every": 2, "crop_px": 0,
        "workers": 0, "width": 8, "calibration_images": 0}


@pytest.fixture(scope="module")
def margin_checkpoint(tmp_path_factory) -> Path:
    """A (barely) trained segmenter whose camera saw 8 px beyond each edge of the 64 px view: it reads 80 px frames
    and refuses the view alone."""
    return train(SegmenterTrainConfig(**TINY, margin_px=MARGIN_PX), tmp_path_factory.mktemp("margin") / "run",
                 progress=False)


@pytest.fixture(scope="module")
def margin_segmenter(margin_checkpoint) -> Segmenter:
    return Segmenter.load(margin_checkpoint, "cpu")


def test_an_env_with_a_view_margin_renders_the_view_in_the_middle_of_a_wider_frame():
    with GraspEnv(EnvConfig()) as env:
        plain = env.reset(3).frame
        env.set_view_margin(MARGIN_PX)
        wide = env.reset(3).frame
        with pytest.raises(ValueError, match="margin_px must be >= 0"):
            env.set_view_margin(-1)
    assert plain.margin_px == 0 and plain.view() is plain
    assert wide.margin_px == MARGIN_PX and wide.rgb.shape == (80, 80, 3)
    view = wide.view()
    assert view.rgb.shape == plain.rgb.shape == (64, 64, 3)
    # the same pixels: the widened camera's middle is the view (pixels of the same size, the same pose)
    np.testing.assert_array_equal(view.sphere_mask, plain.sphere_mask)
    np.testing.assert_array_equal(view.gripper_mask, plain.gripper_mask)
    assert np.abs(view.rgb.astype(int) - plain.rgb.astype(int)).mean() < 1.0
    assert plain.sphere_mask.any() and wide.sphere_mask.sum() >= plain.sphere_mask.sum()
    np.testing.assert_array_equal(crop_margin(wide.rgb[None], MARGIN_PX, batched=True)[0], view.rgb)


def test_rollouts_render_the_margins_the_segmenter_reads_and_the_controller_gets_the_view(margin_segmenter):
    # GIVEN a mask source that refuses anything but the view and its 8 px margins (80 px)
    masks = SegmenterMasks(margin_segmenter)
    assert masks.margin_px == MARGIN_PX
    with pytest.raises(ValueError, match="8 px beyond the view"):
        masks(np.zeros((1, 64, 64, 3), np.uint8))
    assert masks(np.zeros((2, 80, 80, 3), np.uint8)).shape == (2, 64, 64)
    policy, blob = Policy.load(default_controller_path(), "cpu")
    # WHEN the pool plays episodes with it: the learner acting, photos composited onto the frames (the backdrop
    # condition) and a photo as the table; and an expert episode with the ground truth
    requests = [EpisodeRequest(seed=5, condition=CONDITIONS["heldout-backgrounds"]),
                EpisodeRequest(seed=6, condition=CONDITIONS["table-photo"])]
    with RolloutPool(trained_scene(blob), 2) as pool:
        records = pool.run(requests, policy, masks, progress=False, parallax=SHIPPED_PARALLAX)
        expert = pool.run([EpisodeRequest(seed=5, condition=CONDITIONS["nominal"], actor=EXPERT)], None,
                          masks, progress=False)
    # THEN every recorded step is the view: its image, its ground truth and the controller's input mask
    for rec in [*records, *expert]:
        a = rec.arrays
        assert a["rgb"].shape[1:] == (64, 64, 3) and a["sphere_mask"].shape[1:] == (64, 64)
        assert a["input_mask"].shape[1:] == (64, 64) and a["gripper_mask"].shape[1:] == (64, 64)
        assert a["sphere_mask"][0].any()  # the sphere in view at the start, in the view's own pixels
    assert expert[0].success  # the expert's episode is the one it grasps without a margin


def test_the_agent_brings_images_to_the_segmenters_wider_view_and_returns_the_views_mask(margin_segmenter):
    policy, blob = Policy.load(default_controller_path(), "cpu")
    agent = GraspAgent(segmenter=margin_segmenter, policy=policy, env=trained_scene(blob))
    cam = agent.segmenter_camera
    assert (cam.width_px, cam.height_px) == (80, 80) and cam.fov_deg > agent.camera.fov_deg
    # a camera of the widened field of view at twice the resolution
    step = agent.act(np.full((160, 160, 3), 90, np.uint8), [0.0, 0.0, 0.2, 0.04, 0.0])
    wide_camera = GraspAgent(segmenter=margin_segmenter, policy=policy, env=trained_scene(blob),
                           camera_vfov_deg=cam.fov_deg)
    assert step.image.shape == (80, 80, 3) and step.mask.shape == (64, 64)
    assert wide_camera.act(np.zeros((80, 80, 3), np.uint8), [0.0, 0.0, 0.2, 0.04, 0.0]).mask.shape == (64, 64)
    # a camera that sees only the trained view lacks the margins the segmenter reads: refused when the agent is made
    with pytest.raises(AgentError, match="60° sees less than the trained 71.6"):
        GraspAgent(segmenter=margin_segmenter, policy=policy, env=trained_scene(blob),
                   camera_vfov_deg=agent.camera.fov_deg)
    with pytest.raises(AgentError, match="does not cover"):  # an image narrower than the view, at the image
        agent.act(np.zeros((64, 48, 3), np.uint8), [0.0, 0.0, 0.2, 0.04, 0.0])


def test_what_reads_a_checkpoint_keeps_or_names_its_margin(margin_checkpoint, tmp_path, capsys):
    # a fine-tune from it (pipeline, adapt) keeps its margin; the shipped weights have none
    from grasp_s2r.vision.networks.segmenter import default_checkpoint_path

    assert margin_of(margin_checkpoint) == MARGIN_PX and margin_of(default_checkpoint_path()) == 0
    # train-vision says when a run's margin is not its --init's (the weights carry over, the camera changes)
    cfg = SegmenterTrainConfig(**TINY, init_checkpoint=str(margin_checkpoint))
    capsys.readouterr()
    train_vision._check_inputs(cfg, argparse.Namespace(out=tmp_path / "run", resume=False, backgrounds=None))
    assert "seen 8 px beyond each edge, this run 0 px (--margin-px)" in capsys.readouterr().out
    train_vision._check_inputs(SegmenterTrainConfig(**TINY, margin_px=MARGIN_PX, init_checkpoint=str(margin_checkpoint)),
                               argparse.Namespace(out=tmp_path / "run", resume=False, backgrounds=None))
    assert "--margin-px" not in capsys.readouterr().out
    # the test suites hold the view alone: eval-vision refuses the segmenter in one line, before making them
    with pytest.raises(SuiteError, match="reads the view seen 8 px beyond each edge"):
        evaluate_segmenter(margin_checkpoint, cfg=VisionEvalConfig(suite="sim", n_images=4), device="cpu")
