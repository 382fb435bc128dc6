"""Multi-teacher DAgger on a benchmark suite's train split.

One-shot cloning of one teacher (the shipped model: Gandiva) leaves the
agent where that teacher is good and where it is not. Here:

* every training case of the suite gets its own teacher, the best heuristic
  there (``agents.teachers``; chosen on the train split only);
* iteration 0 rolls out the teachers themselves; iteration ``i`` rolls out
  a mixture: at each decision the teacher's action with probability
  ``beta_i = beta0 * beta_decay ** i``, the current agent's otherwise;
* every visited state is labelled with the case teacher's decision *on that
  state* (``teachers.label``: the teacher acting on the same engine view),
  so the agent learns what to do in the states its own mistakes lead to;
* the labels of all iterations are aggregated and the set policy
  (``agents.set_policy``) is fitted to them (masked cross-entropy), going on
  from the previous iteration's weights;
* after every iteration the agent is scored on the suite's validation split
  (IQM of the normalised mean JCT, the benchmark's statistic); the run keeps
  the best iteration (``best.zip``). The test split is never touched here.

Each saved model (``iterN.zip``, ``best.zip``) has a ``TrainConfig`` beside
it, so ``load_policy`` and ``ddl-gym benchmark evaluate --policy agent:PATH``
run it like any trained model.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import resource
import shutil
import time
import tomllib
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
from ddl_gym.agents.config import EnvConfig, PPOConfig, TrainConfig, _build

MODELS = Path(__file__).resolve().parent / "models"


def _agent_env() -> EnvConfig:
    # the shipped model's env: 64+64 rows, preemption (1 per instant), 30-min ticks
    return EnvConfig(
        obs="set",
        K=64,
        M=64,
        tick_s=1800.0,
        preempt=True,
        preempt_budget=1,
        window_s=None,
        max_steps=None,
    )


@dataclass
class DaggerConfig:
    seed: int = 0
    suite: str = "ddl-gym-v1"
    # candidate teachers (default: every non-oracle heuristic) and the file
    # caching the choice per training case (computed if missing)
    candidates: list[str] = field(default_factory=list)
    teachers_file: str = str(MODELS / "teachers_ddl-gym-v1.json")
    cases: list[str] = field(default_factory=list)  # train cases to use (empty: all)
    iterations: int = 3
    beta0: float = 1.0
    beta_decay: float = 0.5
    episodes_per_iteration: int = 12  # (case, seed) rollouts per iteration, cycling the cases
    max_episode_steps: int = 3000  # decisions per rollout (whole cases are long)
    samples_per_episode: int = 800  # labelled states kept per rollout (random subset)
    # arrival-rate randomisation: each rollout's arrival rate times a factor
    # drawn log-uniformly in [1/(1+j), 1+j] (0: the case's own rate)
    arrival_jitter: float = 0.0
    epochs: int = 4  # over the aggregate, per iteration
    batch_size: int = 256
    learning_rate: float = 1e-3
    hidden: int = 64
    validate: bool = True  # score every iteration on the validation split
    validation_dir: str = "runs/benchmark/ddl-gym-v1/validation"  # heuristics' records
    # start from this saved set-policy model instead of a fresh network ("": fresh)
    init: str = ""
    # per train case, a teacher replacing the cached best heuristic: a heuristic
    # name, or "self": the ``init`` network as it was (frozen, greedy), so the
    # cases it already handles keep their behaviour while others are taught
    teacher_override: dict[str, str] = field(default_factory=dict)
    env: EnvConfig = field(default_factory=_agent_env)

    @classmethod
    def load(cls, path: str | Path) -> DaggerConfig:
        with Path(path).open("rb") as f:
            return _build(cls, tomllib.load(f), "dagger config")


@dataclass
class Episode:
    """One rollout: the labelled states and what happened."""

    obs: list[np.ndarray]
    masks: list[np.ndarray]
    labels: list[int]
    taken: list[int]  # the action executed at each labelled state
    actions: list[int] = field(default_factory=list)  # every executed action, in order
    steps: int = 0
    unlabelled: int = 0  # states where the teacher's decision was not expressible
    agent_steps: int = 0  # decisions the agent (not the teacher) took


def rollout(
    env: Any,
    teacher: Any,
    act: Callable[[np.ndarray, np.ndarray], int],
    beta: float,
    rng: np.random.Generator,
    max_steps: int,
    seed: int | None = None,
) -> Episode:
    """Run one episode of ``env`` (a ``ClusterEnv``): at each decision the
    teacher labels the state (``teachers.label``); the label is executed with
    probability ``beta``, ``act(obs, mask)`` otherwise (and whenever the
    teacher's decision cannot be expressed)."""
    from ddl_gym.agents.teachers import label

    obs, _ = env.reset(seed=seed)
    teacher.reset(env.view, seed=seed)
    ep = Episode([], [], [], [])
    for _ in range(max_steps):
        mask = env.action_masks()
        lab = label(teacher, env)
        if lab is not None and rng.random() < beta:
            a = lab
        else:
            a = int(act(obs, mask))
            ep.agent_steps += 1
        if lab is None:
            ep.unlabelled += 1
        else:
            ep.obs.append(np.asarray(obs, dtype=np.float16))  # values in [0, 1]
            ep.masks.append(mask)
            ep.labels.append(lab)
            ep.taken.append(a)
        ep.actions.append(a)
        obs, _, term, trunc, _ = env.step(a)
        ep.steps += 1
        if term or trunc:
            break
    return ep


def case_env(
    case: Any,
    env_cfg: EnvConfig,
    seed: int,
    rate: float = 1.0,
    *,
    cluster: Any = None,
    window_s: float | None = None,
    time_scale_s: float | None = None,
) -> Any:
    """The set env of one benchmark case (its trace for ``seed``, its cluster
    and congestion), arrival rate times ``rate``: by default the whole case,
    as the benchmark runs it (``env_cfg.cluster``, ``window_s`` and
    ``max_steps`` are not used). ``cluster`` replaces the case's cluster,
    ``window_s`` makes each episode a window of that length and
    ``time_scale_s`` replaces the reward's time unit (``agents.suite_ppo``)."""
    from ddl_gym.env.set_env import SetClusterEnv

    workload = case.workload
    if rate != 1.0:
        workload = dataclasses.replace(workload, arrival_scale=workload.arrival_scale * rate)
    return SetClusterEnv(
        trace=workload.build(seed),
        cluster=case.cluster() if cluster is None else cluster,
        congestion=case.congestion,
        K=env_cfg.K,
        M=env_cfg.M,
        preempt_budget=env_cfg.preempt_budget,
        tick_s=env_cfg.tick_s,
        lease_s=env_cfg.lease_s,
        restore_s_per_gpu=env_cfg.restore_s_per_gpu,
        reward=env_cfg.reward,
        time_scale_s=env_cfg.time_scale_s if time_scale_s is None else time_scale_s,
        window_s=window_s,
        max_steps=None,  # rollouts stop at DaggerConfig.max_episode_steps
    )


# -- the model -------------------------------------------------------------------
def new_model(env_cfg: EnvConfig, hidden: int, seed: int) -> Any:
    """A fresh MaskablePPO with the set policy (its spaces depend on K, M only)."""
    from ddl_gym.agents.set_policy import SetPolicy
    from sb3_contrib import MaskablePPO
    from stable_baselines3.common.vec_env import DummyVecEnv

    from ddl_gym.env.set_env import SetClusterEnv

    def probe() -> Any:
        return SetClusterEnv(
            trace="default", cluster="seed64", K=env_cfg.K, M=env_cfg.M, max_steps=10
        )

    kwargs = {"features_extractor_kwargs": {"K": env_cfg.K, "M": env_cfg.M, "hidden": hidden}}
    return MaskablePPO(
        SetPolicy, DummyVecEnv([probe]), policy_kwargs=kwargs, seed=seed, device="cpu", verbose=0
    )


def load_init(path: str | Path) -> Any:
    """A saved set-policy MaskablePPO model to continue from."""
    from ddl_gym.agents.policy import load_model

    return load_model(path, "maskable_ppo", "set")


def train_config(cfg: DaggerConfig) -> TrainConfig:
    """The ``TrainConfig`` saved beside each model: what ``load_policy`` needs
    (env settings, the set policy); training itself is this module's."""
    return TrainConfig(
        env=cfg.env,
        ppo=PPOConfig(algo="maskable_ppo", policy="set", hidden=cfg.hidden),
        total_timesteps=0,
        seed=cfg.seed,
    )


def greedy_action(model: Any) -> Callable[[np.ndarray, np.ndarray], int]:
    """The agent's deterministic choice (masked argmax), as at evaluation."""
    import torch as th

    policy = model.policy

    def act(obs: np.ndarray, mask: np.ndarray) -> int:
        with th.no_grad():
            x = th.as_tensor(np.asarray(obs, dtype=np.float32)).unsqueeze(0)
            logits = policy.features_extractor(x)[0, : len(mask)].numpy()
        return int(np.argmax(np.where(mask, logits, -np.inf)))

    return act


def fit(
    model: Any, obs: np.ndarray, masks: np.ndarray, labels: np.ndarray, cfg: DaggerConfig, seed: int
) -> dict[str, float]:
    """Masked cross-entropy of the policy's logits on the labels (the value
    head is left alone); returns the last epoch's loss and accuracy."""
    import torch as th

    fx = model.policy.features_extractor
    n_actions = masks.shape[1]
    gen = th.Generator().manual_seed(seed)
    opt = th.optim.Adam(fx.parameters(), lr=cfg.learning_rate)
    n = len(labels)
    stats: dict[str, float] = {}
    for _ in range(cfg.epochs):
        order = th.randperm(n, generator=gen).numpy()
        tot = correct = 0.0
        for i in range(0, n, cfg.batch_size):
            idx = order[i : i + cfg.batch_size]
            x = th.as_tensor(obs[idx].astype(np.float32))
            m = th.as_tensor(masks[idx])
            y = th.as_tensor(labels[idx])
            logits = fx(x)[:, :n_actions].masked_fill(~m, -1e9)
            loss = th.nn.functional.cross_entropy(logits, y)
            opt.zero_grad()
            loss.backward()
            th.nn.utils.clip_grad_norm_(fx.parameters(), 0.5)
            opt.step()
            tot += float(loss.detach()) * len(idx)
            correct += float((logits.detach().argmax(-1) == y).sum())
        stats = {"loss": tot / n, "accuracy": correct / n}
    return stats


# -- validation ------------------------------------------------------------------
def validation_score(model_path: Path, suite: str, heuristics_dir: str | Path) -> dict[str, Any]:
    """The model on the suite's validation split: IQM (and mean) of the
    normalised mean JCT, per case, against the heuristics' records in
    ``heuristics_dir`` (computed there if missing; ``--resume`` style)."""
    import pandas as pd
    from ddl_gym.agents.policy import load_policy
    from ddl_gym.baselines import HEURISTICS

    from ddl_gym.benchmarks import evaluate
    from ddl_gym.benchmarks.leaderboard import run_policies
    from ddl_gym.benchmarks.stats import baseline_jct, iqm, normalised, score_matrix

    heur = run_policies(HEURISTICS, suite, "validation", Path(heuristics_dir), True, False)
    scores = evaluate(
        lambda: load_policy(model_path),
        suite=suite,
        split="validation",
        progress=False,
        name="candidate",
    )
    rec = scores.records.assign(clairvoyant=False)
    base = baseline_jct(heur)
    norm = normalised(pd.concat([rec, heur], ignore_index=True), base)
    mine = norm[norm["policy"] == "candidate"]
    matrix, cases = score_matrix(mine)
    per_case = mine.groupby("case")["normalised_jct"].mean().to_dict()
    return {
        "iqm": iqm(matrix),
        "mean": float(matrix.mean()),
        "per_case": per_case,
        "mean_jct_h": float(rec["mean_jct_s"].mean() / 3600),
        "p95_jct_h": float(rec["p95_jct_s"].mean() / 3600),
        "makespan_h": float(rec["makespan_s"].mean() / 3600),
    }


# -- the loop --------------------------------------------------------------------
def _cpu_s() -> float:
    own = resource.getrusage(resource.RUSAGE_SELF)
    return own.ru_utime + own.ru_stime


def run_dagger(cfg: DaggerConfig, out: str | Path, progress: bool = True) -> Path:
    """Multi-teacher DAgger per ``cfg`` into ``out``; returns the best model
    on validation (the last one when ``cfg.validate`` is off)."""
    from ddl_gym.agents.teachers import cached_teachers
    from ddl_gym.agents.threads import one_thread
    from ddl_gym.baselines import HEURISTICS, make_policy

    from ddl_gym.benchmarks.suite import get_suite

    one_thread()
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    (out / "dagger_config.json").write_text(json.dumps(asdict(cfg), indent=2) + "\n")
    say = print if progress else (lambda *a, **k: None)
    cpu0, wall0 = _cpu_s(), time.perf_counter()
    candidates = cfg.candidates or list(HEURISTICS)
    teachers = cached_teachers(
        cfg.env, cfg.teachers_file, cfg.suite, candidates=candidates, progress=progress
    )
    suite = get_suite(cfg.suite)
    cases = [c for c in suite.select("train") if not cfg.cases or c.name in cfg.cases]
    runs = [(c, s) for s in range(max(len(c.seeds) for c in cases)) for c in cases]
    runs = [(c, c.seeds[s]) for c, s in runs if s < len(c.seeds)]
    say("teachers: " + ", ".join(f"{c.name}={teachers[c.name].teacher}" for c in cases))

    names = {c.name: teachers[c.name].teacher for c in cases} | cfg.teacher_override
    unknown = sorted(set(cfg.teacher_override) - {c.name for c in cases})
    if unknown:
        raise ValueError(f"teacher_override: {unknown} are not train cases in use")
    if "self" in names.values() and not cfg.init:
        raise ValueError('teacher "self" needs init (the network to keep)')
    if cfg.teacher_override:
        say("teachers now: " + ", ".join(f"{c.name}={names[c.name]}" for c in cases))

    shipped: Any = None  # teacher "self", loaded once: rollout() resets it per episode

    def teacher_for(case: Any) -> Any:
        nonlocal shipped
        if names[case.name] != "self":
            return make_policy(names[case.name])
        if shipped is None:
            from ddl_gym.agents.policy import load_policy

            shipped = load_policy(cfg.init)
        return shipped

    rng = np.random.default_rng(cfg.seed)
    order = rng.permutation(len(runs))
    model = load_init(cfg.init) if cfg.init else new_model(cfg.env, cfg.hidden, cfg.seed)
    tcfg = train_config(cfg)
    data_obs: list[np.ndarray] = []
    data_masks: list[np.ndarray] = []
    data_labels: list[int] = []
    curve: list[dict[str, Any]] = []
    k = 0
    for it in range(cfg.iterations):
        beta = cfg.beta0 * cfg.beta_decay**it
        act = greedy_action(model)
        agg = {"steps": 0, "labelled": 0, "unlabelled": 0, "agent_steps": 0}
        t0 = _cpu_s()
        for _ in range(cfg.episodes_per_iteration):
            case, seed = runs[order[k % len(runs)]]
            k += 1
            rate = 1.0
            if cfg.arrival_jitter > 0:
                rate = float(np.exp(rng.uniform(-1, 1) * np.log1p(cfg.arrival_jitter)))
            env = case_env(case, cfg.env, seed, rate)
            teacher = teacher_for(case)
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
        cpu_roll = _cpu_s() - t0
        obs = np.stack(data_obs)
        masks = np.stack(data_masks)
        labels = np.asarray(data_labels, dtype=np.int64)
        t1 = _cpu_s()
        fitted = fit(model, obs, masks, labels, cfg, cfg.seed + it)
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
            "cpu_s_rollouts": cpu_roll,
            "cpu_s_fit": cpu_fit,
        }
        if cfg.validate:
            t2 = _cpu_s()
            val = validation_score(path, cfg.suite, cfg.validation_dir)
            row["validation"] = val
            row["cpu_s_validation"] = _cpu_s() - t2
        curve.append(row)
        say(json.dumps({k2: v for k2, v in row.items() if k2 != "validation"}))
        if cfg.validate:
            say(f"iteration {it}: validation IQM {row['validation']['iqm']:.3f}", flush=True)
        (out / "curve.json").write_text(json.dumps(curve, indent=1) + "\n")
    chosen = finalize(out, cpu_s=_cpu_s() - cpu0, wall_s=time.perf_counter() - wall0)
    say(f"best iteration on validation: {chosen}; {_cpu_s() - cpu0:.0f} CPU-s")
    return out / "best.zip"


