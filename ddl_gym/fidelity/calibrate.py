"""Fidelity of the network model: predict measured placement tables, fit fabrics.

The measured points come from :mod:`ddl_gym.fidelity.measured` (Gavel, Pollux,
Chronus). Every point is a ratio ``t_iter(placement) / t_iter(reference)``
with a known single-GPU compute time, so :func:`predict_ratio` asks
:class:`ddl_gym.perf.PerfModel` for both iteration times on a one-rack cluster
and divides. Errors are absolute relative errors of that ratio, which for
Gavel and Pollux (reference = one GPU, compute time measured) is exactly the
relative error of the iteration time.

:func:`fit_fabric` fits the fabric parameters that the tables can see (GPU
link and NIC bandwidth and latency, overlap) and one gradient-byte
multiplier per model (``Fabric.comm_scale``, geometric mean 1) by least
squares on the log ratio, in log-parameter space with bounds, the way Pollux
fits its throughput model to a cluster's measurements. The tables know no
racks, so the uplink of a fitted preset is a copy of its NIC link (unfitted).

For hardware no table measured, :func:`transfer_prior` pools the fits of
other clusters in one form (``"shared"``): link parameters and per-model
gradient-byte multipliers separately, so either carries on its own (a
model's multiplier as a card relative to the configuration each table ran,
:func:`ddl_gym.fidelity.measured.configuration_factor`); :func:`calibrate_server`
refits the GPU link to a few single-server rows of the new hardware, and
:func:`predict_leave_one_cluster_out` scores the whole chain by holding each
measured cluster out in turn (:func:`draw_table` summarizes it over several
seeded draws of the calibration rows).

What the tables themselves allow: :func:`repeat_spread` measures how far a
measurement is from a repeat of it (the noise floor of any model), and
:func:`monotone_floor` how many single-server points no data-parallel model
can reach.

Typical use::

    df = load_measured(find_data_dir())
    fit = fit_fabric(df[df.cluster == "pollux_t4"], name="pollux_t4")
    save_fitted(fit)  # <user data dir>/fabrics/pollux_t4.json, usable by name

Your own cluster's table: :mod:`ddl_gym.fidelity.own_table` (``ddl-gym
calibrate --table``); hardware no table measured: the prior per interconnect
class, :mod:`ddl_gym.fidelity.hardware` and :mod:`ddl_gym.fidelity.unseen`
(:func:`transfer_prior` below pools the links of the measured clusters, the
method before issue 34, kept as the source of the pooled terms).
"""

from __future__ import annotations

import contextlib
import math
import os
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, replace
from pathlib import Path

import numpy as np
import pandas as pd
from scipy.optimize import least_squares

from ddl_gym.fidelity.measured import STATED_HARDWARE, configuration_factor
from ddl_gym.perf import Shape
from ddl_gym.profiles import bucket_sizes, get_profile
from ddl_gym.topology import (
    FABRICS,
    Algorithm,
    Fabric,
    Link,
    save_fabric,
)

# -- prediction ----------------------------------------------------------------


def _shape(placement: tuple[int, ...]) -> Shape:
    return Shape(n=sum(placement), g=max(placement), s=len(placement), r=1)


class RatioPredictor:
    """``predict_ratio`` for one table, set up once and evaluated per fabric.

    A fit evaluates thousands of fabrics on the same rows, and the rows repeat
    few (model, shape) pairs (Pollux: ~100 placements x ~10 batch sizes per
    model), so the all-reduce is computed once per distinct pair, as arrays
    over the pairs (:meth:`allreduce`, the closed forms of
    :class:`~ddl_gym.perf.PerfModel` for one rack), and the rest is array
    arithmetic. Equal to ``PerfModel.iter_time`` per row (tested).
    """

    def __init__(self, df: pd.DataFrame) -> None:
        models = df["model"].to_numpy()
        shapes = [
            Shape(int(n), int(g), int(s), 1)
            for n, g, s in zip(df["n"], df["g"], df["s"], strict=True)
        ]
        refs = [_shape(ref) for ref in df["ref_placement"]]
        keys: dict[tuple[str, Shape], int] = {}

        def key_index(pairs: Iterable[tuple[str, Shape]]) -> np.ndarray:
            return np.array([keys.setdefault(pair, len(keys)) for pair in pairs], dtype=int)

        self.num_key = key_index(zip(models, shapes, strict=True))
        self.den_key = key_index(zip(models, refs, strict=True))
        self.keys = list(keys)
        self.key_models = [m for m, _ in self.keys]
        self.n = np.array([shape.n for _, shape in self.keys], dtype=float)
        self.g = np.array([shape.g for _, shape in self.keys], dtype=float)
        self.s = np.array([shape.s for _, shape in self.keys], dtype=float)
        self._buckets: dict[float | None, tuple[np.ndarray, np.ndarray]] = {}
        self.t_compute = df["t_compute"].to_numpy(dtype=float)
        share = {m: get_profile(m).backward_share for m in set(models)}
        self.backward_share = np.array([share[m] for m in models], dtype=float)

    def _bytes_and_buckets(self, bucket_bytes: float | None) -> tuple[np.ndarray, np.ndarray]:
        """Catalogue gradient bytes and bucket count of every pair's model."""
        if bucket_bytes not in self._buckets:
            per_model = {}
            for m in set(self.key_models):
                buckets = bucket_sizes(m, bucket_bytes)
                per_model[m] = (float(sum(buckets)), float(len(buckets)))
            self._buckets[bucket_bytes] = (
                np.array([per_model[m][0] for m in self.key_models]),
                np.array([per_model[m][1] for m in self.key_models]),
            )
        return self._buckets[bucket_bytes]

    def allreduce(self, fabric: Fabric) -> np.ndarray:
        """Seconds of all-reduce of every (model, shape) pair on ``fabric``
        (one rack: no uplink term), term by term as ``PerfModel`` computes it."""
        raw, nb = self._bytes_and_buckets(fabric.bucket_bytes)
        scale = {m: fabric.comm_scale_of(m) for m in set(self.key_models)}
        nbytes = raw * np.array([scale[m] for m in self.key_models])
        n, g, s = self.n, self.g, self.s
        gpu, nic = fabric.gpu_link, fabric.nic

        def ring(k: np.ndarray, b: np.ndarray, bw: float, alpha: float) -> np.ndarray:
            with np.errstate(divide="ignore", invalid="ignore"):
                t = 2.0 * (k - 1) / k * b / bw + nb * 2.0 * (k - 1) * alpha
            return np.where(k > 1, t, 0.0)

        def ring_nic(b: np.ndarray) -> np.ndarray:
            with np.errstate(divide="ignore", invalid="ignore"):
                t = 2.0 * (n - 1) / n * b / nic.bandwidth + nb * 2.0 * (s - 1) * nic.latency
            return np.where(s > 1, t, 0.0)

        if fabric.algorithm == "ring":
            bw = np.where(s > 1, nic.bandwidth, gpu.bandwidth)
            alpha = np.where(s > 1, nic.latency, gpu.latency)
            with np.errstate(divide="ignore", invalid="ignore"):
                t = 2.0 * (n - 1) / n * nbytes / bw + nb * 2.0 * (n - 1) * alpha
            out = np.where(n > 1, t, 0.0)
        elif fabric.algorithm == "shared":
            h, x = fabric.gpu_link_sharing, fabric.nic_sharing
            out = ring(g, nbytes * g**h, gpu.bandwidth, gpu.latency) + ring_nic(nbytes * g**x)
        else:
            out = ring(g, nbytes, gpu.bandwidth, gpu.latency) + ring(
                s, nbytes, nic.bandwidth, nic.latency
            )
        return np.where(n > 1, out, 0.0)

    def __call__(self, fabric: Fabric) -> np.ndarray:
        allreduce = self.allreduce(fabric)
        hidden = fabric.overlap * self.backward_share * self.t_compute
        t_c = self.t_compute
        num = t_c + np.maximum(0.0, allreduce[self.num_key] - hidden)
        den = t_c + np.maximum(0.0, allreduce[self.den_key] - hidden)  # 1 GPU: no all-reduce
        return num / den


