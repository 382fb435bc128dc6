"""Which observation features a trained set-observation model relies on.

Permutation importance at run time: in every observation the values of one
group of features are shuffled among the rows present (pending rows among
the pending ones, running among the running; one permutation per table, so
a job's features within the group stay together), which keeps their spread
but cuts their tie to the job. The model is then scored on a benchmark split
as usual; the rise of the IQM over the unshuffled model says how much its
decisions use that group. It measures reliance, not whether training with
the group would help.

    python -m research.feature_ablation --model agents/models/default.zip --split validation
"""

from __future__ import annotations

import argparse
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
from ddl_gym.agents.policy import AgentPolicy, load_policy
from ddl_gym.baselines import HEURISTICS

from ddl_gym.benchmarks import evaluate
from ddl_gym.benchmarks.evaluate import slug
from ddl_gym.benchmarks.leaderboard import markdown_table, run_policies
from ddl_gym.benchmarks.stats import baseline_jct, iqm, normalised, score_matrix
from ddl_gym.env.set_observation import SET_PENDING_FIELDS, SET_RUNNING_FIELDS, split_set_obs

_TRAITS = ("log_grad_bytes", "log_buckets", "backward_share", "log_iter_time")

# group -> (pending fields, running fields)
FEATURE_GROUPS: dict[str, tuple[tuple[str, ...], tuple[str, ...]]] = {
    "attained service": (("attained_per_gpu",), ("attained_per_gpu",)),
    "waited time": (("waited_1h", "waited_24h", "age_24h"), ()),
    "predicted slowdown": (
        ("slowdown_machine", "slowdown_rack", "slowdown_network"),
        ("slowdown", "efficiency"),
    ),
    "model traits": (_TRAITS, _TRAITS),
    "job size": (
        ("gpus_share", "gpus_server", "fits_machine", "fits_rack"),
        ("gpus_share", "gpus_server"),
    ),
    "queue rank": (("queue_rank",), ()),
    "run time": ((), ("running_for_1h", "running_for_24h")),
    "preemptions so far": (("preemptions",), ("preemptions",)),
}


class ShuffledAgent(AgentPolicy):
    """An ``AgentPolicy`` whose network sees ``group``'s features shuffled
    among the rows of each observation (seeded by ``reset``)."""

    def __init__(self, agent: AgentPolicy, group: str) -> None:
        super().__init__(agent.model, agent.config, f"{agent.name}-shuffled-{slug(group)}")
        pending, running = FEATURE_GROUPS[group]
        self._cols = (
            np.array([SET_PENDING_FIELDS.index(f) for f in pending], dtype=np.intp),
            np.array([SET_RUNNING_FIELDS.index(f) for f in running], dtype=np.intp),
        )
        self._shuffle_rng = np.random.default_rng(0)

    def reset(self, view: Any, seed: int | None = None) -> None:
        super().reset(view, seed)
        self._shuffle_rng = np.random.default_rng(seed)

    def choose(self, obs: np.ndarray, mask: np.ndarray) -> int:
        return super().choose(self.shuffle(obs), mask)

    def shuffle(self, obs: np.ndarray) -> np.ndarray:
        env = self.config.env
        out = obs.copy()
        tables = split_set_obs(out, env.K, env.M)[:2]
        for table, cols in zip(tables, self._cols, strict=True):
            rows = np.flatnonzero(table[:, 0] > 0)  # field 0: "present"
            if len(cols) and len(rows) > 1:
                perm = rows[self._shuffle_rng.permutation(len(rows))]
                table[np.ix_(rows, cols)] = table[np.ix_(perm, cols)]
        return out


def _factory(model: str | Path, group: str) -> Any:
    """A zero-argument factory (``evaluate`` builds one policy per run)."""

    def make() -> AgentPolicy:
        agent = load_policy(model)
        return agent if group == "none" else ShuffledAgent(agent, group)

    return make


def ablation(
    model: str | Path,
    groups: Sequence[str] = tuple(FEATURE_GROUPS),
    suite: str = "ddl-gym-v1",
    split: str = "validation",
    out_dir: str | Path = "runs/benchmark",
) -> pd.DataFrame:
    """Per group (and ``none``): the split's IQM and per-case scores."""
    root = Path(out_dir)
    heur = run_policies(list(HEURISTICS), suite, split, root / suite / split, True, False)
    base = baseline_jct(heur)
    rows = []
    for group in ("none", *groups):
        records = evaluate(
            _factory(model, group),
            suite=suite,
            split=split,
            name=f"{Path(model).stem}-shuffled-{slug(group)}",
            out_dir=root / "ablation" / split / slug(str(model)) / slug(group),
            resume=True,
            progress=False,
        ).records
        norm = normalised(records, base)
        per_case = norm.groupby("case")["normalised_jct"].mean().round(3).to_dict()
        rows.append({"group": group, "iqm": iqm(score_matrix(norm)[0]), **per_case})
    return pd.DataFrame(rows)


def main(argv: Sequence[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description="Permutation importance of observation features.")
    ap.add_argument("--model", default="agents/models/default.zip")
    ap.add_argument("--split", default="validation")
    ap.add_argument("--suite", default="ddl-gym-v1")
    ap.add_argument("--groups", default="", help="comma-separated (default: all)")
    args = ap.parse_args(argv)
    groups = [g for g in args.groups.split(",") if g] or list(FEATURE_GROUPS)
    unknown = sorted(set(groups) - set(FEATURE_GROUPS))
    if unknown:
        ap.error(f"unknown feature groups {unknown}; known: {sorted(FEATURE_GROUPS)}")
    table = ablation(args.model, groups, args.suite, args.split)
    print(markdown_table(table.round(3)))


if __name__ == "__main__":
    main()
