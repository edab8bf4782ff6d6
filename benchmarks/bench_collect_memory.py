"""Memory of ``grasp-s2r collect`` does not grow with the number of episodes (issue 15, item 5).

Runs the real command as a subprocess at 200 and at 2 000 episodes (small, fast episodes: ``--max-steps 20
--resolution 32``, 2 workers) and samples, while it runs, the peak resident set size (``VmHWM`` of
``/proc/PID/status``) of the parent process and of each of its worker processes (every descendant but
multiprocessing's resource tracker). Prints both peaks per size, the 2 000 / 200 ratio and whether it is
<= 1.2x (the issue's bar).

    python benchmarks/bench_collect_memory.py [--sizes 200 2000] [--workers 2] [--max-steps 20] [--resolution 32]
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from results_io import add_json_argument, write_results

LIMIT = 1.2
"""Max RSS at the largest size may be at most this many times that at the smallest."""


def _status_kib(pid: int, field: str) -> int | None:
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith(field + ":"):
                return int(line.split()[1])
    except (OSError, ValueError, IndexError):
        return None
    return None


def _children() -> dict[int, list[int]]:
    """ppid -> pids, of every process this machine shows."""
    out: dict[int, list[int]] = {}
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit():
            continue
        try:
            stat = Path(f"/proc/{entry.name}/stat").read_text()
            ppid = int(stat.rsplit(")", 1)[1].split()[1])
        except (OSError, ValueError, IndexError):
            continue
        out.setdefault(ppid, []).append(int(entry.name))
    return out


def _descendants(pid: int) -> list[int]:
    tree, todo, found = _children(), [pid], []
    while todo:
        for child in tree.get(todo.pop(), []):
            found.append(child)
            todo.append(child)
    return found


def _is_helper(pid: int) -> bool:
    try:
        return b"resource_tracker" in Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return True


def measure(episodes: int, workers: int, max_steps: int, resolution: int, interval_s: float = 0.05) -> dict:
    """Run one collect; its peak RSS (KiB) of the parent and of the largest worker, and its wall time."""
    with tempfile.TemporaryDirectory(prefix="bench-collect-memory-") as tmp:
        cmd = [sys.executable, "-m", "grasp_s2r", "collect", "--episodes", str(episodes), "--workers", str(workers),
               "--max-steps", str(max_steps), "--resolution", str(resolution), "--seed", "0",
               "--out", str(Path(tmp) / "demos")]
        t0 = time.perf_counter()
        proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
        parent_kib, worker_kib, seen_workers = 0, {}, set()
        while proc.poll() is None:
            parent_kib = max(parent_kib, _status_kib(proc.pid, "VmHWM") or 0)
            for pid in _descendants(proc.pid):
                if _is_helper(pid):
                    continue
                hwm = _status_kib(pid, "VmHWM")
                if hwm:
                    seen_workers.add(pid)
                    worker_kib[pid] = max(worker_kib.get(pid, 0), hwm)
            time.sleep(interval_s)
        out = proc.stdout.read() if proc.stdout else ""
        seconds = time.perf_counter() - t0
        if proc.returncode != 0:
            raise SystemExit(f"collect --episodes {episodes} failed (exit {proc.returncode}):\n{out}")
        written = len(list((Path(tmp) / "demos").glob("episode-*")))
    if written != episodes:
        raise SystemExit(f"collect --episodes {episodes} wrote {written} episodes")
    return {"episodes": episodes, "parent_kib": parent_kib, "worker_kib": max(worker_kib.values(), default=0),
            "workers_seen": len(seen_workers), "seconds": seconds}


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--sizes", type=int, nargs=2, default=(200, 2000), metavar=("SMALL", "LARGE"))
    p.add_argument("--workers", type=int, default=2)
    p.add_argument("--max-steps", type=int, default=20)
    p.add_argument("--resolution", type=int, default=32)
    add_json_argument(p, "bench_collect_memory")
    args = p.parse_args(argv)
    print(f"grasp-s2r collect --workers {args.workers} --max-steps {args.max_steps} --resolution {args.resolution}; "
          f"peak RSS (VmHWM) sampled every 50 ms; {os.cpu_count()} CPU cores")
    rows = [measure(n, args.workers, args.max_steps, args.resolution) for n in args.sizes]
    print(f"{'episodes':>9} {'parent MiB':>11} {'worker MiB':>11} {'workers':>8} {'seconds':>8}")
    for r in rows:
        print(f"{r['episodes']:>9} {r['parent_kib'] / 1024:>11.1f} {r['worker_kib'] / 1024:>11.1f} "
              f"{r['workers_seen']:>8} {r['seconds']:>8.1f}")
    small, large = rows
    ok, ratios = True, {}
    for who in ("parent", "worker"):
        ratio = large[f"{who}_kib"] / max(small[f"{who}_kib"], 1)
        ratios[who] = ratio
        ok &= ratio <= LIMIT
        print(f"{who:<7} max RSS {large['episodes']} / {small['episodes']} episodes: {ratio:.3f}x "
              f"({'<=' if ratio <= LIMIT else '>'} {LIMIT}x: {'flat' if ratio <= LIMIT else 'GROWS'})")
    write_results(args.json, "bench_collect_memory", {"rows": rows, "ratio": ratios, "limit": LIMIT, "flat": ok},
                  args)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