def predict_ratio(df: pd.DataFrame, fabric: Fabric) -> np.ndarray:
    """Predicted ``t_iter(placement) / t_iter(ref_placement)`` of every row."""
    return RatioPredictor(df)(fabric)


def abs_rel_error(df: pd.DataFrame, predicted_ratio: np.ndarray) -> np.ndarray:
    """``|predicted / measured - 1|`` per row."""
    return np.abs(predicted_ratio / df["ratio"].to_numpy(dtype=float) - 1.0)


def error_table(
    df: pd.DataFrame, err: np.ndarray, by: Sequence[str] = ("cluster", "level")
) -> pd.DataFrame:
    """Median and 90th percentile of absolute relative error per group.

    Reference rows (ratio 1 by definition) are left out: they say nothing
    about the network.
    """
    d = df.assign(err=err)[~df["is_reference"].to_numpy()]
    g = d.groupby(list(by), sort=True)["err"]
    return pd.DataFrame(
        {"points": g.size(), "median": g.median(), "p90": g.quantile(0.9), "max": g.max()}
    ).reset_index()


def summarize(df: pd.DataFrame, err: np.ndarray, by: str = "level") -> dict[str, float]:
    """``{"<level> median": ..., "<level> p90": ...}`` over non-reference rows."""
    mask = ~df["is_reference"].to_numpy()
    out: dict[str, float] = {}
    for key, idx in df[mask].groupby(by).indices.items():
        e = err[mask][idx]
        out[f"{key} median"] = float(np.median(e))
        out[f"{key} p90"] = float(np.quantile(e, 0.9))
    return out


# -- fitting -------------------------------------------------------------------


def _one_blas_thread() -> contextlib.AbstractContextManager:
    """One BLAS thread for the duration of a fit (when ``threadpoolctl`` is
    installed). Why: ``least_squares`` takes an SVD of the Jacobian every
    step, a tall and thin matrix (Pollux: 5,491 x 12) that is little work;
    a multithreaded OpenBLAS spends several times that work's CPU time
    starting and spinning its threads (a Pollux fit: 10 s CPU, 1.2 s on one
    thread, same result)."""
    try:
        from threadpoolctl import threadpool_limits
    except ImportError:
        return contextlib.nullcontext()
    return threadpool_limits(limits=1, user_api="blas")


PARAMS: tuple[str, ...] = (
    "gpu_link.bandwidth",
    "gpu_link.latency",
    "nic.bandwidth",
    "nic.latency",
    "overlap",
    "gpu_link_sharing",
    "nic_sharing",
)
_UNIT = ("overlap", "gpu_link_sharing", "nic_sharing")  # fitted in [0, 1], not in log
# Bounds in natural units: 1 MB/s .. 10 TB/s, 1 ns .. 100 ms, overlap in [0, 1].
_BW_BOUNDS = (1e6, 1e13)
_LAT_BOUNDS = (1e-9, 1e-1)
_OVERLAP_BOUNDS = (0.0, 1.0)
_SCALE_BOUNDS = (1e-3, 1e3)  # a model's gradient-byte multiplier


SCALE_PREFIX = "comm_scale."  # + model: that model's gradient-byte multiplier


def get_param(fabric: Fabric, name: str) -> float:
    if name in _UNIT:
        return float(getattr(fabric, name))
    if name.startswith(SCALE_PREFIX):
        return fabric.comm_scale_of(name[len(SCALE_PREFIX) :])
    link, attr = name.split(".")
    return float(getattr(getattr(fabric, link), attr))


def with_params(fabric: Fabric, values: dict[str, float]) -> Fabric:
    """``fabric`` with some of ``PARAMS`` (or ``comm_scale.<model>``) replaced."""
    links = {k: getattr(fabric, k) for k in ("gpu_link", "nic")}
    unit = {k: getattr(fabric, k) for k in _UNIT}
    scale = dict(fabric.comm_scale)
    for name, value in values.items():
        if name in _UNIT:
            unit[name] = float(value)
        elif name.startswith(SCALE_PREFIX):
            scale[name[len(SCALE_PREFIX) :]] = float(value)
        else:
            link, attr = name.split(".")
            links[link] = replace(links[link], **{attr: float(value)})
    return replace(fabric, comm_scale=tuple(scale.items()), **unit, **links)


def _is_log(name: str) -> bool:
    return name not in _UNIT


def _bounds(name: str) -> tuple[float, float]:
    if name in _UNIT:
        return _OVERLAP_BOUNDS
    lo, hi = _BW_BOUNDS if name.endswith("bandwidth") else _LAT_BOUNDS
    return math.log(lo), math.log(hi)


