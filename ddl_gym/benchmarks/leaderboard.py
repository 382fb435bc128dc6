"""The leaderboard: every heuristic and oracle (and the shipped agent) on a
suite split, aggregated as rliable defines it, written as ``docs/benchmark.md`` and
a performance-profile PNG.

    ddl-gym benchmark leaderboard --suite ddl-gym-v1 --split test --agent

Runs go to ``--out`` (one folder per policy, one JSON per finished case and
seed; ``--resume`` reuses them). The page states the command that
regenerates it from nothing (:func:`leaderboard_command`: no ``--resume``)
and is generated whole: edit the text here, not in the page.

Each policy is placed between the best heuristic of each case (the suite's
own ``Suite.heuristics``) and the lower bound on mean JCT of each (case,
seed) (:mod:`ddl_gym.benchmarks.bounds`): ``position = (mean JCT - bound) /
(best heuristic's mean JCT - bound)``, 1 = the best heuristic, 0 = the
bound, per case and as the mean over cases. Policies passed with
``--policy`` (``extra``) are the user's: the profile plot draws them last,
thicker and first in its legend.
"""

from __future__ import annotations

import dataclasses
import sys
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from ddl_gym.baselines import ORACLES
from ddl_gym.benchmarks import stats
from ddl_gym.benchmarks.bounds import case_lower_bound
from ddl_gym.benchmarks.evaluate import evaluate, slug
from ddl_gym.benchmarks.suite import Suite, get_suite, suite_hash

DOC = "docs/benchmark.md"
IMG = "docs/img/benchmark_profile.png"
REPS = 2000  # the command's --reps default
TAUS = np.geomspace(0.5, 30.0, 120)


def leaderboard_command(
    suite: str = "ddl-gym-v1",
    split: str = "test",
    agent: bool = False,
    extra: Sequence[str] = (),
    quick: bool = False,
    reps: int = REPS,
    doc: str | Path = DOC,
    img: str | Path = IMG,
) -> str:
    """The command line that regenerates a page from nothing (no ``--resume``)."""
    parts = ["ddl-gym benchmark leaderboard", f"--suite {suite}"]
    parts.append("--quick" if quick else f"--split {split}")
    if agent:
        parts.append("--agent")
    parts += [f"--policy {p}" for p in extra]
    if reps != REPS:
        parts.append(f"--reps {reps}")
    if str(doc) != DOC:
        parts.append(f"--doc {doc}")
    if str(img) != IMG:
        parts.append(f"--img {img}")
    return " ".join(parts)


def run_bounds(suite: Suite, records: pd.DataFrame) -> dict[tuple[str, int], float]:
    """The lower bound on mean JCT of every (case, seed) in ``records``."""
    out: dict[tuple[str, int], float] = {}
    for case, seed in records[["case", "seed"]].drop_duplicates().itertuples(index=False):
        out[(str(case), int(seed))] = case_lower_bound(suite.case(str(case)), int(seed))
    return out


def run_policies(
    policies: Sequence[str],
    suite: str,
    split: str,
    out_dir: Path,
    resume: bool = True,
    progress: bool = True,
    quick: bool = False,
    seeds: Sequence[int] | None = None,
) -> pd.DataFrame:
    """Every policy's records (one row per policy, case and seed; ``seeds``:
    these instead of each case's)."""
    frames = []
    for policy in policies:
        scores = evaluate(
            policy,
            suite=suite,
            split=split,
            seeds=seeds,
            out_dir=out_dir / slug(policy),
            resume=resume,
            progress=progress,
            quick=quick,
        )
        frames.append(scores.records)
    return pd.concat([f for f in frames if not f.empty], ignore_index=True)


def _ci(x: float, lo: float, hi: float, fmt: str = "{:.3f}") -> str:
    return f"{fmt.format(x)} [{fmt.format(lo)}, {fmt.format(hi)}]"


