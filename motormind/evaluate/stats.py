"""Small statistics for results: Wilson score intervals, medians, percentiles."""
from __future__ import annotations

import math


def wilson(k: int, n: int, z: float = 1.959964) -> tuple[float, float]:
    """95% Wilson score interval for k successes in n trials (0, 0 for n = 0... reported as (0, 1))."""
    if n == 0:
        return 0.0, 1.0
    p = k / n
    den = 1 + z * z / n
    centre = (p + z * z / (2 * n)) / den
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / den
    # the interval always holds p (it reaches 1 at k = n): say so exactly, not 0.9999999999999999,
    # which put p above its own upper bound (a negative error bar: the report's plot refused it)
    return max(0.0, min(p, centre - half)), min(1.0, max(p, centre + half))


def percentile(xs, q: float, digits: int = 2) -> float | None:
    """The ``q`` quantile (0..1) of ``xs``, linearly interpolated, rounded to ``digits``; None values are
    left out (a measure an episode did not have), None when nothing is left."""
    xs = sorted(x for x in xs if x is not None)
    if not xs:
        return None
    k = (len(xs) - 1) * q
    lo, hi = int(k), min(len(xs) - 1, int(k) + 1)
    return round(xs[lo] + (xs[hi] - xs[lo]) * (k - lo), digits)


def median(xs) -> float:
    xs = sorted(xs)
    if not xs:
        return float("nan")
    m = len(xs) // 2
    return xs[m] if len(xs) % 2 else (xs[m - 1] + xs[m]) / 2
