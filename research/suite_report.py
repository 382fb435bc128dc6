"""Trained models (several training seeds each) on a benchmark split, scored
as the leaderboard scores policies (``ddl_gym.benchmarks.stats``).

Each model is evaluated on every case and case seed of the split (records
cached per model under ``out_dir``, ``--resume`` style); the runs of a
model's training seeds are pooled into one (runs x cases) matrix (run =
training seed x case seed), so the stratified bootstrap resamples cases,
then those runs. Beside the normalised mean JCT: the share of cases where
the model is no worse than the best heuristic (per-case mean <= 1.00), the
per-family IQM, and p95 JCT and makespan over those of the case's best
heuristic (by mean JCT), averaged over cases.

    python -m research.suite_report --split test --model dagger=runs/dagger-s0/best.zip,...
"""

from __future__ import annotations

import argparse
import json
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
from ddl_gym.baselines import HEURISTICS

from ddl_gym.benchmarks import evaluate
from ddl_gym.benchmarks.evaluate import slug
from ddl_gym.benchmarks.leaderboard import run_policies
from ddl_gym.benchmarks.stats import aggregate_table, baseline_jct, iqm, normalised, score_matrix
from ddl_gym.cli.common import CliError, parse_seeds


def _factory(
    path: str | Path, portfolio: bool = False, options: Mapping[str, Any] | None = None
) -> Any:
    """A zero-argument factory (``resolve_policy`` calls it once per run):
    the model, or with ``portfolio`` the replay portfolio around it
    (``agents.portfolio.make``, ``options`` its ``ReplayPortfolio`` fields)."""
    if portfolio:
        from ddl_gym.agents.portfolio import make

        return lambda: make(model=str(path), **(options or {}))
    from ddl_gym.agents.policy import load_policy

    return lambda: load_policy(path)


def model_records(
    name: str,
    paths: Sequence[str | Path],
    suite: str,
    split: str,
    out_dir: Path,
    seeds: Sequence[int] | None = None,
    portfolio: bool = False,
    options: Mapping[str, Any] | None = None,
) -> pd.DataFrame:
    """Every training seed's runs, pooled: ``seed`` = 100 * model index + case seed."""
    frames = []
    for i, path in enumerate(paths):
        rec = evaluate(
            _factory(path, portfolio, options),
            suite=suite,
            split=split,
            seeds=seeds,
            name=name,
            out_dir=out_dir / slug(name) / f"model{i}",
            resume=True,
            progress=False,
        ).records
        frames.append(rec.assign(seed=rec["seed"] + 100 * i, clairvoyant=False))
    return pd.concat(frames, ignore_index=True)


