"""Memory vs memoryless controller, and DAgger vs BC, at the same label budget, on the conditions that lose the
sphere (start-out-of-view, dropout): 2 training seeds pooled, Wilson 95 % intervals.

    python benchmarks/compare_memory.py [--out runs/compare_memory] [--rounds 5] [--episodes-per-round 32]
                                        [--eval-episodes 100] [--seeds 0,1]

Each arm is one ``grasp-s2r dagger`` run per seed (observable expert, the training mixture below, predicted masks
of the shipped segmenter, BC baseline on), then ``evaluate_policy`` of its final DAgger controller (policy.pt) and of
its last round's BC controller (same labels) on ``--eval-episodes`` per condition and seed (test seeds, never seen in
training). Writes OUT/results.json and benchmarks/results/compare_memory.json (``--json PATH``) and prints a
table. Resumable (each run folder resumes).
"""

from __future__ import annotations

import argparse
import dataclasses
from pathlib import Path

from results_io import add_json_argument, write_results

from grasp_s2r.control.dagger import DaggerConfig, run_dagger
from grasp_s2r.control.evaluate import PolicyEvalConfig, evaluate_policy
from grasp_s2r.control.policy import PolicyConfig
from grasp_s2r.control.train import PolicyTrainConfig
from grasp_s2r.files import write_json
from grasp_s2r.stats import wilson_interval

CONDITIONS = ("start-out-of-view", "dropout")
ARMS = {"memory": True, "memoryless": False}


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--out", type=Path, default=Path("runs/compare_memory"))
    p.add_argument("--rounds", type=int, default=5)
    p.add_argument("--episodes-per-round", type=int, default=32)
    p.add_argument("--eval-episodes", type=int, default=100, help="per condition and seed (default 100)")
    p.add_argument("--seeds", default="0,1")
    p.add_argument("--workers", type=int, default=2)
    add_json_argument(p, "compare_memory")
    args = p.parse_args()
    seeds = [int(s) for s in args.seeds.split(",")]
    results: dict = {"config": {k: str(v) for k, v in vars(args).items() if k != "json"}, "arms": {}}
    for arm, memory in ARMS.items():
        counts = {(learner, c): [0, 0] for learner in ("dagger", "bc") for c in CONDITIONS}
        labels = []
        for seed in seeds:
            cfg = DaggerConfig(
                out=str(args.out / f"{arm}-seed{seed}"), rounds=args.rounds, episodes_per_round=args.episodes_per_round,
                eval_episodes=24, eval_conditions=CONDITIONS, observable_expert=True, out_of_view_prob=0.3,
                dropout_prob=0.3, table_photo_prob=0.2, workers=args.workers, seed=seed,
                train=PolicyTrainConfig(), policy=dataclasses.replace(PolicyConfig(), memory=memory))
            d = run_dagger(cfg)
            labels.append(d.rows[-1]["labels"])
            last = d.rows[-1]["round"]
            for learner, ckpt in (("dagger", d.policy_path),
                                  ("bc", Path(cfg.out) / "checkpoints" / f"bc-{last:03d}.pt")):
                r = evaluate_policy(PolicyEvalConfig(policy=str(ckpt), episodes=args.eval_episodes,
                                                     conditions=CONDITIONS, workers=args.workers), progress=False)
                for c in CONDITIONS:
                    counts[learner, c][0] += r["conditions"][c]["successes"]
                    counts[learner, c][1] += r["conditions"][c]["episodes"]
        results["arms"][arm] = {"labels_per_seed": labels, "success": {
            f"{learner}/{c}": {"successes": k, "episodes": n, "rate": k / n, "ci": wilson_interval(k, n)}
            for (learner, c), (k, n) in counts.items()}}
        write_json(args.out / "results.json", results, indent=2)
    print(f"{'arm':<11} {'learner':<7} " + " ".join(f"{c:>28}" for c in CONDITIONS))
    for arm, r in results["arms"].items():
        for learner in ("dagger", "bc"):
            cells = []
            for c in CONDITIONS:
                s = r["success"][f"{learner}/{c}"]
                cells.append(f"{100 * s['rate']:5.1f} % [{100 * s['ci'][0]:4.1f}-{100 * s['ci'][1]:5.1f}] "
                             f"({s['successes']}/{s['episodes']})")
            print(f"{arm:<11} {learner:<7} " + " ".join(f"{x:>28}" for x in cells))
        print(f"{'':<11} labels per seed: {r['labels_per_seed']}")
    print(f"results: {args.out / 'results.json'}")
    write_results(args.json, "compare_memory", results, args)


if __name__ == "__main__":
    main()
