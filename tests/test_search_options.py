"""The observable expert's search options (``SearchConfig``): a search height, a first look from lower down, and
what counts as the learner seeing the sphere; carried to the env workers and recorded in a DAgger run's config."""

from __future__ import annotations

import numpy as np
import pytest

from grasp_s2r.control.dagger import DaggerConfig
from grasp_s2r.expert.fsm import Expert, Phase, SearchConfig
from grasp_s2r.runtime.pool import RolloutPool
from grasp_s2r.runtime.records import EXPERT, EpisodeRequest
from grasp_s2r.sim.config import EnvConfig, SceneConfig
from grasp_s2r.sim.env import GraspEnv


class CornerBlob:
    """A mask source that shows one false blob in the image's corner and never the sphere."""

    kind = "predicted"

    def __call__(self, rgb: np.ndarray, gt_mask: np.ndarray | None = None) -> np.ndarray:
        masks = np.zeros(np.asarray(rgb).shape[:3], bool)
        masks[:, :4, :4] = True
        return masks


def _phases(learner_sees: str) -> set[Phase]:
    env = EnvConfig(scene=SceneConfig(max_episode_steps=12))
    requests = [EpisodeRequest(seed=s, actor=EXPERT) for s in (3, 4)]
    with RolloutPool(env, 1, observable_expert=True, search=SearchConfig(learner_sees=learner_sees)) as pool:
        recs = pool.run(requests, None, CornerBlob(), progress=False)
    return {Phase(p) for rec in recs for p in rec.arrays["phase"]}


def test_a_false_blob_counts_as_seen_only_under_the_mask_rule() -> None:
    """The learner's mask holds a blob that is not the sphere: under "mask" the expert labels (and here acts on) the
    sphere's hidden position; under "sphere" it searches, as an agent that saw nothing."""
    assert _phases("mask") & {Phase.APPROACH, Phase.DESCEND}
    assert _phases("sphere") <= {Phase.RETURN, Phase.SEARCH}


def test_the_search_height_reaches_the_workers() -> None:
    """The expert in the env worker searches at the pool's search height (the TCP levels off there)."""
    env = EnvConfig(scene=SceneConfig(max_episode_steps=30))
    with RolloutPool(env, 1, observable_expert=True, search=SearchConfig(search_height_m=0.12,
                                                                         learner_sees="sphere")) as pool:
        rec = pool.run([EpisodeRequest(seed=5, actor=EXPERT)], None, CornerBlob(), progress=False)[0]
    z = rec.arrays["proprio"][:, 2]
    assert abs(z[-1] - 0.12) < 0.015 and z.min() > 0.1  # came down from the 0.18 m start, no lower


def test_a_first_look_goes_low_over_the_spawn_area_then_searches_high() -> None:
    env = GraspEnv(EnvConfig())
    try:
        s = env.config.scene
        search = SearchConfig(first_look_height_m=0.11)
        expert = Expert(s, search=search)
        env.reset(5)
        expert.reset()
        heights, xy = [], []
        for _ in range(40):
            pv = env.privileged()
            action, phase = expert.act(pv, False)
            assert phase == Phase.SEARCH
            heights.append(pv.tcp_pos_world_m[2] - s.table_height_m)
            xy.append(pv.tcp_pos_world_m[:2])
            env.step(action)
        low = int(np.argmin(heights))
        assert heights[low] == pytest.approx(0.11, abs=0.012)  # the first look
        assert max(heights[low:]) == pytest.approx(search.search_height_m, abs=0.012)  # then the spiral, high
        # from where the camera's view is centred on the middle of where spheres spawn
        view_centre = xy[low] + np.asarray(search.view_offset_at(heights[low]))
        assert np.linalg.norm(view_centre - np.asarray(s.spawn_center_world_m)) < 0.015
    finally:
        env.close()


def test_dagger_config_checks_and_records_the_search() -> None:
    with pytest.raises(ValueError, match="search_height_m"):
        DaggerConfig(out="x", search_height_m=0.01)
    with pytest.raises(ValueError, match="first_look_height_m"):
        DaggerConfig(out="x", first_look_height_m=0.9)
    with pytest.raises(ValueError, match="learner_sees"):
        SearchConfig(learner_sees="blob")
    # the recipe's values stay out of a run's identity (runs made before the options resume); others enter it
    assert not {"search_height_m", "first_look_height_m", "learner_sees"} & set(DaggerConfig(out="x").identity())
    ident = DaggerConfig(out="x", search_height_m=0.15, learner_sees="sphere").identity()
    assert ident["search_height_m"] == 0.15 and ident["learner_sees"] == "sphere"
