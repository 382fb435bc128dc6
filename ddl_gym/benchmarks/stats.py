"""Score cards, normalised scores and robust aggregates (as rliable defines them).

Normalised score of a policy on a case: its mean JCT over the case's seeds
divided by the best non-oracle heuristic's mean JCT over the same seeds (a
ratio of means; 1.0 = as good as the best heuristic there, lower is better).
Per (case, seed) the score matrix holds the policy's JCT on that seed over
the same per-case baseline, so the mean over seeds is that ratio.

Aggregates over the (seeds x cases) matrix follow Agarwal et al. (NeurIPS
2021) and their library, ``rliable``: interquartile mean (IQM), mean,
median, optimality gap (here: how far above 1.0, i.e. worse than the best
heuristic, the scores lie on average), probability of improvement over each
heuristic (that a random run of the policy has a lower JCT ratio than one of
the heuristic on the same case), and stratified bootstrap 95% confidence
intervals, resampling cases and then seeds within each case
(``task_bootstrap=True``: most heuristics are deterministic, so seeds alone
would give zero-width intervals).

The aggregate functions are ``rliable.metrics``' formulas written out here
with numpy and scipy (core dependencies), so scores need no extra; the
numbers are rliable's to the bit (``tests/test_card.py`` compares them when
rliable is installed). rliable's interval estimator
(``rliable.library.get_interval_estimates``) does not run in this
environment: it needs ``arch``, rliable 1.2 pins ``arch < 8``, arch 7
fails to import under pandas 3, and under arch 8 rliable passes a keyword
(``random_state``) that arch 8 refuses. So the intervals
come from :func:`stratified_bootstrap`, rliable's ``StratifiedBootstrap``
with ``task_bootstrap=True`` and its percentile method, written out here
(cases resampled with replacement, then seeds within each drawn case),
seeded so that the page is reproducible.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd
import scipy.stats

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
# Each is rliable.metrics' function of the same name, with its arithmetic.
def iqm(x: np.ndarray) -> float:
    """Interquartile mean: the 25% trimmed mean of every run of every case."""
    return float(scipy.stats.trim_mean(x, proportiontocut=0.25, axis=None))  # type: ignore[arg-type]


def mean(x: np.ndarray) -> float:
    """Mean over cases of the per-case mean over runs."""
    return float(np.mean(np.mean(x, axis=0)))


def median(x: np.ndarray) -> float:
    """Median over cases of the per-case mean over runs."""
    return float(np.median(np.mean(x, axis=0)))


def optimality_gap(x: np.ndarray) -> float:
    """Mean of max(x - 1, 0): rliable's gap (gamma - mean(min(s, gamma))) on
    s = -x with gamma = -1, since here lower is better."""
    gamma = -1.0
    return float(gamma - np.mean(np.minimum(-x, gamma)))


AGGREGATES: dict[str, Callable[[np.ndarray], float]] = {
    "IQM": iqm,
    "mean": mean,
    "median": median,
    "optimality gap": optimality_gap,
}


def probability_of_improvement(x: np.ndarray, y: np.ndarray) -> float:
    """P(a run of x has a lower normalised JCT than a run of y on the same
    case; ties count half), averaged over cases: rliable's (the Mann-Whitney
    U statistic over all pairs of runs, 0.5 for identical columns) on
    negated scores."""
    sx, sy = -np.asarray(x, dtype=float), -np.asarray(y, dtype=float)
    per_case = []
    for task in range(sx.shape[1]):
        if np.array_equal(sx[:, task], sy[:, task]):
            per_case.append(0.5)
        else:
            u = scipy.stats.mannwhitneyu(sx[:, task], sy[:, task], alternative="greater")
            per_case.append(u.statistic / (sx.shape[0] * sy.shape[0]))
    return float(np.mean(per_case))


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


# -- the card of one policy against reference records -------------------------------------
CITATION = (
    "cite: ddl-gym {version} (CITATION.cff), benchmark {suite} (suite sha256 {hash}), "
    "{split} split, scored against the shipped heuristic reference (commit {commit})"
)


@dataclass(frozen=True)
class Card:
    """One policy's normalised score card (:func:`normalised_card`).

    ``cases``: per case its mean JCT, the best heuristic there and its mean
    JCT (over the same seeds), the normalised score (ratio of the two: 1 =
    as good as the best heuristic, lower is better), P(a run of the policy
    beats a run of that heuristic), and with bounds the lower bound on mean
    JCT and the ``position`` (policy JCT - bound) / (best heuristic JCT -
    bound): 1 = the best heuristic, 0 = the bound. ``aggregates``: rows
    ``IQM``, ``mean``, ``median``, ``optimality gap`` of the normalised
    scores, ``P(improvement)`` over the best heuristic of each case, and with
    bounds ``position IQM`` / ``position mean``; columns ``value``, ``lo``,
    ``hi`` (95% stratified-bootstrap CI). ``families``: IQM and mean of the
    normalised scores per family. ``reference``: the reference's provenance.
    """

    policy: str
    suite: str
    split: str
    seeds: int
    cases: pd.DataFrame
    aggregates: pd.DataFrame
    families: pd.DataFrame
    reference: dict[str, Any]
    reps: int
    method: str
    notes: tuple[str, ...] = ()

    def citation(self) -> str:
        return CITATION.format(
            version=self.reference.get("ddl_gym", "?"),
            suite=self.suite,
            hash=self.reference.get("suite_hash", "?"),
            split=self.split,
            commit=self.reference.get("commit", "?"),
        )

    def text(self) -> str:
        """The card as text (times in hours)."""
        c = self.cases
        shown = pd.DataFrame(
            {
                "case": c["case"],
                "family": c["family"],
                "mean JCT (h)": c["mean_jct_s"] / 3600,
                "best heuristic": c["best"],
                "its JCT (h)": c["best_jct_s"] / 3600,
                "normalised": c["normalised"],
                "P(better)": c["p_improvement"],
            }
        )
        if "position" in c:
            shown["bound (h)"] = c["bound_s"] / 3600
            shown["position"] = c["position"]
        agg = self.aggregates
        width = max(len(str(k)) for k in agg.index)
        lines = [
            f"{self.policy} on {self.suite} {self.split}: {len(c)} cases x {self.seeds} seeds; "
            "normalised mean JCT = policy's / best heuristic's of the case (lower is better)",
            shown.to_string(index=False, float_format=lambda v: f"{v:.3f}"),
            "",
            f"aggregate [95% CI] ({self.method}, {self.reps} resamples):",
        ]
        for name, row in agg.iterrows():
            lines.append(
                f"  {str(name):{width}s}  {row['value']:.3f} [{row['lo']:.3f}, {row['hi']:.3f}]"
            )
        if len(self.families) > 1:
            lines.append("per family, IQM [95% CI] (mean):")
            for _, row in self.families.iterrows():
                lines.append(
                    f"  {row['family']:{width}s}  {row['IQM']:.3f} [{row['IQM lo']:.3f}, "
                    f"{row['IQM hi']:.3f}] ({row['mean']:.3f}), {row['cases']} cases"
                )
        ref = self.reference
        lines += [
            "",
            f"reference: {ref.get('path', '?')} ({len(ref.get('heuristics', ()))} heuristics: "
            f"{', '.join(ref.get('heuristics', ()))}); suite sha256 {ref.get('suite_hash')}, "
            f"ddl-gym {ref.get('ddl_gym')} at commit {ref.get('commit')}",
            *self.notes,
            self.citation(),
        ]
        return "\n".join(lines)

    def __str__(self) -> str:
        return self.text()

    def __getitem__(self, column: str) -> pd.Series:
        """A column of the per-case table (``card["normalised"]``)."""
        return self.cases[column]


def normalised_card(
    records: pd.DataFrame,
    reference: pd.DataFrame,
    heuristics: Sequence[str],
    bounds: Mapping[tuple[str, int], float] | None = None,
    reps: int = REPS,
) -> dict[str, Any]:
    """The parts of a :class:`Card` for one policy's ``records`` (status ok)
    against the ``reference`` records of the suite's ``heuristics`` on the
    same (case, seed)s: ``cases``, ``aggregates``, ``families``, ``seeds``,
    ``method``. ``bounds``: per (case, seed) a lower bound on mean JCT
    (adds ``position``). Raises ValueError when a (heuristic, case, seed)
    has no reference record, or when cases ran different numbers of seeds
    (the bootstrap needs a (seeds x cases) matrix)."""
    cases = list(dict.fromkeys(records["case"]))
    seer = set(reference.loc[reference["clairvoyant"].astype(bool), "policy"])
    heuristics = [h for h in heuristics if h not in seer]  # an oracle is never the baseline
    ref = reference[reference["policy"].isin(heuristics)]
    jct = {
        (str(p), str(c), int(s)): float(v)
        for p, c, s, v in ref[["policy", "case", "seed", "mean_jct_s"]].itertuples(index=False)
    }
    cols_p, cols_b, cols_q, rows = [], [], [], []
    with_bounds = bounds is not None and bool(bounds)
    for case in cases:
        mine = records[records["case"] == case].sort_values("seed")
        seeds = [int(s) for s in mine["seed"]]
        per_h: dict[str, np.ndarray] = {}
        for h in heuristics:
            missing = [s for s in seeds if (h, case, s) not in jct]
            if missing:
                raise ValueError(
                    f"no reference record of {h} on {case} seed(s) {missing}: the card "
                    "needs the heuristics' runs on the same (case, seed)s"
                )
            per_h[h] = np.array([jct[(h, case, s)] for s in seeds])
        means = {h: float(v.mean()) for h, v in per_h.items()}
        best = min(heuristics, key=lambda h: means[h])  # first of the suite's order on ties
        base = means[best]
        p = mine["mean_jct_s"].to_numpy(dtype=float)
        cols_p.append(p / base)
        cols_b.append(per_h[best] / base)
        row: dict[str, Any] = {
            "case": case,
            "family": str(mine["family"].iloc[0]),
            "seeds": len(seeds),
            "mean_jct_s": float(p.mean()),
            "best": best,
            "best_jct_s": base,
            "normalised": float(p.mean()) / base,
            "p_improvement": probability_of_improvement(
                (p / base)[:, None], (per_h[best] / base)[:, None]
            ),
        }
        if with_bounds:
            assert bounds is not None
            missing = [s for s in seeds if (case, s) not in bounds]
            if missing:
                with_bounds = False
            else:
                b = np.array([bounds[(case, s)] for s in seeds])
                span = base - float(b.mean())
                row["bound_s"] = float(b.mean())
                row["position"] = (float(p.mean()) - float(b.mean())) / span
                cols_q.append((p - b) / span)
        rows.append(row)
    lengths = {len(c) for c in cols_p}
    if len(lengths) != 1:
        raise ValueError(f"cases ran different numbers of seeds ({sorted(lengths)})")
    table = pd.DataFrame(rows)
    P, B = np.stack(cols_p, axis=1), np.stack(cols_b, axis=1)
    point, ci = stratified_bootstrap([P], batch_aggregates, reps)
    names = list(AGGREGATES)
    values = {n: (point[i], ci[0][i], ci[1][i]) for i, n in enumerate(names)}
    pp, pci = stratified_bootstrap([P, B], batch_improvement, reps)
    values["P(improvement)"] = (pp[0], pci[0][0], pci[1][0])
    if with_bounds:
        Q = np.stack(cols_q, axis=1)
        qp, qci = stratified_bootstrap([Q], batch_aggregates, reps)
        values["position IQM"] = (qp[0], qci[0][0], qci[1][0])
        values["position mean"] = (qp[1], qci[0][1], qci[1][1])
    else:
        table = table.drop(columns=["bound_s", "position"], errors="ignore")
    aggregates = pd.DataFrame.from_dict(values, orient="index", columns=["value", "lo", "hi"])
    fam_rows = []
    for fam in dict.fromkeys(table["family"]):
        idx = [i for i, f in enumerate(table["family"]) if f == fam]
        fp, fci = stratified_bootstrap([P[:, idx]], batch_aggregates, reps)
        fam_rows.append(
            {
                "family": fam,
                "cases": len(idx),
                "IQM": fp[0],
                "IQM lo": fci[0][0],
                "IQM hi": fci[1][0],
                "mean": fp[1],
            }
        )
    return {
        "cases": table,
        "aggregates": aggregates,
        "families": pd.DataFrame(fam_rows),
        "seeds": lengths.pop(),
        "method": "stratified bootstrap over cases, then seeds",
    }
