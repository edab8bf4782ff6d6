"""Scaling of the episode runtime: local worker processes vs Ray actors, and a DAgger round on each backend.

    python benchmarks/bench_scaling.py [--episodes 80] [--dagger-episodes 16]

One run, on this machine (the figures are ratios measured side by side):

1. expert episodes/s (``collect``'s loop, beta = 1) with local 1 and 2 workers, and with Ray 1 actor x 1 worker
   and 2 actors x 1 worker (two simulated nodes on a local Ray runtime); the clock runs over ``run()`` only,
   after each runner has started (its start-up is printed apart);
2. a two-round DAgger run (predicted masks: each Ray actor loads the shipped segmenter and the round's
   controller) on each backend: round 1's time (rollout + train + eval) and its rollout and eval parts;
3. the driver's own cost per episode (receive + write an episode, no env) and the learner-side forward
   times at batch 16/64/256 on this CPU: the inputs of the cluster projection in docs/cluster.md.
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path

import numpy as np
import torch
from results_io import add_json_argument, write_results

from grasp_s2r.control.dagger import DaggerConfig, run_dagger
from grasp_s2r.control.policy import Policy
from grasp_s2r.control.train import PolicyTrainConfig
from grasp_s2r.data.episodes import init_dataset, write_episode
from grasp_s2r.runtime.backend import BackendConfig, open_runner
from grasp_s2r.runtime.masks import GroundTruthMasks
from grasp_s2r.runtime.pool import RolloutPool
from grasp_s2r.runtime.records import EXPERT, EpisodeRequest
from grasp_s2r.sim.config import EnvConfig
from grasp_s2r.sim.env import PROPRIO_NAMES
from grasp_s2r.vision.networks.segmenter import Segmenter, default_checkpoint_path
from grasp_s2r.vision.testsets.suites import timed_ms

SETUPS = {"local 1": (BackendConfig(), 1), "local 2": (BackendConfig(), 2),
          "ray 1x1": (BackendConfig("ray", ray_actors=1), 1), "ray 2x1": (BackendConfig("ray", ray_actors=2), 1)}


def episode_rates(n: int) -> dict[str, dict[str, float]]:
    """Per setup: expert episodes/s, env-steps/s and the runner's start-up in s."""
    requests = [EpisodeRequest(seed=i, actor=EXPERT) for i in range(n)]
    rates, out = {}, {}
    for name, (backend, workers) in SETUPS.items():
        t0 = time.perf_counter()
        with open_runner(backend, EnvConfig(), workers) as runner:
            start_s = time.perf_counter() - t0
            runner.run(requests[:4], None, GroundTruthMasks(), progress=False)  # warm-up: imports, first render
            t0 = time.perf_counter()
            recs = runner.run(requests, None, GroundTruthMasks(), progress=False, record=lambda i: False)
            seconds = time.perf_counter() - t0
        rates[name] = n / seconds
        steps = sum(r.length for r in recs)
        out[name] = {"episodes_per_s": rates[name], "env_steps_per_s": steps / seconds, "start_up_s": start_s}
        print(f"{name:<8} {rates[name]:6.2f} episodes/s  {steps / seconds:6.0f} env-steps/s  "
              f"({seconds:.1f} s for {n}; start-up {start_s:.1f} s)", flush=True)
    print(f"ray 2x1 / ray 1x1  = {rates['ray 2x1'] / rates['ray 1x1']:.2f}x   (target >= 1.7)")
    print(f"ray 2x1 / local 2  = {rates['ray 2x1'] / rates['local 2']:.2f}x   (target >= 0.9)")
    print(f"local 2 / local 1  = {rates['local 2'] / rates['local 1']:.2f}x")
    return out


