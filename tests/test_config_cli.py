"""The config is the CLI: every command's options come from its config dataclass, with the same defaults."""

from __future__ import annotations

import importlib
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from grasp_s2r import configs
from grasp_s2r.cli import COMMANDS, build_parser
from grasp_s2r.options import config_from_options, default_of

# command -> (its config dataclass, the options it must be given, the config fields those set)
GENERATED = {
    "collect": ("grasp_s2r.collect.CollectConfig", ["--out", "d"], {"out": "d"}),
    "train-vision": ("grasp_s2r.vision.training.train.SegmenterTrainConfig", [], {}),
    "eval-vision": ("grasp_s2r.vision.evaluation.evaluate.VisionEvalConfig", [], {}),
    "dagger": ("grasp_s2r.control.dagger.DaggerConfig", ["--out", "d"], {"out": "d"}),
    "eval": ("grasp_s2r.control.evaluate.PolicyEvalConfig", ["--policy", "p.pt"], {"policy": "p.pt"}),
    "pipeline": ("grasp_s2r.pipeline.PipelineConfig", [], {}),
    "calibrate-vision": ("grasp_s2r.vision.training.calibrate.CalibrationConfig", ["--model", "m.pt"], {"model": "m.pt"}),
    "train-gripper": ("grasp_s2r.vision.training.gripper_train.GripperTrainConfig", [], {}),
}


def _class(dotted: str) -> type:
    module, _, name = dotted.rpartition(".")
    return getattr(importlib.import_module(module), name)


def _help(command: str) -> str:
    """``grasp-s2r COMMAND --help`` as printed, one option per line (no wrapping)."""
    env = {**os.environ, "COLUMNS": "1000", "PYTHONPATH": str(Path(__file__).parents[1])}
    r = subprocess.run([sys.executable, "-m", "grasp_s2r.cli", command, "--help"], capture_output=True, text=True,
                       env=env, check=True)
    return r.stdout


@pytest.mark.parametrize("command", GENERATED)
def test_help_defaults_are_the_dataclass_defaults(command):
    """GIVEN a command's --help WHEN each generated option's '(default: X)' is read THEN X is its field's default."""
    dotted, _, _ = GENERATED[command]
    cls, module = _class(dotted), importlib.import_module(COMMANDS[command][0])
    text = _help(command)
    checked = 0
    lines = text.splitlines()
    for o in module.OPTIONS:
        at = next((i for i, ln in enumerate(lines) if re.match(rf"\s+{re.escape(o.flag)}\b", ln)), None)
        assert at is not None, f"{command}: {o.flag} missing from --help"
        line = lines[at] + (lines[at + 1] if not re.search(r"\S\s{2,}\S", lines[at]) else "")  # help on its own line
        if o.sets is not None or o.required:
            continue
        shown = re.search(r"\(default: (.*)\)\s*$", line)
        assert shown, f"{command} {o.flag}: no '(default: ...)' in {line!r}"
        assert shown.group(1) == o.show(default_of(cls, o.field)), f"{command} {o.flag}"
        checked += 1
    assert checked >= 3


@pytest.mark.parametrize("command", COMMANDS)
def test_each_option_states_its_default_once(command):
    """GIVEN any command's --help THEN no option's line states a default twice (its help text and the generated
    '(default: X)' both did once: adapt's --check-photos)."""
    twice = [ln.strip() for ln in _help(command).splitlines() if ln.count("(default") > 1]
    assert not twice, twice


@pytest.mark.parametrize("command", GENERATED)
def test_options_left_out_keep_every_dataclass_default(command):
    """GIVEN only the required options WHEN the command builds its config THEN it equals the dataclass default."""
    dotted, argv, given = GENERATED[command]
    cls, module = _class(dotted), importlib.import_module(COMMANDS[command][0])
    parser = build_parser(only=command)
    args = parser.parse_args([command, *argv])
    assert config_from_options(cls, args, module.OPTIONS, **given) == cls(**given)


