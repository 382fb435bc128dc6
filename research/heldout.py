"""Held-out comparison of trained agents with every heuristic.

Cases come only from data the agent never trained or was selected on (its
``SplitConfig``): the whole ``test_traces`` (e.g. whole seed-format traces)
and 24 h windows of the *test* part of the time-split pool traces that match
``window_traces`` (e.g. the last days of the Philly week). Every run goes
through ``simulate()`` under the same scenario (cluster, congestion,
``clairvoyant = False``); the oracle heuristics that need true job sizes
(SJF, SRTF) run with ``clairvoyant = True`` and are labelled ``(oracle)``.

Agents trained with several seeds are reported as mean ± std over the
seeds. Results are cached per (policy, case) in a CSV, so adding an agent
does not re-run the heuristics.

``CountingPolicy`` wraps any policy to count its decisions: how often it
waited although some waiting job could have been placed (a delay), next to
the engine's counts of placements per level and preemptions (the action
histogram of ``docs/agents_log.md``).
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
from ddl_gym.agents.envs import fixed_windows, resolve_traces, time_part
from ddl_gym.baselines import HEURISTICS, ORACLES

from ddl_gym.engine import WAIT, Wait, simulate
from ddl_gym.traces import Trace

METRICS = {  # summary key -> (column title, scale)
    "mean_jct_s": ("mean JCT (h)", 1 / 3600),
    "p95_jct_s": ("p95 JCT (h)", 1 / 3600),
    "makespan_s": ("makespan (h)", 1 / 3600),
    "comm_overhead": ("comm overhead (comm/compute)", 1.0),
}
HIST = ("delays", "alloc_machine", "alloc_rack", "alloc_network", "preemptions")


@dataclass(frozen=True)
class Case:
    group: str  # "whole" or "window"
    name: str
    trace: Trace


def heldout_cases(
    cfg: Any, window_traces: Sequence[str] = ("philly",), n_windows: int = 3, window_h: float = 24
) -> list[Case]:
    """Whole test traces plus ``n_windows`` windows of each matching test part."""
    cases = [Case("whole", t.name, t) for t in resolve_traces(cfg.split.test_traces)]
    pool = [t for t in resolve_traces(cfg.split.traces) if any(k in t.name for k in window_traces)]
    for t in pool:
        part = time_part(t, *cfg.split.test)
        for i, w in enumerate(fixed_windows([part], n_windows, window_h * 3600.0, seed=10_000)):
            cases.append(Case("window", f"{t.name}[test {i}]", w))
    return cases


class CountingPolicy:
    """A policy, counting WAITs returned while some waiting job fits the free GPUs."""

    def __init__(self, policy: Any) -> None:
        self.policy = policy
        self.name = getattr(policy, "name", type(policy).__name__)
        self.delays = 0
        self.decisions = 0

    def engine_kwargs(self) -> dict[str, Any]:
        return self.policy.engine_kwargs() if hasattr(self.policy, "engine_kwargs") else {}

    def reset(self, view, seed: int | None = None) -> None:
        self.delays = self.decisions = 0
        self.policy.reset(view, seed=seed)

    def act(self, view):
        action = self.policy.act(view)
        if action is WAIT or isinstance(action, Wait):
            pending = view.pending
            if pending and min(j.gpus for j in pending) <= view.total_free:
                self.delays += 1
                self.decisions += 1
        else:
            self.decisions += 1
        return action


def levers_off(policy: Any) -> Any:
    """An inference-time lever ablation of a loaded set agent: no preemption
    (budget 0, the preempt logits masked) and no ticks (WAIT lasts until the
    next arrival or completion, so it cannot express a delay)."""
    from ddl_gym.env.set_observation import SetObsConfig

    env = policy.config.env
    env.preempt_budget = 0
    env.tick_s = None
    policy._set_cfg = SetObsConfig(K=env.K, M=env.M, clairvoyant=False, preempt_budget=0)
    policy.name += "-levers-off"
    return policy


# trace-name fragment -> family: selection weighs families equally, whatever
# their number of cases
FAMILIES = (
    ("sense_", "seed"),
    ("workload-", "pollux"),
    ("long:", "synthetic"),
    ("openb", "alibaba"),
    ("philly", "philly"),
    ("60_job", "tiresias"),
)
# the rule of docs/agents_log.md ("Choosing the configuration"): a challenger
# replaces the incumbent only if its mean score is this much lower
SELECT_MARGIN = 0.02


def trace_family(name: str) -> str:
    for key, fam in FAMILIES:
        if key in name:
            return fam
    return name


def selection_cases(cfg: Any) -> list[Case]:
    """Cases for choosing between runs and configurations, never trained on
    and disjoint from every test case: the whole ``val_traces`` and
    ``select_traces`` and the validation part (``split.val``) of every pool
    trace matching ``split.select_parts``, each whole."""
    whole = resolve_traces(list(cfg.split.val_traces) + list(cfg.split.select_traces))
    cases = [Case("select", t.name, t) for t in whole]
    for t in resolve_traces(cfg.split.traces):
        if any(k in t.name for k in cfg.split.select_parts):
            cases.append(Case("select", f"{t.name}[val]", time_part(t, *cfg.split.val)))
    return cases


def _gmean(x: Sequence[float] | np.ndarray) -> float:
    return float(np.exp(np.mean(np.log(np.asarray(x, dtype=float)))))


def selection_scores(
    df: pd.DataFrame, heuristics: Sequence[str], oracles: Sequence[str] = ()
) -> pd.DataFrame:
    """Per agent (neither a heuristic nor an oracle): its mean JCT on each
    case divided by the best (non-clairvoyant) heuristic's there, the
    geometric mean of those ratios per trace family, and ``score``, the
    geometric mean over families (1.0 = as good as the best heuristic on
    every family; lower is better). Oracles read true job sizes: they are
    neither a baseline nor a candidate. Only cases every policy finished
    count."""
    cases = common_cases(df, "select")
    sub = df[(df["group"] == "select") & df["case"].isin(cases)]
    jct = sub.pivot_table(index="case", columns="policy", values="mean_jct_s")
    best = jct[[h for h in heuristics if h in jct.columns]].min(axis=1)
    others = set(heuristics) | set(oracles)
    ratio = jct.drop(columns=[c for c in jct.columns if c in others]).div(best, axis=0)
    fam = pd.Series([trace_family(c) for c in ratio.index], index=ratio.index)
    per_fam = ratio.groupby(fam).agg(_gmean).T
    per_fam["score"] = [_gmean(row) for row in per_fam.to_numpy()]
    return per_fam.sort_values("score")


def choose_configuration(
    scores: pd.Series, incumbent: str, margin: float = SELECT_MARGIN
) -> tuple[str, str, pd.DataFrame]:
    """The rule: per configuration (``agent_family`` of each model), the mean
    and std over its seeds of ``score``; the configuration with the lowest
    mean wins, but replaces ``incumbent`` only if its mean is at least
    ``margin`` lower; the shipped model is the winner's seed with the lowest
    score. Returns (configuration, model, per-configuration table)."""
    fam = pd.Series([agent_family(m) for m in scores.index], index=scores.index)
    table = scores.groupby(fam).agg(["mean", "std", "count"]).sort_values("mean")
    best = str(table.index[0])
    if incumbent in table.index and best != incumbent:
        means = table["mean"].astype(float)
        if not means[best] <= (1 - margin) * means[incumbent]:
            best = incumbent
    model = str(scores[fam == best].idxmin())
    return best, model, table


def guarded(policy: Any, s_max: float) -> Any:
    """An inference-time guard on a loaded set agent: no placement at a
    level whose predicted slowdown exceeds ``s_max`` (``EnvConfig.max_slowdown``)."""
    policy.config.env.max_slowdown = float(s_max)
    policy.name += f"-guard{s_max:g}"
    return policy


def run_case(
    name: str, factory: Callable[[], Any], case: Case, cluster: Any, congestion: Any, oracle: bool
) -> dict[str, Any]:
    policy = CountingPolicy(factory())
    kwargs = dict(policy.engine_kwargs())
    kwargs["clairvoyant"] = oracle
    t0 = time.process_time()
    result = simulate(case.trace, cluster, policy, seed=0, congestion=congestion, **kwargs)
    s = result.summary
    row = {
        "policy": name,
        "group": case.group,
        "case": case.name,
        "jobs": len(case.trace),
        "clairvoyant": oracle,
        "cpu_s": time.process_time() - t0,
        "delays": policy.delays,
        "decisions": policy.decisions,
    }
    row |= {key: s[key] for key in METRICS}
    row |= {key: s[key] for key in HIST if key in s}
    return row


def run_all(
    policies: dict[str, tuple[Callable[[], Any], bool]],
    cases: Sequence[Case],
    cluster: Any,
    congestion: Any,
    cache: Path | None = None,
    log: Callable[[str], None] = print,
    only_cached: bool = False,
) -> pd.DataFrame:
    """One row per (policy, case); ``policies[name] = (factory, oracle)``.
    Rows already in ``cache`` are reused and new ones appended to it."""
    done = pd.read_csv(cache) if cache is not None and cache.is_file() else pd.DataFrame()
    have = set(zip(done["policy"], done["case"], strict=True)) if len(done) else set()
    rows = []
    for case in cases:
        for name, (factory, oracle) in policies.items():
            if (name, case.name) in have or only_cached:
                continue
            row = run_case(name, factory, case, cluster, congestion, oracle)
            log(
                f"{name:>22} {case.name:<44} mean JCT {row['mean_jct_s'] / 3600:9.1f} h "
                f"({row['cpu_s']:.0f} s CPU)"
            )
            rows.append(row)
            if cache is not None:
                pd.DataFrame([row]).to_csv(cache, mode="a", header=not cache.is_file(), index=False)
    out = pd.concat([done, pd.DataFrame(rows)], ignore_index=True) if rows else done
    keep = {n for n in policies}
    cases_ = {c.name for c in cases}
    return out[out["policy"].isin(keep) & out["case"].isin(cases_)].reset_index(drop=True)


def agent_family(name: str) -> str:
    """``"agent[s1]"`` -> ``"agent"``: seeds of one configuration pool together."""
    return name.split("[", 1)[0]


def common_cases(df: pd.DataFrame, group: str) -> list[str]:
    """Cases of ``group`` that every policy present in it has finished (so
    every row of a table averages the same cases)."""
    sub = df[df["group"] == group]
    sets = [set(g["case"]) for _, g in sub.groupby("policy")]
    return sorted(set.intersection(*sets)) if sets else []


def group_of(df: pd.DataFrame, case: str) -> str:
    return str(df.loc[df["case"] == case, "group"].iloc[0])


def summary_table(df: pd.DataFrame, group: str) -> pd.DataFrame:
    """Per policy family: mean over the group's cases (those every policy
    finished), then mean and std over training seeds (std 0 for heuristics:
    they are deterministic here)."""
    sub = df[(df["group"] == group) & df["case"].isin(common_cases(df, group))]
    per = sub.groupby("policy", sort=False)[list(METRICS)].mean()
    per["family"] = [agent_family(p) for p in per.index]
    rows = []
    for fam, g in per.groupby("family", sort=False):
        row: dict[str, Any] = {"policy": fam, "seeds": len(g)}
        for key, (title, scale) in METRICS.items():
            v = g[key].to_numpy() * scale
            row[title] = float(np.mean(v))
            row[title + " std"] = float(np.std(v, ddof=1)) if len(v) > 1 else 0.0
        rows.append(row)
    return pd.DataFrame(rows).sort_values("mean JCT (h)").reset_index(drop=True)


def markdown(table: pd.DataFrame, oracle: set[str]) -> str:
    titles = [t for t, _ in METRICS.values()]
    lines = ["| policy | " + " | ".join(titles) + " |", "|---" * (len(titles) + 1) + "|"]
    for _, r in table.iterrows():
        name = r["policy"] + (" (oracle)" if r["policy"] in oracle else "")
        if r["seeds"] > 1:
            name += f" ({int(r['seeds'])} seeds)"
        cells = []
        for t in titles:
            fmt = "{:.3f}" if "comm" in t else "{:.1f}"
            cell = fmt.format(r[t])
            if r["seeds"] > 1:
                cell += " ± " + fmt.format(r[t + " std"])
            cells.append(cell)
        lines.append(f"| {name} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def clairvoyance_line(oracles: Sequence[str]) -> str:
    """The explicit statement every table carries: who saw true job sizes."""
    if not oracles:
        return "Clairvoyant: no policy (no row sees job sizes or remaining work)."
    return (
        f"Clairvoyant: only {', '.join(oracles)}, labelled (oracle): they read true job sizes; "
        "the agents and every other heuristic are non-clairvoyant."
    )


def histogram(df: pd.DataFrame, names: Sequence[str]) -> pd.DataFrame:
    """Shares of decisions per kind (delay, place per level, preempt), summed
    over all cases, for the policy families in ``names``."""
    df = df.assign(family=[agent_family(p) for p in df["policy"]])
    out = []
    for fam in names:
        g = df[df["family"] == fam]
        if not len(g):
            continue
        counts = {k: float(g[k].sum()) for k in HIST}
        total = sum(counts.values())
        out.append({"policy": fam} | {k: counts[k] / total for k in HIST} | {"n": total})
    return pd.DataFrame(out)


def learning_curve(run_dir: str | Path) -> pd.DataFrame:
    """Validation return (minus the total JCT in hours over the validation
    windows and whole traces) against training steps, from a run's
    ``eval/evaluations.npz`` (written by the eval callback)."""
    data = np.load(Path(run_dir) / "eval" / "evaluations.npz")
    returns = data["results"]  # (evaluations, episodes)
    return pd.DataFrame({"steps": data["timesteps"], "val_return": returns.sum(axis=1)})


# -- command line (python -m research.heldout) ------------------------------
def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(
        description="Held-out comparison of trained agents with every heuristic."
    )
    ap.add_argument("--config", type=Path, required=True, help="the agents' TrainConfig")
    ap.add_argument(
        "--agent",
        action="append",
        default=[],
        metavar="NAME=ZIP[,ZIP...]",
        help="an agent family and its models (one per training seed); repeatable",
    )
    ap.add_argument(
        "--levers-off",
        action="store_true",
        help="also run each agent with preempt budget 0 and no ticks (NAME-levers-off)",
    )
    ap.add_argument(
        "--select",
        action="store_true",
        help="model selection: run --agent families and the heuristics on the selection "
        "cases only (never a test case) and apply the rule (best configuration, its best seed)",
    )
    ap.add_argument(
        "--incumbent", default="default", help="--select: the configuration shipped today"
    )
    ap.add_argument(
        "--guard",
        type=float,
        metavar="S",
        help="also run each agent with placements slower than S x masked (NAME-guardS)",
    )
    ap.add_argument("--cache", type=Path, help="CSV of finished runs (reused, appended)")
    ap.add_argument("--windows", type=int, default=3, help="Philly test windows")
    ap.add_argument("--quick", action="store_true", help="first case only, 3 heuristics")
    ap.add_argument("--heuristics", nargs="*", help=f"default: {' '.join(HEURISTICS)}")
    ap.add_argument("--oracles", nargs="*", help=f"default: {' '.join(ORACLES)}")
    ap.add_argument("--skip-heuristics", action="store_true", help="agents only (cache kept)")
    ap.add_argument("--report-only", action="store_true", help="run nothing: tables from --cache")
    ap.add_argument("--only", help="only the cases whose name contains this")
    ap.add_argument("--curves", nargs="*", default=[], help="run dirs: print learning curves")
    args = ap.parse_args(argv)

    from ddl_gym.agents.config import TrainConfig
    from ddl_gym.agents.policy import load_policy
    from ddl_gym.baselines import make_policy

    for run in args.curves:
        print(f"learning curve of {run}:")
        print(learning_curve(run).to_string(index=False))
    cfg = TrainConfig.load(args.config)
    cases = selection_cases(cfg) if args.select else heldout_cases(cfg, n_windows=args.windows)
    if args.only:
        cases = [c for c in cases if args.only in c.name]
    heuristics = HEURISTICS if args.heuristics is None else tuple(args.heuristics)
    oracles = ORACLES if args.oracles is None else tuple(args.oracles)
    if args.quick:
        cases, heuristics, oracles = cases[:1], ("fifo", "tiresias", "gandiva"), ()
    policies = {}
    for spec in args.agent:
        name, _, paths = spec.partition("=")
        for i, p in enumerate(paths.split(",")):
            key = name if "[" in name else f"{name}[s{i}]"  # "set[s1]=...": one seed
            policies[key] = ((lambda p=p: load_policy(p)), False)
            if args.guard is not None:
                g = key.replace("[", f"-guard{args.guard:g}[", 1)
                policies[g] = ((lambda p=p: guarded(load_policy(p), args.guard)), False)
            if args.levers_off:
                off = key.replace("[", "-levers-off[", 1)
                policies[off] = ((lambda p=p: levers_off(load_policy(p))), False)
    run_policies = dict(policies)
    for h in heuristics:
        policies[h] = ((lambda h=h: make_policy(h)), False)
    for h in oracles:
        policies[h] = ((lambda h=h: make_policy(h)), True)
    if not args.skip_heuristics:
        run_policies = policies
    print(f"{len(cases)} cases on {cfg.env.cluster}, congestion {cfg.env.congestion}:")
    print(clairvoyance_line(oracles))
    for c in cases:
        print(f"  {c.group:6s} {c.name} ({len(c.trace)} jobs)")
    if args.cache is None:
        raise SystemExit("--cache is required (results are read back from it)")
    if not args.report_only:
        run_all(run_policies, cases, cfg.env.cluster, cfg.env.congestion, cache=args.cache)
    df = run_all(
        policies, cases, cfg.env.cluster, cfg.env.congestion, cache=args.cache, only_cached=True
    )
    if args.select:
        scores = selection_scores(df, heuristics, oracles)
        print("\n### selection: mean JCT / best heuristic's, geometric mean per family\n")
        print(scores.round(3).to_string())
        config, model, table = choose_configuration(scores["score"], args.incumbent)
        print("\n### per configuration (score over seeds)\n")
        print(table.round(3).to_string())
        print(f"\nchosen configuration: {config}; shipped model: {model}")
        return
    for case in dict.fromkeys(df["case"]):
        print(f"\n#### {case}\n")
        print(markdown(summary_table(df[df["case"] == case], group_of(df, case)), set(oracles)))
    for group, title in (("whole", "whole held-out traces"), ("window", "Philly test windows")):
        if (df["group"] == group).any():
            print(f"\n### {title}\n")
            print("cases: " + ", ".join(common_cases(df, group)) + "\n")
            print(clairvoyance_line(oracles) + "\n")
            print(markdown(summary_table(df, group), set(oracles)))
    families = list(dict.fromkeys(a.partition("=")[0].split("[")[0] for a in args.agent))
    families += ["dally", "dally-1-2", "dally-delay", "gandiva", "tiresias"]
    print("\n### decisions (shares; delays = WAIT while a waiting job fits)\n")
    hist = histogram(df, families)
    cols = list(hist.columns)
    print("| " + " | ".join(cols) + " |\n" + "|---" * len(cols) + "|")
    for _, r in hist.iterrows():
        cells = [r["policy"]] + [f"{r[c]:.3f}" for c in cols[1:-1]] + [f"{int(r['n'])}"]
        print("| " + " | ".join(cells) + " |")
