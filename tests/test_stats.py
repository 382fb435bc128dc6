"""Confidence intervals of the comparison tables (ddl_gym.report.stats),
checked against values worked out by hand."""

from __future__ import annotations

import math

import pytest

from ddl_gym.report.stats import fmt_mean_ci, fmt_ratio, mean_ci, ratio_ci, t_quantile

T2 = 4.302652729749464  # t(0.975, df = 2), from tables


def test_t_quantile_matches_tables():
    assert t_quantile(2) == pytest.approx(T2)
    assert t_quantile(1) == pytest.approx(12.706204736)
    assert t_quantile(10**6) == pytest.approx(1.959964, abs=1e-5)


def test_ci_of_three_known_values():
    est = mean_ci([1.0, 2.0, 3.0])  # mean 2, s = 1
    assert est.value == 2.0 and est.n == 3
    assert est.low == pytest.approx(2 - T2 / math.sqrt(3))  # 2 - 2.4841
    assert est.high == pytest.approx(2 + T2 / math.sqrt(3))
    assert fmt_mean_ci(est) == "2.00 ± 2.48"
    assert fmt_mean_ci(est, scale=100) == "200 ± 248"


def test_one_value_has_no_interval():
    est = mean_ci([7.0])
    assert est.value == 7.0 and est.n == 1 and not est.has_interval
    assert fmt_mean_ci(est) == "7.00"
    assert mean_ci([]).n == 0 and fmt_mean_ci(mean_ci([])) == "-"


def test_equal_values_have_a_zero_width_interval():
    est = mean_ci([4.0, 4.0, 4.0])
    assert est.low == est.high == 4.0


def test_paired_ratio_by_hand():
    # R = 9 / 3 = 3; residuals 2-3, 3-3, 4-3 = -1, 0, 1 -> s = 1; se = 1 / (sqrt 3 * 1)
    est = ratio_ci([2.0, 3.0, 4.0], [1.0, 1.0, 1.0], paired=True)
    assert est.value == pytest.approx(3.0)
    assert est.half_width == pytest.approx(T2 / math.sqrt(3))
    # a constant ratio is exact however the seeds vary
    exact = ratio_ci([2.0, 4.0, 6.0], [1.0, 2.0, 3.0], paired=True)
    assert exact.value == pytest.approx(2.0) and exact.half_width == pytest.approx(0.0)


def test_unpaired_ratio_against_a_single_run():
    # the single run counts as exact: se = sqrt(1/3) / 1, df = 2
    est = ratio_ci([2.0, 3.0, 4.0], [1.0])
    assert est.value == pytest.approx(3.0)
    assert est.half_width == pytest.approx(T2 / math.sqrt(3))
    # both sides vary: se^2 = (var_a / n_a + R^2 var_b / n_b) / mean_b^2
    est = ratio_ci([1.0, 2.0, 3.0], [2.0, 4.0, 6.0])
    se = math.sqrt(1 / 3 + 0.5**2 * 4 / 3) / 4
    assert est.value == pytest.approx(0.5) and est.high == pytest.approx(0.5 + T2 * se)
    assert est.low == 0.0  # 0.5 - 0.88 cut at 0


def test_ratio_without_spread_or_base():
    est = ratio_ci([3.0], [2.0])
    assert est.value == 1.5 and not est.has_interval and fmt_ratio(est) == "1.50×"
    assert fmt_ratio(ratio_ci([1.0], [0.0])) == "n/a"
    with pytest.raises(ValueError, match="paired"):
        ratio_ci([1.0, 2.0], [1.0], paired=True)


def test_ratio_interval_of_non_negative_values_stops_at_zero():
    est = ratio_ci([0.0, 0.1, 3.0], [1.0, 1.0, 1.0], paired=True)
    assert est.low == 0.0 and est.high > est.value
