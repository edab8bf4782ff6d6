"""Issue 25, item 7: property-based tests over the option space of every command. Hypothesis draws command lines
from each command's own parser (every option it has, each given a value that is valid and small, or hostile: out
of range, malformed, nan/inf, empty, a path to the wrong thing); whatever it draws either runs (exit 0) or is
refused with exit 2, one line on stderr, no traceback, and nothing written. Every example runs the real command
(``grasp_s2r.cli.main``) in a fresh working directory.

The sizes a valid draw can take are small (``SMALL``) and a base command line keeps a run short, so that a draw
that is accepted finishes in seconds: the budget of the whole suite holds. Ray is left out (``--backend ray``
starts a cluster; tests/test_ray_backend.py covers it), and so is ``pipeline``'s run (minutes): its draws always
hold one hostile value.

Profiles: ``ci`` (the default: derandomized, so a run is the same every time, and a fixed number of examples a
command) and ``deep`` (``HYPOTHESIS_PROFILE=deep``: random, 10x the examples).
"""

from __future__ import annotations

import contextlib
import os
import re
import shutil
import signal
import tempfile
from pathlib import Path

import cv2
import numpy as np
import pytest
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st

from grasp_s2r.cli import COMMANDS, build_parser, main
from grasp_s2r.vision.networks.segmenter import default_checkpoint_path

settings.register_profile("ci", derandomize=True, deadline=None, database=None, print_blob=True,
                          phases=[Phase.explicit, Phase.generate],  # no shrinking: a failure is reported as drawn
                          suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])
settings.register_profile("deep", parent=settings.get_profile("ci"), derandomize=False,
                          phases=[Phase.explicit, Phase.generate, Phase.shrink])
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "ci"))
SCALE = 10 if os.environ.get("HYPOTHESIS_PROFILE") == "deep" else 1

HOSTILE_INT = ["-1", "0", "10000000000", "99999999999999999999", "1.5", "x", "", "nan", "1e3"]
"""Hostile integers: each out of every option's range, or not an integer (a value inside a range but large would
make an accepted run long: the sizes of accepted runs are :data:`SMALL`'s)."""
HOSTILE_FLOAT = ["-1", "nan", "inf", "-inf", "1e308", "x", "", "2"]
HOSTILE_TEXT = ["", "bogus", ",,", "nan", "=", "a=b=c"]
SMALL = {  # option -> valid values that keep a run short
    "--episodes": ["1", "2"], "--episodes-per-round": ["1", "2"], "--eval-episodes": ["1"], "--rounds": ["1", "2"],
    "--max-steps": ["1", "4"], "--steps": ["1", "2"], "--train-steps": ["1", "2"], "--val-every": ["1", "2"],
    "--batch-size": ["1", "2"], "--image-size": ["16", "24"], "--width": ["1", "4"], "--n-images": ["1", "2"],
    "--val-images": ["1", "2"], "--heldout-images": ["1", "2"], "--calibration-images": ["0", "2"],
    "--crop-px": ["0", "8"], "--crops-per-composite": ["1", "2"], "--resolution": ["8", "16", "32"],
    "--seed": ["0", "7"], "--video": ["0", "1"], "--beta-rampdown": ["1", "2"], "--blind-cutoff": ["0", "2"],
    "--workers": ["0", "1", "2", "100000"], "--threads": ["1", "2", "100000"], "--ray-actors": ["0", "2"],
    "--demo-episodes": ["1"], "--vision-steps": ["1"], "--dagger-rounds": ["1"],
    "--fov": ["5", "60", "150"], "--sphere-diameter": ["0.0137", "0.03"], "--lr": ["0.001", "1e-9"],
    "--threshold": ["0.5", "0.01"], "--beta-decay": ["0.5", "1"], "--dice-weight": ["0", "1"],
    "--camera-jitter-mm": ["0", "1"], "--camera-jitter-deg": ["0", "0.5"],
    "--conditions": ["nominal", "nominal,perturbation"], "--eval-conditions": ["nominal"],
    "--mix": ["photo=0.5", "flat=0"], "--affine-scale": ["0.8,1.2"], "--dilations": ["1", "1,2"],
    "--cnn-channels": ["4"], "--suite": ["sim"], "--task": ["pick up the sphere"], "--device": ["cpu", ""],
    "--backend": ["local"], "--amp": ["off"], "--packages": ["pybullet", "pybullet,scikit-learn"],
}
"""Valid values; a float option not named here draws from 0, 0.1, 0.5, 1."""
HOSTILE_CHOICE = ["bogus", ""]
LEFT_OUT = {"--ray-address", "--tensorboard", "--help", "--version", "--resume", "--overwrite"}
"""Not drawn: Ray, TensorBoard (their own tests), and the switches that only make sense with what a test made."""
BASE = {  # a short run, whatever is drawn on top (argparse: the last value of an option wins)
    "collect": "--out out --episodes 1 --max-steps 4",
    "train-vision": "--out out --steps 1 --batch-size 2 --image-size 16 --width 4 --val-every 1 --workers 0 "
                    "--threads 1 --no-progress --amp off",
    "eval-vision": "--out out --model {seg16} --n-images 2 --threads 1",
    "calibrate-vision": "--model {seg16} --out out.pt --n-images 2",
    "train-gripper": "--out out --steps 1 --batch-size 2 --val-images 2 --heldout-images 2 --workers 0 --threads 1 "
                     "--no-progress",
    "dagger": "--out out --rounds 1 --episodes-per-round 1 --eval-episodes 1 --masks gt --no-bc --workers 1 "
              "--train-steps 1 --max-steps 4 --quiet --threads 1",
    "eval": "--policy {ctrl} --masks gt --episodes 1 --conditions nominal --workers 1 --video 0 --quiet --threads 1",
    "pipeline": "--out out --workers 1 --demo-episodes 1 --vision-steps 1 --dagger-rounds 1 --eval-episodes 1",
    "export": "{ds} --format robomimic --out out.hdf5",
    "upgrade": "{ds} --out out",
    "backgrounds": "--out out --packages pybullet --no-progress",
    "adapt": "--photos {photos} --out out --rounds 1 --episodes-per-round 1 --eval-episodes 1 --workers 1 "
             "--segmenter-steps 0 --no-progress",
}
EXAMPLES = {"collect": 12, "train-vision": 20, "eval-vision": 10, "calibrate-vision": 8, "train-gripper": 6, "dagger": 6,
            "eval": 10, "pipeline": 6, "export": 10, "upgrade": 6, "backgrounds": 6, "adapt": 3}
