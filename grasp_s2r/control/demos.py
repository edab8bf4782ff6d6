"""Expert demonstrations from ``grasp-s2r collect`` as DAgger's round 0."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
from tqdm import tqdm

from grasp_s2r.data.episodes import EpisodeDataset, finished_indices, init_dataset, remove_partial, write_episode
from grasp_s2r.runtime.masks import MaskSource
from grasp_s2r.runtime.records import rollout_features
from grasp_s2r.sim.config import EnvConfig


def import_demos(
    demos_dir: Path, root: Path, config: dict[str, Any], env: EnvConfig, masks: MaskSource, n_episodes: int,
    kind: str, progress: bool = True,
) -> int:
    """Copy the first ``n_episodes`` demonstrations into the round dataset ``root``; returns how many.

    The controller's input mask is computed here (segmenter or ground truth, as the run's), so that
    round 0 is in the same format as every DAgger round. The demos' scene and camera must be the
    run's; their randomization may differ (e.g. collect's default camera jitter): the expert's labels
    are right all the same. Resumable: episodes already copied are kept.
    """
    demos = EpisodeDataset(demos_dir)
    demo_env = demos.meta.get("config", {}).get("env")
    mine = json.loads(json.dumps(env.to_dict()))
    if demo_env is not None and demo_env != mine:
        if {k: v for k, v in demo_env.items() if k != "randomization"} != \
                {k: v for k, v in mine.items() if k != "randomization"}:
            raise ValueError(f"demos {demos_dir} were collected with another scene or camera than this run's; "
                             "collect them with the same options, or leave --demos out")
        tqdm.write(f"note: demos {demos_dir} use other randomization settings than this run (e.g. camera jitter); "
                   "they are expert labels all the same and are used as round 0")
    n = min(len(demos), n_episodes)
    init_dataset(root, config, rollout_features(env), kind)
    remove_partial(root)
    done = set(finished_indices(root))
    for i in tqdm(range(n), desc="round 0 from demos", unit="ep", disable=not progress, leave=False):
        if i in done:
            continue
        ep = demos.episode(i)
        rgb, gt, action = np.asarray(ep["rgb"]), np.asarray(ep["sphere_mask"]), np.asarray(ep["action"])
        if rgb.shape[1:3] != (env.camera.height_px, env.camera.width_px):
            raise ValueError(f"demos {demos_dir} have {rgb.shape[1:3]} px images, the run's camera differs")
        arrays = {
            "rgb": rgb, "sphere_mask": gt, "gripper_mask": np.asarray(ep["gripper_mask"]), "input_mask": masks(rgb, gt), "proprio": np.asarray(ep["proprio"]),
            "action": action, "learner_action": np.full_like(action, np.nan), "executed_action": action,
            "from_expert": np.ones(len(action), bool), "phase": np.asarray(ep["phase"]),
            "state": np.asarray(ep["state"]),
        }
        write_episode(root, i, arrays, {**ep.info, "beta": 1.0, "condition": "demos"})
    return n
