"""Batched inference of the two networks: milliseconds per batch of the segmenter and the controller.

    python benchmarks/bench_inference.py [--batches 1,16,64,256,1024] [--devices cpu,cuda] [--repeats 30]

For each device (``cuda`` only when present) and batch size: ``Segmenter.predict`` (uint8 RGB in, bool masks out:
conversion, host->device copy, forward, threshold, copy back) and ``Policy.act`` (masks + proprioception in,
actions out), median over ``--repeats`` timed calls after warm-up, with ``torch.cuda.synchronize`` implied by
the copy back to the host. CPU figures use the torch thread count given by ``--threads`` (default: torch's).
"""

from __future__ import annotations

import argparse

import numpy as np
import torch
from results_io import add_json_argument, write_results

from grasp_s2r.control.policy import Policy
from grasp_s2r.sim.env import PROPRIO_NAMES
from grasp_s2r.vision.networks.segmenter import Segmenter, default_checkpoint_path
from grasp_s2r.vision.testsets.suites import timed_ms


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--batches", default="1,16,64,256,1024", help="batch sizes, comma-separated")
    p.add_argument("--devices", default=None, help="devices, comma-separated (default: cpu, and cuda when present)")
    p.add_argument("--repeats", type=int, default=30, help="timed calls per figure (default: 30)")
    p.add_argument("--threads", type=int, default=None, help="torch CPU threads (default: torch's)")
    add_json_argument(p, "bench_inference")
    args = p.parse_args()
    if args.threads:
        torch.set_num_threads(args.threads)
    devices = args.devices.split(",") if args.devices else ["cpu"] + (["cuda"] if torch.cuda.is_available() else [])
    batches = [int(b) for b in args.batches.split(",")]
    rng = np.random.default_rng(0)
    rows = []
    print(f"{'device':<8} {'batch':>6} {'segmenter ms':>13} {'per frame':>10} {'controller ms':>14} {'per frame':>10}")
    for device in devices:
        seg = Segmenter.load(default_checkpoint_path(), device=device)
        policy = Policy(device=device)
        h, w = seg.input_hw
        for n in batches:
            rgb = rng.integers(0, 256, size=(n, h, w, 3), dtype=np.uint8)
            masks = rng.random((n, h, w)) < 0.01
            proprio = rng.random((n, len(PROPRIO_NAMES))).astype(np.float32)
            seg_ms = float(np.median(timed_ms(lambda _, s=seg, x=rgb: s.predict(x), args.repeats, warmup=5)))
            ctl_ms = float(np.median(timed_ms(lambda _, a=policy, m=masks, q=proprio: a.act(m, q), args.repeats,
                                              warmup=5)))
            rows.append({"device": device, "batch": n, "segmenter_ms": seg_ms, "controller_ms": ctl_ms})
            print(f"{device:<8} {n:>6} {seg_ms:13.3f} {seg_ms / n:10.4f} {ctl_ms:14.3f} {ctl_ms / n:10.4f}")
    name = torch.cuda.get_device_name() if torch.cuda.is_available() else "no CUDA device"
    print(f"torch {torch.__version__}, {torch.get_num_threads()} CPU threads, {name}")
    write_results(args.json, "bench_inference", {"rows": rows, "torch": torch.__version__, "cuda_device": name,
                                                 "cpu_threads": torch.get_num_threads()}, args)


if __name__ == "__main__":
    main()
