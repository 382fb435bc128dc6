"""Distilling the lookahead planner into the set policy (DAgger, planner as teacher).

The planner (``ddl_gym.baselines.planner``) chooses, per decision instant,
which heuristic to follow by rollouts of the simulator on sampled futures:
non-clairvoyant, but tens to hundreds of milliseconds per planned instant.
Here a network learns to act as it does, on the states its own actions
lead to (expert iteration in its DAgger form), with the machinery of
``agents.dagger``:

* every episode is a benchmark train case of ``ddl-gym-v3`` (the cases of
  ``ddl_gym/Bench-v3``'s train split: ``dagger.case_env``), cut to a random
  window of ``window_s`` seconds of arrivals (the planner's cost grows with
  the episode);
* iteration ``i`` rolls out a mixture (``dagger.rollout``): the planner's
  action with probability ``beta0 * beta_decay ** i``, the current
  network's otherwise; every visited state is labelled with the planner's
  decision on it (``teachers.label``), which follows the trajectory taken
  (its candidates' state is the run's; ``tests/test_distill.py`` checks
  that on a trajectory the planner drove the labels are its actions);
* the labels of all iterations are aggregated and the set policy fitted
  to them (``dagger.fit``), from ``init`` (default: the shipped model,
  whose run-time rules its saved config keeps) or a fresh network;
* after every iteration the network is scored on the validation cases
  (``validation_cases``, default: the whole validation split) against the
  shipped reference records of the suite's heuristics: IQM of the mean JCT
  over the best heuristic's, per (case, seed). The test split is never read.

``scripts/distill.py`` is the command (``--quick``: :data:`QUICK`).
"""

from __future__ import annotations

import argparse
import json
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
from ddl_gym.agents.config import EnvConfig, PPOConfig, TrainConfig
from ddl_gym.agents.dagger import (
    _agent_env,
    _cpu_s,
    case_env,
    finalize,
    fit,
    greedy_action,
    load_init,
    new_model,
    rollout,
)
from ddl_gym.agents.policy import DEFAULT_MODEL


@dataclass
class DistillConfig:
    seed: int = 0
    suite: str = "ddl-gym-v3"
    cases: list[str] = field(default_factory=list)  # train cases to use (empty: all)
    # the teacher's settings (``PlannerPolicy``'s fields: candidates, horizon_s, futures, ...)
    planner: dict[str, Any] = field(default_factory=dict)
    iterations: int = 3
    beta0: float = 1.0
    beta_decay: float = 0.5
    episodes_per_iteration: int = 8  # (case, seed) rollouts per iteration, cycling the cases
    window_s: float | None = 24 * 3600.0  # each episode: a random window of arrivals
    max_episode_steps: int = 3000
    samples_per_episode: int = 800  # labelled states kept per rollout (random subset)
    epochs: int = 4
    batch_size: int = 256
    learning_rate: float = 1e-4
    hidden: int = 64  # a fresh network's width (``init`` empty)
    # start from this saved set-policy model ("": a fresh network with the agent's env)
    init: str = str(DEFAULT_MODEL)
    validate: bool = True
    validation_cases: list[str] = field(default_factory=list)  # (empty: the whole split)


#: the ``--quick`` preset: two small train cases, a quick planner, two
#: iterations, scored on two small validation cases
QUICK: dict[str, Any] = {
    "cases": ["pollux-1@t4x64", "sia-2@t4x16"],
    "planner": {"futures": 2, "horizon_s": 1800.0},
    "iterations": 2,
    "episodes_per_iteration": 2,
    "window_s": 12 * 3600.0,
    "max_episode_steps": 400,
    "samples_per_episode": 400,
    "epochs": 3,
    "validation_cases": ["tiresias-60@gv100x16", "pollux-6@t4x64"],
}


def env_of(cfg: DistillConfig) -> tuple[EnvConfig, TrainConfig]:
    """The env the episodes run in and the config saved beside each model:
    ``init``'s (its run-time rules travel with it) or the agent's default."""
    if cfg.init:
        from ddl_gym.agents.policy import config_path

        tcfg = TrainConfig.load(config_path(cfg.init))
        if tcfg.env.obs != "set":
            raise ValueError(f"init {cfg.init}: a set-policy model is needed, not {tcfg.env.obs!r}")
        return tcfg.env, tcfg
    env = _agent_env()
    ppo = PPOConfig(algo="maskable_ppo", policy="set", hidden=cfg.hidden)
    return env, TrainConfig(env=env, ppo=ppo, total_timesteps=0, seed=cfg.seed)


