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


def difference_interval(k1: int, n1: int, k2: int, n2: int, z: float = 1.96) -> tuple[float, float, float]:
    """Rate difference p1 - p2 of two independent binomials and its 95 % interval (Newcombe's hybrid score
    interval, from the two Wilson intervals; Newcombe 1998, method 10). Returns (difference, low, high)."""
    if n1 <= 0 or n2 <= 0:
        return float("nan"), float("nan"), float("nan")
    p1, p2 = k1 / n1, k2 / n2
    l1, u1 = wilson_interval(k1, n1, z)
    l2, u2 = wilson_interval(k2, n2, z)
    d = p1 - p2
    return d, d - math.sqrt((p1 - l1) ** 2 + (u2 - p2) ** 2), d + math.sqrt((u1 - p1) ** 2 + (p2 - l2) ** 2)


def format_difference(k1: int, n1: int, k2: int, n2: int) -> str:
    """``"+6.0 points (95 % CI +0.4 to +11.5)"``."""
    d, lo, hi = difference_interval(k1, n1, k2, n2)
    return f"{100 * d:+.1f} points (95 % CI {100 * lo:+.1f} to {100 * hi:+.1f})"