def dagger_rounds(episodes: int) -> dict[str, dict[str, float]]:
    """Per backend: round 1 of a two-round DAgger run, its time and parts in s."""
    rows = {}
    for name, backend in (("local 2", BackendConfig()), ("ray 2x1", BackendConfig("ray", ray_actors=2))):
        with tempfile.TemporaryDirectory() as tmp:
            cfg = DaggerConfig(out=tmp, rounds=2, episodes_per_round=episodes, eval_episodes=episodes,
                               bc_baseline=False, train=PolicyTrainConfig(steps=200), backend=backend,
                               workers=2 if backend.backend == "local" else 1)
            rows[name] = run_dagger(cfg, progress=False).rows[1]
        r = rows[name]
        print(f"DAgger round 1, {name}: {r['round_s']:.1f} s (rollout {r['rollout_s']:.1f}, train {r['train_s']:.1f}, "
              f"eval {r['eval_s']:.1f})", flush=True)
    loc, ray = rows["local 2"], rows["ray 2x1"]
    print(f"DAgger round time ray / local = {ray['round_s'] / loc['round_s']:.2f}x   (target <= 1.10); "
          f"rollout + eval only: {(ray['rollout_s'] + ray['eval_s']) / (loc['rollout_s'] + loc['eval_s']):.2f}x")
    return {name: {k: r[k] for k in ("round_s", "rollout_s", "train_s", "eval_s")} for name, r in rows.items()}


def driver_and_learner(n: int = 40) -> dict[str, object]:
    """The driver's ms per episode received + written, and forward ms per batch size on one CPU thread."""
    with RolloutPool(EnvConfig(), 1) as pool:
        recs = pool.run([EpisodeRequest(seed=i, actor=EXPERT) for i in range(n)], None, GroundTruthMasks(), progress=False)
    import pickle

    with tempfile.TemporaryDirectory() as tmp:
        init_dataset(Path(tmp), {}, {}, "bench")
        t0 = time.perf_counter()
        for i, rec in enumerate(recs):
            rec2 = pickle.loads(pickle.dumps(rec))  # what the driver pays to receive a record from an actor
            write_episode(Path(tmp), i, rec2.arrays, {"seed": rec2.info["seed"]})
        per_ep_ms = 1000 * (time.perf_counter() - t0) / n
    print(f"driver: {per_ep_ms:.1f} ms per episode received + written  ->  at most {1000 / per_ep_ms:.0f} episodes/s "
          "through one driver", flush=True)
    torch.set_num_threads(1)
    seg = Segmenter.load(default_checkpoint_path(), device="cpu")
    policy = Policy(device="cpu")
    rng = np.random.default_rng(0)
    forward = []
    for b in (16, 64, 256):
        rgb = rng.integers(0, 255, (b, 64, 64, 3), dtype=np.uint8)
        masks = rng.random((b, 64, 64)) < 0.01
        proprio = rng.normal(size=(b, len(PROPRIO_NAMES))).astype(np.float32)
        seg_ms = float(np.median(timed_ms(lambda _, x=rgb: seg.predict(x), repeats=10, warmup=2)))
        pol_ms = float(np.median(timed_ms(lambda _, m=masks, q=proprio: policy.act(m, q), repeats=10, warmup=2)))
        print(f"forward on CPU (1 thread), batch {b:>3}: segmenter {seg_ms:7.1f} ms, controller {pol_ms:6.2f} ms")
        forward.append({"batch": b, "segmenter_ms": seg_ms, "controller_ms": pol_ms})
    return {"driver_ms_per_episode": per_ep_ms, "forward_cpu_1_thread": forward}


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--episodes", type=int, default=80, help="expert episodes per setup (default 80)")
    p.add_argument("--dagger-episodes", type=int, default=16, help="episodes per DAgger round and eval (default 16)")
    add_json_argument(p, "bench_scaling")
    args = p.parse_args()
    figures = {"episodes": episode_rates(args.episodes), "dagger_round_1": dagger_rounds(args.dagger_episodes),
               **driver_and_learner()}
    write_results(args.json, "bench_scaling", figures, args)


if __name__ == "__main__":
    main()