def make_teacher(cfg: DistillConfig) -> Any:
    from ddl_gym.baselines.planner import PlannerPolicy

    return PlannerPolicy(**{"seed": cfg.seed, **cfg.planner})


def validation_scores(
    factory: Callable[[], Any],
    suite: str = "ddl-gym-v3",
    cases: Sequence[str] | None = None,
    name: str = "candidate",
) -> dict[str, Any]:
    """``factory``'s policy on ``suite``'s validation cases (``cases``: only
    these) against the shipped reference records of the suite's heuristics:
    per (case, seed) its mean JCT over the best heuristic's on that case
    (mean over seeds), with the IQM and mean over all runs, and CPU time."""
    from ddl_gym.benchmarks import evaluate
    from ddl_gym.benchmarks.reference import load_reference
    from ddl_gym.benchmarks.stats import baseline_jct, iqm, normalised, score_matrix
    from ddl_gym.benchmarks.suite import get_suite

    scores = evaluate(
        factory, suite=suite, split="validation", progress=False, name=name, cases=cases
    )
    rec = scores.records.assign(clairvoyant=False)
    ref = load_reference(suite).split("validation").frame()
    ref = ref[ref["case"].isin(set(rec["case"]))]
    base = baseline_jct(ref, get_suite(suite).heuristics)
    norm = normalised(rec, base)
    matrix, _ = score_matrix(norm)
    return {
        "iqm": iqm(matrix),
        "mean": float(matrix.mean()),
        "per_case": norm.groupby("case")["normalised_jct"].mean().to_dict(),
        "best_heuristic": base.attrs["best"],
        "mean_jct_h": float(rec["mean_jct_s"].mean() / 3600),
        "cpu_s": float(rec["cpu_s"].sum()),
    }


def _loader(path: Path) -> Callable[[], Any]:
    """A zero-argument factory of the saved model's policy (what ``evaluate`` calls per run)."""
    from ddl_gym.agents.policy import load_policy

    return lambda: load_policy(path)


def check(cfg: DistillConfig) -> None:
    """Refuse bad settings before any run (ValueError, one line naming the setting)."""
    from ddl_gym.benchmarks.suite import get_suite

    suite = get_suite(cfg.suite)
    for key, split in (("cases", "train"), ("validation_cases", "validation")):
        names = {c.name for c in suite.select(split)}
        unknown = sorted(set(getattr(cfg, key)) - names)
        if unknown:
            raise ValueError(f"{key}: {unknown} are not {split} cases of {cfg.suite}")
    for key in ("iterations", "episodes_per_iteration", "max_episode_steps", "samples_per_episode"):
        if getattr(cfg, key) < 1:
            raise ValueError(f"{key} must be >= 1, got {getattr(cfg, key)}")
    make_teacher(cfg)  # the planner's own checks
    env_of(cfg)


