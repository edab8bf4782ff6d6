"""Validation on tables no segmenter trained on (benchmarks/validation.py ``table-photo-unseen``): the photos of a
folder as the sim table, on the validation seeds; the held-out photos never enter it."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import cv2
import numpy as np
import pytest

BENCH = Path(__file__).resolve().parents[1] / "benchmarks"
sys.path.insert(0, str(BENCH))

import validation  # benchmarks/ is not a package: imported from its folder

from grasp_s2r.agent import default_controller_path
from grasp_s2r.control.policy import Policy
from grasp_s2r.runtime.conditions import CONDITIONS
from grasp_s2r.runtime.masks import make_mask_source
from grasp_s2r.runtime.pool import RolloutPool
from grasp_s2r.sim.config import control_env_config


@pytest.mark.parametrize(("name", "held_out", "replaced", "kept"), [
    (validation.UNSEEN_TABLE, "table-photo", "table_photos", "backgrounds"),  # the folder as the table
    (validation.UNSEEN_BACKDROP, "heldout-backgrounds", "backgrounds", "table_photos"),  # behind the sphere
])
def test_an_unseen_condition_is_its_held_out_one_with_the_folder_instead(tmp_path, name, held_out, replaced, kept):
    cond, reference = validation.validation_condition(name, str(tmp_path)), CONDITIONS[held_out]
    assert getattr(cond, replaced) == str(tmp_path) and getattr(reference, replaced) == "heldout"
    assert cond.name == name and getattr(cond, kept) == getattr(reference, kept)
    with pytest.raises(ValueError, match="needs a folder"):
        validation.validation_condition(name)
    assert validation.validation_condition("nominal") is validation.TRAIN_PHOTO_CONDITIONS["nominal"]


def test_validation_episodes_run_on_a_folder_of_photos_as_the_table(tmp_path):
    rng = np.random.default_rng(0)
    for k in range(2):  # two plain photos: smooth colour fields with noise
        img = cv2.resize(rng.integers(0, 255, (6, 6, 3), dtype=np.uint8), (96, 96), interpolation=cv2.INTER_CUBIC)
        cv2.imwrite(str(tmp_path / f"table{k}.png"), img)
    policy = Policy.load(Path(default_controller_path()), "cpu")[0]
    with RolloutPool(control_env_config(), 1) as pool:
        out = validation.validate(pool, policy, make_mask_source("predicted", "", "cpu"), [validation.UNSEEN_TABLE],
                                  2, unseen_photos=str(tmp_path))
    row = out[validation.UNSEEN_TABLE]
    assert row["episodes"] == 2 and 0 <= row["successes"] <= 2 and row["ci_low"] <= row["ci_high"]


def test_a_folder_without_photos_is_refused_not_replaced(tmp_path):
    policy = Policy.load(Path(default_controller_path()), "cpu")[0]
    with RolloutPool(control_env_config(), 1) as pool, pytest.raises(Exception, match="needs at least 2 images"):
        validation.validate(pool, policy, make_mask_source("predicted", "", "cpu"), [validation.UNSEEN_TABLE], 1,
                            unseen_photos=str(tmp_path))


def test_error_budget_removes_one_kind_of_error_and_sorts_frames_by_height(tmp_path):
    import types

    import error_budget

    from grasp_s2r.vision.networks.segmenter import Segmenter, default_checkpoint_path

    # GIVEN the shipped segmenter's mask of a frame with a sphere and a false blob, and the sphere's true mask
    seg = Segmenter.load(default_checkpoint_path(), device="cpu")
    rgb = np.zeros((1, 64, 64, 3), np.uint8)
    gt = np.zeros((1, 64, 64), bool)
    gt[0, 30:34, 30:34] = True
    no_misses, no_false = error_budget.OracleMasks(seg, "no misses"), error_budget.OracleMasks(seg, "no false blobs")
    seg.predict = lambda x: np.pad(np.ones((1, 3, 3), bool), ((0, 0), (5, 56), (5, 56))) | np.pad(
        np.ones((1, 2, 2), bool), ((0, 0), (34, 28), (34, 28)))  # a blob far off, and one touching the sphere's edge
    # WHEN each oracle makes its mask, THEN "no misses" holds the whole sphere and the far blob, "no false blobs"
    # only what lies within 2 px of the sphere
    m = no_misses(rgb, gt)
    assert m[gt].all() and m[0, 5:8, 5:8].all()
    m = no_false(rgb, gt)
    assert not m[0, :20, :20].any() and m[0, 34:36, 34:36].all() and not m[gt].any()
    # AND of two frames missing the sphere, one holds a signal below the threshold that is also the frame's peak, the
    # other only a faint one under a stronger false response
    log = error_budget.FrameLog(seg)
    prob = np.zeros((2, 64, 64), np.float32)
    prob[0][gt[0]], prob[0, 5, 5] = 0.3, 0.2
    prob[1][gt[0]], prob[1, 5, 5] = 0.05, 0.4
    seg.predict_proba = lambda x: prob[: len(x)]
    frames = {"sphere_mask": np.repeat(gt, 2, 0), "input_mask": np.zeros((2, 64, 64), bool),
              "rgb": np.zeros((2, 64, 64, 3), np.uint8), "proprio": np.zeros((2, len(error_budget.PROPRIO_NAMES)), np.float32)}
    log(types.SimpleNamespace(arrays=frames, success=False))
    assert log.misses()["failed"] == {"missed": 2, "signal": 0.5, "top": 0.5, "signal_prob": 0.1}
    assert log.misses()["succeeded"]["missed"] == 0
    # AND a whole run (2 episodes a row, two plain photos as the table) writes every row and the height bins
    rng = np.random.default_rng(0)
    photos = tmp_path / "photos"
    photos.mkdir()
    for k in range(2):
        img = cv2.resize(rng.integers(0, 255, (6, 6, 3), dtype=np.uint8), (96, 96), interpolation=cv2.INTER_CUBIC)
        cv2.imwrite(str(photos / f"table{k}.png"), img)
    out = tmp_path / "eb.json"
    subprocess.run([sys.executable, str(BENCH / "error_budget.py"), "--photos", str(photos), "--episodes", "2",
                    "--workers", "1", "--json", str(out)], check=True, capture_output=True, timeout=600)
    f = json.loads(out.read_text())["figures"]
    assert list(f["rows"]) == ["segmenter", "no false blobs", "no misses", "ground truth"]
    assert all(r["episodes"] == 2 for r in f["rows"].values())
    frames = sum(h[k]["frames"] for h in f["by_height"] for k in ("failed", "succeeded"))
    assert frames > 0 and f["by_height"][0]["height_cm"] == [0, 2]
    assert set(f["misses"]) == {"failed", "succeeded"}


def test_adabn_re_estimates_only_the_batch_norm_statistics_on_the_given_frames(tmp_path):
    """test_time_remedies.adabn_checkpoint: every weight as shipped, only the running statistics re-estimated; the
    first batch norm's running mean is the average of the first convolution's per-batch output means over the frames;
    the source recorded."""
    import test_time_remedies as ttr
    import torch

    from grasp_s2r.vision.networks.model import to_input_tensor
    from grasp_s2r.vision.networks.segmenter import Segmenter, default_checkpoint_path, read_checkpoint

    rgb = np.random.default_rng(0).integers(0, 256, (80, 64, 64, 3), dtype=np.uint8)  # two batches: 64 + 16
    out = ttr.adabn_checkpoint(Path(default_checkpoint_path()), rgb, tmp_path / "adabn.pt", {"photos": "noise"})
    before, after = read_checkpoint(default_checkpoint_path()), read_checkpoint(out)
    assert after["batchnorm_statistics"] == {"photos": "noise", "layers": 14, "frames": 80}
    changed = {k for k, v in before["state_dict"].items() if not torch.equal(v, after["state_dict"][k])}
    assert changed and all(k.rsplit(".", 1)[1] in ("running_mean", "running_var", "num_batches_tracked")
                           for k in changed)
    conv = Segmenter.load(default_checkpoint_path(), device="cpu").model.down[0][0]
    # the cumulative average of per-batch statistics, batches weighted equally (PyTorch's momentum=None)
    means = [conv(to_input_tensor(rgb[i:i + 64])).detach().mean((0, 2, 3)) for i in (0, 64)]
    assert torch.allclose(after["state_dict"]["down.0.0.weight"], before["state_dict"]["down.0.0.weight"])
    assert torch.allclose(after["state_dict"]["down.0.1.running_mean"], (means[0] + means[1]) / 2, atol=1e-4)


def test_upsampled_remedy_runs_the_network_on_the_larger_frame_and_masks_the_frame_itself():
    """test_time_remedies.upsampled: at scale 1 the shipped segmenter's own masks; at 1.5 the network sees 96 px frames
    (a multiple of 16) and the mask comes back at 64 px; ``RemedyMasks`` is a mask source that asks through it."""
    import test_time_remedies as ttr

    from grasp_s2r.vision.networks.segmenter import Segmenter, default_checkpoint_path

    seg = Segmenter.load(default_checkpoint_path(), device="cpu")
    rgb = np.random.default_rng(1).integers(0, 256, (3, 64, 64, 3), dtype=np.uint8)
    rgb[:, 30:34, 30:34] = (230, 30, 30)  # a red dot, so some masks are not empty
    assert np.array_equal(ttr.upsampled(1.0)(seg, rgb), seg.predict(rgb))
    seen = []
    hook = seg.model.register_forward_hook(lambda _m, inputs, _out: seen.append(tuple(inputs[0].shape[-2:])))
    try:
        mask = ttr.upsampled(1.5)(seg, rgb)
        via_source = ttr.RemedyMasks(seg, ttr.upsampled(1.5))(rgb, None)
    finally:
        hook.remove()
    assert seen == [(96, 96), (96, 96)] and mask.shape == (3, 64, 64) and mask.dtype == bool
    assert np.array_equal(via_source, mask)


def test_conv_padding_remedy_is_the_network_built_with_that_padding_and_leaves_the_segmenter_as_it_was():
    """test_time_remedies.conv_padding: the shipped weights run with replicate padding give the masks of a U-Net
    built with ``padding="replicate"`` from the same checkpoint, and the shipped segmenter pads with zeros after."""
    import test_time_remedies as ttr

    from grasp_s2r.vision.networks.segmenter import Segmenter, default_checkpoint_path, read_checkpoint

    seg = Segmenter.load(default_checkpoint_path(), device="cpu")
    rgb = np.random.default_rng(2).integers(0, 256, (4, 64, 64, 3), dtype=np.uint8)
    rgb[:, 0:5, 20:25] = (230, 30, 30)  # red dots at the top border and inside
    rgb[:, 40:44, 30:34] = (230, 30, 30)
    before = seg.predict(rgb)
    ckpt = read_checkpoint(default_checkpoint_path())
    ckpt["arch_kwargs"] = {**ckpt["arch_kwargs"], "padding": "replicate"}
    replicated = Segmenter.from_checkpoint(ckpt, "cpu").predict(rgb)
    assert np.array_equal(ttr.conv_padding("replicate")(seg, rgb), replicated)
    assert not np.array_equal(replicated, before)  # the padding changes what the network sees at the border
    assert np.array_equal(seg.predict(rgb), before)


def test_test_time_remedies_refuses_an_unknown_e2e_remedy(tmp_path):
    """``--e2e`` names rows of REMEDIES; another name exits with the list, before any view is rendered."""
    import subprocess

    r = subprocess.run([sys.executable, str(BENCH / "test_time_remedies.py"), "--photos", str(tmp_path),
                        "--e2e", "input upsampled 3x"], check=False, capture_output=True, text=True,
                       timeout=120)
    assert r.returncode != 0 and "unknown remedies ['input upsampled 3x']" in r.stderr
    assert "input upsampled 1.5x" in r.stderr


def test_failures_of_a_validation_condition_with_a_strip_per_failed_episode(tmp_path):
    """``table_photo_failures.py --validation start-out-of-view``: the validation seeds of that condition, one row an
    episode, a strip for each failed one and none for the others; with ``--backgrounds`` refused (it goes with the
    unseen-photo conditions only)."""
    import json
    import subprocess

    script = str(BENCH / "table_photo_failures.py")
    out, strips, untrained = tmp_path / "f.json", tmp_path / "strips", tmp_path / "untrained.pt"
    Policy(device="cpu").save(untrained)  # a controller of random weights: its episodes fail, so strips are drawn
    r = subprocess.run([sys.executable, script, "--validation", "start-out-of-view", "--episodes", "2", "--workers",
                        "1", "--policy", str(untrained), "--strips", str(strips), "--json", str(out)],
                       capture_output=True, text=True, check=False, timeout=600)
    assert r.returncode == 0, r.stderr
    figures = json.loads(out.read_text())["figures"]
    assert figures["condition"] == "start-out-of-view"
    seeds = [row["seed"] for row in figures["episodes"]]
    assert seeds == [validation.VALIDATION_BASE, validation.VALIDATION_BASE + 1]
    failed = {f"seed-{row['seed']}.png" for row in figures["episodes"] if not row["success"]}
    assert failed and {p.name for p in strips.glob("*.png")} == failed
    for row in figures["episodes"]:  # 20 frames (or every step of a shorter one), ten a row, 64 px tiles, 2 px gap, 3x
        if not row["success"]:
            rows, columns = -(-min(20, row["steps"]) // 10), min(10, row["steps"])
            assert cv2.imread(str(strips / f"seed-{row['seed']}.png")).shape[:2] == (rows * 66 * 3, columns * 66 * 3)
    # an unseen-photo table on a folder: each episode names the photo it had as its table, failures counted by photo
    photos = tmp_path / "photos"
    photos.mkdir()
    for k in range(3):
        cv2.imwrite(str(photos / f"table{k}.png"), np.full((48, 48, 3), 60 * k + 40, np.uint8))
    r = subprocess.run([sys.executable, script, "--validation", validation.UNSEEN_TABLE, "--backgrounds", str(photos),
                        "--episodes", "3", "--workers", "1", "--policy", str(untrained), "--json", str(out)],
                       capture_output=True, text=True, check=False, timeout=600)
    assert r.returncode == 0, r.stderr
    figures = json.loads(out.read_text())["figures"]
    assert {row["table_photo"] for row in figures["episodes"]} <= {f"table{k}.png" for k in range(3)}
    by_photo = figures["summary"]["failures_by_table_photo"]
    assert sum(e for _, e in by_photo.values()) == 3
    assert sum(k for k, _ in by_photo.values()) == sum(not row["success"] for row in figures["episodes"])
    # and each failure has one kind
    failed = [row for row in figures["episodes"] if not row["success"]]
    assert sum(figures["summary"]["failure_kinds"].values()) == len(failed)
    assert all(row["kind"] in figures["summary"]["failure_kinds"] for row in failed)
    assert all(row["rolled"] in (0, 1) for row in figures["episodes"])  # whether the sphere rolled on the table
    # table-photo (no --validation) on a folder of yours: its photos as the table, on the test seeds
    r = subprocess.run([sys.executable, script, "--backgrounds", str(photos), "--episodes", "1", "--workers", "1",
                        "--policy", str(untrained), "--json", str(out)],
                       capture_output=True, text=True, check=False, timeout=600)
    assert r.returncode == 0, r.stderr
    figures = json.loads(out.read_text())["figures"]
    assert figures["condition"] == "table-photo"
    assert figures["episodes"][0]["table_photo"] in {f"table{k}.png" for k in range(3)}
    # compared with a run of other episodes: refused in one line before any episode runs
    r = subprocess.run([sys.executable, script, "--backgrounds", str(photos), "--episodes", "2", "--compare", str(out)],
                       capture_output=True, text=True, check=False, timeout=120)
    assert r.returncode != 0 and "holds 1 episodes, this run 2" in r.stderr
    # or of another condition
    r = subprocess.run([sys.executable, script, "--validation", "start-out-of-view", "--episodes", "1", "--compare",
                        str(out)], capture_output=True, text=True, check=False, timeout=120)
    assert r.returncode != 0 and "is a run of table-photo, this one of start-out-of-view" in r.stderr
    # a training-photo condition with --backgrounds, an unseen-photo one without: refused, each in one line
    for argv in (["--validation", "nominal", "--backgrounds", str(tmp_path)], ["--validation", validation.UNSEEN_TABLE]):
        r = subprocess.run([sys.executable, script, *argv], capture_output=True, text=True, check=False, timeout=120)
        assert r.returncode != 0 and "--backgrounds goes with table-photo or --validation" in r.stderr, argv


def test_two_runs_failures_are_split_into_shared_and_each_runs_own():
    import table_photo_failures

    # GIVEN two runs of seeds 1-4: the first fails 1 and 2, the second 2 and 3 (finding the sphere in 40 % of 1's)
    def rows(failed, found):
        return [{"seed": s, "success": s not in failed, "found": found.get(s, 1.0)} for s in (1, 2, 3, 4)]

    here, there = rows({1, 2}, {}), rows({2, 3}, {1: 0.4})
    # WHEN compared
    c = table_photo_failures.compare_failures(here, there)
    # THEN 2 is shared, 1 is the first's own (found there in 40 % of its frames), 3 the second's own
    assert c == {"shared": [2], "only_here": [1], "only_there": [3], "there_found": {1: 0.4}}
    # and runs of other seeds are refused
    with pytest.raises(ValueError, match="other episodes"):
        table_photo_failures.compare_failures(here, here[:3])
    # and runs of the same seeds on other table photos
    on_photos = [{**r, "table_photo": "a.jpg"} for r in here]
    with pytest.raises(ValueError, match="other table photos"):
        table_photo_failures.compare_failures(on_photos, [{**r, "table_photo": "b.jpg"} for r in there])


def test_the_segmenters_peak_probability_on_a_missed_sphere_is_read_from_its_frames():
    """``table_photo_failures.missed_sphere_probability``: over the frames whose sphere is in view and missed by the
    controller's mask, the shipped segmenter's highest probability on the sphere's pixels; frames where the mask
    found the sphere, or with no sphere in view, do not count."""
    from types import SimpleNamespace

    import table_photo_failures

    from grasp_s2r.sim.env import GraspEnv
    from grasp_s2r.vision.networks.segmenter import Segmenter, default_checkpoint_path

    env = GraspEnv(control_env_config())
    try:
        frame = env.reset(seed=3).frame
    finally:
        env.close()
    assert frame.sphere_mask.sum() >= 3  # the sphere is in view at the start
    segmenter = Segmenter.load(default_checkpoint_path(), "cpu")
    empty = np.zeros_like(frame.sphere_mask)
    rgb = np.stack([frame.rgb] * 3)
    gt = np.stack([frame.sphere_mask, frame.sphere_mask, empty])  # the third frame shows no sphere
    missed = SimpleNamespace(arrays={"rgb": rgb, "sphere_mask": gt, "input_mask": np.zeros_like(gt)})
    found = SimpleNamespace(arrays={"rgb": rgb, "sphere_mask": gt, "input_mask": gt.copy()})
    peaks = table_photo_failures.missed_sphere_probability([missed, found], segmenter, 0.5)
    expected = float(segmenter.predict_proba(frame.rgb[None])[0][frame.sphere_mask].max())
    assert peaks["frames"] == 2 and peaks["median"] == pytest.approx(expected, abs=1e-6)
    assert peaks["share_above_half_threshold"] == float(expected >= 0.25)
    assert table_photo_failures.missed_sphere_probability([found], segmenter, 0.5) == {"frames": 0}
    # with only a few px of the frame around it: the sphere's pixels kept, the far ones the colour around it
    cut = table_photo_failures.within_context(frame.rgb, frame.sphere_mask, 4)
    assert np.array_equal(cut[frame.sphere_mask], frame.rgb[frame.sphere_mask])
    ys, xs = np.nonzero(frame.sphere_mask)
    assert (cut[0, 0] == cut[-1, -1]).all() and not np.array_equal(cut, frame.rgb)
    assert abs(ys.mean() - 32) < 28 and abs(xs.mean() - 32) < 28  # the corners are far from the sphere
    for radius, share in peaks["found_within_context_px"].items():
        proba = segmenter.predict_proba(table_photo_failures.within_context(frame.rgb, frame.sphere_mask,
                                                                            int(radius))[None])[0]
        assert share == float(proba[frame.sphere_mask].max() > 0.5)


def test_truth_in_a_range_of_sizes_and_a_sphere_dropped_in_the_lift():
    """``table_photo_failures.TruthInRange`` gives the ground truth in the frames whose sphere covers at least (close)
    or fewer than (far) ``px`` pixels and the shipped segmenter's mask elsewhere; ``failure_kind`` names an episode
    whose controller opened the gripper in the expert's lift phase first."""
    import table_photo_failures

    from grasp_s2r.runtime.masks import make_mask_source
    from grasp_s2r.sim.env import GraspEnv

    env = GraspEnv(control_env_config())
    try:
        frame = env.reset(seed=3).frame
    finally:
        env.close()
    area = int(frame.sphere_mask.sum())
    assert 3 <= area < 16  # far at the start
    lure = np.zeros_like(frame.sphere_mask)
    lure[2:6, 2:6] = True  # a 16 px "truth" away from the sphere, in a frame of its own: which mask it got is plain
    rgb, gt = np.stack([frame.rgb] * 2), np.stack([frame.sphere_mask, lure])
    source = make_mask_source("predicted", "", "cpu")
    predicted = source(rgb, gt)
    assert not (predicted[1] == lure).all()
    close = table_photo_failures.TruthInRange(source, "close", 16)
    masks = close(rgb, gt)
    assert (masks[0] == predicted[0]).all() and (masks[1] == lure).all()
    masks = table_photo_failures.TruthInRange(source, "far", 16)(rgb, gt)
    assert (masks[0] == gt[0]).all() and (masks[1] == predicted[1]).all()
    assert close.segmenter is source.segmenter
    with pytest.raises(ValueError, match="close or far"):
        table_photo_failures.TruthInRange(source, "near", 20)
    row = {"in_view": 0.1, "found": 0.0, "false_blob": 0.9, "opened_in_lift": 0}
    assert table_photo_failures.failure_kind(row) == "lured away"
    assert table_photo_failures.failure_kind({**row, "opened_in_lift": 2}) == "dropped in the lift"


