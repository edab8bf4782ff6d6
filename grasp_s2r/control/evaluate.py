"""End-to-end evaluation: wrist RGB -> segmentation -> controller -> action, on named conditions.

``evaluate_policy(cfg)`` plays ``cfg.episodes`` episodes per condition (seeds ``seeds.TEST_BASE + i``,
never used for training, the same for every condition), with the learner alone in control
(beta = 0), and returns (and writes, as ``OUT/eval.json``) the success rate of each condition with
its 95 % Wilson interval. A few episodes per condition are drawn as a PNG strip and a GIF.
"""

from __future__ import annotations

import os
import shutil
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import torch
from tqdm import tqdm

from grasp_s2r import __version__
from grasp_s2r.configs import to_dict
from grasp_s2r.control import seeds
from grasp_s2r.control.parallax import SHIPPED as SHIPPED_PARALLAX
from grasp_s2r.control.policy import Policy, trained_scene
from grasp_s2r.devices import default_device
from grasp_s2r.drawing import write_gif, write_strip
from grasp_s2r.files import file_sha256, remove_unwritten, write_json
from grasp_s2r.runtime.backend import BackendConfig, claimed, open_runner
from grasp_s2r.runtime.conditions import CONDITIONS, resolve_condition
from grasp_s2r.runtime.masks import MaskInput, make_mask_source, mask_source_identity
from grasp_s2r.runtime.records import EpisodeRequest
from grasp_s2r.stats import format_rate, wilson_interval

EVAL_FORMAT = "grasp_s2r.eval"
EVAL_FORMAT_VERSION = 1
ISSUE_CONDITIONS = tuple(name for name in CONDITIONS if name != "sim-render")
"""The conditions evaluated by default: every one of ``CONDITIONS`` but the raw sim render (a condition added there
is evaluated by default too)."""


PICTURES_STAGING = ".pictures-partial"
"""The folder inside ``--out`` where a run's strips and GIFs wait until its ``eval.json`` is written."""


@dataclass(frozen=True)
class PolicyEvalConfig:
    """One ``grasp-s2r eval`` run; saved inside its ``eval.json``."""

    policy: str
    """Controller checkpoint (``OUT/policy.pt`` of a DAgger run)."""
    vision: str = ""
    """Segmenter checkpoint ("" = the one packaged with grasp_s2r); unused with masks = "gt"."""
    masks: MaskInput = "predicted"
    """Controller input: "predicted" (the whole pipeline) or "gt" (ground-truth masks: controller only)."""
    episodes: int = 200
    """Episodes per condition."""
    conditions: tuple[str, ...] = ISSUE_CONDITIONS
    """Names from ``conditions.CONDITIONS``."""
    backgrounds: str = ""
    """Folder of the user's own photos for ``heldout-backgrounds`` ("" = the embedded held-out photos)."""
    out: str = ""
    """Folder for eval.json and the pictures ("" = write nothing)."""
    media_episodes: int = 3
    """Episodes per condition drawn as a PNG strip and a GIF (0 = none)."""
    workers: int = 2
    """Env worker processes (per Ray actor with the ray backend)."""
    backend: BackendConfig = field(default_factory=BackendConfig)
    """Where the episodes run: local processes or Ray actors."""
    device: str = ""
    """Torch device ("" = CUDA when present, else CPU)."""
    torch_threads: int = 1
    """Torch CPU threads of the main process."""
    parallax: bool = True
    """Drop the detections that stay put in the image as the camera moves (``control.parallax``), as
    ``GraspAgent`` does; False: the controller gets the segmenter's masks as they are."""
    sphere_shadow: bool = False
    """Draw the sphere's shadows in every condition's scene (``CameraConfig.sphere_shadow``); False: the scene the
    controller was trained in, as it was."""

    def __post_init__(self) -> None:
        unknown = [c for c in self.conditions if c not in CONDITIONS]
        if unknown:
            raise ValueError(f"unknown condition(s) {', '.join(unknown)}; known: {', '.join(CONDITIONS)}")
        if not self.conditions:
            raise ValueError(f"no condition to evaluate; name one or more of {', '.join(CONDITIONS)}")
        if twice := sorted({c for c in self.conditions if self.conditions.count(c) > 1}):
            raise ValueError(f"condition(s) named twice: {', '.join(twice)} (each runs the same episodes)")
        if self.episodes < 1 or self.workers < 1 or self.media_episodes < 0:
            raise ValueError("episodes and workers must be >= 1, media_episodes >= 0")

    def to_dict(self) -> dict[str, Any]:
        return to_dict(self)


