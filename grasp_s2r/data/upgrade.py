"""``grasp-s2r upgrade DATASET --out NEW``: a dataset of an older layout, written in the current one.

Demonstrations collected before they had a DAgger round's schema (``grasp-s2r collect`` wrote rgb, masks,
proprio, action, phase and state) lack the controller's input mask and the learner / executed actions. Every old
demonstration was collected with the expert acting and ground-truth masks, so the missing arrays are known exactly:
``input_mask`` = ``sphere_mask``, ``executed_action`` = ``action``, ``from_expert`` all true, ``learner_action`` NaN
-- what ``collect --masks gt`` writes today, to the byte. The old folder is only read; ``NEW`` is a new dataset
(resumable: run the same command again after an interruption).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
from tqdm import tqdm

from grasp_s2r.artifacts import ArtifactFolder
from grasp_s2r.data.episodes import (
    DatasetError,
    EpisodeDataset,
    EpisodeWriter,
    finished_indices,
    init_dataset,
    remove_damaged,
    remove_partial,
)
from grasp_s2r.runtime.conditions import Condition
from grasp_s2r.runtime.masks import mask_source_identity
from grasp_s2r.runtime.records import EXPERT, STEP_KEYS, rollout_features
from grasp_s2r.sim.config import EnvConfig

DEMONSTRATIONS = "expert-demonstrations"
ADDED = ("input_mask", "learner_action", "executed_action", "from_expert")
"""The arrays demonstrations gained when they took a DAgger round's schema."""


def upgrade_dataset(src: Path, out: Path, progress: bool = True) -> int:
    """Write the old-layout demonstrations of ``src`` into the new dataset ``out``; returns the episodes written
    this run. Raises :class:`DatasetError` when ``src`` is not such a dataset."""
    old = EpisodeDataset(src)
    if old.meta.get("kind") != DEMONSTRATIONS:
        raise DatasetError(f"{src} holds a '{old.meta.get('kind')}' dataset; only '{DEMONSTRATIONS}' of an older "
                           "layout need upgrading")
    have = set(old.meta.get("features", {}))
    if set(STEP_KEYS) <= have:
        raise DatasetError(f"{src} already has the current layout: nothing to upgrade")
    if have | set(ADDED) != set(STEP_KEYS):
        raise DatasetError(f"{src} has arrays {sorted(have)}, not those of an older grasp_s2r's demonstrations")
    config: dict[str, Any] = {**old.meta["config"], "masks": mask_source_identity("gt")}
    env = EnvConfig.from_dict(config["env"])
    with ArtifactFolder(Path(out), "dataset"):
        init_dataset(out, config, rollout_features(env), DEMONSTRATIONS)
        remove_partial(out)
        remove_damaged(out)  # written again below
        done, n = set(finished_indices(out)), 0
        with EpisodeWriter(out) as writer:
            for ep in tqdm(list(old), desc="upgrade", unit="ep", disable=not progress):
                index = int(ep.info["index"])
                if index in done:
                    continue
                arrays = {k: np.asarray(ep[k]) for k in have}
                action = arrays["action"]
                arrays |= {"input_mask": arrays["sphere_mask"].copy(), "executed_action": action.copy(),
                           "learner_action": np.full_like(action, np.nan), "from_expert": np.ones(len(action), bool)}
                info = {k: v for k, v in ep.info.items() if k != "index"}
                writer.write(index, arrays, {**info, "beta": EXPERT.expert_share, "condition": Condition().name})
                n += 1
    return n
