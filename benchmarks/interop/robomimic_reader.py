"""Load a ``grasp-s2r export --format robomimic`` file with robomimic itself; run in robomimic's own environment.

    python benchmarks/interop/robomimic_reader.py EXPORT.hdf5 SOURCE.npz [--train OUT_DIR]

SOURCE.npz (written by benchmarks/check_interop.py) holds the source arrays, episode after episode: ``rgb``,
``proprio``, ``action``, ``lengths``, and ``next_obs`` (1 when the export has it). Checks, with robomimic's own code:
the env metadata (``FileUtils.get_env_metadata_from_dataset``, ``EnvUtils.get_env_type``), ``SequenceDataset``
with ``load_next_obs`` True and False (True only when the export has next_obs) against the source arrays, dtype
included, and with ``--train`` one epoch of robomimic's BC training (``robomimic.scripts.train.train``) from
robomimic's default BC config. Prints one line per check; exit 1 on the first mismatch.
"""

import argparse
import json
import sys
from pathlib import Path

import h5py
import numpy as np
import robomimic
import robomimic.utils.env_utils as EnvUtils
import robomimic.utils.file_utils as FileUtils
import robomimic.utils.obs_utils as ObsUtils
import robomimic.utils.torch_utils as TorchUtils
from robomimic.config import config_factory
from robomimic.envs.env_base import EnvType
from robomimic.utils.dataset import SequenceDataset

IMAGE, LOW_DIM = "robot0_eye_in_hand_image", "proprio"


def check(cond, what):
    print(("ok    " if cond else "FAIL  ") + what, flush=True)
    if not cond:
        sys.exit(1)


def check_dataset(path, src, load_next_obs):
    ds = SequenceDataset(hdf5_path=path, obs_keys=(IMAGE, LOW_DIM), dataset_keys=("actions", "rewards", "dones"),
                         load_next_obs=load_next_obs, hdf5_cache_mode="low_dim")
    check(len(ds) == int(src["lengths"].sum()), f"SequenceDataset(load_next_obs={load_next_obs}): {len(ds)} samples")
    items = [ds[i] for i in range(len(ds))]
    rgb = np.concatenate([it["obs"][IMAGE] for it in items])
    proprio = np.concatenate([it["obs"][LOW_DIM] for it in items])
    actions = np.concatenate([it["actions"] for it in items])
    check(rgb.dtype == src["rgb"].dtype and np.array_equal(rgb, src["rgb"]), f"  obs/{IMAGE} {rgb.dtype} {rgb.shape}")
    check(proprio.dtype == src["proprio"].dtype and np.array_equal(proprio, src["proprio"]),
          f"  obs/{LOW_DIM} {proprio.dtype} {proprio.shape}")
    check(actions.dtype == src["action"].dtype and np.array_equal(actions, src["action"]),
          f"  actions {actions.dtype} {actions.shape}")
    if load_next_obs:
        ends = np.cumsum(src["lengths"])
        nxt = np.concatenate([it["next_obs"][LOW_DIM] for it in items])
        want = np.concatenate([np.concatenate([p[1:], p[-1:]]) for p in np.split(src["proprio"], ends[:-1])])
        check(np.array_equal(nxt, want), f"  next_obs/{LOW_DIM} is obs shifted by one step")


def train_one_epoch(path, out_dir):
    from robomimic.scripts.train import train

    config = config_factory("bc")  # robomimic's default BC config: hdf5_load_next_obs True, cache mode "all"
    with config.values_unlocked():
        config.experiment.name = "interop"
        config.experiment.rollout.enabled = False
        config.experiment.render_video = False
        config.experiment.logging.log_tb = False
        config.experiment.epoch_every_n_steps = 10
        config.experiment.save.epochs = [1]
        config.train.data = path
        config.train.output_dir = str(out_dir)
        config.train.hdf5_filter_key = "train"
        config.train.num_epochs = 1
        config.train.batch_size = 16
        config.train.cuda = False
        config.observation.modalities.obs.rgb = [IMAGE]
        config.observation.modalities.obs.low_dim = [LOW_DIM]
    config.lock()
    ObsUtils.initialize_obs_utils_with_config(config)
    train(config, device=TorchUtils.get_torch_device(try_to_use_cuda=False))
    models = sorted(Path(out_dir).rglob("model_epoch_1.pth"))
    check(bool(models), "BC training (robomimic.scripts.train, the default BC config): 1 epoch, model_epoch_1.pth")
    policy, _ = FileUtils.policy_from_checkpoint(ckpt_path=str(models[-1]), device="cpu")
    policy.start_episode()
    with h5py.File(path, "r") as f:
        obs = {k: f[f"data/demo_0/obs/{k}"][0] for k in (IMAGE, LOW_DIM)}
    action = policy(ob=ObsUtils.process_obs_dict(obs))  # as robomimic's env wrappers hand observations over
    check(action.shape == (4,) and np.isfinite(action).all(), f"  the saved policy loads and acts: {action.round(3)}")


def main():
    p = argparse.ArgumentParser()
    p.add_argument("export")
    p.add_argument("source")
    p.add_argument("--train", type=Path, default=None)
    args = p.parse_args()
    src = dict(np.load(args.source))
    print(f"robomimic {robomimic.__version__}: {args.export}", flush=True)
    env_meta = FileUtils.get_env_metadata_from_dataset(dataset_path=args.export)
    check(EnvUtils.get_env_type(env_meta=env_meta) == EnvType.GYM_TYPE,
          f"EnvUtils.get_env_type: GYM_TYPE ({json.dumps(env_meta['env_name'])}, env_kwargs {env_meta['env_kwargs']})")
    ObsUtils.initialize_obs_utils_with_obs_specs({"obs": {"rgb": [IMAGE], "low_dim": [LOW_DIM]}})
    for load_next_obs in (True, False) if int(src["next_obs"]) else (False,):
        check_dataset(args.export, src, load_next_obs)
    if args.train is not None:
        train_one_epoch(args.export, args.train)


if __name__ == "__main__":
    main()