def finalize(out: str | Path, **extra: float) -> int:
    """Copy the iteration with the best validation IQM in ``out/curve.json``
    (the last one without validation scores) to ``best.zip`` (+ its config)
    and write ``stats.json``; also for a run stopped early. Returns it."""
    out = Path(out)
    curve = json.loads((out / "curve.json").read_text())
    scored = [(row["validation"]["iqm"], row["iteration"]) for row in curve if "validation" in row]
    chosen = min(scored)[1] if scored else curve[-1]["iteration"]
    shutil.copyfile(out / f"iter{chosen}.zip", out / "best.zip")
    shutil.copyfile(out / f"iter{chosen}.json", out / "best.json")
    cpu = sum(row.get(k, 0.0) for row in curve for k in row if k.startswith("cpu_s_"))
    stats = {"best_iteration": chosen, "iterations": len(curve), "cpu_s_iterations": cpu, **extra}
    (out / "stats.json").write_text(json.dumps(stats, indent=2) + "\n")
    return chosen


def choose(run_dirs: Sequence[str | Path]) -> tuple[Path, float]:
    """The pre-registered rule: of the runs' best models (``best.zip``), the
    one with the lowest validation IQM of the normalised mean JCT (read from
    each run's ``curve.json``; ties: the first run)."""
    scored: list[tuple[float, int, Path]] = []
    for i, d in enumerate(run_dirs):
        d = Path(d)
        curve = json.loads((d / "curve.json").read_text())
        best = json.loads((d / "stats.json").read_text())["best_iteration"]
        scored.append((curve[best]["validation"]["iqm"], i, d / "best.zip"))
    iqm_, _, path = min(scored)
    return path, iqm_


def main(argv: Sequence[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description="Multi-teacher DAgger on a benchmark's train split.")
    ap.add_argument("--config", type=Path, help="TOML DaggerConfig (defaults otherwise)")
    ap.add_argument("--out", type=Path, required=True, help="run directory")
    ap.add_argument("--seed", type=int, help="override seed")
    ap.add_argument("--iterations", type=int, help="override iterations")
    ap.add_argument("--no-validate", action="store_true", help="skip the validation scores")
    ap.add_argument("--finalize", action="store_true", help="only pick best.zip from --out's curve")
    args = ap.parse_args(argv)
    if args.finalize:  # e.g. a run stopped early
        print(f"best iteration: {finalize(args.out)}")
        return
    cfg = DaggerConfig.load(args.config) if args.config else DaggerConfig()
    if args.seed is not None:
        cfg.seed = args.seed
    if args.iterations is not None:
        cfg.iterations = args.iterations
    if args.no_validate:
        cfg.validate = False
    run_dagger(cfg, args.out)


if __name__ == "__main__":
    main()