def results_table(results: dict[str, Any]) -> str:
    """The terminal table of :func:`evaluate_policy`'s result."""
    lines = [f"{'condition':<22} success (95 % Wilson CI)                  mean steps  description"]
    for name, r in results["conditions"].items():
        lines.append(f"{name:<22} {format_rate(r['successes'], r['episodes']):<42} {r['mean_length']:>10.1f}  "
                     f"{r['description']}")
    return "\n".join(lines)


def evaluate_policy(cfg: PolicyEvalConfig, progress: bool = True) -> dict[str, Any]:
    """Success rate per condition; also writes ``cfg.out/eval.json`` and the pictures when ``cfg.out`` is set."""
    with claimed(cfg.out or None, "eval-report", cfg.backend):  # Ray reached before the report's folder is claimed
        return _evaluate(cfg, progress)


def _evaluate(cfg: PolicyEvalConfig, progress: bool = True) -> dict[str, Any]:
    torch.set_num_threads(cfg.torch_threads)
    device = torch.device(cfg.device) if cfg.device else default_device()
    policy, ckpt = Policy.load(Path(cfg.policy), device)
    env_config = trained_scene(ckpt)
    if cfg.sphere_shadow:
        env_config = env_config.with_sphere_shadow()
    masks = make_mask_source(cfg.masks, cfg.vision, device)
    out = Path(cfg.out) if cfg.out else None
    staging = None if out is None else out / PICTURES_STAGING
    if staging is not None:  # this run's pictures wait here, so that an interrupted run leaves the last report whole
        shutil.rmtree(staging, ignore_errors=True)
        staging.mkdir(parents=True)
    results: dict[str, Any] = {
        "format": EVAL_FORMAT, "format_version": EVAL_FORMAT_VERSION, "package_version": __version__,
        "config": cfg.to_dict(), "env": env_config.to_dict(), "device": str(device),
        "policy_round": ckpt.get("round"),
        "weights": {"policy_sha256": file_sha256(cfg.policy), "masks": mask_source_identity(cfg.masks, cfg.vision)},
        "mask_filter": asdict(SHIPPED_PARALLAX) if cfg.parallax else None,  # what the masks went through
        "conditions": {},
    }
    t_start = time.perf_counter()
    pictures: list[str] = []
    with open_runner(cfg.backend, env_config, cfg.workers, torch_threads=cfg.torch_threads) as pool:
        for name in cfg.conditions:
            cond = resolve_condition(name, cfg.backgrounds or None)
            requests = [EpisodeRequest(seed=seeds.TEST_BASE + i, condition=cond)
                        for i in range(cfg.episodes)]
            t0 = time.perf_counter()
            recs = pool.run(requests, policy, masks, record=lambda i: out is not None and i < cfg.media_episodes,
                            progress=progress, desc=f"eval {name}", parallax=SHIPPED_PARALLAX if cfg.parallax else None)
            seconds = time.perf_counter() - t0
            k, n = sum(r.success for r in recs), len(recs)
            lo, hi = wilson_interval(k, n)
            steps = sum(r.length for r in recs)
            results["conditions"][name] = {
                "description": cond.description, "condition": cond.to_dict(), "successes": k, "episodes": n,
                "success_rate": k / n, "ci_low": lo, "ci_high": hi, "mean_length": steps / n,
                "failed_seeds": [r.request.seed for r in recs if not r.success], "seconds": seconds,
                "env_steps_per_s": steps / max(seconds, 1e-9),
            }
            shown = [r for r in recs if r.arrays]
            if staging is not None and shown:
                pictures += [f"{name}.png", f"{name}.gif"]
                write_strip(shown, staging / pictures[-2])
                write_gif(shown, staging / pictures[-1])
            tqdm.write(f"{name:<22} {format_rate(k, n)}")
    results["seconds"] = time.perf_counter() - t_start
    if out is not None:
        write_json(out / "eval.json", results, indent=2)
        for picture in pictures:  # renames: the new report's pictures follow it at once
            os.replace(staging / picture, out / picture)
        shutil.rmtree(staging, ignore_errors=True)
        remove_unwritten(out, [f"{c}{ext}" for c in CONDITIONS for ext in (".png", ".gif")],
                         [out / picture for picture in pictures])
    return results