def identifiable(df: pd.DataFrame, algorithm: Algorithm) -> tuple[str, ...]:
    """The parameters the points of ``df`` can constrain.

    A flat ring crossing servers runs entirely at NIC speed, so the GPU link
    only shows in single-server points; hierarchically it shows wherever a
    server holds two or more of the job's GPUs.
    """
    d = df[~df["is_reference"]]
    free = []
    if algorithm == "ring":
        gpu_seen = bool(((d["s"] == 1) & (d["g"] > 1)).any())
    else:
        gpu_seen = bool((d["g"] > 1).any())
    if gpu_seen:
        free += ["gpu_link.bandwidth", "gpu_link.latency"]
    if bool((d["s"] > 1).any()):
        free += ["nic.bandwidth", "nic.latency"]
    if free:
        free.append("overlap")
    if algorithm == "shared":
        # g**h needs servers of 3+ GPUs beside 2-GPU ones; g**x servers
        # holding 2+ GPUs on a multi-server placement.
        if gpu_seen and bool((d["g"] > 2).any()):
            free.append("gpu_link_sharing")
        if bool(((d["s"] > 1) & (d["g"] > 1)).any()):
            free.append("nic_sharing")
    return tuple(free)


@dataclass(frozen=True)
class FitResult:
    """A fitted fabric and how well it fits the points it saw."""

    fabric: Fabric
    free: tuple[str, ...]
    points: int
    rms_log_error: float  # root mean square of log(predicted / measured)
    success: bool
    message: str

    def params(self) -> dict[str, float]:
        """Fabric parameters, then the fitted ``comm_scale.<model>`` ones."""
        names = PARAMS + tuple(n for n in self.free if n.startswith(SCALE_PREFIX))
        return {name: get_param(self.fabric, name) for name in names}


def _residuals(df: pd.DataFrame, measured_log: np.ndarray) -> Callable[[Fabric], np.ndarray]:
    predict = RatioPredictor(df)

    def res(fabric: Fabric) -> np.ndarray:
        return np.log(predict(fabric)) - measured_log

    return res


def scaled_models(df: pd.DataFrame) -> tuple[str, ...]:
    """Models of ``df`` that get a fitted ``comm_scale``: those with a
    multi-GPU point. With fewer than two there is nothing to tell apart."""
    d = df[~df["is_reference"].to_numpy() & (df["n"].to_numpy() > 1)]
    models = tuple(sorted(d["model"].unique()))
    return models if len(models) >= 2 else ()


def _start_points(base: Fabric, free: tuple[str, ...]) -> list[dict[str, float]]:
    """A few starts: the base fabric and the built-in presets' values.

    The exposed-communication kink (max(0, .)) makes the cost flat wherever
    all communication is hidden, so one start can get stuck; see
    :func:`_grid_start` for the start that cannot.
    """
    starts = []
    for fabric in (base, FABRICS["pcie_25gbe"], FABRICS["nvswitch_ib"]):
        starts.append({name: get_param(fabric, name) for name in free})
    starts.append({**starts[0], "overlap": 0.5} if "overlap" in free else starts[0])
    half = {p: 0.5 for p in ("gpu_link_sharing", "nic_sharing") if p in free}
    if half:
        starts.append({**starts[0], **half})
    return starts


# A coarse grid over the bandwidths and the overlap, for one more start:
# 1e7..1e12 B/s in x10 steps (10 MB/s .. 1 TB/s) and overlap 0, 0.5, 0.9.
_GRID_BW = tuple(10.0**e for e in range(7, 13))
_GRID_OVERLAP = (0.0, 0.5, 0.9)


def _grid_start(
    cost: Callable[[dict[str, float]], float], first: dict[str, float], free: tuple[str, ...]
) -> dict[str, float]:
    """The cheapest point of a coarse grid over the free bandwidths and overlap.

    Why (issue 34): every preset start hides all communication of a table
    whose jobs compute long (a 4-GPU Quadro server: the fit returned
    pcie_25gbe's 12 GB/s, 5 us, overlap 0.9 and multipliers 1.0 unchanged,
    though its rows measure 1.18x): there ``max(0, allreduce - hidden)`` is
    0 for every row, the gradient is exactly zero and ``least_squares`` stops
    where it starts. A grid that reaches slow links and no overlap always
    has points whose communication shows; the cheapest is a start the
    solver can leave.
    """
    axes: list[tuple[str, tuple[float, ...]]] = [
        (p, _GRID_BW) for p in ("gpu_link.bandwidth", "nic.bandwidth") if p in free
    ]
    if "overlap" in free:
        axes.append(("overlap", _GRID_OVERLAP))
    if not axes:
        return first
    best, best_cost = first, cost(first)
    for values in np.array(np.meshgrid(*[v for _, v in axes])).reshape(len(axes), -1).T:
        point = {**first, **{p: float(v) for (p, _), v in zip(axes, values, strict=True)}}
        c = cost(point)
        if c < best_cost:
            best, best_cost = point, c
    return best


