"""Where the env's episodes come from: resolving ``trace=`` arguments and
drawing each episode's engine (a pool trace, a window of one, or a fresh
synthetic trace), all from the env's seeded RNG.

Kept apart from the env so that the env's own module is only its
Gymnasium interface (reset, step, masks, render).
"""

from __future__ import annotations

import inspect
import warnings
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from ddl_gym.engine import Engine
from ddl_gym.topology import Cluster
from ddl_gym.traces import (
    Trace,
    TraceWarning,
    check_fits,
    default_trace,
    find_data_dir,
    load_trace,
    synthetic_trace,
    validate,
    window,
)

# Named traces accepted by ``trace=`` besides paths, Traces and DataFrames.
SEED_WEEK_FILE = "traces/dally/sense_500jobs_poisson_1proc-week.json"
PHILLY_WEEK_FILE = "traces/philly/philly_2017-11-13_to_2017-11-19.csv"


def named_trace(name: str, cluster: Cluster) -> Trace:
    """``"default"``, ``"seed-week"``, ``"philly-week"`` (synthetic stand-ins,
    with a warning, when the data dir is absent) or a trace file."""
    data = find_data_dir()
    if name == "default":
        return default_trace(seed=0)
    if name in ("seed-week", "philly-week"):
        rel = SEED_WEEK_FILE if name == "seed-week" else PHILLY_WEEK_FILE
        if data is not None and (data / rel).is_file():
            with warnings.catch_warnings():
                # the seed's JSON is unsorted; the loader sorts it and says so
                warnings.simplefilter("ignore", TraceWarning)
                return load_trace(data / rel)
        warnings.warn(
            f"trace {name!r}: {rel} not found (no data dir); using a synthetic stand-in",
            stacklevel=3,
        )
        if name == "seed-week":
            return default_trace(seed=0)
        return synthetic_trace(n_jobs=5869, seed=0, max_gpus=cluster.num_gpus, name=name)
    path = Path(name).expanduser()
    if path.exists():  # a folder or unreadable file: load_trace says which
        return load_trace(path)
    raise ValueError(
        f"unknown trace {name!r}: not 'default', 'seed-week', 'philly-week' or a trace file"
    )


def resolve_trace(item: Any, cluster: Cluster) -> Trace:
    """A ``Trace`` from a Trace, a DataFrame in the trace schema, a name or a path."""
    if isinstance(item, Trace):
        return item
    if isinstance(item, pd.DataFrame):
        return Trace("<DataFrame>", validate(item.reset_index(drop=True), "<DataFrame>"))
    if isinstance(item, (str, Path)):
        return named_trace(str(item), cluster)
    raise TypeError(f"not a trace: {type(item).__name__}")


def check_synthetic_spec(spec: Mapping[str, Any]) -> None:
    """Fail now, not at the first episode, on a spec ``synthetic_trace`` rejects:
    an unknown key, or a value it refuses (checked on a one-job draw)."""
    known = set(inspect.signature(synthetic_trace).parameters) - {"seed"}
    unknown = sorted(set(spec) - known)
    if unknown:
        raise ValueError(
            f"unknown synthetic trace argument(s) {', '.join(map(repr, unknown))}; "
            f"known: {', '.join(sorted(known))}"
        )
    try:
        synthetic_trace(seed=0, **{**spec, "n_jobs": min(int(spec.get("n_jobs", 1)), 1)})
    except (TypeError, ValueError) as err:
        raise ValueError(f"bad synthetic trace spec {dict(spec)!r}: {err}") from err


class EpisodeSource:
    """Builds the engine of each episode from the env's ``trace`` argument.

    ``trace`` is a mapping of ``synthetic_trace`` arguments (a fresh trace per
    episode), or one trace / a list of traces (a pool, one drawn per
    episode), each optionally cut to a random window of ``window_s`` seconds.
    Whole pool traces keep their engine between episodes (reset, not rebuilt).
    """

    def __init__(
        self,
        trace: Any,
        cluster: Cluster,
        engine_kwargs: Mapping[str, Any],
        window_s: float | None = None,
    ) -> None:
        self.cluster = cluster
        self.engine_kwargs = dict(engine_kwargs)
        self.window_s = window_s
        self.synthetic: dict[str, Any] | None = None
        self.pool: list[Trace] = []
        if isinstance(trace, Mapping):
            spec = dict(trace)
            spec.setdefault("max_gpus", cluster.num_gpus)
            spec.pop("seed", None)  # drawn per episode
            check_synthetic_spec(spec)
            self.synthetic = spec
        else:
            items = (
                list(trace)
                if isinstance(trace, Sequence) and not isinstance(trace, (str, bytes))
                else [trace]
            )
            if not items:
                raise ValueError("empty trace pool")
            self.pool = [resolve_trace(t, cluster) for t in items]
            for t in self.pool:
                check_fits(t, cluster.num_gpus)
                if len(t) == 0:
                    raise ValueError(f"trace {t.name!r} has no jobs")
        self._engines: dict[int, Engine] = {}  # whole pool traces, reused

    def _engine(self, trace: Trace) -> Engine:
        return Engine(trace, self.cluster, **self.engine_kwargs)

    def next_engine(self, rng: np.random.Generator) -> Engine:
        if self.synthetic is not None:
            for _ in range(100):
                seed = int(rng.integers(2**31 - 1))
                trace = synthetic_trace(seed=seed, **self.synthetic)
                if len(trace):
                    return self._engine(trace)
            raise ValueError("the synthetic spec produces no jobs")
        i = int(rng.integers(len(self.pool))) if len(self.pool) > 1 else 0
        base = self.pool[i]
        if self.window_s is None:
            engine = self._engines.get(i)
            if engine is None:
                engine = self._engines[i] = self._engine(base)
            else:
                engine.reset()
            return engine
        arrivals = base.jobs["arrival_s"].to_numpy()
        lo, hi = float(arrivals.min()), float(arrivals.max())
        for _ in range(100):
            start = lo + float(rng.random()) * max(0.0, hi - lo - self.window_s)
            part = window(base, start, start + self.window_s)
            if len(part):
                return self._engine(part)
        # sparse arrivals (gaps longer than the window): anchor the window on a
        # random job, so a valid window length never fails an episode
        anchor = float(arrivals[int(rng.integers(len(arrivals)))])
        start = max(lo, anchor - float(rng.random()) * self.window_s)
        if not anchor < start + self.window_s:  # rounding: keep the anchor inside
            start = anchor
        return self._engine(window(base, start, start + self.window_s))