def test_context_suppression_counts_the_missed_spheres_found_with_little_around_them(tmp_path):
    """``benchmarks/context_suppression.py``: per suite, the spheres the shipped segmenter finds, and of those it
    misses the share it finds with only 4 / 8 / 16 px of the image around them; an unknown suite is refused."""
    out = tmp_path / "context.json"
    subprocess.run([sys.executable, str(BENCH / "context_suppression.py"), "--suites", "painted", "--images", "60",
                    "--json", str(out)], check=True, capture_output=True, text=True)
    row = json.loads(out.read_text())["figures"]["suites"]["painted"]
    assert 0 < row["spheres"] <= 60 and 0 <= row["found"] <= 1
    assert row["missed"] == round(row["spheres"] * (1 - row["found"]))
    shares = row["missed_found_within_context_px"]
    assert (set(shares) == {"4", "8", "16"} and all(0 <= v <= 1 for v in shares.values())) or row["missed"] == 0
    bad = subprocess.run([sys.executable, str(BENCH / "context_suppression.py"), "--suites", "nothing", "--json",
                          str(out)], check=False, capture_output=True, text=True)
    assert bad.returncode != 0 and "context_suppression:" in bad.stderr


def test_won_lost_pairs_two_runs_episode_by_episode():
    won, lost = validation.won_lost([True, False, True, False], [True, True, False, False], [7, 8, 9, 10])
    assert (won, lost) == ([8], [9])
    with pytest.raises(ValueError):  # runs of different episodes do not pair
        validation.won_lost([True], [True, False], [1, 2])