def fit_fabric(
    df: pd.DataFrame,
    base: Fabric | str = "pcie_25gbe",
    algorithm: Algorithm | None = None,
    name: str | None = None,
    free: Iterable[str] | None = None,
    loss: str = "linear",
    comm_scale: bool = True,
    scale_prior: float = 1.0,
) -> FitResult:
    """Fit fabric parameters to measured points by least squares on log ratio.

    Args:
        df: measured points (see :mod:`ddl_gym.fidelity.measured`), of one cluster.
        base: fabric whose other fields (bucket size, uplink, ...) are kept and
            whose values are the first start.
        algorithm: ``"ring"`` or ``"hierarchical"``; ``None`` fits both and
            keeps the better.
        name: name of the fitted preset (default ``"<base>_fitted"``).
        free: fabric parameters to fit (default: :func:`identifiable`).
        loss: ``scipy.optimize.least_squares`` loss (``"soft_l1"`` is robust
            to the tables' outliers).
        comm_scale: also fit one gradient-byte multiplier per model
            (:func:`scaled_models`), the way Pollux fits per-job parameters.
            Scaling every model's bytes and every bandwidth by the same factor
            changes nothing, so the multipliers are fitted with their
            geometric mean held at 1: the bandwidths carry what the cluster's
            models share, the multipliers only how they differ, and a model
            the table lacks (multiplier 1) moves like a typical one.
        scale_prior: weight of a ridge penalty ``scale_prior * log(multiplier)``
            added to the residuals per model, in units of one point's log
            error. It keeps a model with few points (Gavel: ~15) near the
            typical bytes and hardly moves one with hundreds (Pollux); 0
            turns it off.
    """
    base = base if isinstance(base, Fabric) else FABRICS[base]
    if algorithm is None:
        fits = [
            fit_fabric(df, base, a, name, free, loss, comm_scale, scale_prior)
            for a in ("ring", "hierarchical", "shared")
        ]
        return min(fits, key=lambda f: f.rms_log_error)
    base = replace(base, algorithm=algorithm, name=name or f"{base.name}_fitted")
    data = df[~df["is_reference"].to_numpy()]
    if data.empty:
        raise ValueError("no informative points to fit (only reference placements)")
    free_t = tuple(free) if free is not None else identifiable(data, algorithm)
    unknown = set(free_t) - set(PARAMS)
    if unknown:
        raise ValueError(f"unknown parameters {sorted(unknown)}; known: {', '.join(PARAMS)}")
    models = scaled_models(data) if comm_scale else ()
    scale_names = tuple(SCALE_PREFIX + m for m in models)
    residual = _residuals(data, np.log(data["ratio"].to_numpy(dtype=float)))
    if not free_t and not models:
        r = residual(base)
        return FitResult(base, (), len(data), float(np.sqrt(np.mean(r**2))), True, "nothing free")

    # x = fabric parameters (log where positive), then the log multipliers of
    # all models but the last, whose log is minus their sum (geometric mean 1).
    n_scale = max(len(models) - 1, 0)
    lo_f, hi_f = zip(*(_bounds(p) for p in free_t), strict=True) if free_t else ((), ())
    lo = np.array(lo_f + (math.log(_SCALE_BOUNDS[0]),) * n_scale)
    hi = np.array(hi_f + (math.log(_SCALE_BOUNDS[1]),) * n_scale)

    def to_x(values: dict[str, float]) -> np.ndarray:
        x = [math.log(values[p]) if _is_log(p) else values[p] for p in free_t] + [0.0] * n_scale
        return np.clip(x, lo + 1e-9, hi - 1e-9)

    def scale_logs(x: np.ndarray) -> np.ndarray:
        """Log multipliers of all ``models``: the free ones, then the last."""
        free_logs = x[len(free_t) :]
        return np.append(free_logs, -np.sum(free_logs)) if models else free_logs

    def to_fabric(x: np.ndarray) -> Fabric:
        values = {p: math.exp(v) if _is_log(p) else v for p, v in zip(free_t, x, strict=False)}
        logs = scale_logs(x)
        values.update({n: math.exp(v) for n, v in zip(scale_names, logs, strict=True)})
        return with_params(base, values)

    def penalized(x: np.ndarray) -> np.ndarray:
        r = residual(to_fabric(x))
        if not models or scale_prior == 0:
            return r
        return np.concatenate([r, scale_prior * scale_logs(x)])

    best = None
    starts = _start_points(base, free_t)
    if free_t:
        starts.append(
            _grid_start(lambda v: float(np.sum(penalized(to_x(v)) ** 2)), starts[0], free_t)
        )
    with _one_blas_thread():
        sols = [_solve(penalized, to_x(start), lo, hi, loss) for start in starts]
    for sol in sols:
        if best is None or sol.cost < best.cost:
            best = sol
    assert best is not None
    fabric = to_fabric(best.x)
    rms = float(np.sqrt(np.mean(residual(fabric) ** 2)))
    return FitResult(
        fabric, free_t + scale_names, len(data), rms, bool(best.success), str(best.message)
    )


def _solve(
    fun: Callable[[np.ndarray], np.ndarray],
    x0: np.ndarray,
    lo: np.ndarray,
    hi: np.ndarray,
    loss: str,
):  # -> scipy.optimize.OptimizeResult
    """One bounded least-squares run from ``x0``: the fit's solver settings."""
    return least_squares(
        fun,
        x0,
        bounds=(lo, hi),
        loss=loss,
        x_scale=1.0,
        diff_step=1e-4,  # relative step: well above the model's float noise
        xtol=1e-8,  # errors are reported in %: tighter only burns evaluations
        ftol=1e-8,
        gtol=1e-8,
        max_nfev=400,  # converged fits take < 60; a few folds oscillate
    )


def save_fitted(
    fit: FitResult,
    name: str | None = None,
    directory: str | Path | None = None,
    description: str = "",
    overwrite: bool = True,
) -> Path:
    """Save a fitted fabric as ``<directory>/<name>.json``; by default in the
    user data dir (``ddl_gym.userdata.fabrics_dir()``), where
    ``topology.get_fabric`` finds it by name. Never the package by default:
    the shipped presets change only deliberately (golden results use them).

    The file is written whole or not at all (a temporary file in the same
    folder, then ``os.replace``), so an interrupted save never leaves half a
    preset. ``overwrite=False`` raises ``FileExistsError`` (and writes
    nothing) where the preset exists.

    The tables know no racks, so the uplink is set to the fitted NIC link
    (non-blocking): an assumption, not a fit.
    """
    name = name or fit.fabric.name
    fabric = replace(
        fit.fabric,
        name=name,
        uplink=Link(fit.fabric.nic.bandwidth, fit.fabric.nic.latency),
        oversubscription=1.0,
        description=description or fit.fabric.description,
    )
    if directory is None:
        from ddl_gym import userdata

        directory = userdata.fabrics_dir()
    directory = Path(directory)
    path = directory / f"{name}.json"
    if not overwrite and path.exists():
        raise FileExistsError(f"{path}: a preset of that name exists")
    directory.mkdir(parents=True, exist_ok=True)
    # hidden and not *.json: never listed as a preset while it is being written;
    # created by write_text, so with the user's usual permissions (umask)
    tmp = directory / f".{name}.{os.getpid()}.tmp"
    try:
        save_fabric(fabric, tmp)
        os.replace(tmp, path)
    finally:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
    return path


# -- hold-out evaluation ---------------------------------------------------------