def report(
    models: Mapping[str, Sequence[str | Path]],
    suite: str = "ddl-gym-v1",
    split: str = "test",
    out_dir: str | Path = "runs/benchmark",
    also: Sequence[str] = ("agent", "gandiva", "tiresias"),
    reps: int = 2000,
    seeds: Sequence[int] | None = None,
    portfolios: Sequence[str] = (),
    portfolio_options: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """Scores of ``models`` (name -> model paths, one per training seed) and
    of the policies ``also`` on ``split``; the heuristics' records are read
    from (or written to) ``out_dir/suite/split/<policy>`` as the leaderboard's.
    ``seeds``: every case on these seeds instead of its own (more runs per
    validation case, say); the records then go to ``split_seeds_...``
    folders, apart from the leaderboard's. ``portfolios``: the names in
    ``models`` to run inside the replay portfolio (``agents.portfolio``),
    with ``portfolio_options`` (its ``ReplayPortfolio`` fields, e.g.
    ``{"warmup_jobs": 10}``) if given."""
    folder = split if seeds is None else f"{split}_seeds_" + "_".join(str(s) for s in seeds)
    root = Path(out_dir) / suite / folder
    heur = run_policies(
        sorted(set(HEURISTICS) | ({*also} - {"agent"})),
        suite,
        split,
        root,
        True,
        False,
        seeds=seeds,
    )
    frames = [heur]
    if "agent" in also:
        frames.append(run_policies(["agent"], suite, split, root, True, False, seeds=seeds))
    for name, paths in models.items():
        frames.append(
            model_records(
                name,
                paths,
                suite,
                split,
                Path(out_dir) / "models" / folder,
                seeds,
                portfolio=name in portfolios,
                options=portfolio_options,
            )
        )
    records = pd.concat(frames, ignore_index=True)
    records["clairvoyant"] = records["clairvoyant"].astype(bool)
    base = baseline_jct(heur)
    best_of = base.attrs["best"]
    norm = normalised(records, base)
    names = [*models, *also]
    matrices = {n: score_matrix(norm[norm["policy"] == n])[0] for n in names}
    table, method = aggregate_table(matrices, reps)
    cards = records.groupby(["policy", "case"])[["mean_jct_s", "p95_jct_s", "makespan_s"]].mean()
    card = {m: cards[m].to_dict() for m in ("p95_jct_s", "makespan_s")}
    out: dict[str, Any] = {"split": split, "ci": method, "best_heuristic": best_of, "policies": {}}
    for n in names:
        mine = norm[norm["policy"] == n]
        per_case = mine.groupby("case")["normalised_jct"].mean()
        ratios = {
            m: float(np.mean([card[m][(n, c)] / card[m][(best_of[c], c)] for c in per_case.index]))
            for m in ("p95_jct_s", "makespan_s")
        }
        fam = {f: iqm(score_matrix(g)[0]) for f, g in mine.groupby("family", sort=False)}
        row = table[table["policy"] == n].iloc[0].drop("policy").to_dict()
        out["policies"][n] = {
            **{k: float(v) for k, v in row.items()},
            "cases_no_worse": float((per_case <= 1.0).mean()),
            "per_case": per_case.round(3).to_dict(),
            "per_family_iqm": fam,
            "p95_over_best": ratios["p95_jct_s"],
            "makespan_over_best": ratios["makespan_s"],
            "mean_jct_h": float(mine["mean_jct_s"].mean() / 3600),
        }
    return out


def _named_paths(spec: str) -> tuple[str, list[str]]:
    """``"NAME=a.zip,b.zip"`` -> ``("NAME", ["a.zip", "b.zip"])``."""
    name, _, paths = spec.partition("=")
    return name, [p for p in paths.split(",") if p]


def main(argv: Sequence[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description="Trained models (several seeds) on a benchmark split.")
    ap.add_argument("--split", default="test")
    ap.add_argument("--suite", default="ddl-gym-v1")
    ap.add_argument(
        "--model", action="append", default=[], help="NAME=PATH[,PATH...] (one per training seed)"
    )
    ap.add_argument(
        "--also",
        default="agent,gandiva,tiresias",
        help="other policies to score beside (comma-separated)",
    )
    ap.add_argument("--out", type=Path, help="write the JSON here too")
    ap.add_argument(
        "--portfolio",
        action="append",
        default=[],
        help="NAME=PATH[,PATH...]: those models inside the replay portfolio (agents.portfolio)",
    )
    ap.add_argument(
        "--portfolio-options",
        type=json.loads,
        help="the portfolios' portfolio.make() arguments as JSON (ReplayPortfolio fields, "
        "heuristic_options), e.g. '{\"warmup_jobs\": 10}'",
    )
    ap.add_argument(
        "--seeds", help="comma-separated seeds, a-b ranges allowed (default: each case's)"
    )
    args = ap.parse_args(argv)
    try:
        seeds = parse_seeds(args.seeds) if args.seeds else None
    except CliError as e:
        ap.error(str(e))
    models = dict(_named_paths(spec) for spec in args.model)
    portfolios = dict(_named_paths(spec) for spec in args.portfolio)
    models.update(portfolios)
    also = [p for p in args.also.split(",") if p]
    result = report(
        models,
        args.suite,
        args.split,
        also=also,
        seeds=seeds,
        portfolios=list(portfolios),
        portfolio_options=args.portfolio_options,
    )
    text = json.dumps(result, indent=1)
    if args.out:
        args.out.write_text(text + "\n")
    print(text)


if __name__ == "__main__":
    main()