def run_distill(cfg: DistillConfig, out: str | Path, progress: bool = True) -> Path:
    """DAgger with the planner as teacher per ``cfg`` into ``out``; returns
    the best model on validation (the last one without validation)."""
    from ddl_gym.agents.threads import one_thread

    from ddl_gym.benchmarks.suite import get_suite

    one_thread()
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    (out / "distill_config.json").write_text(json.dumps(asdict(cfg), indent=2) + "\n")
    say = print if progress else (lambda *a, **k: None)
    cpu0, wall0 = _cpu_s(), time.perf_counter()
    check(cfg)
    env_cfg, tcfg = env_of(cfg)
    train = get_suite(cfg.suite).select("train")
    cases = [c for c in train if not cfg.cases or c.name in cfg.cases]
    runs = [(c, s) for c in cases for s in c.seeds]
    rng = np.random.default_rng(cfg.seed)
    order = rng.permutation(len(runs))
    model = load_init(cfg.init) if cfg.init else new_model(env_cfg, cfg.hidden, cfg.seed)
    data_obs: list[np.ndarray] = []
    data_masks: list[np.ndarray] = []
    data_labels: list[int] = []
    curve: list[dict[str, Any]] = []
    k = 0
    for it in range(cfg.iterations):
        beta = cfg.beta0 * cfg.beta_decay**it
        act = greedy_action(model)
        agg = {"steps": 0, "labelled": 0, "unlabelled": 0, "agent_steps": 0, "agree": 0}
        plan = {"decisions": 0, "planned": 0, "rollouts": 0, "cpu_s": 0.0}
        t0 = _cpu_s()
        for _ in range(cfg.episodes_per_iteration):
            case, seed = runs[order[k % len(runs)]]
            k += 1
            env = case_env(case, env_cfg, seed, window_s=cfg.window_s)
            teacher = make_teacher(cfg)
            ep = rollout(env, teacher, act, beta, rng, cfg.max_episode_steps, seed=seed)
            keep = np.arange(len(ep.labels))
            if len(keep) > cfg.samples_per_episode:
                keep = np.sort(rng.choice(keep, cfg.samples_per_episode, replace=False))
            data_obs += [ep.obs[i] for i in keep]
            data_masks += [ep.masks[i] for i in keep]
            data_labels += [ep.labels[i] for i in keep]
            agg["steps"] += ep.steps
            agg["labelled"] += len(ep.labels)
            agg["unlabelled"] += ep.unlabelled
            agg["agent_steps"] += ep.agent_steps
            agg["agree"] += sum(a == b for a, b in zip(ep.labels, ep.taken, strict=True))
            for key in plan:
                plan[key] += getattr(teacher.stats, key)
        cpu_roll = _cpu_s() - t0
        labels = np.asarray(data_labels, dtype=np.int64)
        t1 = _cpu_s()
        fitted = fit(model, np.stack(data_obs), np.stack(data_masks), labels, cfg, cfg.seed + it)  # type: ignore[arg-type]
        cpu_fit = _cpu_s() - t1
        path = out / f"iter{it}.zip"
        model.save(str(path))
        tcfg.save_json(path.with_suffix(".json"))
        row: dict[str, Any] = {
            "iteration": it,
            "beta": beta,
            **agg,
            "dataset": len(labels),
            "wait_share": float(np.mean(labels == 0)),
            **fitted,
            "teacher": plan,
            "cpu_s_rollouts": cpu_roll,
            "cpu_s_fit": cpu_fit,
        }
        if cfg.validate:
            t2 = _cpu_s()
            row["validation"] = validation_scores(
                _loader(path), cfg.suite, cfg.validation_cases or None
            )
            row["cpu_s_validation"] = _cpu_s() - t2
        curve.append(row)
        say(json.dumps({k2: v for k2, v in row.items() if k2 != "validation"}), flush=True)
        if cfg.validate:
            say(f"iteration {it}: validation IQM {row['validation']['iqm']:.3f}", flush=True)
        (out / "curve.json").write_text(json.dumps(curve, indent=1) + "\n")
    chosen = finalize(out, cpu_s=_cpu_s() - cpu0, wall_s=time.perf_counter() - wall0)
    say(f"best iteration on validation: {chosen}; {_cpu_s() - cpu0:.0f} CPU-s")
    return out / "best.zip"


def load_config(path: str | Path) -> DistillConfig:
    """A ``DistillConfig`` from JSON (unknown keys: one line naming them)."""
    data = json.loads(Path(path).read_text())
    unknown = sorted(set(data) - set(DistillConfig.__dataclass_fields__))
    if unknown:
        raise ValueError(f"{path}: unknown distill setting(s) {unknown}")
    return DistillConfig(**data)


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description="DAgger with the lookahead planner as teacher.")
    ap.add_argument("--out", type=Path, required=True, help="run directory")
    ap.add_argument("--config", type=Path, help="JSON DistillConfig (defaults otherwise)")
    ap.add_argument("--quick", action="store_true", help="the small preset (agents.distill.QUICK)")
    ap.add_argument("--seed", type=int, help="override seed")
    ap.add_argument("--iterations", type=int, help="override iterations")
    ap.add_argument("--no-validate", action="store_true", help="skip the validation scores")
    args = ap.parse_args(argv)
    try:
        cfg = load_config(args.config) if args.config else DistillConfig()
        if args.quick:
            cfg = DistillConfig(**{**asdict(cfg), **QUICK})
        if args.seed is not None:
            cfg.seed = args.seed
        if args.iterations is not None:
            cfg.iterations = args.iterations
        if args.no_validate:
            cfg.validate = False
        check(cfg)
    except (OSError, ValueError, TypeError, KeyError) as err:
        print(f"error: {err}")
        return 2
    run_distill(cfg, args.out)
    return 0