def test_every_option_reaches_its_field():
    """GIVEN non-default values for nested fields WHEN parsed THEN they land in the nested configs."""
    from grasp_s2r.commands import dagger as cli_dagger

    args = build_parser(only="dagger").parse_args(
        ["dagger", "--out", "d", "--train-steps", "7", "--camera-jitter-mm", "2", "--cnn-channels", "4,8",
         "--raw-sim", "--no-bc", "--resolution", "48", "--eval-conditions", "nominal,perturbation"])
    cfg = cli_dagger.config_from_args(args)
    assert cfg.train.steps == 7 and cfg.env.randomization.camera_jitter_m == pytest.approx(0.002)
    assert cfg.policy.channels == (4, 8) and cfg.backgrounds == "" and not cfg.bc_baseline
    assert (cfg.env.camera.width_px, cfg.env.camera.height_px) == (48, 48)
    assert cfg.eval_conditions == ("nominal", "perturbation")


def test_one_serializer_round_trips_nested_configs_through_json():
    from grasp_s2r.control.dagger import DaggerConfig
    from grasp_s2r.vision.training.train import SegmenterTrainConfig

    for cfg in (DaggerConfig(out="x", eval_conditions=("nominal", "perturbation")), SegmenterTrainConfig()):
        assert configs.from_dict(type(cfg), json.loads(json.dumps(configs.to_dict(cfg)))) == cfg


def test_resume_check_names_every_differing_field():
    stored = {"seed": 0, "env": {"camera": {"fov_deg": 60.0}}, "rounds": 3}
    asked = {"seed": 9, "env": {"camera": {"fov_deg": 50.0}}, "rounds": 5}
    with pytest.raises(ValueError) as e:
        configs.check_same(stored, asked, "X was made", "use a new --out folder", ignore=("rounds",))
    assert str(e.value) == ("X was made with another config (env.camera.fov_deg: stored 60.0, asked 50.0; "
                            "seed: stored 0, asked 9); use a new --out folder")
    configs.check_same(stored, {**stored, "rounds": 9}, "X", "", ignore=("rounds",))  # same but for ignored fields


def test_collect_and_help_import_no_torch(tmp_path):
    """``grasp-s2r collect`` (a tiny run) and every command's parser building stay free of torch."""
    code = ("import sys; from grasp_s2r.cli import main; rc = main(sys.argv[1:]); "
            "assert 'torch' not in sys.modules, 'torch imported'; sys.exit(rc)")
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).parents[1])}
    for argv in (["collect", "--help"], ["pipeline", "--help"],
                 ["collect", "--episodes", "1", "--max-steps", "3", "--out", str(tmp_path / "d")]):
        r = subprocess.run([sys.executable, "-c", code, *argv], check=False, capture_output=True, text=True, env=env)
        assert r.returncode == 0, (argv, r.stderr[-2000:])


# --- artifacts written before the renames (issue 17) -------------------------------------------------------------
OLD = json.loads((Path(__file__).parent / "data" / "configs_pre_issue17.json").read_text())
"""Configs as the code before issue 17 wrote them: a dataset's, a DAgger run.json and a vision run's."""


def test_an_old_dagger_run_folder_still_resumes_and_another_config_is_refused_by_field(tmp_path):
    from grasp_s2r.control.dagger import DaggerConfig
    from grasp_s2r.control.run_store import RunStore

    (tmp_path / "run.json").write_text(json.dumps(OLD["dagger_run"]))
    assert configs.from_dict(DaggerConfig, OLD["dagger_run"]["config"]) == DaggerConfig(out="run")
    store = RunStore(tmp_path)
    store.open(DaggerConfig(out="run", rounds=9).identity(), {})  # more rounds: resumable
    store.open(DaggerConfig(out="moved/run").identity(), {})  # the folder moved or copied: resumable
    with pytest.raises(ValueError, match=r"another config \(seed: stored 0, asked 1\)"):
        store.open(DaggerConfig(out="run", seed=1).identity(), {})


def test_an_old_dataset_is_refused_by_layout_and_a_new_one_by_field(tmp_path):
    """A collect dataset written before demonstrations had a DAgger round's arrays is refused, naming the arrays it
    lacks (it cannot be extended with episodes of another layout); a current one names the differing field."""
    from grasp_s2r.collect import CollectConfig
    from grasp_s2r.data.episodes import DatasetError, init_dataset
    from grasp_s2r.runtime.records import rollout_features
    from grasp_s2r.sim.config import EnvConfig

    features = rollout_features(EnvConfig())
    old_features = {k: v for k, v in features.items()
                    if k not in ("input_mask", "learner_action", "executed_action", "from_expert")}
    init_dataset(tmp_path / "old", OLD["dataset_config"], old_features, "expert-demonstrations")
    with pytest.raises(DatasetError, match="another layout .*executed_action, from_expert, input_mask"):
        init_dataset(tmp_path / "old", CollectConfig(out="d").dataset_config(), features, "expert-demonstrations")
    init_dataset(tmp_path / "new", CollectConfig(out="d", seed=3).dataset_config(), features, "expert-demonstrations")
    init_dataset(tmp_path / "new", CollectConfig(out="d", seed=3).dataset_config(), features, "expert-demonstrations")
    with pytest.raises(DatasetError, match=r"seed: stored 3, asked 4"):
        init_dataset(tmp_path / "new", CollectConfig(out="d", seed=4).dataset_config(), features,
                     "expert-demonstrations")