def predict_leave_one_model_out(
    df: pd.DataFrame,
    base: Fabric | str = "pcie_25gbe",
    loss: str = "linear",
    progress: Callable[[], object] | None = None,
    algorithms: dict[str, Algorithm] | None = None,
) -> np.ndarray:
    """Ratios predicted for each model by a fabric fitted to the *other*
    models of the same cluster (compute times stay measured per model).

    ``algorithms`` fixes the all-reduce form per cluster (e.g. the one its
    full fit chose: a third of the fits); by default each fit tries all."""
    out = np.full(len(df), np.nan)
    for _, cluster in df.groupby("cluster").groups.items():
        part = df.loc[cluster]
        for model in part["model"].unique():
            held = (part["model"] == model).to_numpy()
            train = part[~held]
            if progress is not None:
                progress()
            if train["is_reference"].all():
                continue  # a cluster with one model: nothing to learn from
            algorithm = (algorithms or {}).get(str(part["cluster"].iloc[0]))
            fit = fit_fabric(train, base, algorithm, loss=loss)
            idx = np.flatnonzero(df.index.isin(part.index[held]))
            out[idx] = predict_ratio(df.iloc[idx], fit.fabric)
    return out


def count_model_folds(df: pd.DataFrame) -> int:
    """Fits :func:`predict_leave_one_model_out` makes (for a progress bar)."""
    return int(sum(len(p["model"].unique()) for _, p in df.groupby("cluster")))


def count_placement_folds(df: pd.DataFrame, folds: np.ndarray) -> int:
    """Fits :func:`predict_placement_cv` makes (for a progress bar)."""
    return int(sum(len(set(folds[i]) - {-1}) for i in df.groupby("cluster").indices.values()))


def placement_folds(df: pd.DataFrame, k: int = 4, seed: int = 0) -> np.ndarray:
    """Fold (0..k-1) of every row for k-fold cross-validation over placements.

    Placements (GPU-per-node multisets) are dealt to folds at random, per
    cluster and level, so every fold holds out both levels where a cluster
    has them and a placement is held out for all its models and batches at
    once. Reference rows (one GPU, ratio 1 by definition) get -1.
    """
    rng = np.random.default_rng(seed)
    fold = np.full(len(df), -1)
    placements = df["placement"].to_numpy()
    for _, idx in df.groupby(["cluster", "level"]).indices.items():
        informative = idx[~df["is_reference"].to_numpy()[idx]]
        places = sorted({placements[i] for i in informative})
        order = rng.permutation(len(places))
        offset = int(rng.integers(k))  # small groups should not always start at fold 0
        of = {places[j]: (r + offset) % k for r, j in enumerate(order)}
        fold[informative] = [of[placements[i]] for i in informative]
    return fold


def predict_placement_cv(
    df: pd.DataFrame,
    folds: np.ndarray,
    base: Fabric | str = "pcie_25gbe",
    loss: str = "linear",
    progress: Callable[[], object] | None = None,
    algorithms: dict[str, Algorithm] | None = None,
) -> np.ndarray:
    """Ratio of every non-reference row predicted by a fabric fitted per
    cluster to the rows of the other folds, i.e. without its placement
    (NaN on reference rows). ``algorithms``: as in
    :func:`predict_leave_one_model_out`."""
    out = np.full(len(df), np.nan)
    for cluster, idx in df.groupby("cluster").indices.items():
        for f in sorted(set(folds[idx]) - {-1}):
            test = idx[folds[idx] == f]
            train = df.iloc[idx[folds[idx] != f]]
            if progress is not None:
                progress()
            if train["is_reference"].all():
                continue
            fit = fit_fabric(train, base, (algorithms or {}).get(str(cluster)), loss=loss)
            out[test] = predict_ratio(df.iloc[test], fit.fabric)
    return out


# -- transfer to hardware the fit never saw ----------------------------------------

TRANSFER_ALGORITHM: Algorithm = "shared"
# The fabric a table that states no hardware (``measured.STATED_HARDWARE``) is
# predicted with in the leave-one-cluster-out transfer: the simulator's default
# (what a user who names no fabric gets), with the pooled model cards. Why not
# the pooled links: they are the measured generations' (K80, P100, V100, T4
# on 10-50 Gb/s networks), and nothing says an unstated cluster is one of them.
UNKNOWN_HARDWARE_FABRIC = "seed"
_LINK_PARAMS = ("gpu_link.bandwidth", "gpu_link.latency", "nic.bandwidth", "nic.latency")


def transfer_prior(
    fits: dict[str, FitResult],
    name: str = "transfer_prior",
    target: str | None = None,
    models: Iterable[str] = (),
) -> Fabric:
    """A fabric for hardware none of ``fits`` measured, built from them.

    Physical and per-model terms are pooled separately, so each carries on
    its own: link bandwidths are the median over the clusters in log space
    (a typical server and network of the measured generations), latencies
    the plain median (robust to fits at the solver's lower bound),
    overlap and the sharing exponents the median, and a model's
    gradient-byte multiplier its "model card": what the framework makes of
    its bytes, the geometric mean over the clusters that measured it of
    their multiplier divided by :func:`~ddl_gym.fidelity.measured.configuration_factor`
    (the bytes of the configuration each table ran, over the catalogue's).

    ``target`` names the cluster predicted (its configurations give the
    bytes the card is applied to) and ``models`` are its models: a model no
    fit measured moves its configuration's bytes. ``fits`` is keyed by
    cluster name and must use one algorithm.
    """
    if not fits:
        raise ValueError("transfer_prior needs at least one fitted cluster")
    fabrics = [f.fabric for f in fits.values()]
    algorithms = {f.algorithm for f in fabrics}
    if len(algorithms) != 1:
        raise ValueError(f"fits use different algorithms {sorted(algorithms)}; pool one form")
    # Bandwidths: median in log (a typical generation). Latencies: plain
    # median, because fits that need no latency sit at the solver's lower
    # bound (1 ns), and a log median between such a fit and a measured
    # latency (Gavel P100: 579 us) lands at a value set by the bound.
    values = {
        p: (
            float(np.median([get_param(f, p) for f in fabrics]))
            if p.endswith("latency")
            else math.exp(np.median([math.log(get_param(f, p)) for f in fabrics]))
        )
        for p in _LINK_PARAMS
    }
    values.update({p: float(np.median([get_param(f, p) for f in fabrics])) for p in _UNIT})
    logs: dict[str, list[float]] = {}
    for cluster, fit in fits.items():
        for model, factor in fit.fabric.comm_scale:
            card = factor / configuration_factor(cluster, model)
            logs.setdefault(model, []).append(math.log(card))
    cards = {m: math.exp(float(np.mean(v))) for m, v in logs.items()}
    for m in models:
        cards.setdefault(m, 1.0)
    scale = tuple(
        (m, card * (configuration_factor(target, m) if target is not None else 1.0))
        for m, card in sorted(cards.items())
    )
    prior = with_params(replace(fabrics[0], comm_scale=scale), values)
    return replace(prior, name=name, description=f"pooled from {', '.join(sorted(fits))}")