def _oracles(records: pd.DataFrame) -> set[str]:
    """The policies whose runs read true job sizes (clairvoyant records)."""
    if "clairvoyant" not in records:
        return set(ORACLES) & set(records["policy"])
    return set(records.loc[records["clairvoyant"].astype(bool), "policy"])


def _labeller(oracles: set[str]) -> Callable[[str], str]:
    return lambda policy: f"{policy} (oracle)" if policy in oracles else policy


def position_matrix(
    records: pd.DataFrame,
    baseline: pd.Series,
    bounds: Mapping[tuple[str, int], float],
    cases: Sequence[str],
) -> np.ndarray:
    """One policy's positions as a (seeds x cases) matrix: per run
    ``(JCT - bound) / (best heuristic's mean JCT - the case's mean bound)``;
    its mean over seeds is the case's position. NaN where the best heuristic
    reaches the bound (no room between them)."""
    cols = []
    for case in cases:
        runs = records[records["case"] == case].sort_values("seed")
        b = np.array([bounds[(case, int(s))] for s in runs["seed"]])
        span = float(baseline[case]) - float(b.mean())
        jct = runs["mean_jct_s"].to_numpy(dtype=float)
        cols.append((jct - b) / span if span > 0 else np.full(len(jct), np.nan))
    return np.stack(cols, axis=1)


def _matrices(norm: pd.DataFrame, cases: Sequence[str]) -> dict[str, np.ndarray]:
    return {
        str(p): stats.score_matrix(g, cases)[0]  # (policy names: str already)
        for p, g in norm.groupby("policy", sort=False)
        if set(cases) <= set(g["case"])
    }


def design_table(
    records: pd.DataFrame, baseline: pd.Series, heuristics: Sequence[str]
) -> pd.DataFrame:
    """Per case: best and worst non-oracle heuristic (mean over seeds), the
    spread (worst / best - 1) and the network effect (the largest comm
    overhead of multi-server jobs among the heuristics)."""
    h = records[records["policy"].isin(heuristics)]
    per = h.groupby(["case", "policy"], sort=False)["mean_jct_s"].mean().unstack("policy")
    net = h.groupby("case", sort=False)["multi_server_comm_overhead"].max()
    multi = h.groupby("case", sort=False)["multi_server_jobs"].mean()
    rows = []
    for case in dict.fromkeys(h["case"]):
        jct = per.loc[case].dropna()
        rows.append(
            {
                "case": case,
                "best": jct.idxmin(),
                "best JCT (h)": jct.min() / 3600,
                "worst": jct.idxmax(),
                "worst JCT (h)": jct.max() / 3600,
                "spread": jct.max() / jct.min() - 1,
                "multi-server jobs": multi.loc[case],
                "comm overhead of multi-server jobs": net.loc[case],
            }
        )
    return pd.DataFrame(rows)


