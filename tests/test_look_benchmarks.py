"""benchmarks/sphere_contrast.py and painted_factors.py: a sphere's contrast with its surround, and the painted val
images with one ingredient taken out, run small on the real suites and the shipped segmenter."""

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

REPO = Path(__file__).resolve().parents[1]
BENCH = REPO / "benchmarks"
sys.path.insert(0, str(BENCH))

from sphere_contrast import contrast


def _disc(colour, surround, noise_sd=0.0):
    rng = np.random.default_rng(0)
    image = np.clip(np.full((32, 32, 3), surround, np.float64) + rng.normal(0, noise_sd, (32, 32, 3)), 0, 255)
    yy, xx = np.mgrid[:32, :32]
    mask = (yy - 16) ** 2 + (xx - 16) ** 2 <= 9
    image[mask] = colour
    return image.astype(np.uint8), mask


def test_a_sphere_in_its_surround_s_colour_has_no_contrast_and_a_red_one_on_grey_much():
    # GIVEN a disc of the surround's own grey, and a red disc on the same grey, the surround noisy
    hidden, mask = _disc((120, 120, 120), (120, 120, 120), noise_sd=8)
    shown, _ = _disc((220, 30, 30), (120, 120, 120), noise_sd=8)
    # THEN the hidden one differs from its surround less than the surround does within itself, the red one far more
    delta_hidden, ratio_hidden = contrast(hidden, mask)
    delta_shown, ratio_shown = contrast(shown, mask)
    assert ratio_hidden < 1 and ratio_shown > 5
    assert delta_hidden < 5 and delta_shown > 50


def test_the_contrast_is_that_of_the_noise_free_surround_s_spread():
    # GIVEN the same red disc on a flat and on a noisy grey
    flat, mask = _disc((220, 30, 30), (120, 120, 120))
    noisy, _ = _disc((220, 30, 30), (120, 120, 120), noise_sd=20)
    # THEN the colour difference is about the same, the ratio much lower where the surround is busy
    (d_flat, r_flat), (d_noisy, r_noisy) = contrast(flat, mask), contrast(noisy, mask)
    assert d_noisy == pytest.approx(d_flat, rel=0.1)
    assert r_noisy < r_flat / 10


@pytest.mark.parametrize("script, extra", [("sphere_contrast.py", ["--suites", "painted", "--n-images", "24"]),
                                           ("painted_factors.py", ["--n-images", "12"])])
def test_each_look_benchmark_runs_small_and_records_its_figures(tmp_path, script, extra):
    out = tmp_path / "r.json"
    run = subprocess.run([sys.executable, str(BENCH / script), *extra, "--json", str(out)], check=False,
                         capture_output=True, text=True, timeout=300)
    assert run.returncode == 0, run.stderr
    figures = json.loads(out.read_text())["figures"]
    if script == "sphere_contrast.py":
        cells = figures["suites"]["painted"]["checkpoints"]
        (row,) = cells.values()
        assert sum(c["spheres"] for c in row["by_width_and_scr"].values()) == figures["suites"]["painted"]["spheres"]
    else:
        from painted_factors import ARMS

        assert list(figures["arms"]) == list(ARMS)
        assert all(0.0 <= f <= 1.0 for a in figures["arms"].values() for f in a["found"].values())
