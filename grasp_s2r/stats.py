"""Small statistics shared by every command that reports a rate."""

from __future__ import annotations

import math


def wilson_interval(successes: int, n: int, z: float = 1.96) -> tuple[float, float]:
    """95 % (z = 1.96) Wilson score interval of a binomial rate; (nan, nan) when n == 0."""
    if n <= 0:
        return float("nan"), float("nan")
    p = successes / n
    denom = 1.0 + z * z / n
    centre = (p + z * z / (2 * n)) / denom
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / denom
    return max(0.0, centre - half), min(1.0, centre + half)


def format_rate(successes: int, n: int) -> str:
    """``"97.5 % (195/200, 95 % CI 94.3-98.9)"``."""
    lo, hi = wilson_interval(successes, n)
    if n == 0:
        return "n/a (0 episodes)"
    return f"{100 * successes / n:.1f} % ({successes}/{n}, 95 % CI {100 * lo:.1f}-{100 * hi:.1f})"