"""Examples a command (the ``ci`` profile): what the suite's budget affords, the slow commands fewest."""


@pytest.fixture(scope="module")
def files(tmp_path_factory) -> dict[str, str]:
    """What path options may name: real artifacts (read only) and things that are not what they claim."""
    root = tmp_path_factory.mktemp("props")
    f = {"root": str(root), "seg": str(default_checkpoint_path()),
         "ctrl": str(Path(default_checkpoint_path()).parent / "controller.pt")}
    assert main(["train-vision", "--out", str(root / "tv"), "--steps", "1", "--batch-size", "2", "--image-size", "16",
                 "--width", "4", "--val-every", "1", "--threads", "1", "--workers", "0", "--no-progress"]) == 0
    f["seg16"], f["tv"] = str(root / "tv" / "model.pt"), str(root / "tv")
    assert main(["collect", "--out", str(root / "ds"), "--episodes", "1", "--max-steps", "4"]) == 0
    f["ds"] = str(root / "ds")
    (root / "notes.txt").write_text("not what it claims\n")
    f["txt"] = str(root / "notes.txt")
    (root / "foreign").mkdir()
    (root / "foreign" / "thesis.tex").write_text("mine")
    f["foreign"] = str(root / "foreign")
    (root / "photos").mkdir()
    for i in range(2):
        cv2.imwrite(str(root / "photos" / f"p{i}.png"), np.full((24, 32, 3), 60 + 90 * i, np.uint8))
    f["photos"] = str(root / "photos")
    return f


def _paths(command: str, flag: str, f: dict[str, str]) -> tuple[list[str], list[str]]:
    """(valid, hostile) values of a path option: the real thing(s) it wants; missing, empty, a text file, a foreign
    folder, an artifact of another kind (never one the command would rightly extend: shared files stay as they are)."""
    real = {"--model": [f["seg16"]], "--vision": [f["seg"], ""], "--policy": [f["ctrl"]], "--init": [f["seg16"]],
            "--demos": [f["ds"]], "--out": ["out", "new/sub"], "--photos": [f["photos"]]}.get(flag, [])
    other = f["tv"] if command in ("collect", "upgrade") else f["ds"]
    return real, ["", f["txt"], f["foreign"], other] + ([] if flag == "--out" else ["missing"])


def option_values(command: str, f: dict[str, str]) -> tuple[list[tuple[str, st.SearchStrategy]], list[str]]:
    """[(flag, strategy of its value or None for a switch)] of ``command``'s parser, and its positionals' flags."""
    parser = build_parser(only=command).command_parsers[command]
    options, positionals = [], []
    for a in parser._actions:
        if not a.option_strings:
            positionals.append(a.dest)
            continue
        flag = a.option_strings[0]
        if flag in LEFT_OUT or flag == "-h":
            continue
        if a.nargs == 0:
            options.append((flag, None))
            continue
        kind = getattr(a.type, "__name__", "")
        if a.choices:
            valid, bad = [c for c in a.choices if c != "ray"], HOSTILE_CHOICE
        elif flag in ("--model", "--vision", "--policy", "--init", "--demos", "--out", "--data", "--backgrounds",
                      "--debs", "--cache", "--allowlist", "--photos"):
            valid, bad = _paths(command, flag, f)
        elif kind in ("positive_int", "non_negative_int", "int"):
            valid, bad = SMALL.get(flag, ["1"]), HOSTILE_INT
        elif kind == "float":
            valid, bad = SMALL.get(flag, ["0", "0.1", "0.5", "1"]), HOSTILE_FLOAT
        else:
            valid, bad = SMALL.get(flag, [""]), HOSTILE_TEXT
        options.append((flag, (valid, bad)))
    return options, positionals


