"""Score cards, normalised scores and robust aggregates (rliable).

Normalised score of a policy on a case: its mean JCT over the case's seeds
divided by the best non-oracle heuristic's mean JCT over the same seeds (a
ratio of means; 1.0 = as good as the best heuristic there, lower is better).
Per (case, seed) the score matrix holds the policy's JCT on that seed over
the same per-case baseline, so the mean over seeds is that ratio.

Aggregates over the (seeds x cases) matrix follow Agarwal et al. (NeurIPS
2021) with their library, ``rliable``: interquartile mean (IQM), mean,
median, optimality gap (here: how far above 1.0, i.e. worse than the best
heuristic, the scores lie on average), probability of improvement over each
heuristic (that a random run of the policy has a lower JCT ratio than one of
the heuristic on the same case), and stratified bootstrap 95% confidence
intervals, resampling cases and then seeds within each case
(``task_bootstrap=True``: most heuristics are deterministic, so seeds alone
would give zero-width intervals).

The aggregate functions are rliable's (``rliable.metrics``, pure numpy).
Its interval estimator (``rliable.library.get_interval_estimates``) does
not run in this environment: it needs ``arch``, rliable 1.2 pins
``arch < 8``, arch 7 fails to import under pandas 3, and under arch 8 rliable
passes a keyword (``random_state``) that arch 8 refuses. So the intervals
come from :func:`stratified_bootstrap`, rliable's ``StratifiedBootstrap``
with ``task_bootstrap=True`` and its percentile method, written out here
(cases resampled with replacement, then seeds within each drawn case),
seeded so that the page is reproducible.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence

import numpy as np
import pandas as pd
import scipy.stats
from rliable import metrics

from ddl_gym.baselines import HEURISTICS

REPS = 2000
CI = 0.95
SEED = 0


# -- score cards and normalisation ----------------------------------------------------
def score_cards(records: pd.DataFrame) -> pd.DataFrame:
    """Per (policy, case): mean over seeds of the card's metrics, and the
    number of seeds."""
    cols = ["mean_jct_s", "p95_jct_s", "makespan_s", "comm_overhead", "preemptions"]
    g = records.groupby(["policy", "family", "case"], sort=False)
    out = g[cols].mean()
    out["seeds"] = g.size()
    return out.reset_index()


def baseline_jct(records: pd.DataFrame, heuristics: Sequence[str] = HEURISTICS) -> pd.Series:
    """Per case: the lowest mean JCT (mean over seeds) of the non-oracle
    heuristics present in ``records``, and which one it is (``.attrs``)."""
    h = records[records["policy"].isin(heuristics) & ~records["clairvoyant"].astype(bool)]
    if h.empty:
        raise ValueError("no non-oracle heuristic in the records: nothing to normalise by")
    per = h.groupby(["case", "policy"])["mean_jct_s"].mean().unstack("policy")
    best = per.min(axis=1)
    best.attrs["best"] = per.idxmin(axis=1).to_dict()
    return best


def normalised(records: pd.DataFrame, baseline: pd.Series) -> pd.DataFrame:
    """``records`` plus ``normalised_jct``: the run's mean JCT over its case's
    baseline (cases without a baseline are dropped)."""
    out = records[records["case"].isin(baseline.index)].copy()
    out["normalised_jct"] = out["mean_jct_s"].to_numpy() / baseline.loc[out["case"]].to_numpy()
    return out


def score_matrix(
    records: pd.DataFrame, cases: Sequence[str] | None = None
) -> tuple[np.ndarray, list[str]]:
    """One policy's normalised JCTs as rliable's (runs = seeds) x (tasks =
    cases) matrix; every case must have the same number of seeds."""
    cases = list(cases) if cases is not None else list(dict.fromkeys(records["case"]))
    cols = []
    for case in cases:
        v = records.loc[records["case"] == case].sort_values("seed")["normalised_jct"]
        cols.append(v.to_numpy(dtype=float))
    lengths = {len(c) for c in cols}
    if len(lengths) != 1:
        raise ValueError(f"cases have different numbers of seeds: {sorted(lengths)}")
    return np.stack(cols, axis=1), cases


# -- aggregates (lower normalised JCT is better) ------------------------------------------
def iqm(x: np.ndarray) -> float:
    return float(metrics.aggregate_iqm(x))


def mean(x: np.ndarray) -> float:
    return float(metrics.aggregate_mean(x))


def median(x: np.ndarray) -> float:
    return float(metrics.aggregate_median(x))


def optimality_gap(x: np.ndarray) -> float:
    """Mean of max(x - 1, 0): rliable's gap (mean of max(gamma - s, 0)) on
    s = -x with gamma = -1, since here lower is better."""
    return float(metrics.aggregate_optimality_gap(-x, gamma=-1))


AGGREGATES: dict[str, Callable[[np.ndarray], float]] = {
    "IQM": iqm,
    "mean": mean,
    "median": median,
    "optimality gap": optimality_gap,
}


def probability_of_improvement(x: np.ndarray, y: np.ndarray) -> float:
    """P(a run of x has a lower normalised JCT than a run of y on the same
    case), averaged over cases (rliable's, on negated scores)."""
    return float(metrics.probability_of_improvement(-x, -y))


# -- the same metrics over a batch of resampled matrices ---------------------------------
# The bootstrap evaluates each metric on thousands of resampled (runs x
# cases) matrices: these take a batch (n, runs, cases) and return (n, k), the
# same numbers as the rliable functions above (tests check it).
def batch_aggregates(x: np.ndarray) -> np.ndarray:
    """IQM, mean, median and optimality gap of each matrix of the batch."""
    flat = x.reshape(len(x), -1)
    return np.stack(
        [
            scipy.stats.trim_mean(flat, proportiontocut=0.25, axis=1),
            flat.mean(axis=1),
            np.median(x.mean(axis=1), axis=1),  # rliable: median of per-case means
            np.maximum(flat - 1.0, 0.0).mean(axis=1),
        ],
        axis=1,
    )


def batch_improvement(x: np.ndarray, y: np.ndarray) -> np.ndarray:
    """P(x < y) per case (ties count half; the Mann-Whitney U statistic over
    all pairs of runs), averaged over cases: shape (n, 1)."""
    less = (x[:, :, None, :] < y[:, None, :, :]).mean(axis=(1, 2))
    ties = (x[:, :, None, :] == y[:, None, :, :]).mean(axis=(1, 2))
    return (less + 0.5 * ties).mean(axis=1)[:, None]


def batch_profile(taus: np.ndarray) -> Callable[[np.ndarray], np.ndarray]:
    """Fraction of runs with score <= tau, for each tau: shape (n, len(taus))."""

    def func(x: np.ndarray) -> np.ndarray:
        flat = x.reshape(len(x), -1)
        return (flat[:, :, None] <= taus[None, None, :]).mean(axis=1)

    return func


# -- intervals ---------------------------------------------------------------------------
def stratified_bootstrap(
    arrays: Sequence[np.ndarray],
    func: Callable[..., np.ndarray],
    reps: int = REPS,
    ci: float = CI,
    seed: int = SEED,
) -> tuple[np.ndarray, np.ndarray]:
    """Point estimate and percentile CI of a batched metric ``func`` (arrays
    of shape (n, runs, cases) -> (n, k)), resampling cases and then runs
    within each drawn case, the same draw for every array (rliable's
    ``StratifiedBootstrap`` with ``task_bootstrap=True``). Returns (point of
    shape (k,), CI of shape (2, k))."""
    rng = np.random.default_rng(seed)
    runs, tasks = arrays[0].shape
    point = np.asarray(func(*(a[None] for a in arrays)), dtype=float)[0]
    t = rng.integers(0, tasks, size=(reps, 1, tasks))
    rows = rng.integers(0, runs, size=(reps, runs, tasks))
    draws = np.asarray(func(*(a[rows, t] for a in arrays)), dtype=float)
    lo, hi = np.percentile(draws, [50 * (1 - ci), 50 * (1 + ci)], axis=0)
    return point, np.stack([lo, hi])


def interval_estimates(
    score_dict: Mapping[str, np.ndarray | list[np.ndarray] | tuple[np.ndarray, ...]],
    func: Callable[..., np.ndarray],
    reps: int = REPS,
) -> tuple[dict[str, np.ndarray], dict[str, np.ndarray], str]:
    """rliable's ``get_interval_estimates`` contract (a dict of score matrices,
    or of lists of them for paired metrics; point estimates and 95% CIs),
    computed by :func:`stratified_bootstrap` with a batched ``func``.
    Returns (points, intervals, method)."""
    points, cis = {}, {}
    for key, value in score_dict.items():
        arrays = list(value) if isinstance(value, (list, tuple)) else [value]
        points[key], cis[key] = stratified_bootstrap(arrays, func, reps)
    return points, cis, "stratified bootstrap over cases, then seeds"


# -- tables ------------------------------------------------------------------------------
def by_score_then_name(
    frame: pd.DataFrame, score: pd.Series, names: pd.Index | pd.Series
) -> pd.DataFrame:
    """``frame``'s rows by ``score``, ties (policies with the very same
    runs) in ``names`` order: a table keeps one order whatever else is on it."""
    return frame.iloc[np.lexsort((names.to_numpy(dtype=str), score.to_numpy()))]


def aggregate_table(
    matrices: Mapping[str, np.ndarray], reps: int = REPS
) -> tuple[pd.DataFrame, str]:
    """Per policy: each aggregate with its 95% CI (columns ``X``, ``X lo``,
    ``X hi``), sorted by IQM. Returns (table, CI method)."""
    points, cis, method = interval_estimates(matrices, batch_aggregates, reps)
    rows = []
    for policy in matrices:
        row: dict[str, float | str] = {"policy": policy}
        for i, key in enumerate(AGGREGATES):
            row[key] = float(points[policy][i])
            row[f"{key} lo"] = float(cis[policy][0][i])
            row[f"{key} hi"] = float(cis[policy][1][i])
        rows.append(row)
    frame = pd.DataFrame(rows)
    frame = by_score_then_name(frame, frame["IQM"], frame["policy"])
    return frame.reset_index(drop=True), method


def improvement_table(
    matrices: Mapping[str, np.ndarray],
    against: Sequence[str],
    reps: int = REPS,
    policies: Sequence[str] | None = None,
) -> pd.DataFrame:
    """P(policy better than each of ``against``) with 95% CIs, one row per
    pair, for ``policies`` (default: all)."""
    pairs = {
        f"{p}|{h}": [matrices[p], matrices[h]]
        for p in (policies if policies is not None else matrices)
        for h in against
        if h in matrices and h != p
    }
    if not pairs:
        return pd.DataFrame(columns=["policy", "over", "P", "P lo", "P hi"])

    points, cis, _ = interval_estimates(pairs, batch_improvement, reps)
    rows = []
    for key in pairs:
        p, h = key.split("|")
        rows.append(
            {
                "policy": p,
                "over": h,
                "P": float(points[key][0]),
                "P lo": float(cis[key][0][0]),
                "P hi": float(cis[key][1][0]),
            }
        )
    return pd.DataFrame(rows)


def performance_profile(
    matrices: Mapping[str, np.ndarray], taus: np.ndarray, reps: int = REPS
) -> tuple[dict[str, np.ndarray], dict[str, np.ndarray]]:
    """Fraction of (case, seed) runs with normalised JCT <= tau, for each
    tau, with 95% CIs (the run-score distribution of rliable's profiles,
    for a lower-is-better score)."""

    points, cis, _ = interval_estimates(matrices, batch_profile(np.asarray(taus)), reps)
    return points, cis


def plot_performance_profiles(
    points: Mapping[str, np.ndarray],
    cis: Mapping[str, np.ndarray],
    taus: np.ndarray,
    path: str,
    title: str = "",
) -> None:
    """A PNG of the profiles (matplotlib, imported here: an optional extra)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(8, 5))
    colours = plt.get_cmap("tab20")  # (20 colours: ``colours(i)`` is the i-th)
    for i, (name, y) in enumerate(points.items()):
        style = "--" if "oracle" in name else "-"
        (line,) = ax.plot(taus, y, style, label=name, linewidth=1.6, color=colours(i % 20))
        ax.fill_between(taus, cis[name][0], cis[name][1], color=line.get_color(), alpha=0.07)
    ax.set_xscale("log")
    ax.set_xlim(taus[0], taus[-1])
    ax.set_xlabel("tau: mean JCT / best non-oracle heuristic's on the case")
    ax.set_ylabel("fraction of runs with score <= tau")
    ax.set_ylim(0, 1.02)
    ax.grid(True, which="both", alpha=0.3)
    ax.axvline(1.0, color="black", linewidth=0.8, linestyle=":")
    if title:
        ax.set_title(title)
    ax.legend(fontsize=8, loc="lower right", ncol=2)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)