def markdown_table(frame: pd.DataFrame, formats: dict[str, str] | None = None) -> str:
    formats = formats or {}
    cols = list(frame.columns)
    lines = ["| " + " | ".join(cols) + " |", "|" + "---|" * len(cols)]
    for _, row in frame.iterrows():
        cells = []
        for c in cols:
            v = row[c]
            if isinstance(v, float):
                cells.append(formats.get(c, "{:.3g}").format(v))
            else:
                cells.append(str(v))
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def build_report(
    records: pd.DataFrame,
    suite: Suite,
    split: str,
    img_path: Path | None = None,
    img_link: str | None = None,
    reps: int = stats.REPS,
    other_splits: dict[str, pd.DataFrame] | None = None,
    bounds: Mapping[tuple[str, int], float] | None = None,
    highlight: Sequence[str] = (),
    command: str | None = None,
) -> str:
    """The leaderboard page (markdown) for ``records`` of ``split``;
    ``other_splits``: heuristic records of other splits, for their "why each
    case is in" tables; ``bounds``: the lower bound on mean JCT per (case,
    seed), which adds the ``position`` columns; ``highlight``: the user's
    policies, drawn on top in the profile plot; ``command``: the command the
    page says regenerates it (default: :func:`leaderboard_command` of the
    suite and split)."""
    heuristics = suite.heuristics
    label = _labeller(_oracles(records))
    baseline = stats.baseline_jct(records, heuristics)
    norm = stats.normalised(records, baseline)
    cases = list(dict.fromkeys(c.name for c in suite.select(split)))
    cases = [c for c in cases if c in set(norm["case"])]
    mats = _matrices(norm, cases)
    table, method = stats.aggregate_table(mats, reps)
    jct_h = records.groupby("policy")["mean_jct_s"].mean() / 3600
    overall = pd.DataFrame(
        {
            "policy": [label(p) for p in table["policy"]],
            "IQM [95% CI]": [_ci(r["IQM"], r["IQM lo"], r["IQM hi"]) for _, r in table.iterrows()],
            "mean [95% CI]": [
                _ci(r["mean"], r["mean lo"], r["mean hi"]) for _, r in table.iterrows()
            ],
            "median": table["median"],
            "optimality gap [95% CI]": [
                _ci(r["optimality gap"], r["optimality gap lo"], r["optimality gap hi"])
                for _, r in table.iterrows()
            ],
            "mean JCT (h), all runs": [jct_h[p] for p in table["policy"]],
        }
    )
    positions: dict[str, np.ndarray] = {}
    if bounds is not None:
        for p, g in records.groupby("policy", sort=False):
            if str(p) in mats:
                positions[str(p)] = position_matrix(g, baseline, bounds, cases)
        overall["position [95% CI]"] = [_position_ci(positions[p], reps) for p in table["policy"]]
    # per family: IQM of the family's cases (runs x cases of that family)
    fam_of = {c.name: c.family for c in suite.select(split)}
    fam_rows = []
    families = list(dict.fromkeys(fam_of[c] for c in cases))
    fam_points: dict[str, dict[str, str]] = {p: {} for p in table["policy"]}
    for fam in families:
        fcases = [c for c in cases if fam_of[c] == fam]
        fmats = {p: m[:, [cases.index(c) for c in fcases]] for p, m in mats.items()}
        ft, _ = stats.aggregate_table(fmats, reps)
        for _, r in ft.iterrows():
            fam_points[r["policy"]][fam] = _ci(r["IQM"], r["IQM lo"], r["IQM hi"], "{:.2f}")
    for p in table["policy"]:
        fam_rows.append({"policy": label(p)} | {f: fam_points[p].get(f, "") for f in families})
    per_family = pd.DataFrame(fam_rows)

    challengers = [p for p in table["policy"] if p not in heuristics][:4]
    top = [p for p in table["policy"] if p in heuristics][:2]
    imp = stats.improvement_table(mats, heuristics, reps, policies=challengers + top)
    imp_tab = pd.DataFrame(
        {
            "policy": [label(p) for p in imp["policy"]],
            "over": imp["over"],
            "P(improvement) [95% CI]": [
                _ci(r["P"], r["P lo"], r["P hi"], "{:.2f}") for _, r in imp.iterrows()
            ],
        }
    )
    cards = stats.score_cards(records)
    cards = cards[cards["case"].isin(cases)]
    best = baseline.attrs["best"]
    card_lines = []
    for case in cases:
        c = cards[cards["case"] == case].set_index("policy")
        c = c.assign(normalised=c["mean_jct_s"] / baseline[case])
        c = stats.by_score_then_name(c, c["normalised"], c.index)
        frame = pd.DataFrame(
            {
                "policy": [label(p) for p in c.index],
                "normalised": c["normalised"],
                "mean JCT (h)": c["mean_jct_s"] / 3600,
                "p95 JCT (h)": c["p95_jct_s"] / 3600,
                "makespan (h)": c["makespan_s"] / 3600,
                "comm overhead": c["comm_overhead"],
                "preemptions": c["preemptions"],
            }
        )
        head = f"#### {case}\n\nbest non-oracle heuristic: {best[case]}"
        if bounds is not None:
            k = cases.index(case)
            frame.insert(
                2,
                "position",
                [
                    float(np.mean(positions[str(p)][:, k])) if str(p) in positions else np.nan
                    for p in c.index
                ],
            )
            bound_h = np.mean([v for (cn, _), v in bounds.items() if cn == case]) / 3600
            head += f"; lower bound on mean JCT: {bound_h:.2f} h"
        card_lines.append(head + "\n")
        formats = {
            "normalised": "{:.3f}",
            "position": "{:.3f}",
            "mean JCT (h)": "{:.2f}",
            "p95 JCT (h)": "{:.1f}",
            "makespan (h)": "{:.0f}",
            "comm overhead": "{:.3f}",
            "preemptions": "{:.0f}",
        }
        card_lines.append(markdown_table(frame, formats) + "\n")

    design = design_table(records[records["case"].isin(cases)], baseline, heuristics)
    if bounds is not None:
        design["bound / best"] = [
            np.mean([v for (cn, _), v in bounds.items() if cn == case]) / baseline[case]
            for case in design["case"]
        ]
    if img_path is not None:
        taus = TAUS
        points, cis = stats.performance_profile(mats, taus, reps=min(reps, 1000))
        plot_profiles(
            points,
            cis,
            taus,
            img_path,
            title=f"{suite.name} {split}: performance profiles (95% CIs)",
            label=label,
            highlight=highlight,
        )
    others = {
        name: design_table(rec, stats.baseline_jct(rec, heuristics), heuristics)
        for name, rec in (other_splits or {}).items()
    }
    return _page(
        suite,
        split,
        method,
        reps,
        overall,
        per_family,
        imp_tab,
        design,
        "\n".join(card_lines),
        img_link,
        records,
        others,
        command or leaderboard_command(suite.name, split),
        sorted(_oracles(records)),
        bounds is not None,
    )