def calibration_rows(df: pd.DataFrame, k: int, seed: int = 0) -> np.ndarray:
    """Positions of ``k`` measured single-server multi-GPU rows of ``df`` (one
    cluster), drawn at random with ``seed``: what a user could measure on a
    new server in a few minutes. Fewer if the table has fewer (Chronus: none,
    it has no single-server ratios)."""
    ok = (~df["is_reference"].to_numpy()) & (df["s"].to_numpy() == 1) & (df["n"].to_numpy() > 1)
    cand = np.flatnonzero(ok)
    if k <= 0 or len(cand) == 0:
        return np.array([], dtype=int)
    rng = np.random.default_rng(seed)
    return np.sort(rng.choice(cand, size=min(k, len(cand)), replace=False))


def calibrate_server(prior: Fabric, rows: pd.DataFrame) -> Fabric:
    """``prior`` with its GPU link bandwidth refitted to a few single-server
    rows of the new hardware (everything else, the NIC included, stays the
    prior's: single-server rows cannot see it)."""
    return _refit_one(prior, rows, "gpu_link.bandwidth")


def calibrate_network(prior: Fabric, rows: pd.DataFrame) -> Fabric:
    """``prior`` with its NIC bandwidth refitted to a few multi-node rows of
    the new hardware: for a table with no single-server rows (Chronus), what
    a few small spread runs could tell. Not part of the leave-one-cluster-out
    protocol (which allows single-server rows only); reported beside it."""
    return _refit_one(prior, rows, "nic.bandwidth")


_REFIT_GRID = 29  # log-spaced starting values over a parameter's bounds (x1.8 apart)


def _refit_one(prior: Fabric, rows: pd.DataFrame, param: str) -> Fabric:
    """``prior`` with the one parameter ``param`` refitted to ``rows``.

    Where the prior hides all of the rows' communication behind the
    backward pass, every row is predicted at exactly its reference's time
    and the cost is flat: a local solver started there never moves, however
    much slower the rows measure (Gavel K80 at k = 3: 3 of the first 9 draws
    kept the prior's GPU link, 23.5 % instead of 5-9 %). So the solver starts
    from the best of the prior's value and a log grid over the parameter's
    bounds (the prior's on a tie).
    """
    data = rows[~rows["is_reference"].to_numpy()]
    if data.empty:
        return prior
    residual = _residuals(data, np.log(data["ratio"].to_numpy(dtype=float)))
    lo, hi = _bounds(param)
    grid = np.linspace(lo, hi, _REFIT_GRID)
    values = [get_param(prior, param)] + [
        float(math.exp(v)) if _is_log(param) else float(v) for v in grid
    ]
    costs = [float(np.sum(residual(with_params(prior, {param: v})) ** 2)) for v in values]
    start = with_params(prior, {param: values[int(np.argmin(costs))]})
    fit = fit_fabric(
        data, start, algorithm=prior.algorithm, name=prior.name, free=(param,), comm_scale=False
    )
    return fit.fabric


def leave_one_cluster_out(
    df: pd.DataFrame, fits: dict[str, FitResult]
) -> Iterator[tuple[str, np.ndarray, pd.DataFrame, dict[str, FitResult]]]:
    """Each cluster of ``df`` (in name order) with its row positions, its rows
    and the *other* clusters' fits; a cluster with no other fit is skipped."""
    clusters = df["cluster"].to_numpy()
    for c in sorted(set(clusters)):
        others = {o: f for o, f in fits.items() if o != c}
        if others:
            idx = np.flatnonzero(clusters == c)
            yield c, idx, df.iloc[idx], others


def predict_leave_one_cluster_out(
    df: pd.DataFrame,
    fits: dict[str, FitResult],
    k: int = 0,
    seed: int = 0,
    unknown_hardware: Fabric | str | None = UNKNOWN_HARDWARE_FABRIC,
) -> tuple[np.ndarray, np.ndarray]:
    """Each cluster predicted by :func:`transfer_prior` of the *other*
    clusters' fits, after :func:`calibrate_server` on ``k`` of its own
    single-server rows.

    A cluster whose table states no hardware (not in
    ``measured.STATED_HARDWARE``) gets ``unknown_hardware``'s links with the
    prior's model cards instead of the pooled links; ``None`` pools links for
    every cluster. The rule reads what the table says about itself, never its
    measurements.

    Returns the predicted ratios (NaN on the calibration rows, which must not
    be scored) and a boolean mask of the calibration rows.
    """
    if isinstance(unknown_hardware, str):
        unknown_hardware = FABRICS[unknown_hardware]
    pred = np.full(len(df), np.nan)
    used = np.zeros(len(df), dtype=bool)
    for c, idx, part, others in leave_one_cluster_out(df, fits):
        calib = calibration_rows(part, k, seed)
        prior = transfer_prior(others, target=c, models=part["model"].unique())
        if unknown_hardware is not None and c not in STATED_HARDWARE:
            prior = replace(unknown_hardware, comm_scale=prior.comm_scale)
        fabric = calibrate_server(prior, part.iloc[calib])
        pred[idx] = predict_ratio(part, fabric)
        used[idx[calib]] = True
    pred[used] = np.nan
    return pred, used


# How many seeded draws of the k calibration rows the leave-one-cluster-out
# figure at k > 0 is the median of. Which 3 rows a user happens to measure
# moves a cluster's median error by several points (Gavel K80 on one server:
# 5-24 % over five draws), so one draw says little; odd, so the reported
# median is one draw's own figure. A draw costs about 0.1 s CPU on the data.
CALIBRATION_DRAWS = 9


