"""Interval arithmetic behind every reported rate, against published worked examples."""

from __future__ import annotations

import math

import pytest

from grasp_s2r.stats import difference_interval, format_difference, format_rate, wilson_interval


def test_wilson_interval_matches_newcombe_1998():
    # Newcombe (1998), Stat. Med. 17:857, table I: 81/263 -> 0.2553 to 0.3662
    lo, hi = wilson_interval(81, 263)
    assert lo == pytest.approx(0.2553, abs=5e-4) and hi == pytest.approx(0.3662, abs=5e-4)
    assert wilson_interval(0, 10)[0] == 0.0 and wilson_interval(10, 10)[1] == 1.0
    assert all(math.isnan(v) for v in wilson_interval(0, 0))


def test_difference_interval_matches_newcombe_1998_method_10():
    # Newcombe (1998), Stat. Med. 17:873, table II, example (a): 56/70 - 48/80 -> +0.0524 to +0.3339
    d, lo, hi = difference_interval(56, 70, 48, 80)
    assert d == pytest.approx(0.2)
    assert lo == pytest.approx(0.0524, abs=5e-4) and hi == pytest.approx(0.3339, abs=5e-4)
    # swapping the groups mirrors the interval
    d2, lo2, hi2 = difference_interval(48, 80, 56, 70)
    assert (d2, lo2, hi2) == pytest.approx((-d, -hi, -lo))


def test_formatting():
    assert format_rate(195, 200).startswith("97.5 % (195/200, 95 % CI 94.")
    assert format_difference(56, 70, 48, 80) == "+20.0 points (95 % CI +5.2 to +33.4)"