def test_a_sphere_set_rolling_on_the_table_rolls_on_and_one_left_alone_does_not():
    """``table_photo_failures.rolled_steps`` on PyBullet's own states: a sphere given 5 cm/s along the table rolls on
    for every step recorded after (its rolling resistance is near zero), enough to count as ``rolled``; one left alone
    never rolls."""
    import pybullet as pb
    import table_photo_failures

    from grasp_s2r.sim.env import GraspEnv

    hold = np.array([0.0, 0.0, 0.0, -1.0])  # the arm stays where it starts, high above the sphere, fingers open
    with GraspEnv(control_env_config()) as env:
        env.reset(seed=0)
        still = [env.get_state()]
        for _ in range(table_photo_failures.ROLLED_STEPS):
            env.step(hold)
            still.append(env.get_state())
        spin = 0.05 / env.config.scene.sphere_radius_m  # rad/s: rolling, not sliding
        pb.resetBaseVelocity(env.sphere_uid, [0.05, 0.0, 0.0], [0.0, spin, 0.0], physicsClientId=env.client)
        rolling = [env.get_state()]
        for _ in range(table_photo_failures.ROLLED_STEPS):
            env.step(hold)
            rolling.append(env.get_state())
    assert not table_photo_failures.rolled_steps(np.array(still)).any()
    rolled = table_photo_failures.rolled_steps(np.array(rolling))
    assert rolled.all(), rolled
    assert rolled.sum() >= table_photo_failures.ROLLED_STEPS
