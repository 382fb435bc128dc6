"""Hardware no fit saw: the prior chosen from a description, refined by k rows,
scored by leaving each measured cluster out (issues 34 and 51).

For each measured cluster in turn: the other clusters' fits (``shared``
form) give the pooled terms, the efficiencies and their spreads
(:func:`ddl_gym.fidelity.hardware.class_prior`); the held-out cluster's
hardware description is the only thing read of it at k = 0. At k > 0, k of
its rows, spanning the levels its table has (:func:`refine_rows`), update
the bandwidths they identify, jointly (:func:`posterior`): the GPU link from
rows with more than one GPU in a server, the NIC from rows on more than one
server; a link whose rows disagree with each other beyond the row noise
keeps its prior (:func:`disagree`). Every row is predicted by
:meth:`~ddl_gym.fidelity.hardware.Prior.predict` (the ratio of least
expected error under the bandwidths' uncertainty). The k rows are not
scored; the figure at k > 0 is the median over seeded draws of which rows
(``calibrate.CALIBRATION_DRAWS``), beside k = 0 scored on the same rows.

:func:`write_evidence` writes the fits the prior ships with
(:mod:`ddl_gym.fidelity.evidence`).
"""

from __future__ import annotations

import itertools
import json
import math
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path

import numpy as np
import pandas as pd

from ddl_gym.fidelity.calibrate import (
    CALIBRATION_DRAWS,
    UNKNOWN_HARDWARE_FABRIC,
    FitResult,
    RatioPredictor,
    abs_rel_error,
    draw_seeds,
    leave_one_cluster_out,
    predict_ratio,
    transfer_prior,
)
from ddl_gym.fidelity.hardware import (
    Hardware,
    Prior,
    class_prior,
    class_table,
    describe,
    nearest_preset,
    pooled_spread,
)
from ddl_gym.fidelity.measured import MACHINE
from ddl_gym.fidelity.own_table import below_one, non_monotone
from ddl_gym.topology import FABRICS, Link

WITHIN, ACROSS = "within", "across"
# The k rows start from a single-server row (k = 3: two of them and one
# across servers), so the rows that identify the GPU link can be checked
# against each other (:func:`disagree`).
FIRST_KIND = WITHIN


