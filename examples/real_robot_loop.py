"""Drive GraspAgent from a plain control loop, as a real arm would: camera -> agent -> Cartesian delta command.

Nothing here touches the simulator. ``FakeCameraFromFrames`` and ``FakeArm`` stand in for your drivers: replace them
with your camera (RGB images, any size whose field of view covers the trained 60°) and your arm's Cartesian
interface (TCP delta in the table frame, gripper open/close, proprioception in SI units). As a demo the fake camera
replays saved frames (``examples/wrist_frames.npz``: one simulated episode, 160 x 120 px, 75° vertical FOV), so
the commands printed are open loop: the point is the loop's shape and the latency per call.

    python examples/real_robot_loop.py                        # the shipped networks
    python examples/real_robot_loop.py --controller DIR/policy.pt --bench 200     # yours; latency per call, 1 thread

See docs/deploy.md.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np

from grasp_s2r.agent import AgentError, GraspAgent

HERE = Path(__file__).resolve().parent


class FakeCameraFromFrames:
    """Demo camera: replays saved RGB frames (uint8 (T, H, W, 3)), the last one repeated. Replace with yours."""

    def __init__(self, path: Path):
        data = np.load(path)
        self.frames, self.vfov_deg = data["rgb"], float(data["vfov_deg"])
        self.start_proprio = data["proprio"][0]
        self.t = 0

    def read(self) -> np.ndarray:
        frame = self.frames[min(self.t, len(self.frames) - 1)]
        self.t += 1
        return frame


class FakeArm:
    """Demo arm: integrates the commanded TCP deltas. A real one sends them to its Cartesian controller."""

    def __init__(self, start_proprio: np.ndarray):
        self.tcp_m = np.array(start_proprio[:3], dtype=float)  # x, y (table frame), z above the table
        self.gap_m, self.closed = float(start_proprio[3]), bool(start_proprio[4] > 0.5)

    def proprio(self) -> np.ndarray:
        """SI units, in GraspAgent's order: tcp_x_world_m, tcp_y_world_m, tcp_z_above_table_m, finger_gap_m,
        gripper_closed."""
        return np.array([*self.tcp_m, self.gap_m, float(self.closed)], dtype=np.float32)

    def move_tcp(self, delta_m: np.ndarray) -> None:
        self.tcp_m = self.tcp_m + delta_m
        self.tcp_m[2] = max(self.tcp_m[2], 0.006)

    def set_gripper(self, close: bool) -> None:
        self.closed = close
        self.gap_m = 0.0 if close else 0.04


def control_loop(agent: GraspAgent, camera: FakeCameraFromFrames, arm: FakeArm, steps: int, hz: float,
                 max_blind_steps: int = 20) -> None:
    """One episode: every 1/hz s, one image and the proprio in, one Cartesian delta and gripper command out."""
    agent.reset()
    for t in range(steps):
        t0 = time.monotonic()
        step = agent.act(camera.read(), arm.proprio())
        arm.move_tcp(step.delta_m)
        arm.set_gripper(step.close_gripper)
        dx, dy, dz = 1000 * step.delta_m
        print(f"t={t:2d} command: TCP delta ({dx:+5.1f}, {dy:+5.1f}, {dz:+5.1f}) mm, "
              f"gripper {'close' if step.close_gripper else 'open '}  sphere pixels {int(step.mask.sum()):3d}  "
              f"agent {step.timings_ms['total']:.1f} ms")
        if agent.blind_steps > max_blind_steps:
            print("the sphere has not been seen for too long: stop and look again")
            break
        time.sleep(max(0.0, 1.0 / hz - (time.monotonic() - t0)))


def bench(agent: GraspAgent, camera: FakeCameraFromFrames, proprio: np.ndarray, calls: int) -> dict[str, float]:
    """Latency of ``agent.act`` at batch 1: ``calls`` calls after 10 warm-up calls, per stage; the figures in ms."""
    frames = [camera.frames[i % len(camera.frames)] for i in range(calls + 10)]
    rows = [agent.act(f, proprio).timings_ms for f in frames][10:]
    parts = ", ".join(f"{k} {np.median([r[k] for r in rows]):.2f}" for k in ("preprocess", "segment", "filter", "control"))
    total = np.array([r["total"] for r in rows])
    print(f"latency per call (batch 1, {calls} calls, {frames[0].shape[1]}x{frames[0].shape[0]} px input): median "
          f"{np.median(total):.2f} ms, p90 {np.percentile(total, 90):.2f} ms ({parts} ms medians)")
    return {"calls": calls, "input_width_px": frames[0].shape[1], "input_height_px": frames[0].shape[0],
            "total_median_ms": float(np.median(total)), "total_p90_ms": float(np.percentile(total, 90)),
            **{f"{k}_median_ms": float(np.median([r[k] for r in rows])) for k in ("preprocess", "segment", "filter", "control")}}


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--controller", default=None, help="controller checkpoint (default: the shipped one, if any)")
    p.add_argument("--segmenter", default=None, help="segmenter checkpoint (default: the shipped one)")
    p.add_argument("--frames", type=Path, default=HERE / "wrist_frames.npz", help="demo frames (.npz: rgb, proprio, "
                   "vfov_deg)")
    p.add_argument("--steps", type=int, default=15, help="control steps of the demo episode")
    p.add_argument("--hz", type=float, default=10.0, help="control rate (the trained one: 10)")
    p.add_argument("--bench", type=int, default=0, metavar="N", help="also time N calls of agent.act")
    p.add_argument("--threads", type=int, default=1, help="torch CPU threads (default 1)")
    p.add_argument("--json", type=Path, default=None, help="with --bench: write the latency here (default: "
                   "runs/benchmarks/real_robot_loop.json; with --save: benchmarks/results/real_robot_loop.json)")
    p.add_argument("--save", action="store_true", help="with --bench: record the latency in benchmarks/results/ (the "
                   "tracked file the docs' tables are generated from)")
    args = p.parse_args()

    import torch

    torch.set_num_threads(args.threads)
    camera = FakeCameraFromFrames(args.frames)
    try:
        agent = GraspAgent.load(segmenter=args.segmenter, controller=args.controller, device="cpu",
                                camera_vfov_deg=camera.vfov_deg)
    except AgentError as e:
        print(f"real_robot_loop: {e}", file=sys.stderr)
        return 2
    control_loop(agent, camera, FakeArm(camera.start_proprio), args.steps, args.hz)
    if args.bench:
        figures = bench(agent, camera, camera.start_proprio, args.bench)
        sys.path.insert(0, str(HERE.parent / "benchmarks"))
        from results_io import write_results

        write_results(args.json, "real_robot_loop", figures, args)
    return 0


if __name__ == "__main__":
    sys.exit(main())
