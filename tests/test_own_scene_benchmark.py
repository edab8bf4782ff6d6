"""benchmarks/own_scene.py: the photo sets cut into tuning and test parts, and the targets it reports."""

import subprocess
import sys
from pathlib import Path

import cv2
import numpy as np

REPO = Path(__file__).resolve().parents[1]
BENCH = REPO / "benchmarks"
sys.path.insert(0, str(BENCH))

from own_scene import gain_met


def test_split_only_cuts_each_photo_into_a_left_tuning_part_and_a_right_test_part_and_stops(tmp_path):
    # GIVEN a photo set of two photos whose columns are numbered
    photos = tmp_path / "my-scene"
    photos.mkdir()
    for k, width in enumerate((100, 250)):
        image = np.zeros((40, width, 3), np.uint8)
        image[:, :, 0] = np.arange(width) % 256
        cv2.imwrite(str(photos / f"photo{k}.png"), image)
    out = tmp_path / "out"
    # WHEN the benchmark only splits it
    run = subprocess.run([sys.executable, str(BENCH / "own_scene.py"), str(photos), "--out", str(out),
                          "--split-only"], check=False, capture_output=True, text=True, timeout=120)
    # THEN it exits at once with the tuning part the left 60 % of each photo and the test part the rest, pixels
    # unchanged, and nothing evaluated or adapted
    assert run.returncode == 0, run.stderr
    assert "2 photos" in run.stdout
    for k, width in enumerate((100, 250)):
        tune = cv2.imread(str(out / "my-scene" / "tune" / f"photo{k}.png"))
        test = cv2.imread(str(out / "my-scene" / "test" / f"photo{k}.png"))
        cut = round(0.6 * width)
        assert tune.shape[1] + test.shape[1] == width
        assert abs(tune.shape[1] - cut) <= 1
        np.testing.assert_array_equal(np.concatenate([tune, test], axis=1)[0, :, 0], np.arange(width) % 256)
    assert not (out / "my-scene" / "adapted").exists()


def test_a_gain_of_exactly_the_target_counts_as_met():
    # GIVEN 93 of 100 episodes untouched (0.98 - 0.93 is 0.04999... in floats)
    shipped = {"successes": 93, "episodes": 100}
    # THEN 98 adapted is +5 points, met; 97 is not; on 300 episodes 294 against 279 is +5 exactly
    assert gain_met({"successes": 98, "episodes": 100}, shipped)
    assert not gain_met({"successes": 97, "episodes": 100}, shipped)
    assert gain_met({"successes": 294, "episodes": 300}, {"successes": 279, "episodes": 300})
    assert not gain_met({"successes": 293, "episodes": 300}, {"successes": 279, "episodes": 300})
    # a few episodes: no gain is no gain (0.05 x 2 x 2 episodes once rounded to nothing)
    assert not gain_met({"successes": 2, "episodes": 2}, {"successes": 2, "episodes": 2})
    assert gain_met({"successes": 2, "episodes": 2}, {"successes": 1, "episodes": 2})