def draw_seeds(seed: int, draws: int = CALIBRATION_DRAWS) -> list[int]:
    """Calibration-row seeds of ``draws`` draws: ``seed``, ``seed + 1``, ..."""
    if draws < 1:
        raise ValueError(f"draws must be at least 1, got {draws}")
    return [seed + i for i in range(draws)]


def predict_leave_one_cluster_out_draws(
    df: pd.DataFrame,
    fits: dict[str, FitResult],
    k: int,
    seed: int = 0,
    draws: int = CALIBRATION_DRAWS,
    unknown_hardware: Fabric | str | None = UNKNOWN_HARDWARE_FABRIC,
) -> list[np.ndarray]:
    """:func:`predict_leave_one_cluster_out` once per seed of
    :func:`draw_seeds`: one prediction per draw of the ``k`` calibration
    rows (NaN on that draw's rows). With ``k <= 0`` nothing is drawn, so
    there is one prediction."""
    seeds = draw_seeds(seed, draws) if k > 0 else [seed]
    return [predict_leave_one_cluster_out(df, fits, k, s, unknown_hardware)[0] for s in seeds]


def draw_table(
    df: pd.DataFrame, errs: Sequence[np.ndarray], by: Sequence[str] = ("cluster", "level")
) -> pd.DataFrame:
    """:func:`error_table` of each draw's errors (NaN rows, its calibration
    rows, left out), summarized over the draws per group: ``median`` is the
    median over draws of the draw's median error, ``lo`` and ``hi`` the
    smallest and largest draw's median, ``p90`` and ``max`` the median over
    draws of those statistics, ``points`` the points a draw scores (the
    fewest over draws) and ``draws`` how many draws scored the group.

    The reported figure is a median over draws rather than one draw's,
    because which few rows a user measures changes the fit they get."""
    if not errs:
        raise ValueError("draw_table needs at least one draw")
    tables = []
    for i, err in enumerate(errs):
        ok = ~np.isnan(err)
        tables.append(error_table(df[ok], err[ok], by).assign(draw=i))
    g = pd.concat(tables, ignore_index=True).groupby(list(by), sort=True)
    return pd.DataFrame(
        {
            "draws": g["draw"].nunique(),
            "points": g["points"].min(),
            "median": g["median"].median(),
            "lo": g["median"].min(),
            "hi": g["median"].max(),
            "p90": g["p90"].median(),
            "max": g["max"].median(),
        }
    ).reset_index()


# -- what the tables themselves allow ---------------------------------------------


def repeat_spread(df: pd.DataFrame, second: pd.DataFrame | None = None) -> pd.DataFrame:
    """How well a measurement predicts a repeat of itself: the floor that
    measurement noise puts under any model's error.

    Two kinds of repeats, both taken as they are in the data:

    * within a table, rows of one job (model and batch) whose placements are
      the same multiset of GPUs per node (Pollux measures ``13`` and ``31``,
      both ``(3, 1)``): every ordered pair gives ``|r_i / r_j - 1|``;
    * ``second``, another measuring campaign of the same table (Gavel's
      ``physical_cluster_throughputs.json`` beside the simulation one): rows
      of the same cluster, job and placement whose iteration times differ
      (identical floats are copies, not re-measurements) give
      ``|t_a / t_b - 1|``. Only jobs the table measures on more than one GPU
      (the ones fitted) count.

    Returns per cluster: pairs, median and p90 of the spread, and what the
    pairs are.
    """
    rows = []
    d = df[~df["is_reference"].to_numpy()]
    for cluster, part in d.groupby("cluster", sort=True):
        spread: list[float] = []
        for _, ratios in part.groupby(["job", "placement"])["ratio"]:
            r = ratios.to_numpy(dtype=float)
            if len(r) > 1:
                q = r[:, None] / r[None, :]
                spread.extend(np.abs(q[~np.eye(len(r), dtype=bool)] - 1.0))
        if spread:
            rows.append(("same job and GPUs per node, measured twice", cluster, spread))
    if second is not None:
        keys = ["cluster", "job", "placement"]
        fitted = set(d["job"])
        both = df.merge(second, on=keys, suffixes=("", "_2"))
        both = both[both["job"].isin(fitted)]
        t1, t2 = both["t_iter"].to_numpy(dtype=float), both["t_iter_2"].to_numpy(dtype=float)
        both = both.assign(spread=np.abs(t1 / t2 - 1.0))[t1 != t2]
        for cluster, part in both.groupby("cluster", sort=True):
            rows.append(("second campaign, re-measured rows", cluster, list(part["spread"])))
    out = [
        {
            "cluster": c,
            "repeats": what,
            "pairs": len(s),
            "median": float(np.median(s)),
            "p90": float(np.quantile(s, 0.9)),
        }
        for what, c, s in rows
    ]
    return pd.DataFrame(out, columns=["cluster", "repeats", "pairs", "median", "p90"])


def _most_within(lo: np.ndarray, hi: np.ndarray) -> int:
    """Most points whose value can be chosen in ``[lo_i, hi_i]``, non-decreasing
    in order and >= 1 (points in order; small groups: all subsets)."""
    n = len(lo)
    if n > 12:
        raise ValueError(f"group of {n} points: too many for the exhaustive check")
    best = 0
    for mask in range(1, 1 << n):
        take = [i for i in range(n) if mask >> i & 1]
        if len(take) <= best:
            continue
        y = 1.0
        for i in take:
            y = max(y, lo[i])
            if y > hi[i]:
                break
        else:
            best = len(take)
    return best


def monotone_floor(df: pd.DataFrame, tol: float = 0.15) -> pd.DataFrame:
    """The best any data-parallel model can do on one server, in-sample.

    On one server every all-reduce form here (and any data-parallel one)
    gives a slowdown ``t_iter / t_1GPU`` that is at least 1 and does not fall
    as GPUs are added. Give such a model a free value per job and GPU count,
    constrained only by that: per cluster, this is how many single-server
    points it must still miss by more than ``tol``, and the smallest median
    error it can reach (``best median``; the target cannot be met below it,
    by any fit).
    """
    d = df[(~df["is_reference"].to_numpy()) & (df["s"].to_numpy() == 1)]
    rows = []
    for cluster, part in d.groupby("cluster", sort=True):
        groups = [
            (g["ratio"].to_numpy(dtype=float))
            for _, g in part.sort_values("n").groupby("job", sort=True)
        ]
        total = sum(len(g) for g in groups)

        def within(t: float, groups: list[np.ndarray] = groups) -> int:
            return sum(_most_within(m * (1 - t), m * (1 + t)) for m in groups)

        lo, hi = 0.0, 10.0  # bisect the smallest error half the points can meet
        for _ in range(40):
            mid = (lo + hi) / 2
            lo, hi = (lo, mid) if within(mid) >= total / 2 else (mid, hi)
        rows.append(
            {
                "cluster": cluster,
                "points": total,
                f"missed by > {tol:.0%}": total - within(tol),
                "best median": hi,
            }
        )
    return pd.DataFrame(rows)