def _position_ci(q: np.ndarray, reps: int) -> str:
    """Mean over cases of the per-case position, with its 95% CI."""
    if np.isnan(q).any():
        return "-"
    point, ci = stats.stratified_bootstrap([q], stats.batch_aggregates, reps)
    return _ci(point[1], ci[0][1], ci[1][1])


def plot_profiles(
    points: Mapping[str, np.ndarray],
    cis: Mapping[str, np.ndarray],
    taus: np.ndarray,
    path: str | Path,
    title: str = "",
    label: Callable[[str], str] = str,
    highlight: Sequence[str] = (),
) -> None:
    """A PNG of the performance profiles (matplotlib: an optional extra). The
    ``highlight`` policies (the user's) are drawn last, thicker, and come
    first in the legend; oracles dashed."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(8, 5))
    colours = plt.get_cmap("tab20")  # (20 colours: ``colours(i)`` is the i-th)
    mine = [p for p in highlight if p in points]
    order = [p for p in points if p not in mine] + mine
    handles = {}
    for i, name in enumerate(order):
        y, text = points[name], label(name)
        top = name in mine
        style = "--" if text.endswith("(oracle)") else "-"
        colour = "black" if top and len(mine) == 1 else colours(i % 20)
        (line,) = ax.plot(
            taus,
            y,
            style,
            label=text,
            linewidth=3.2 if top else 1.6,
            color=colour,
            zorder=10 if top else 2,
        )
        ax.fill_between(
            taus,
            cis[name][0],
            cis[name][1],
            color=line.get_color(),
            alpha=0.15 if top else 0.07,
            zorder=9 if top else 1,
        )
        handles[name] = line
    ax.set_xscale("log")
    ax.set_xlim(taus[0], taus[-1])
    ax.set_xlabel("tau: mean JCT / best non-oracle heuristic's on the case")
    ax.set_ylabel("fraction of runs with score <= tau")
    ax.set_ylim(0, 1.02)
    ax.grid(True, which="both", alpha=0.3)
    ax.axvline(1.0, color="black", linewidth=0.8, linestyle=":")
    if title:
        ax.set_title(title)
    legend = [*mine, *(p for p in points if p not in mine)]
    ax.legend(
        [handles[p] for p in legend],
        [label(p) for p in legend],
        fontsize=8,
        loc="lower right",
        ncol=2,
    )
    fig.tight_layout()
    fig.savefig(str(path), dpi=120)
    plt.close(fig)


def _page(
    suite: Suite,
    split: str,
    method: str,
    reps: int,
    overall: pd.DataFrame,
    per_family: pd.DataFrame,
    imp: pd.DataFrame,
    design: pd.DataFrame,
    cards: str,
    img_link: str | None,
    records: pd.DataFrame,
    others: dict[str, pd.DataFrame],
    command: str,
    oracles: Sequence[str],
    with_position: bool,
) -> str:
    cases = suite.select(split)
    case_rows = pd.DataFrame(
        {
            "case": [c.name for c in cases],
            "family": [c.family for c in cases],
            "workload": [_workload_text(c) for c in cases],
            "cluster": [f"{c.shape} {c.fabric}" for c in cases],
            "congestion": [c.congestion for c in cases],
            "seeds": [",".join(map(str, c.seeds)) for c in cases],
            "disjoint from the other splits": [c.disjoint for c in cases],
        }
    )
    n_runs = len(records.drop_duplicates(["case", "seed"]))
    parts = [
        f"# Benchmark: {suite.name}",
        "",
        "<!-- generated by ddl_gym.benchmarks.leaderboard: do not edit by hand -->",
        "",
        "Regenerate this page and its profile plot from nothing (every run again, no "
        f"`--resume`) with:\n\n    {command}\n",
        "Score your own scheduler on the same cases with one call "
        f'(`ddl_gym.benchmarks.evaluate(policy, suite="{suite.name}", split="test").card()`, '
        f"or `ddl-gym benchmark evaluate --suite {suite.name} --policy "
        "NAME|agent:PATH|module:function`): the heuristics' runs ship with the package, so "
        "only the policy's own runs are made; `ddl-gym data fetch --suite "
        f"{suite.name}` gets the traces; `ddl-gym benchmark show --suite {suite.name}` "
        "lists the cases and the suite's hash; "
        "[write_a_scheduler.md](write_a_scheduler.md) shows how to write and report one.",
        "",
        "What `policy` may be: a heuristic name; `agent` (the shipped model); "
        "`portfolio` (the shipped model, Tiresias and Gandiva, one at a time, chosen online "
        "by replaying the cluster's recent jobs: `ddl_gym.agents.portfolio`); "
        "`agent:PATH`, a model saved by `ddl_gym.agents.train` or any SB3 / sb3-contrib zip "
        "(with `env_id` / `env_kwargs`, or `--env-id` / `--env-kwargs`, naming the env it "
        "was trained on: such a model observes one row per server, so it runs on the cases "
        "of its cluster shape and the others are reported as unsupported); "
        "`module:function`; an object with `reset(view, seed)` and `act(view)` (an RLlib "
        "module: wrap its forward pass as "
        "`ddl_gym.agents.external.EnvModelPolicy(predict, env_kwargs, env_id)`); or a plain "
        "`f(view) -> Action`. Each finished (case, seed) is one JSON file in `--out`; "
        "Ctrl-C keeps them and `--resume` skips them; `--backend ray` runs the runs as Ray "
        "tasks. `ddl-gym benchmark datasets --split train` records every heuristic's "
        "episodes as Minari datasets (the `datasets` extra).",
        "",
        "## Protocol",
        "",
        f"* Suite `{suite.name}`, content hash `{_hash_of(suite)}` (pinned in "
        "`tests/test_benchmarks.py`; a changed case means a new suite version). "
        "Splits: train (for your training), validation (for choosing models), "
        "test (report only this).",
        f"* {split} split: {len(cases)} cases x their seeds = {n_runs} runs per policy.",
        "* **Normalised score** of a policy on a case: its mean JCT (mean over the case's "
        "seeds) / the best non-oracle heuristic's mean JCT on that case: a ratio of "
        "means, 1.0 = as good as the best heuristic there, **lower is better**. The "
        f"heuristics of `{suite.name}`: {', '.join(suite.heuristics)}. Oracles "
        f"({', '.join(oracles) or 'none here'}) read true job sizes and are never the baseline.",
        *(
            [
                "* **Position** of a policy on a case: (its mean JCT - the lower bound) / "
                "(the best heuristic's mean JCT - the lower bound): 1 = as good as the best "
                "heuristic, 0 = the lower bound, below 0 impossible. The bound "
                "(`ddl_gym.benchmarks.bounds`, per case and seed) is the larger of each job "
                "alone at its fastest placement and a fluid relaxation of the cluster's GPUs "
                "run shortest-remaining-first; no schedule can beat it, and it need not be "
                "reachable. The leaderboard's position: the mean over cases [95% CI].",
            ]
            if with_position
            else []
        ),
        "* **Aggregates** over the (seeds x cases) score matrix, as rliable defines them "
        "(Agarwal et al., NeurIPS 2021), computed in `ddl_gym.benchmarks.stats` with numpy "
        "(the tests check them equal to `rliable.metrics`; rliable is not needed): "
        "interquartile mean (IQM), mean, "
        "median (of per-case means) and optimality gap (mean of max(score - 1, 0): how far "
        "above the best heuristic), with 95% percentile confidence intervals from a "
        f"stratified bootstrap ({method}, {reps} resamples: rliable's `StratifiedBootstrap` "
        "with `task_bootstrap=True`). "
        "Probability of improvement: that a run of the policy has a lower score than a run "
        "of the other on the same case (ties count half), averaged over cases.",
        "* Heuristics run with their own engine settings (`engine_kwargs()`); every "
        "non-oracle policy is non-clairvoyant.",
        "",
        "## Leaderboard (normalised mean JCT, lower is better)",
        "",
        markdown_table(overall, {"median": "{:.3f}", "mean JCT (h), all runs": "{:.1f}"}),
        "",
    ]
    if img_link:
        parts += [
            "Performance profiles: the fraction of runs whose normalised score is at most "
            "tau (higher and further left is better), with 95% CIs.",
            "",
            f"![performance profiles]({img_link})",
            "",
        ]
    design_formats = {
        "best JCT (h)": "{:.2f}",
        "worst JCT (h)": "{:.2f}",
        "spread": "{:.2f}",
        "multi-server jobs": "{:.0f}",
        "comm overhead of multi-server jobs": "{:.2f}",
    }
    parts += [
        "## Per family (IQM of the normalised score [95% CI])",
        "",
        markdown_table(per_family),
        "",
        "## Probability of improvement over each heuristic",
        "",
        "For the non-heuristic rows and the two best heuristics.",
        "",
        markdown_table(imp),
        "",
        f"## Cases of the {split} split",
        "",
        markdown_table(case_rows),
        "",
        "### Why each case is in (it discriminates)",
        "",
        "A case where every policy ties measures nothing. Spread: worst / best non-oracle "
        "heuristic mean JCT - 1 (the test requires >= 0.10); network effect: the largest, "
        "over the heuristics, ratio of exposed communication to compute time of the jobs "
        "that ran on more than one server.",
        "",
        markdown_table(design, design_formats),
        "",
        # CPU times vary between runs and machines: printed by the command, kept off
        # the page so that regenerating it from nothing gives the same page
        "CPU time per policy: printed by the command that regenerates this page "
        "(it varies between runs and machines).",
        "",
    ]
    for name, table in others.items():
        parts += [
            f"The {name} cases, by the same measure (heuristics only; seeds as listed by "
            "`ddl-gym benchmark show`):",
            "",
            markdown_table(table, design_formats),
            "",
        ]
    parts += [
        "## Score cards per case (means over seeds)",
        "",
        cards,
    ]
    return "\n".join(parts) + "\n"


def _hash_of(suite: Suite) -> str:
    """The registered suite's content hash (a quick page's cases are part of
    it), else the hash of ``suite`` as given."""
    from ddl_gym.benchmarks.provenance import suite_fingerprint

    return suite_fingerprint(suite.name) or suite_hash(suite)


def _workload_text(case: Any) -> str:
    w = case.workload
    src = w.source.rsplit("/", 1)[-1]
    bits = [src]
    if w.part != (0.0, 1.0):
        bits.append(f"jobs {w.part[0]:.0%}-{w.part[1]:.0%}")
    if w.head is not None:
        bits.append(f"first {w.head}")
    if w.seed_offset:
        bits.append(f"seed +{w.seed_offset}")
    if w.catalogue_iter_time:
        bits.append("catalogue iteration times")
    bits.append(f"arrivals x{w.arrival_scale:g}")
    return ", ".join(bits)


def write_leaderboard(
    suite_name: str = "ddl-gym-v1",
    split: str = "test",
    out_dir: str | Path = "runs/benchmark",
    doc: str | Path = DOC,
    img: str | Path = IMG,
    agent: bool = False,
    extra: Sequence[str] = (),
    design_splits: Sequence[str] = ("validation",),
    resume: bool = True,
    progress: bool = True,
    quick: bool = False,
    reps: int = stats.REPS,
) -> Path:
    """Run the suite's heuristics and every oracle (+ with ``agent`` the
    shipped agent and its replay portfolio, + ``extra`` policy specs: the
    user's, highlighted in the plot) on ``split``, and the heuristics on
    ``design_splits``, compute the lower bound of every (case, seed), and
    write the page; returns its path. With ``progress`` the time it took is
    printed (stderr)."""
    wall0, cpu0 = time.perf_counter(), time.process_time()
    suite = get_suite(suite_name)
    heuristics = list(suite.heuristics)
    extra = list(dict.fromkeys(extra))
    policies = [*heuristics, *ORACLES, *(["agent", "portfolio"] if agent else []), *extra]
    policies = list(dict.fromkeys(policies))  # a named heuristic or oracle runs once
    out = Path(out_dir) / suite_name / ("quick" if quick else split)
    records = run_policies(policies, suite_name, split, out, resume, progress, quick)
    other_splits = {}
    if not quick:
        for name in design_splits:
            other = Path(out_dir) / suite_name / name
            recs = run_policies(heuristics, suite_name, name, other, resume, progress)
            other_splits[name] = recs
    doc_path, img_path = Path(doc), Path(img)
    img_path.parent.mkdir(parents=True, exist_ok=True)
    split_name = split
    if quick:
        suite = dataclasses.replace(suite, cases=suite.quick)
        records = records.assign(split="test")
        split_name = "test"
    bounds = run_bounds(suite, records)
    try:
        link = str(img_path.resolve().relative_to(doc_path.resolve().parent))
    except ValueError:
        link = str(img_path.resolve())
    command = leaderboard_command(suite_name, split, agent, extra, quick, reps, doc, img)
    page = build_report(
        records, suite, split_name, img_path, link, reps, other_splits, bounds, extra, command
    )
    doc_path.parent.mkdir(parents=True, exist_ok=True)
    doc_path.write_text(page)
    if progress:
        wall, cpu = time.perf_counter() - wall0, time.process_time() - cpu0
        print(f"{command}: {wall / 60:.1f} min wall, {cpu / 60:.1f} CPU-min", file=sys.stderr)
        per_policy = records.groupby("policy")["cpu_s"].sum().sort_values()
        print(
            f"CPU of the {split_name} split per policy (s, simulation only): "
            + ", ".join(f"{p} {v:.0f}" for p, v in per_policy.items()),
            file=sys.stderr,
        )
    return doc_path
