"""Spread over seeds: Student-t confidence intervals of means and of ratios
of means, for the comparison tables.

* ``mean_ci(values)``: the mean and the two-sided t-interval
  ``mean ± t(0.975, n-1) · s / sqrt(n)`` (``s``: sample standard deviation).
  With n = 1 there is no spread to estimate: the bounds are NaN and tables
  print the mean with "n = 1".
* ``ratio_ci(num, den)``: ``mean(num) / mean(den)`` with a delta-method
  t-interval. Paired (the same seeds, so the same synthetic traces) it uses
  the ratio estimator's residuals ``z_i = num_i - R · den_i``:
  ``se = s_z / (sqrt(n) · mean(den))``, ``df = n - 1``; unpaired it adds the
  two means' variances, ``se² = (se_num² + R² se_den²) / mean(den)²`` with
  ``df = min(n) - 1`` of the sides that vary. A side with one value counts
  as exact (variance 0): on a fixed trace a deterministic policy gives the
  same number for every seed, so the grid runs it once.

The interval of a ratio of non-negative quantities is cut at 0.
Three seeds make wide intervals (t(0.975, 2) = 4.30): that is the honest
width of three samples, not a defect of the method.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

LEVEL = 0.95
METHOD = "Student-t 95% interval over seeds"
RATIO_METHOD = "ratio of means, delta-method t interval (paired by seed when both vary)"


def t_quantile(df: int, level: float = LEVEL) -> float:
    """The two-sided ``level`` quantile of Student's t with ``df`` degrees of freedom."""
    from scipy.stats import t  # scipy is a core dependency; imported when tables are made

    return float(t.ppf(0.5 + level / 2.0, df))


@dataclass(frozen=True)
class Estimate:
    """A mean (or ratio of means) and its confidence interval; ``low`` and
    ``high`` are NaN when there is no spread to estimate (n = 1)."""

    value: float
    low: float
    high: float
    n: int

    @property
    def has_interval(self) -> bool:
        return math.isfinite(self.low) and math.isfinite(self.high)

    @property
    def half_width(self) -> float:
        """Half the interval's width (NaN without an interval)."""
        return (self.high - self.low) / 2.0 if self.has_interval else math.nan


def _clean(values: Sequence[float] | np.ndarray) -> np.ndarray:
    a = np.asarray(values, dtype=float)
    return a[np.isfinite(a)]


def mean_ci(values: Sequence[float] | np.ndarray, level: float = LEVEL) -> Estimate:
    """The mean of ``values`` (non-finite ones dropped) and its t-interval."""
    a = _clean(values)
    n = len(a)
    if n == 0:
        return Estimate(math.nan, math.nan, math.nan, 0)
    mean = float(a.mean())
    if n == 1:
        return Estimate(mean, math.nan, math.nan, 1)
    half = t_quantile(n - 1, level) * float(a.std(ddof=1)) / math.sqrt(n)
    return Estimate(mean, mean - half, mean + half, n)


def ratio_ci(
    num: Sequence[float] | np.ndarray,
    den: Sequence[float] | np.ndarray,
    paired: bool = False,
    level: float = LEVEL,
) -> Estimate:
    """``mean(num) / mean(den)`` and its delta-method t-interval (see the
    module docstring); NaN when ``mean(den)`` is 0 or a side is empty.
    ``paired`` needs equal lengths (element i of both from the same seed)."""
    a, b = np.asarray(num, dtype=float), np.asarray(den, dtype=float)
    if paired:
        if len(a) != len(b):
            raise ValueError(f"paired samples differ in length: {len(a)} and {len(b)}")
        keep = np.isfinite(a) & np.isfinite(b)
        a, b = a[keep], b[keep]
    else:
        a, b = _clean(a), _clean(b)
    n = min(len(a), len(b))
    if n == 0 or float(b.mean()) == 0.0:
        return Estimate(math.nan, math.nan, math.nan, n)
    mean_b = float(b.mean())
    ratio = float(a.mean()) / mean_b
    if paired and len(a) >= 2:
        se = float((a - ratio * b).std(ddof=1)) / (math.sqrt(len(a)) * abs(mean_b))
        df = len(a) - 1
    else:
        varying = [x for x in (a, b) if len(x) >= 2]
        if not varying:
            return Estimate(ratio, math.nan, math.nan, 1)
        var_a = float(a.var(ddof=1)) / len(a) if len(a) >= 2 else 0.0
        var_b = float(b.var(ddof=1)) / len(b) if len(b) >= 2 else 0.0
        se = math.sqrt(var_a + ratio**2 * var_b) / abs(mean_b)
        df = min(len(x) for x in varying) - 1
    half = t_quantile(df, level) * se
    # a ratio of non-negative quantities is never negative, whatever the
    # symmetric (delta-method) interval says
    floor = 0.0 if (a >= 0).all() and (b >= 0).all() else -math.inf
    return Estimate(ratio, max(floor, ratio - half), ratio + half, max(len(a), len(b)))


def fmt_number(x: float) -> str:
    """3 significant figures, thousands with commas, never scientific."""
    if not math.isfinite(x):
        return "-"
    if abs(x) >= 100:
        return f"{x:,.0f}"
    if abs(x) >= 10:
        return f"{x:.1f}"
    return f"{x:.2f}"


def fmt_mean_ci(est: Estimate, scale: float = 1.0) -> str:
    """``"961 ± 12"``, or the bare mean when there is no interval (n = 1)."""
    if not math.isfinite(est.value):
        return "-"
    text = fmt_number(est.value * scale)
    if est.has_interval:
        text += f" ± {fmt_number(est.half_width * abs(scale))}"
    return text


def fmt_ratio(est: Estimate) -> str:
    """``"1.52× (1.31–1.73)"``, ``"1.52×"`` without an interval, ``"n/a"`` when
    the base is 0."""
    if not math.isfinite(est.value):
        return "n/a"

    text = f"{fmt_number(est.value)}×"
    if est.has_interval:
        text += f" ({fmt_number(est.low)}–{fmt_number(est.high)})"
    return text