def refine_rows(part: pd.DataFrame, k: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """Positions of ``k`` rows of one cluster a user could measure in
    minutes, drawn with ``seed``, spanning the levels the table has: rows on
    two or more servers (they identify the NIC) and single-server multi-GPU
    rows (the GPU link), taken in turn from :data:`FIRST_KIND`, as a user
    measuring a few placements measures one of each kind. Returned as
    (single-server rows, across-server rows).
    """
    informative = ~part["is_reference"].to_numpy()
    s, n = part["s"].to_numpy(), part["n"].to_numpy()
    pools = {
        ACROSS: np.flatnonzero(informative & (s >= 2)),
        WITHIN: np.flatnonzero(informative & (s == 1) & (n > 1)),
    }
    kinds = [FIRST_KIND, WITHIN if FIRST_KIND == ACROSS else ACROSS]
    want = dict.fromkeys(kinds, 0)
    total = min(max(k, 0), sum(len(p) for p in pools.values()))
    turn = itertools.cycle(kinds)
    while sum(want.values()) < total:
        kind = next(turn)
        if want[kind] < len(pools[kind]):
            want[kind] += 1
    rng = np.random.default_rng(seed)
    picked = {
        kind: np.sort(rng.choice(pools[kind], size=want[kind], replace=False))
        if want[kind]
        else np.array([], dtype=int)
        for kind in kinds
    }
    return picked[WITHIN], picked[ACROSS]


def prior_for(
    hw: Hardware,
    others: dict[str, FitResult],
    hardware: dict[str, Hardware],
    target: str | None,
    models: Sequence[str],
) -> Prior:
    """The k = 0 prior of hardware ``hw`` from the fits ``others``, with its
    uncertainty (:func:`~ddl_gym.fidelity.hardware.class_prior`)."""
    pooled = transfer_prior(others, target=target, models=models)
    fabrics = {c: f.fabric for c, f in others.items()}
    return class_prior(hw, pooled, fabrics, hardware, FABRICS[UNKNOWN_HARDWARE_FABRIC])


def row_noise(fits: dict[str, FitResult]) -> float:
    """How far one row sits from the form fitted to its own table, in log:
    the median over ``fits`` of their root mean square log error (the
    bundled tables: 0.09-0.29, median about 0.12). The k rows' likelihood
    uses it, so a row is trusted as far as the form can follow a table."""
    return float(np.median([f.rms_log_error for f in fits.values()]))


# The grid of the posterior of each log-bandwidth, in prior sds either side
# of the prior's median: far enough for any row the form can reach, fine
# enough that the posterior median moves smoothly.
_POSTERIOR_GRID = np.linspace(-4.0, 4.0, 41)
_MIN_SIGMA = 0.05  # a prior this sure is still moved by rows that disagree
# Degrees of freedom of a row's residual (Student t, scale ``noise``): heavy
# tails, as the fits' soft_l1 loss, for tables with rows no form reaches
# (Gavel V100: 25 of 57 single-server rows faster than fewer GPUs).
ROW_DOF = 4.0


def identified(rows: pd.DataFrame) -> tuple[bool, bool]:
    """Whether ``rows`` say anything of the GPU link (a row with more than
    one GPU in a server) and of the NIC (a row on more than one server)."""
    data = rows[~rows["is_reference"].to_numpy()]
    return bool((data["g"].to_numpy() > 1).any()), bool((data["s"].to_numpy() > 1).any())


def _marginal(w: np.ndarray, logs: np.ndarray) -> tuple[float, float]:
    """Median and sd of a log-bandwidth with grid weights ``w`` at ``logs``."""
    cdf = np.cumsum(w)
    median = float(np.interp(0.5, cdf, logs))
    mean = float(w @ logs)
    return median, float(np.sqrt(w @ (logs - mean) ** 2))


def _row_cost(resid: np.ndarray, scales: np.ndarray) -> float:
    """-2 log likelihood (up to a constant) of the log residuals ``resid``
    of one table's rows: Student-t (:data:`ROW_DOF`) with one scale shared by
    the table, that scale equally likely any of ``scales`` (how far the
    other tables' rows sit from their own fits: an unseen table is as noisy
    as one of them). A row the form cannot follow pulls less than a normal
    one would."""
    z = resid[None, :] / scales[:, None]
    log_t = -(ROW_DOF + 1) / 2 * np.log1p(z**2 / ROW_DOF) - np.log(scales)[:, None]
    per_scale = log_t.sum(axis=1)
    top = float(per_scale.max())
    return -2.0 * (top + math.log(float(np.mean(np.exp(per_scale - top)))))


def posterior(
    prior: Prior,
    rows: pd.DataFrame,
    noise: float | Sequence[float],
    hold: tuple[bool, bool] = (False, False),
) -> Prior:
    """``prior`` after ``rows``: the joint posterior of the GPU link's and the
    NIC's bandwidth, each log-normal a priori (the prior's median and sd),
    each row's log ratio Student-t (:data:`ROW_DOF`) about the prediction
    with scale ``noise``; on a grid, every other term held at the prior's.
    A bandwidth no row identifies (:func:`identified`) keeps its prior; the
    others become their posterior median and sd."""
    data = rows[~rows["is_reference"].to_numpy()]
    moves_gpu, moves_nic = identified(data)
    moves_gpu, moves_nic = moves_gpu and not hold[0], moves_nic and not hold[1]
    if data.empty or not (moves_gpu or moves_nic):
        return prior
    central = prior.central
    gpu, nic = central.gpu_link, central.nic
    sg, sn = max(prior.gpu_sigma, _MIN_SIGMA), max(prior.nic_sigma, _MIN_SIGMA)
    zg = _POSTERIOR_GRID if moves_gpu else np.zeros(1)
    zn = _POSTERIOR_GRID if moves_nic else np.zeros(1)
    predict = RatioPredictor(data)
    measured = np.log(data["ratio"].to_numpy(dtype=float))
    scales = np.atleast_1d(np.asarray(noise, dtype=float))
    cost = np.empty((len(zg), len(zn)))
    for i, a in enumerate(zg):
        g = Link(gpu.bandwidth * math.exp(sg * a), gpu.latency)
        for j, b in enumerate(zn):
            n = Link(nic.bandwidth * math.exp(sn * b), nic.latency)
            resid = np.log(predict(replace(central, gpu_link=g, nic=n, uplink=n))) - measured
            cost[i, j] = _row_cost(resid, scales) + a**2 + b**2
    w = np.exp(-(cost - cost.min()) / 2.0)
    w /= w.sum()
    gpu_sigma, nic_sigma = prior.gpu_sigma, prior.nic_sigma
    if moves_gpu:
        m, sd = _marginal(w.sum(axis=1), math.log(gpu.bandwidth) + sg * zg)
        gpu, gpu_sigma = Link(math.exp(m), gpu.latency), sd
    if moves_nic:
        m, sd = _marginal(w.sum(axis=0), math.log(nic.bandwidth) + sn * zn)
        nic, nic_sigma = Link(math.exp(m), nic.latency), sd
    return Prior(replace(central, gpu_link=gpu, nic=nic, uplink=nic), gpu_sigma, nic_sigma)


# How far apart (in row-noise units) two rows that identify the same link
# may sit from the posterior before they are taken to disagree: the 99.5 %
# point of a Student-t (ROW_DOF = 4), for the difference of two rows (a
# two-sided 1 % test: rows are held back only when the form plainly fails).
AGREE = math.sqrt(2.0) * 4.604


def disagree(prior: Prior, post: Prior, rows: pd.DataFrame, noise: float) -> tuple[bool, bool]:
    """Whether the rows that carry information on the GPU link, and those
    that carry information on the NIC, sit further apart about ``post``'s
    prediction than the noise allows (:data:`AGREE`): no bandwidth makes them
    agree, so the form does not follow this table and the prior is kept for
    that link. A row carries information on a link when its prediction moves
    by more than ``noise`` between the ends of the posterior's grid of that
    link (``prior``'s median times exp(+-4 sd), the other link at ``post``'s);
    a row no bandwidth moves cannot disagree about it."""
    data = rows[~rows["is_reference"].to_numpy()]
    if data.empty:
        return False, False
    predict = RatioPredictor(data)
    resid = (np.log(predict(post.central)) - np.log(data["ratio"].to_numpy())) / noise

    def moved_by(link: str, sigma: float) -> np.ndarray:
        base = getattr(prior.central, link)
        ends = []
        for z in (_POSTERIOR_GRID[0], _POSTERIOR_GRID[-1]):
            end = Link(base.bandwidth * math.exp(max(sigma, _MIN_SIGMA) * z), base.latency)
            links = {"nic": end, "uplink": end} if link == "nic" else {link: end}
            ends.append(np.log(predict(replace(post.central, **links))))
        return np.abs(ends[1] - ends[0]) > noise

    def spread(mask: np.ndarray) -> bool:
        return mask.sum() >= 2 and float(np.ptp(resid[mask])) > AGREE

    return (
        spread(moved_by("gpu_link", prior.gpu_sigma)),
        spread(moved_by("nic", prior.nic_sigma)),
    )


def refine(
    prior: Prior,
    server_rows: pd.DataFrame,
    pair_rows: pd.DataFrame,
    noise: float,
) -> Prior:
    """The prior after k measured rows (see :func:`refine_rows`; either may
    be empty): one joint posterior of the GPU link and the NIC from all of
    them (:func:`posterior`), a link whose rows disagree (:func:`disagree`)
    held at the prior. Rows the prior already predicts move it little; rows
    it cannot explain move it as far as the row noise allows.
    """
    rows = pd.concat([server_rows, pair_rows])
    post = posterior(prior, rows, noise)
    hold = disagree(prior, post, rows, noise)
    return posterior(prior, rows, noise, hold) if any(hold) else post


def predict_unseen(
    df: pd.DataFrame,
    fits: dict[str, FitResult],
    descriptions: dict[str, str],
    k: int = 0,
    seed: int = 0,
) -> np.ndarray:
    """Ratios of every row, each cluster predicted from the *other* clusters'
    fits and its own description (plus k of its rows, NaN there)."""
    hardware = {c: describe(descriptions.get(c, "")) for c in set(df["cluster"]) | set(fits)}
    pred = np.full(len(df), np.nan)
    for c, idx, part, others in leave_one_cluster_out(df, fits):
        prior = prior_for(hardware[c], others, hardware, c, list(part["model"].unique()))
        server, pair = refine_rows(part, k, seed)
        posterior_prior = refine(prior, part.iloc[server], part.iloc[pair], row_noise(others))
        pred[idx] = posterior_prior.predict(part)
        pred[idx[np.concatenate([server, pair])]] = np.nan
    return pred


def level_of(df: pd.DataFrame) -> np.ndarray:
    return np.where(df["level"].to_numpy() == MACHINE, WITHIN, ACROSS)


def _medians(df: pd.DataFrame, err: np.ndarray) -> dict[tuple[str, str], float]:
    ok = ~np.isnan(err) & ~df["is_reference"].to_numpy()
    d = pd.DataFrame({"cluster": df["cluster"].to_numpy(), "level": level_of(df), "err": err})[ok]
    return {key: float(v) for key, v in d.groupby(["cluster", "level"])["err"].median().items()}


def unseen_table(
    df: pd.DataFrame,
    fits: dict[str, FitResult],
    descriptions: dict[str, str],
    k_values: Sequence[int] = (0, 3),
    seed: int = 0,
    draws: int = CALIBRATION_DRAWS,
) -> pd.DataFrame:
    """Median error per cluster and level (within one server / across
    servers): predict 1, the nearest datasheet preset, the cluster's own fit
    in-sample and the prior at each k (k > 0: median over ``draws`` draws of
    the refining rows, and ``k=0, k=K's rows``: k = 0 scored on the rows
    each draw scores, median over the draws)."""
    cols: dict[str, dict[tuple[str, str], float]] = {}
    cols["predict 1"] = _medians(df, abs_rel_error(df, np.ones(len(df))))
    preset = np.full(len(df), np.nan)
    for c, idx in df.groupby("cluster").indices.items():
        desc = descriptions.get(str(c), "")
        preset[idx] = predict_ratio(df.iloc[idx], FABRICS[nearest_preset(describe(desc))])
    cols["nearest datasheet preset"] = _medians(df, abs_rel_error(df, preset))
    own = np.full(len(df), np.nan)
    for c, idx in df.groupby("cluster").indices.items():
        if str(c) in fits:
            own[idx] = predict_ratio(df.iloc[idx], fits[str(c)].fabric)
    cols["own fit, in-sample"] = _medians(df, abs_rel_error(df, own))
    err0 = abs_rel_error(df, predict_unseen(df, fits, descriptions, 0, seed))

    def over_draws(per_draw: list[dict[tuple[str, str], float]]) -> dict[tuple[str, str], float]:
        keys = set().union(*per_draw)
        return {key: float(np.median([d[key] for d in per_draw if key in d])) for key in keys}

    for k in k_values:
        if k <= 0:
            cols[f"k={k}"] = _medians(df, err0)
            continue
        errs = [
            abs_rel_error(df, predict_unseen(df, fits, descriptions, k, s))
            for s in draw_seeds(seed, draws)
        ]
        cols[f"k={k}"] = over_draws([_medians(df, e) for e in errs])
        cols[f"k=0, k={k}'s rows"] = over_draws(
            [_medians(df, np.where(np.isnan(e), np.nan, err0)) for e in errs]
        )
    if 3 in k_values:
        best = best_links(df, fits, descriptions, 3, seed, draws)
        for name in next(iter(best.values()), {}):
            cols[name] = {key: v[name] for key, v in best.items()}
    keys = sorted(set().union(*cols.values()))
    rows = []
    for cluster, level in keys:
        hw = describe(descriptions.get(cluster, ""))
        row = {
            "cluster": cluster,
            "level": level,
            "points": int(
                (
                    (df["cluster"] == cluster).to_numpy()
                    & (level_of(df) == level)
                    & ~df["is_reference"].to_numpy()
                ).sum()
            ),
            "nearest preset": nearest_preset(hw),
        }
        row.update({name: col.get((cluster, level), np.nan) for name, col in cols.items()})
        rows.append(row)
    return pd.DataFrame(rows)


def pooled_errors(
    df: pd.DataFrame, fits: dict[str, FitResult], descriptions: dict[str, str], seed: int = 0
) -> pd.DataFrame:
    """The k = 0 prior and predict 1 pooled per level: the median over every
    scored row (which weighs a cluster by its rows: Pollux has 5,323 of the
    5,518 rows across servers) and the median of the clusters' medians."""
    err0 = abs_rel_error(df, predict_unseen(df, fits, descriptions, 0, seed))
    err1 = abs_rel_error(df, np.ones(len(df)))
    ok = ~df["is_reference"].to_numpy()
    levels = level_of(df)
    out = []
    for level in (WITHIN, ACROSS):
        m = ok & (levels == level) & ~np.isnan(err0)
        if not m.any():
            continue
        c0, c1 = _medians(df[m], err0[m]), _medians(df[m], err1[m])
        out.append(
            {
                "level": level,
                "rows": int(m.sum()),
                "prior, over rows": float(np.median(err0[m])),
                "predict 1, over rows": float(np.median(err1[m])),
                "prior, over clusters": float(np.median(list(c0.values()))),
                "predict 1, over clusters": float(np.median(list(c1.values()))),
            }
        )
    return pd.DataFrame(out)


# The bandwidths :func:`best_links` tries, per link: 0.2 GB/s to 3 TB/s, log-spaced.
_ORACLE_GRID = np.exp(np.linspace(math.log(0.2e9), math.log(3000e9), 25))
BEST_LINKS = "best links, k=3's rows"  # the column of :func:`best_links`


def best_links(
    df: pd.DataFrame,
    fits: dict[str, FitResult],
    descriptions: dict[str, str],
    k: int = 3,
    seed: int = 0,
    draws: int = CALIBRATION_DRAWS,
) -> dict[tuple[str, str], dict[str, float]]:
    """What k rows could at best do in this form, per cluster and level: the
    least median error over a grid of GPU link and NIC bandwidths
    (:data:`_ORACLE_GRID` each), every other term the k = 0 prior's and no
    uncertainty, scored on the rows k = ``k`` scores (median over the
    ``draws``), with the GPU link and NIC bandwidths that reach it and how
    many of the prior's sds they sit from its medians. The k rows move only
    those two bandwidths (:func:`posterior`), so where this is barely below
    k = 0 on the same rows they have little to find (not a strict bound: the
    posterior's predictions also shrink under its remaining uncertainty).
    Reads the held-out cluster's errors: a diagnostic for the report, never
    a prediction."""
    hardware = {c: describe(descriptions.get(c, "")) for c in set(df["cluster"]) | set(fits)}
    out: dict[tuple[str, str], dict[str, float]] = {}
    for c, _idx, part, others in leave_one_cluster_out(df, fits):
        part = part.reset_index(drop=True)
        prior = prior_for(hardware[c], others, hardware, c, list(part["model"].unique()))
        central, predict = prior.central, RatioPredictor(part)
        pairs = list(itertools.product(_ORACLE_GRID, _ORACLE_GRID))
        errs = np.array(
            [
                abs_rel_error(
                    part,
                    predict(
                        replace(
                            central,
                            gpu_link=Link(g, central.gpu_link.latency),
                            nic=Link(n, central.nic.latency),
                            uplink=Link(n, central.nic.latency),
                        )
                    ),
                )
                for g, n in pairs
            ]
        )
        scored = []
        for s in draw_seeds(seed, draws):
            keep = np.ones(len(part), dtype=bool)
            keep[np.concatenate(refine_rows(part, k, s))] = False
            scored.append(keep)
        levels, informative = level_of(part), ~part["is_reference"].to_numpy()
        for level in (WITHIN, ACROSS):
            cell = informative & (levels == level)
            if not cell.any():
                continue
            per_pair = np.median(
                [np.nanmedian(errs[:, cell & keep], axis=1) for keep in scored], axis=0
            )
            best = int(np.argmin(per_pair))
            g, n = pairs[best]
            out[(str(c), level)] = {
                BEST_LINKS: float(per_pair[best]),
                "best GPU link": float(g),
                "best NIC": float(n),
                # How far those sit from the prior's medians, in its sds: the
                # posterior's grid reaches 4 (:data:`_POSTERIOR_GRID`).
                "best GPU link, prior sds": abs(math.log(g / central.gpu_link.bandwidth))
                / max(prior.gpu_sigma, _MIN_SIGMA),
                "best NIC, prior sds": abs(math.log(n / central.nic.bandwidth))
                / max(prior.nic_sigma, _MIN_SIGMA),
            }
    return out


def _dominant_lines(
    df: pd.DataFrame, fits: dict[str, FitResult], descriptions: dict[str, str]
) -> list[str]:
    """Where one cluster holds most of a level's rows, the median over rows
    is that cluster's cell: say so, and across servers what its prior's NIC
    costs (its own fit's NIC in the prior instead, with the prior's
    uncertainty and without)."""
    hardware = {c: describe(descriptions.get(c, "")) for c in set(df["cluster"]) | set(fits)}
    ok, levels = ~df["is_reference"].to_numpy(), level_of(df)
    lines = []
    for level in (WITHIN, ACROSS):
        counts = df[ok & (levels == level)]["cluster"].value_counts()
        if counts.empty or counts.iloc[0] * 2 <= counts.sum():
            continue
        c, n = str(counts.index[0]), int(counts.iloc[0])
        text = (
            f"{c} holds {n:,} of {int(counts.sum()):,} rows {level}, so the median over "
            f"rows there is nearly {c}'s cell; the median over clusters weighs each "
            "cluster once."
        )
        others = {o: f for o, f in fits.items() if o != c}
        if level == ACROSS and c in fits and others:
            part = df[df["cluster"] == c]
            prior = prior_for(hardware[c], others, hardware, c, list(part["model"].unique()))
            own = fits[c].fabric.nic
            cell = (levels[df["cluster"].to_numpy() == c] == ACROSS) & ~part[
                "is_reference"
            ].to_numpy()

            def err(p: Prior, part: pd.DataFrame = part, cell: np.ndarray = cell) -> float:
                return float(np.nanmedian(abs_rel_error(part, p.predict(part))[cell]))

            mine = replace(prior.central, nic=own, uplink=own)
            stated = [o for o in others if hardware[o].network_stated]
            # What issue 51 rules out: the measured tables' pooled NIC for a
            # stated network no table measured.
            pooled = transfer_prior(others, target=c, models=list(part["model"].unique())).nic
            borrowed = Prior(
                replace(prior.central, nic=pooled, uplink=pooled),
                prior.gpu_sigma,
                pooled_spread({o: f.fabric for o, f in others.items()}, "nic"),
            )
            text += (
                f" Held out, {c}'s prior NIC is {prior.central.nic.bandwidth / 1e9:.2g} GB/s "
                f"(sigma {prior.nic_sigma:.2f}), its own fit's {own.bandwidth / 1e9:.2g} GB/s. "
                f"With its own fit's NIC in the prior, every other term and the uncertainty "
                f"unchanged, its cell would be {_pct(err(replace(prior, central=mine)))}; "
                f"with that NIC known exactly (sigma 0), "
                f"{_pct(err(replace(prior, central=mine, nic_sigma=0.0)))}. "
                + (
                    f"No other table states its network ({c}'s is the only stated one), so "
                    "held out no network family is measured and the NIC takes the default "
                    "efficiency of the other level's links; nothing in the other tables "
                    "says a network reaches a smaller share of its datasheet than a PCIe "
                    "link does, so reaching the target over rows would take this table's "
                    "own network. The other tables' pooled NIC in its place "
                    f"({pooled.bandwidth / 1e9:.2g} GB/s, {pooled.latency * 1e3:.2g} ms, "
                    f"sigma {borrowed.nic_sigma:.2f}), the stated network ignored, would "
                    f"give {_pct(err(borrowed))}, but issue 51 rules that out (a stated link "
                    "is its datasheet times a measured or default efficiency, never other "
                    "hardware's fitted link): it reads any stated network as the measured "
                    "tables' unstated ones, so an 8x HDR InfiniBand server would get the "
                    "same 1-2 GB/s."
                    if not stated
                    else f"Other tables stating a network: {', '.join(sorted(stated))}."
                )
            )
        lines += ["", text]
    return lines


def _worst_jobs(part: pd.DataFrame, pred: np.ndarray, top: int = 3) -> str:
    """The ``top`` jobs of one cell with the largest median error, with the
    median measured and predicted ratio and the rows."""
    d = part.assign(pred=pred, err=abs_rel_error(part, pred))
    d = d[~np.isnan(d["err"].to_numpy())]
    g = d.groupby("job").agg(
        rows=("err", "size"),
        err=("err", "median"),
        meas=("ratio", "median"),
        pred=("pred", "median"),
    )
    g = g.sort_values("err", ascending=False).head(top)
    return ", ".join(
        f"{job} ({int(r.rows)} rows, {r.err:.0%}: measured {r.meas:.2f}x, predicted {r.pred:.2f}x)"
        for job, r in g.iterrows()
    )


def two_gpu_reference_error(part: pd.DataFrame, pred: np.ndarray) -> tuple[float, int]:
    """Median error of one cluster's single-server rows of more than 2 GPUs
    taken against the same job's 2-GPU single-server row instead of its
    1-GPU row (measured and predicted alike), and how many rows that is.

    A diagnostic of a within-server miss: if the 1-GPU reference were the
    trouble (a 1-GPU row measured under other conditions than the job's
    multi-GPU rows), this error would fall to the other tables' level.
    """
    d = part.assign(pred=pred)
    d = d[(d["s"].to_numpy() == 1) & ~np.isnan(d["pred"].to_numpy())]
    two = d[d["n"] == 2].drop_duplicates("job").set_index("job")
    more = d[(d["n"] > 2) & d["job"].isin(two.index)]
    if more.empty:
        return float("nan"), 0
    meas = more["ratio"].to_numpy() / more["job"].map(two["ratio"]).to_numpy()
    guess = more["pred"].to_numpy() / more["job"].map(two["pred"]).to_numpy()
    return float(np.median(np.abs(guess / meas - 1.0))), len(more)


def _reference_lines(
    df: pd.DataFrame, pred0: np.ndarray, fits: dict[str, FitResult], descriptions: dict[str, str]
) -> list[str]:
    """Two diagnostics of the within-server cells at k = 0: the error
    against each job's 2-GPU row (:func:`two_gpu_reference_error`), and, for
    a cluster whose NVLink was inferred from its GPU rather than stated, the
    error had it said PCIe 3 instead."""
    clusters = df["cluster"].to_numpy()
    cells, alt = [], []
    for c in sorted(set(clusters)):
        m = clusters == c
        e2, n2 = two_gpu_reference_error(df[m], pred0[m])
        if n2:
            cells.append(f"{c} {_pct(e2)} ({n2} rows)")
        hw = describe(descriptions.get(c, ""))
        if hw.intra and hw.intra.startswith("nvlink") and not hw.intra_stated:
            text = {**descriptions, c: descriptions.get(c, "") + ", PCIe 3"}
            pred = predict_unseen(df, fits, text, 0)
            w = m & (level_of(df) == WITHIN) & ~df["is_reference"].to_numpy()
            err = float(np.nanmedian(abs_rel_error(df[w], pred[w])))
            alt.append(f"{c} {_pct(err)}")
    lines = []
    if cells:
        lines.append(
            "Within one server, each job's rows of 4+ GPUs against its 2-GPU row instead of "
            "its 1-GPU row (measured and predicted alike; k = 0): " + ", ".join(cells) + ". "
            "Where this is small, a cluster's error within one server sits in the step from "
            "1 to 2 GPUs (the "
            "1-GPU reference, or a fixed cost of running distributed at all, which no "
            "link-based form has: Pollux's NCF, whose steps are short, measures 1.2-1.8x at "
            "2 GPUs); where it is not, in the growth beyond 2 GPUs."
        )
    if alt:
        lines.append(
            "NVLink inferred from the GPU name, not stated: described as PCIe 3 servers "
            "instead, within one server at k = 0: " + ", ".join(alt) + "."
        )
    return lines


def _nic_line(
    df: pd.DataFrame, cluster: str, fits: dict[str, FitResult], descriptions: dict[str, str]
) -> str:
    """The k = 0 prior's network beside the cluster's own fit's, and whether
    k rows can move it."""
    hardware = {c: describe(descriptions.get(c, "")) for c in set(df["cluster"]) | set(fits)}
    part = df[df["cluster"] == cluster]
    others = {o: f for o, f in fits.items() if o != cluster}
    uncertain = prior_for(
        hardware[cluster], others, hardware, cluster, list(part["model"].unique())
    )
    prior = uncertain.fabric()
    own = fits[cluster].fabric
    _, across = refine_rows(part, 3, 0)
    moves = "" if len(across) else "; no k row spans servers, so the NIC keeps its prior"
    return (
        f"the prior's NIC {prior.nic.bandwidth / 1e9:.2g} GB/s (median "
        f"{uncertain.central.nic.bandwidth / 1e9:.2g} GB/s, sigma {uncertain.nic_sigma:.2f}), "
        f"{prior.nic.latency * 1e3:.2g} ms latency, overlap {prior.overlap:.2f}; "
        f"the cluster's own fit {own.nic.bandwidth / 1e9:.2g} GB/s, "
        f"{own.nic.latency * 1e3:.2g} ms latency, overlap {own.overlap:.2f}{moves}"
    )


def _by(part: pd.DataFrame, pred: np.ndarray, column: str, label: str) -> str:
    """Median error of one cell's rows per value of ``column``."""
    d = part.assign(err=abs_rel_error(part, pred))
    d = d[~np.isnan(d["err"].to_numpy())]
    g = d.groupby(column)["err"].agg(["median", "size"])
    return ", ".join(f"{label}{k} {r['median']:.0%} ({int(r['size'])})" for k, r in g.iterrows())


SAME_ROWS = "k=0, k=3's rows"  # the column of k = 0 scored on k = 3's rows
TARGETS = {WITHIN: 0.10, ACROSS: 0.12}  # issue 34: median error per cluster


def _pct(v: float) -> str:
    return "" if v != v else f"{v:.1%}"


def _inexpressible(part: pd.DataFrame) -> int:
    """Rows of one cluster and level no form can reach: measured faster than
    their reference, or (one server) than fewer GPUs of the same job."""
    return len(below_one(part)) + len(non_monotone(part))


def k_rows_verdict(table: pd.DataFrame) -> dict[str, list[str]]:
    """Cells of :func:`unseen_table` sorted by what k = 3 rows do against
    k = 0 on the same rows: ``improved`` (strictly better), ``tied``,
    ``worse``; and ``not required``: cells where the cluster's own fit (in
    sample) is not better than k = 0 there, which no refinement of the
    prior's links in this form can be required to beat."""
    out: dict[str, list[str]] = {"improved": [], "tied": [], "worse": [], "not required": []}
    for _, r in table.iterrows():
        if SAME_ROWS not in r or r[SAME_ROWS] != r[SAME_ROWS]:
            continue
        k0, k3 = float(r[SAME_ROWS]), float(r["k=3"])
        cell = f"{r['cluster']} {r['level']} ({_pct(k0)} -> {_pct(k3)})"
        if r["own fit, in-sample"] >= k0:
            out["not required"].append(cell)
        out["improved" if k3 < k0 - 1e-12 else "worse" if k3 > k0 + 1e-12 else "tied"].append(cell)
    return out


def _reach(r: pd.Series) -> str:
    """What the best links of one cell (:func:`best_links`) say of it:
    where k rows would have to move the links, and whether they can."""
    best = r.get(BEST_LINKS, np.nan)
    if best != best:
        return ""
    link, sds = ("GPU link", "best GPU link") if r["level"] == WITHIN else ("NIC", "best NIC")
    gb, z = float(r[sds]) / 1e9, float(r[sds + ", prior sds"])
    text = (
        f"; the best GPU link and NIC at any bandwidths (every other term the prior's) "
        f"reach {_pct(best)} on these rows, against k = 0's {_pct(float(r[SAME_ROWS]))}, "
        f"with the {link} at {gb:.3g} GB/s, {z:.1f} of the prior's sds from its median"
    )
    if z > _POSTERIOR_GRID[-1]:
        text += " (beyond the posterior's reach of 4 sds: the prior rules it out)"
    elif best >= float(r[SAME_ROWS]) - 0.01:
        text += " (under a point below k = 0: nothing three rows can be expected to find)"
    return text


def _verdict_lines(table: pd.DataFrame, descriptions: dict[str, str]) -> list[str]:
    """Where the prior is worse than predict 1, and what k = 3 rows do
    against k = 0 on the same rows (:func:`k_rows_verdict`), with why where
    they do not improve."""
    worse = [
        f"{r['cluster']} {r['level']} (k={k})"
        for _, r in table.iterrows()
        for k in (0, 3)
        if f"k={k}" in r and r[f"k={k}"] > r["predict 1"] + 1e-12
    ]
    v = k_rows_verdict(table)
    lines = [
        "The prior is "
        + (
            "never worse than predict 1 on any cluster and level here, at k = 0 and k = 3."
            if not worse
            else "worse than predict 1 on " + ", ".join(worse) + "."
        ),
        "",
        "k = 3 against k = 0 on the same rows. The rule: k rows must improve on k = 0 "
        "wherever the cluster's own fit (in-sample) is better than k = 0 there, and "
        "must never be worse; where the own fit is not better, no refinement of the "
        "prior's links in this form can be required to improve. Improved: "
        + (", ".join(v["improved"]) or "none")
        + ". Tied: "
        + (", ".join(v["tied"]) or "none")
        + ". Worse: "
        + (", ".join(v["worse"]) or "none")
        + ". Own fit not better than k = 0 (not required): "
        + (", ".join(v["not required"]) or "none")
        + ".",
    ]
    why = []
    for _, r in table.iterrows():
        cell = f"{r['cluster']} {r['level']}"
        if not any(c.startswith(cell + " (") for c in v["tied"] + v["worse"]):
            continue
        hw = describe(descriptions.get(str(r["cluster"]), ""))
        reach = _reach(r)
        if not hw.known:
            why.append(
                f"{cell}: its description states nothing, so its prior is the stand-in "
                f"`{UNKNOWN_HARDWARE_FABRIC}` links (no exposed communication), uncertain by "
                "the fits' spread about them; no bandwidth within that reach predicts the "
                "rows' cost, so k rows hardly move its predictions" + reach
            )
        elif r["own fit, in-sample"] > TARGETS[str(r["level"])]:
            why.append(
                f"{cell}: the form cannot follow this table (its own fit misses by "
                f"{_pct(r['own fit, in-sample'])} in-sample, predict 1 by "
                f"{_pct(r['predict 1'])}): rows that agree with each other can still "
                "pull the link where the table's other rows are not" + reach
            )
        elif reach:
            why.append(cell + reach[1:])
    if why:
        lines += ["", "Where k = 3 does not improve: " + "; ".join(why) + "."]
    return lines


def unseen_markdown(
    table: pd.DataFrame,
    df: pd.DataFrame,
    fits: dict[str, FitResult] | None = None,
    descriptions: dict[str, str] | None = None,
) -> str:
    """The report section of :func:`unseen_table`, with the misses named."""
    descriptions = descriptions or {}
    present = ", ".join(sorted(df["cluster"].unique()))
    head = [
        "## Hardware no fit saw: a prior per interconnect class (issues 34 and 51)",
        "",
        "Each measured cluster is predicted from the *other* clusters only, with its "
        "hardware description as the one input read from it (k = 0), then with k = 3 of "
        "its rows (`ddl_gym.fidelity.unseen`). The description (`measured.STATED_HARDWARE`) "
        "is read into an interconnect class per level, or refused "
        "(`fidelity.hardware.describe`; classes below). Each bandwidth of the prior is an "
        "estimate with an uncertainty, the sd of its log (`fidelity.hardware.class_prior`): "
        "a stated class gets its datasheet bandwidth times the efficiency (fitted over "
        "datasheet bandwidth) of the other clusters' tables of the *same family*, "
        "uncertain by that family's leave-one-cluster-out spread (or the spread within "
        "families where one table measured it); a family no table measured (A100/H100 "
        "NVLink, NVSwitch, InfiniBand, RoCE, EFA here) gets the *default efficiency*, "
        "the median over the measured families (each family once), uncertain by the "
        "spread between them; a link inferred from a GPU sold in two forms (P100, V100: "
        "PCIe or SXM) measures no family, and held out it carries the other form as "
        "uncertainty (half the log distance between the forms' datasheets); a level not "
        "stated keeps the other clusters' pooled link, uncertain by their spread; a "
        "description that states nothing gets the default fabric `seed`'s links. "
        "Latencies, sharing, overlap and the per-model cards are pooled "
        "(`calibrate.transfer_prior`). Every row is predicted with the ratio of least "
        "expected error under that uncertainty (`hardware.bayes_ratio`: the median of "
        "the ratio weighted by 1 / ratio over the bandwidths' spread, 15 x 15 quantile "
        "nodes): the estimate where the evidence is tight or the row hardly "
        "communicates, shrunk toward 1 (no exposed communication) where it is not, so "
        "that its expected error is never above predicting 1's. k = 3: three of "
        "the cluster's rows, spanning the levels its table has, as a user measuring "
        "three placements would (`unseen.refine_rows`: a single-server multi-GPU row, "
        "a row across servers, then another single-server row; a table with only one "
        "level gives all three from it), update the bandwidths they identify, jointly "
        "(`unseen.posterior`: the prior times the rows' likelihood on a grid of both "
        "log-bandwidths; a row with more than one GPU in a server identifies the GPU "
        "link, a row on more than one server the NIC; a bandwidth no row identifies "
        "keeps its prior exactly; each row's log ratio Student-t with 4 degrees of "
        "freedom about the prediction, scaled by the median over the other clusters' "
        "own fits of their rms log error, 0.12-0.18; every other term stays the "
        "prior's). Where the rows that carry information on one link (whose "
        "prediction it moves by more than that noise) sit further apart about the "
        "posterior's prediction than the noise allows (the 99.5 % point "
        "of the difference of two such rows), they disagree: the form does not follow "
        "them, and that link keeps its prior (`unseen.disagree`, which reads only the "
        "k rows). "
        "The k rows are not scored; k = 3 is the median over the draws of which "
        "rows, and `k=0, k=3's rows` is k = 0 scored on the same rows (the k = 3 "
        "figure leaves three rows out, which alone moves a small table's median). "
        "`best links, k=3's rows` (`unseen.best_links`, a bound for this report that "
        "reads the held-out errors, never a prediction): the least error on the same "
        "rows of any GPU link and NIC bandwidth (25 x 25, 0.2 GB/s to 3 TB/s), every "
        "other term the prior's: the two bandwidths are all k rows move, so where this "
        "is barely below `k=0, k=3's rows` the rows have little to find (a guide, not a "
        "strict bound: the posterior's remaining uncertainty shrinks its predictions "
        "toward 1, which moves a cell a little either way). "
        "`own fit, in-sample`: the cluster's own fit in the same form, scored on the "
        "rows it saw: what no transfer in this form can beat by much. Nearest "
        "datasheet preset: `fidelity.hardware.nearest_preset` of the same description.",
        "",
        "This section and its tables are written by `python scripts/calibrate.py --docs` "
        "(`fidelity.unseen.unseen_table` and `unseen_markdown`); the fits the prior "
        "ships with (`fidelity.evidence`, read by `hardware.preset_for` and `ddl-gym "
        "calibrate --hardware`) by `python -c 'from ddl_gym.fidelity.unseen import "
        "write_evidence; write_evidence()'`.",
        "",
        f"Measured tables in `../shared/data`: {present}. The A100 DGX, V100 cloud, RTX "
        "2080Ti and Quadro RTX 6000 tables of issues 34 and 51 are not among them (no file under "
        "`profiles/` holds them), so they are not scored here; `ddl-gym calibrate "
        "--table` reads such a table in the documented format.",
        "",
        "| cluster | classes (intra / network; ? = not stated) | level | points | predict 1 "
        "| nearest datasheet preset | k=0 | k=3 | k=0, k=3's rows | best links, k=3's rows "
        "| own fit, in-sample |",
        "|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for _, r in table.iterrows():
        hw = describe(descriptions.get(r["cluster"], ""))
        inferred = (
            f" (GPU's usual; or {hw.intra_alternative})"
            if hw.intra_alternative
            else (" (GPU's only form)" if hw.intra and not hw.intra_stated else "")
        )
        classes = f"{hw.intra or '?'}{inferred} / " + (
            f"{hw.ports} x {hw.network}" if hw.network else "?"
        )
        head.append(
            f"| {r['cluster']} | {classes} | {r['level']} | {r['points']} | "
            f"{_pct(r['predict 1'])} | {r['nearest preset']}: "
            f"{_pct(r['nearest datasheet preset'])} | {_pct(r['k=0'])} | "
            f"{_pct(r['k=3'])} | {_pct(r.get(SAME_ROWS, np.nan))} | "
            f"{_pct(r.get(BEST_LINKS, np.nan))} | {_pct(r['own fit, in-sample'])} |"
        )
    head += ["", *_verdict_lines(table, descriptions)]
    if fits:
        pooled = pooled_errors(df, fits, descriptions)
        head += [
            "",
            "Pooled at k = 0 (median over rows; median of the clusters' medians):",
            "",
            "| level | rows | prior, over rows | predict 1, over rows | prior, over clusters "
            "| predict 1, over clusters |",
            "|---|---|---|---|---|---|",
        ]
        for _, p in pooled.iterrows():
            head.append(
                f"| {p['level']} | {p['rows']} | {_pct(p['prior, over rows'])} | "
                f"{_pct(p['predict 1, over rows'])} | {_pct(p['prior, over clusters'])} | "
                f"{_pct(p['predict 1, over clusters'])} |"
            )
        head += _dominant_lines(df, fits, descriptions)
    head += [
        "",
        f"Targets: median <= {TARGETS[WITHIN]:.0%} within one server and <= "
        f"{TARGETS[ACROSS]:.0%} across servers, at k = 0 and k = 3. Misses:",
        "",
    ]
    levels = level_of(df)
    informative = ~df["is_reference"].to_numpy()
    pred0 = predict_unseen(df, fits, descriptions, 0) if fits else None
    misses = 0
    for _, r in table.iterrows():
        target = TARGETS[r["level"]]
        if not (r["k=0"] > target or r["k=3"] > target):
            continue
        misses += 1
        m = (df["cluster"].to_numpy() == r["cluster"]) & (levels == r["level"]) & informative
        bad = _inexpressible(df[m])
        reason = []
        if r["own fit, in-sample"] > target:
            reason.append(
                f"the cluster's own fit misses it in-sample ({_pct(r['own fit, in-sample'])}): "
                "the form cannot follow this table, whatever the prior"
            )
        if bad:
            reason.append(
                f"{bad} of {r['points']} rows are measured faster than their reference or "
                "than fewer GPUs of the same job on one server (no form predicts that; "
                "`ddl-gym calibrate --table` lists such rows)"
            )
        if r["own fit, in-sample"] <= target:
            reason.append(
                f"the form fits it ({_pct(r['own fit, in-sample'])} in-sample): the gap is "
                "the prior's links or model cards, estimated from other hardware"
            )
        if pred0 is not None:
            part, p0 = df[m], pred0[m]
            reason.append("worst jobs at k=0: " + _worst_jobs(part, p0))
            if r["level"] == WITHIN:
                e2, n2 = two_gpu_reference_error(part, p0)
                if n2:
                    reason.append(
                        f"against each job's 2-GPU row instead of its 1-GPU row, the {n2} "
                        f"rows of 4+ GPUs miss by {_pct(e2)} at k=0"
                    )
            else:
                reason.append("k=0 by servers: " + _by(part, p0, "s", "s="))
                if fits and r["cluster"] in fits:
                    reason.append(_nic_line(df, r["cluster"], fits, descriptions))
            reason.append("by model: " + _by(part, p0, "model", ""))
        head.append(
            f"* {r['cluster']} {r['level']}: k=0 {_pct(r['k=0'])}, k=3 {_pct(r['k=3'])}. "
            + "; ".join(reason or ["within the repeatability floor's reach of the target"])
            + "."
        )
    if not misses:
        head.append("* none.")
    if pred0 is not None:
        for line in _reference_lines(df, pred0, fits or {}, descriptions):
            head += ["", line]
    head += ["", "Datasheet classes (bandwidth per direction, per GPU or per port):", ""]
    ct = class_table()
    head.append("| " + " | ".join(ct.columns) + " |")
    head.append("|" + "---|" * len(ct.columns))
    for _, r in ct.iterrows():
        head.append(
            f"| {r['level']} | {r['class']} | {r['family']} | {r['GB/s per direction']:.4g} | "
            f"{r['latency us']:.3g} | {r['source']} |"
        )
    return "\n".join(head) + "\n"


# -- the evidence the prior ships with ---------------------------------------------

EVIDENCE_PATH = Path(__file__).with_name("evidence.py")


def evidence_source(fits: dict[str, FitResult]) -> str:
    """The text of :mod:`ddl_gym.fidelity.evidence` for ``fits`` (the
    transfer-form fit of every bundled table): what ``hardware.preset_for``
    reads where no data is installed."""
    entries = {
        c: {"fabric": f.fabric.to_dict(), "rms_log_error": f.rms_log_error, "points": f.points}
        for c, f in sorted(fits.items())
    }
    body = json.dumps(entries, indent=4, sort_keys=True)
    return (
        '"""The fits the hardware prior is built from, for use without the data.\n\n'
        "Each bundled measured table fitted in the transfer form (``shared``,\n"
        "``calibrate.TRANSFER_ALGORITHM``; ``fidelity.report.fit_clusters``).\n"
        "Written by ``ddl_gym.fidelity.unseen.write_evidence`` (do not edit by hand):\n\n"
        "    python -c 'from ddl_gym.fidelity.unseen import write_evidence; write_evidence()'\n\n"
        "tests/test_prior.py checks it against a fresh fit where the data is installed.\n"
        '"""\n\n'
        "from __future__ import annotations\n\n"
        "from ddl_gym.fidelity.calibrate import FitResult\n"
        "from ddl_gym.topology import fabric_from_dict\n\n"
        f"EVIDENCE: dict[str, dict] = {body}\n\n\n"
        "def evidence_fits() -> dict[str, FitResult]:\n"
        '    """The bundled fits, by cluster."""\n'
        "    return {\n"
        "        c: FitResult(\n"
        '            fabric_from_dict(e["fabric"]),\n'
        "            (),\n"
        '            int(e["points"]),\n'
        '            float(e["rms_log_error"]),\n'
        "            True,\n"
        '            "bundled evidence",\n'
        "        )\n"
        "        for c, e in EVIDENCE.items()\n"
        "    }\n"
    )


def evidence_from_data(data_dir: Path | None = None) -> dict[str, FitResult]:
    """The transfer-form fit of every bundled table, from the data."""
    from ddl_gym.fidelity.calibrate import TRANSFER_ALGORITHM, fit_fabric
    from ddl_gym.fidelity.measured import load_measured
    from ddl_gym.traces import find_data_dir

    where = data_dir if data_dir is not None else find_data_dir()
    if where is None:
        raise ValueError("no data dir: the bundled tables are not installed (ddl-gym data fetch)")
    df = load_measured(where)
    return {
        str(c): fit_fabric(part, "pcie_25gbe", TRANSFER_ALGORITHM, name=str(c), loss="soft_l1")
        for c, part in df.groupby("cluster")
    }


def write_evidence(path: Path = EVIDENCE_PATH, data_dir: Path | None = None) -> Path:
    """Fit the bundled tables and write :mod:`ddl_gym.fidelity.evidence`."""
    path.write_text(evidence_source(evidence_from_data(data_dir)))
    return path