@st.composite
def command_lines(draw, command: str, f: dict[str, str], hostile: bool) -> list[str]:
    """A command line of ``command``: its base, then a few drawn options, each value valid or hostile (with
    ``hostile``: the first one surely hostile)."""
    options, _ = option_values(command, f)
    argv = [command, *BASE[command].format(**f).split()]
    if hostile:
        flag, (_, bad) = draw(st.sampled_from([o for o in options if o[1] is not None]))
        argv += [flag, draw(st.sampled_from(bad))]
    for flag, values in draw(st.lists(st.sampled_from(options), min_size=1, max_size=4, unique_by=lambda o: o[0])):
        if values is None:
            argv.append(flag)
        else:
            valid, bad = values
            argv += [flag, draw(st.sampled_from(bad if draw(st.booleans()) or not valid else valid))]
    return argv


_CAP_NOTE = re.compile(r"^grasp-s2r [a-z-]+: --(workers|threads) \d+ capped at \d+")
"""The one kind of line besides the error a refused command may print: a cap said before the refusal."""


def _snapshot(root: Path) -> list[tuple[str, int, int]]:
    return sorted((str(p.relative_to(root)), p.stat().st_size, p.stat().st_mtime_ns) for p in root.rglob("*")
                  if p.is_file())


@contextlib.contextmanager
def _fresh_cwd():
    old = os.getcwd()
    with tempfile.TemporaryDirectory() as d:
        os.chdir(d)
        try:
            yield Path(d)
        finally:
            os.chdir(old)


EXAMPLE_LIMIT_S = 90
"""An example still running after this fails, naming its command line (an accepted draw must stay small)."""


class TooLong(BaseException):
    """Raised by the alarm of :data:`EXAMPLE_LIMIT_S` (a BaseException: no handler of the command takes it)."""


def _too_long(signum, frame):
    raise TooLong


def check_property(argv: list[str], f: dict[str, str], capfd) -> int:
    """Runs (exit 0), or exit 2 with one line, no traceback, nothing written (here or among the shared files);
    returns the exit code."""
    shared = _snapshot(Path(f["root"]))
    capfd.readouterr()
    with _fresh_cwd() as cwd:
        previous = signal.signal(signal.SIGALRM, _too_long)
        signal.alarm(EXAMPLE_LIMIT_S)
        try:
            code = main(argv)
        except SystemExit as e:  # the parser's refusals
            code = e.code
        except TooLong:
            pytest.fail(f"{argv} ran longer than {EXAMPLE_LIMIT_S} s")
        finally:
            signal.alarm(0)
            signal.signal(signal.SIGALRM, previous)
        err = capfd.readouterr().err
        note = f"{argv}: exit {code}\n{err[-2000:]}"
        assert "Traceback" not in err, note
        if code != 0:
            lines = [line for line in err.strip().splitlines() if not _CAP_NOTE.search(line)]
            assert code == 2, note
            assert len(lines) == 1 and "error:" in lines[0], note
            assert list(cwd.iterdir()) == [], f"{note}: left {sorted(p.name for p in cwd.iterdir())}"
        assert _snapshot(Path(f["root"])) == shared, f"{note}: a shared file changed"
        shutil.rmtree(cwd / "out", ignore_errors=True)
    return code


NEVER_RUNS = {"pipeline", "upgrade"}
"""Commands whose draws never run: pipeline's hold a hostile value (a run takes minutes), upgrade has no dataset of an
older layout here (tests/test_upgrade*.py)."""


@pytest.mark.parametrize("command", sorted(COMMANDS))
def test_any_command_line_runs_or_is_refused_in_one_line(command, files, capfd):
    codes = []

    @settings(max_examples=EXAMPLES[command] * SCALE)
    @given(argv=command_lines(command, files, hostile=command == "pipeline"))
    def prop(argv):
        codes.append(check_property(argv, files, capfd))

    prop()
    if command not in NEVER_RUNS:  # the draws did reach the commands' work, not only their refusals
        assert codes.count(0) >= 2, (len(codes), codes)


@pytest.mark.parametrize("command", sorted(COMMANDS))
def test_command_lines_with_a_hostile_value_run_or_are_refused_in_one_line(command, files, capfd):
    @settings(max_examples=(6 if command == "pipeline" else 12) * SCALE)
    @given(argv=command_lines(command, files, hostile=True))
    def prop(argv):
        check_property(argv, files, capfd)

    prop()