def _stab_counts(lo: np.ndarray, hi: np.ndarray, at: np.ndarray) -> np.ndarray:
    """How many intervals ``[lo_i, hi_i]`` contain each point of ``at``."""
    return ((lo[None, :] <= at[:, None]) & (at[:, None] <= hi[None, :])).sum(axis=1)


def _best_comm_times(groups: list[tuple[np.ndarray, np.ndarray, np.ndarray]], tol: float) -> int:
    """Most points within ``tol`` when one model's groups (one per GPU count,
    in rising order) each get one communication time ``C >= 0``, non-decreasing
    from group to group. A group is ``(t1, measured, hidden)`` per point: the
    1-GPU time, the measured iteration time and the seconds of communication
    the backward pass hides; the prediction is ``t1 + max(0, C - hidden)``."""
    best: dict[float, int] = {-1.0: 0}  # the last C chosen -> points within so far
    for t1, meas, hidden in groups:
        lo_t, hi_t = meas * (1 - tol), meas * (1 + tol)
        ok = hi_t >= t1  # a point measured below t1 (1 - tol) is out of reach
        lo = np.where(lo_t <= t1, 0.0, hidden + lo_t - t1)[ok]
        hi = (hidden + hi_t - t1)[ok]
        cands = np.unique(np.concatenate([[0.0], lo, hi]))
        counts = _stab_counts(lo, hi, cands) if len(lo) else np.zeros(len(cands), dtype=int)
        prev_c = np.array(sorted(best))
        prev_v = np.maximum.accumulate(np.array([best[c] for c in prev_c]))
        at = np.searchsorted(prev_c, cands, side="right") - 1
        best = {float(c): int(prev_v[i] + n) for c, i, n in zip(cands, at, counts, strict=True)}
    return max(best.values())


def comm_time_floor(
    df: pd.DataFrame, tol: float = 0.15, overlaps: Sequence[float] = (0.0, 0.25, 0.5, 0.75, 1.0)
) -> pd.DataFrame:
    """The best, in-sample, of any model on one server whose communication
    time is a free value per (model, GPU count): whatever the links and each
    model's bytes, not depending on the batch size (the gradient bytes do
    not), not falling as GPUs are added, and hidden behind ``overlap`` of the
    backward pass (one value per cluster, the best of ``overlaps``). Every
    form here (ring, per-level, shared links, with per-model multipliers) is
    such a model, so none can beat it; compare ``monotone_floor``, which also
    frees the batch size.

    Per cluster: points, how many stay more than ``tol`` off, and the
    smallest median error reachable (``best median``).
    """
    d = df[(~df["is_reference"].to_numpy()) & (df["s"].to_numpy() == 1) & df["t_iter"].notna()]
    rows = []
    for cluster, part in d.groupby("cluster", sort=True):
        total = len(part)

        def within(t: float, overlap: float, part: pd.DataFrame = part) -> int:
            count = 0
            for model, by_model in part.groupby("model", sort=True):
                share = get_profile(str(model)).backward_share
                groups = []
                for _, g in by_model.groupby("n", sort=True):
                    t1 = g["t_compute"].to_numpy(dtype=float)
                    groups.append((t1, g["t_iter"].to_numpy(dtype=float), overlap * share * t1))
                count += _best_comm_times(groups, t)
            return count

        best_med, best_miss = math.inf, total
        for overlap in overlaps:
            best_miss = min(best_miss, total - within(tol, overlap))
            lo, hi = 0.0, 5.0  # bisect the smallest error half the points can meet
            for _ in range(20):
                mid = (lo + hi) / 2
                lo, hi = (lo, mid) if within(mid, overlap) >= total / 2 else (mid, hi)
            best_med = min(best_med, hi)
        rows.append(
            {
                "cluster": cluster,
                "points": total,
                f"missed by > {tol:.0%}": best_miss,
                "best median": best_med,
            }
        )
    return pd.DataFrame(rows)


def exposed_growth(df: pd.DataFrame, gpus: tuple[int, int, int] = (2, 4, 8)) -> pd.DataFrame:
    """How a job's exposed communication time on one server grows with its
    GPUs: ``c(g) = t_iter(g) - t_1GPU`` at ``gpus`` = (a, b, c), per job that
    has all three and a positive ``c`` at each.

    Every form here gives ``c(b)**2 >= c(a) * c(c)`` on one server
    (log-concave: the growth from b to c is no faster than from a to b; a
    ring's traffic per GPU saturates at 2x, its latency steps grow linearly,
    and hiding part of it behind the backward pass does not turn that round
    while all three stay positive; tested). A job that grows faster from b to
    c ("log-convex") needs a cost that only its larger placements show, e.g.
    a ring crossing the server's two CPU sockets, which a fit that holds those
    placements out cannot learn. Per cluster: jobs, how many are log-convex,
    and the median growth factors.
    """
    a, b, c = gpus
    d = df[(~df["is_reference"].to_numpy()) & (df["s"].to_numpy() == 1) & df["t_iter"].notna()]
    d = d.assign(exposed=d["t_iter"] - d["t_compute"])
    rows = []
    for cluster, part in d.groupby("cluster", sort=True):
        wide = part.pivot_table(index="job", columns="n", values="exposed")
        if not {a, b, c} <= set(wide.columns):
            continue
        wide = wide[[a, b, c]].dropna()
        wide = wide[(wide > 0).all(axis=1)]
        if wide.empty:
            continue
        rows.append(
            {
                "cluster": cluster,
                "jobs": len(wide),
                "log-convex": int((wide[b] ** 2 < wide[a] * wide[c]).sum()),
                f"c({b}) / c({a})": float((wide[b] / wide[a]).median()),
                f"c({c}) / c({b})": float((wide[c] / wide[b]).median()),
            }
        )
    return pd.DataFrame(rows)
