"""Compare agents and heuristics on held-out windows, in ``simulate()``.

Evaluation windows come only from the *test* part of each trace (the last
fraction of its arrival span, per the agent's ``SplitConfig``), so an agent
is never judged on a window it trained or was validated on. Seed ``s`` draws
one window per trace; each metric is averaged over a seed's windows, then
reported as mean ± std over the seeds.
"""

from __future__ import annotations

import argparse
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
from ddl_gym.agents.envs import fixed_windows, resolve_traces, time_part
from tqdm.auto import tqdm

from ddl_gym.cli.evaluate import HEURISTICS, add_evaluate_options
from ddl_gym.engine import simulate
from ddl_gym.traces import Trace

DALLY_EVAL_TRACES = (
    "traces/dally/sense_500jobs_poisson_1proc-week.json",
    "traces/dally/sense_500jobs_poisson-100jobsPday.json",
    "traces/dally/sense_500jobs_poisson-50jobsPday.json",
)
METRICS = {  # summary key -> (column title, scale)
    "mean_jct_s": ("mean JCT (h)", 1 / 3600),
    "makespan_s": ("makespan (h)", 1 / 3600),
    "comm_overhead": ("comm overhead (comm/compute)", 1.0),
}


@dataclass(frozen=True)
class EvalWindow:
    seed: int
    trace: Trace


def heldout_windows(
    specs: Sequence[str],
    test: tuple[float, float],
    seeds: Sequence[int],
    window_s: float | None,
) -> list[EvalWindow]:
    """One window per trace per seed, drawn from each trace's test part."""
    parts = [time_part(t, *test) for t in resolve_traces(specs)]
    return [
        EvalWindow(seed, w)
        for seed in seeds
        for w in fixed_windows(parts, len(parts), window_s, seed=10_000 + seed)
    ]


def heuristic(name: str) -> Callable[[], Any]:
    """A factory of baseline ``name`` (``baselines.make_policy``; FIFO while
    the registry is absent)."""
    try:
        from ddl_gym.baselines import make_policy
    except ImportError:
        make_policy = None
    if make_policy is not None:
        return lambda: make_policy(name)
    if name != "fifo":
        raise KeyError(f"baseline {name!r} unavailable (no baselines.make_policy yet)")
    from ddl_gym.baselines.fifo import FifoPolicy

    return FifoPolicy


def available_heuristics(names: Sequence[str] = HEURISTICS) -> dict[str, Callable[[], Any]]:
    out = {}
    for name in names:
        try:
            factory = heuristic(name)
            factory()
        except (KeyError, ValueError) as err:
            print(f"skipping {name}: {err}")
            continue
        out[name] = factory
    return out


def run(
    policies: dict[str, Callable[[], Any]],
    windows: Sequence[EvalWindow],
    cluster: str,
    congestion: str | float,
    progress: bool = True,
) -> pd.DataFrame:
    """One row per (policy, window): the summary metrics of ``simulate()``."""
    rows = []
    jobs = [(name, w) for name in policies for w in windows]
    for name, w in tqdm(jobs, disable=not progress, desc="simulate", unit="run"):
        policy = policies[name]()
        # simulate() applies the policy's engine_kwargs() itself
        summary = simulate(w.trace, cluster, policy, seed=w.seed, congestion=congestion)
        s = summary.summary
        rows.append(
            {"policy": name, "seed": w.seed, "trace": w.trace.name, "jobs": len(w.trace)}
            | {key: s[key] for key in METRICS}
        )
    return pd.DataFrame(rows)


def table(df: pd.DataFrame) -> str:
    """Mean ± std over seeds of each seed's average over its windows."""
    per_seed = df.groupby(["policy", "seed"], sort=False)[list(METRICS)].mean()
    lines = []
    header = f"{'policy':<18}" + "".join(f"{title:>30}" for title, _ in METRICS.values())
    lines.append(header)
    lines.append("-" * len(header))
    for policy, group in per_seed.groupby(level=0, sort=False):
        cells = []
        for key, (_, scale) in METRICS.items():
            v = group[key].to_numpy() * scale
            std = float(np.std(v, ddof=1)) if len(v) > 1 else 0.0
            cells.append(f"{np.mean(v):>15.4g} ± {std:<8.3g}")
        lines.append(f"{policy:<18}" + "".join(f"{c:>30}" for c in cells))
    n_seeds = df["seed"].nunique()
    n_win = len(df) // max(1, df["policy"].nunique())
    lines.append(f"({n_win} windows over {n_seeds} seeds; ± is the std over seeds)")
    return "\n".join(lines)


def evaluate(
    models: Sequence[Path] | None = None,
    traces: Sequence[str] = DALLY_EVAL_TRACES,
    seeds: Sequence[int] = (0, 1, 2),
    window_h: float | None = None,
    congestion: str | float = "heavy",
    baselines: Sequence[str] = HEURISTICS,
    csv: Path | None = None,
    progress: bool = True,
) -> pd.DataFrame:
    """Agents (``models``; default: the shipped one) and ``baselines`` on the
    held-out test windows of ``traces``; prints the table, returns the rows.

    ``window_h``: window length in hours (None: the agent's training window;
    0: the whole test part)."""
    from ddl_gym.agents.policy import DEFAULT_MODEL, load_policy

    agents = [load_policy(p) for p in (models or [DEFAULT_MODEL])]
    cfg = agents[0].config
    if window_h is None:
        window_s = cfg.env.window_s
    else:
        window_s = window_h * 3600 if window_h > 0 else None
    seeds = list(seeds)
    windows = heldout_windows(traces, cfg.split.test, seeds, window_s)
    wh = "whole test part" if window_s is None else f"{window_s / 3600:g} h windows"
    print(
        f"test part {cfg.split.test} of {len(traces)} traces, {wh}, seeds {seeds}, "
        f"cluster {cfg.env.cluster}, congestion {congestion}"
    )
    policies = {a.name: (lambda a=a: a) for a in agents}
    policies |= available_heuristics(baselines)
    df = run(policies, windows, cfg.env.cluster, congestion, progress=progress)
    print(table(df))
    if csv:
        df.to_csv(csv, index=False)
    return df


# -- command line (scripts/evaluate.py; ddl-gym evaluate is ddl_gym.cli.evaluate)
def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(
        description="Compare a trained agent with the heuristics on held-out test windows."
    )
    ap.add_argument(
        "--model",
        type=Path,
        action="append",
        help="model .zip (repeatable; default: the shipped one)",
    )
    ap.add_argument(
        "--traces",
        nargs="+",
        default=list(DALLY_EVAL_TRACES),
        help="trace specs (files, or default:A-B); the test part of each is used",
    )
    ap.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    ap.add_argument("--congestion", default="heavy")
    add_evaluate_options(ap)
    args = ap.parse_args(argv)
    evaluate(
        args.model,
        args.traces,
        args.seeds,
        args.window_h,
        args.congestion,
        args.baselines,
        args.csv,
    )
