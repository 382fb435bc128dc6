"""Plots aggregate over seeds: CDF bands, error bars, distinct colours."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

pytest.importorskip("matplotlib")

from ddl_gym.report.plots import cdf_band, plot_jct_cdf, plot_metrics, policy_styles  # noqa: E402


def test_cdf_band_is_each_seeds_empirical_cdf():
    grid = np.array([0.5, 1.0, 2.0, 3.0])
    band = cdf_band([np.array([1.0, 3.0]), np.array([2.0, 2.0, 2.0, 4.0])], grid)
    assert band.tolist() == [[0.0, 0.5, 0.5, 1.0], [0.0, 0.0, 0.75, 0.75]]


def test_twelve_policies_get_twelve_colours_then_dashes():
    names = [f"p{i}" for i in range(14)]
    styles = policy_styles(names)
    assert len({styles[n]["color"] for n in names[:12]}) == 12
    assert styles["p12"]["linestyle"] == "--" and styles["p0"]["linestyle"] == "-"


def _jobs(policies: int, seeds: int) -> pd.DataFrame:
    rng = np.random.default_rng(0)
    rows = [
        {"policy": f"policy-{p}", "congestion": c, "seed": s, "jct_s": float(x)}
        for p in range(policies)
        for c in ("none", "heavy")
        for s in range(seeds)
        for x in rng.lognormal(8, 1, 50)
    ]
    return pd.DataFrame(rows)


def test_multi_seed_plots_write_pngs(tmp_path):
    jobs = _jobs(policies=11, seeds=3)
    path = plot_jct_cdf(jobs, tmp_path / "cdf.png")
    assert path.read_bytes()[:4] == b"\x89PNG"
    summary = (
        jobs.groupby(["policy", "congestion", "seed"])["jct_s"]
        .mean()
        .rename("mean_jct_s")
        .reset_index()
    )
    summary["makespan_s"] = summary["mean_jct_s"] * 3
    summary["comm_overhead"] = 0.5
    assert plot_metrics(summary, tmp_path / "bars.png").stat().st_size > 5_000


def test_levels_plot_draws_the_totals_t_interval(tmp_path, monkeypatch):
    """Stacked placements per level: the error bar is the 95% t interval of the
    total over seeds (totals 10, 12, 14: 12 ± 4.303 * 2 / sqrt(3))."""
    from matplotlib.axes import Axes

    from ddl_gym.report.plots import plot_levels

    drawn = {}
    real = Axes.errorbar

    def spy(self, x, y, yerr=None, **kw):
        drawn["y"], drawn["yerr"] = np.asarray(y), np.asarray(yerr)
        return real(self, x, y, yerr=yerr, **kw)

    monkeypatch.setattr(Axes, "errorbar", spy)
    summary = pd.DataFrame(
        {
            "policy": ["dally"] * 3,
            "congestion": ["heavy"] * 3,
            "alloc_machine": [6, 8, 10],
            "alloc_rack": [3, 3, 3],
            "alloc_network": [1, 1, 1],
        }
    )
    assert plot_levels(summary, tmp_path / "levels.png").is_file()
    assert drawn["y"].tolist() == [12.0]
    assert drawn["yerr"][1][0] == pytest.approx(4.302653 * 2 / np.sqrt(3), rel=1e-5)