def test_an_old_vision_run_still_resumes():
    from grasp_s2r.vision.training.train import SegmenterTrainConfig, TrainError, _check_resume, _run_config

    split = OLD["vision_run_config"]["background_split"]
    whole_images = {"crop_px": 0, "full_size_share": 0.0}  # runs made before crop training trained so
    _check_resume(OLD["vision_run_config"], _run_config(SegmenterTrainConfig(steps=500, **whole_images), split))
    with pytest.raises(TrainError, match=r"lr: stored 0\.003, asked 0\.001"):
        _check_resume(OLD["vision_run_config"], _run_config(SegmenterTrainConfig(lr=1e-3, **whole_images), split))
    with pytest.raises(TrainError, match=r"crop_px: stored 0, asked 32"):  # today's defaults: named, refused
        _check_resume(OLD["vision_run_config"], _run_config(SegmenterTrainConfig(), split))
    # a fine-tune (--init) trains on whole images by default, as runs before crop training did
    finetune = SegmenterTrainConfig(init_checkpoint="x.pt")
    assert (finetune.crop_px, finetune.full_size_share, finetune.crop_steps) == (0, 0.0, 0)
    assert SegmenterTrainConfig().crop_px == 32 and SegmenterTrainConfig(crop_px=16, init_checkpoint="x.pt").crop_px == 16


def test_the_shipped_weights_configs_load_with_the_one_serializer():
    import torch

    from grasp_s2r.agent import default_controller_path
    from grasp_s2r.control.dagger import DaggerConfig
    from grasp_s2r.sim.config import EnvConfig
    from grasp_s2r.vision.networks.segmenter import default_checkpoint_path, read_checkpoint
    from grasp_s2r.vision.training.train import SegmenterTrainConfig

    seg = read_checkpoint(default_checkpoint_path())["config"]
    assert configs.from_dict(SegmenterTrainConfig, seg["train"]).architecture == "unet"
    EnvConfig.from_dict(seg["env"])
    ctrl = torch.load(default_controller_path(), weights_only=True)["config"]
    assert configs.from_dict(DaggerConfig, ctrl).policy.memory


def test_with_defaults_fills_missing_keys_at_any_depth_and_keeps_stored_values():
    from grasp_s2r.configs import with_defaults

    stored = {"lr": 0.1, "data": {"reshade": {"prob": 0.5}, "mix": [1, 2]}}
    defaults = {"lr": 0.3, "crop_px": 0, "data": {"reshade": {"prob": 0.0, "grey": 0.0}, "mirror": 0.0, "mix": [3]}}
    assert with_defaults(stored, defaults) == {"lr": 0.1, "crop_px": 0, "data": {
        "reshade": {"prob": 0.5, "grey": 0.0}, "mirror": 0.0, "mix": [1, 2]}}


def test_a_configs_refusal_names_the_option_that_set_the_field():
    from grasp_s2r.options import Option, _named_by_option

    options = [Option("--fov", "", "env.camera.fov_deg"), Option("--lr", "", "train.lr"),
               Option("--a-prob", "", "a.prob"), Option("--b-prob", "", "b.prob")]
    # the field, alone or after the word naming its config, is told by its option
    assert _named_by_option("fov_deg must be in [5, 150], got 0.0", options) == "--fov must be in [5, 150], got 0.0"
    assert _named_by_option("camera fov_deg must be in [5, 150]", options) == "--fov must be in [5, 150]"
    # a field no option sets, or two options set (which one the user typed is not known), stays as it is
    assert _named_by_option("seed must be >= 0", options) == "seed must be >= 0"
    assert _named_by_option("prob must be in [0, 1]", options) == "prob must be in [0, 1]"
    assert _named_by_option("lr_schedule must be one of", options) == "lr_schedule must be one of"
