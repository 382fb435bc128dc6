"""Teachers for multi-teacher DAgger: the best heuristic per training case.

No heuristic is best everywhere (Gandiva on the seed's traces, Tiresias on
Pollux', Dally on Philly at 512 GPUs), so each training case of a benchmark
suite gets its own teacher: the heuristic of ``baselines.HEURISTICS`` with the
lowest mean JCT on that case, over the case's seeds, simulated under the
*agent's* engine settings (ticks, restore cost, no leases): the settings the
teacher then demonstrates under inside the env. Only the suite's **train**
split is used to choose.

``label`` is the relabelling step of DAgger: the teacher's decision on the
state the env is in now (whoever brought it there), as the env's discrete
action, or None when the env cannot express it (a job outside the K rows, a
preemption beyond the budget).
"""

from __future__ import annotations

import json
import warnings
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from ddl_gym.agents.config import EnvConfig
from ddl_gym.baselines import HEURISTICS, make_policy

from ddl_gym.benchmarks.suite import Case, get_suite
from ddl_gym.engine import simulate


@dataclass(frozen=True)
class TeacherChoice:
    """The teacher of one training case and every candidate's mean JCT (s)."""

    case: str
    teacher: str
    mean_jct_s: dict[str, float]


def case_jct(case: Case, name: str, env: EnvConfig, seeds: Sequence[int]) -> float:
    """Mean over ``seeds`` of heuristic ``name``'s mean JCT on ``case`` under
    the env's congestion (the case's), ticks and restore cost."""
    total = 0.0
    for seed in seeds:
        policy = make_policy(name)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # the env's settings override the policy's
            res = simulate(
                case.workload.build(seed),
                case.cluster(),
                policy,
                seed=seed,
                congestion=case.congestion,
                tick_s=env.tick_s,
                lease_s=env.lease_s,
                restore_s_per_gpu=env.restore_s_per_gpu,
                record_series=False,
                record_placements=False,
            )
        total += float(res.summary["mean_jct_s"])
    return total / len(seeds)


def choose_teachers(
    env: EnvConfig,
    suite: str = "ddl-gym-v1",
    candidates: Sequence[str] = HEURISTICS,
    cases: Sequence[str] | None = None,
    progress: bool = False,
) -> dict[str, TeacherChoice]:
    """The best of ``candidates`` per case of ``suite``'s train split
    (``cases``: only these); ties go to the earlier candidate."""
    chosen: dict[str, TeacherChoice] = {}
    for case in get_suite(suite).select("train"):
        if cases is not None and case.name not in cases:
            continue
        jct = {name: case_jct(case, name, env, case.seeds) for name in candidates}
        best = min(candidates, key=lambda n: (jct[n], list(candidates).index(n)))
        chosen[case.name] = TeacherChoice(case.name, best, jct)
        if progress:
            print(f"teacher for {case.name}: {best} ({jct[best] / 3600:.2f} h)", flush=True)
    return chosen


def save_teachers(choices: dict[str, TeacherChoice], path: str | Path) -> None:
    Path(path).write_text(json.dumps([asdict(c) for c in choices.values()], indent=1) + "\n")


def load_teachers(path: str | Path) -> dict[str, TeacherChoice]:
    rows = json.loads(Path(path).read_text())
    return {r["case"]: TeacherChoice(r["case"], r["teacher"], r["mean_jct_s"]) for r in rows}


def cached_teachers(
    env: EnvConfig, path: str | Path, suite: str = "ddl-gym-v1", **kw: Any
) -> dict[str, TeacherChoice]:
    """``choose_teachers``, read from ``path`` if there, else computed and saved."""
    p = Path(path)
    if p.is_file():
        return load_teachers(p)
    choices = choose_teachers(env, suite, **kw)
    p.parent.mkdir(parents=True, exist_ok=True)
    save_teachers(choices, p)
    return choices


def label(teacher: Any, env: Any) -> int | None:
    """The teacher's decision on ``env``'s current state as a valid discrete
    action (``env``: the ``ClusterEnv`` itself, not a wrapper), or None when
    the env cannot take it. Heuristics keep per-episode state (Tiresias'
    attained-service queues, Gandiva's moves): call this at every decision
    of the episode, after ``teacher.reset(env.view)``, so that state follows
    the trajectory actually taken."""
    mask = env.action_masks()
    try:
        a = env.action_index(teacher.act(env.view))
    except ValueError:
        return None
    return a if 0 <= a < len(mask) and mask[a] else None
