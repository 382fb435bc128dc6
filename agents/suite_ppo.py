"""MaskablePPO fine-tuning on a benchmark suite's train split.

The shipped model was cloned from Gandiva and fine-tuned by PPO on one
cluster (the seed's 64 GPUs, heavy congestion). Imitating more teachers
(``agents.dagger``) did not get past them: an imitator can at best match its
teachers. Here the agent learns from the suite's own objective instead:

* every episode draws a train case of the suite (its cluster, fabric,
  congestion), one of its seeds, an arrival-rate factor (log-uniform in
  ``[1/(1+j), 1+j]``) and a window length (``windows_h``; 0: the whole case);
* the reward is minus the jobs in the system per unit time (the env's
  ``"jct"`` reward, ``env.reward``'s default), with the time unit of each case set to the best
  heuristic's mean JCT there (the teachers' records, train split only), so a
  window's return is about minus its job count times its normalised mean
  JCT: every case weighs as it does in the benchmark's score;
* PPO starts from a trained model (``init``; default the shipped one), so
  training starts at its level;
* every ``eval_freq`` steps the model is scored on the suite's validation
  split (IQM of the normalised mean JCT); iteration 0 is ``init`` itself, and
  the run keeps its best iteration (``best.zip``; ``agents.dagger.finalize``),
  so a run never ends below its start on validation. The test split is never
  touched here.

Each saved model has a ``TrainConfig`` beside it, so ``load_policy`` and
``ddl-gym benchmark evaluate --policy agent:PATH`` run it.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import time
import tomllib
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import gymnasium as gym
import numpy as np
from ddl_gym.agents.config import EnvConfig, PPOConfig, TrainConfig, _build
from ddl_gym.agents.dagger import _agent_env, _cpu_s, case_env, finalize, validation_score
from ddl_gym.agents.guide import GuideCallback, TeacherLabels, frozen_logits

MODELS = Path(__file__).resolve().parent / "models"


def _fine_tune_ppo() -> PPOConfig:
    return PPOConfig(
        algo="maskable_ppo",
        policy="set",
        hidden=64,
        learning_rate=5e-5,
        n_steps=1024,
        batch_size=256,
        n_epochs=4,
        gamma=0.995,
        gae_lambda=0.95,
        ent_coef=0.005,
        clip_range=0.1,
    )


@dataclass
class SuitePPOConfig:
    seed: int = 0
    suite: str = "ddl-gym-v1"
    init: str = str(MODELS / "default.zip")  # the model to start from
    teachers_file: str = str(MODELS / "teachers_ddl-gym-v1.json")  # per-case heuristic JCTs
    cases: list[str] = field(default_factory=list)  # train cases (empty: all)
    # relative sampling weight of a train case's episodes (a case not listed:
    # 1; empty: every case alike), e.g. to train more where the model loses
    case_weights: dict[str, float] = field(default_factory=dict)
    windows_h: list[float] = field(default_factory=lambda: [24.0, 72.0])  # 0: whole case
    arrival_jitter: float = 0.25
    # shape randomisation: with this probability an episode runs on another
    # shape of the case's fabric (racks x servers per rack from ``shapes_rs``,
    # the case's GPUs per server; only shapes the widest job fits), its arrival
    # rate scaled by the GPU ratio so the load per GPU stays the case's
    shape_p: float = 0.0
    shapes_rs: list[list[int]] = field(
        default_factory=lambda: [[r, s] for r in (1, 2, 4, 8, 16, 32) for s in (2, 4)]
    )
    # guided PPO (agents.guide): a heuristic teacher per train case named
    # here, whose labels on the visited states are imitated beside PPO's
    # update; with guide_self, every other state is held to the starting
    # policy (KL). Neither set: plain PPO.
    guide_teachers: dict[str, str] = field(default_factory=dict)
    guide_self: bool = False
    guide_coef: float = 1.0
    guide_epochs: int = 2
    guide_batch_size: int = 256
    guide_learning_rate: float = 5e-5
    max_episode_steps: int = 5000
    total_timesteps: int = 60_000
    eval_freq: int = 10_000  # steps between validation scores
    n_envs: int = 2
    validation_dir: str = "runs/benchmark/ddl-gym-v1/validation"  # heuristics' records
    ppo: PPOConfig = field(default_factory=_fine_tune_ppo)
    env: EnvConfig = field(default_factory=_agent_env)

    @classmethod
    def load(cls, path: str | Path) -> SuitePPOConfig:
        with Path(path).open("rb") as f:
            return _build(cls, tomllib.load(f), "suite-ppo config")


def case_time_scales(teachers_file: str | Path) -> dict[str, float]:
    """Per train case, the best heuristic's mean JCT (s): the reward's time
    unit there. Read from the teachers' records (train split only)."""
    from ddl_gym.agents.teachers import load_teachers

    return {name: min(c.mean_jct_s.values()) for name, c in load_teachers(teachers_file).items()}


class SuiteCaseEnv(gym.Env):
    """One env over a suite's train cases: each reset draws a (case, seed),
    an arrival-rate factor and a window length, and runs that case's
    ``SetClusterEnv`` (its cluster, fabric and congestion) for it."""

    metadata = {"render_modes": []}

    def __init__(self, cfg: SuitePPOConfig) -> None:
        from ddl_gym.benchmarks.suite import get_suite
        from ddl_gym.env.set_env import SetClusterEnv

        self.cfg = cfg
        train = get_suite(cfg.suite).select("train")
        cases = [c for c in train if not cfg.cases or c.name in cfg.cases]
        if not cases:
            raise ValueError(f"no train case of {cfg.suite!r} matches {cfg.cases}")
        self.runs = [(c, s) for c in cases for s in c.seeds]
        unknown = sorted(set(cfg.case_weights) - {c.name for c in cases})
        if unknown:
            raise ValueError(f"case_weights: {unknown} are not train cases of {cfg.suite!r}")
        if any(w < 0 for w in cfg.case_weights.values()):
            raise ValueError(f"case_weights: negative weight in {cfg.case_weights}")
        w = np.array([cfg.case_weights.get(c.name, 1.0) for c, _ in self.runs], dtype=float)
        if w.sum() <= 0:
            raise ValueError("case_weights: every case has weight 0")
        self.run_p = w / w.sum()
        unknown = sorted(set(cfg.guide_teachers) - {c.name for c in cases})
        if unknown:
            raise ValueError(f"guide_teachers: {unknown} are not train cases of {cfg.suite!r}")
        from ddl_gym.baselines import make_policy

        for case_name, teacher in cfg.guide_teachers.items():
            try:
                make_policy(teacher)
            except (KeyError, ValueError) as e:
                raise ValueError(f"guide_teachers[{case_name!r}]: {e}") from e
        self._labels = TeacherLabels(cfg.guide_teachers) if guided(cfg) else None
        self.scales = case_time_scales(cfg.teachers_file)
        missing = [c.name for c in cases if c.name not in self.scales]
        if missing:
            raise ValueError(f"{cfg.teachers_file}: no heuristic records for {missing}")
        self._env: Any = None
        self._steps = 0
        self._widest: dict[tuple[str, int], int] = {}
        self.case_name, self.case_seed, self.cluster = "", 0, None
        K, M = cfg.env.K, cfg.env.M
        probe = SetClusterEnv(trace="default", cluster="seed64", K=K, M=M, max_steps=1)
        self.observation_space = probe.observation_space
        self.action_space = probe.action_space

    def _draw(self) -> Any:
        rng = self.np_random
        if self.cfg.case_weights:
            case, seed = self.runs[int(rng.choice(len(self.runs), p=self.run_p))]
        else:  # (the draw of the runs made before case weights existed)
            case, seed = self.runs[int(rng.integers(len(self.runs)))]
        rate = 1.0
        if self.cfg.arrival_jitter > 0:
            rate = float(np.exp(rng.uniform(-1, 1) * np.log1p(self.cfg.arrival_jitter)))
        cluster = case.cluster()
        if self.cfg.shape_p > 0 and rng.random() < self.cfg.shape_p:
            cluster, gpu_ratio = self._other_shape(case, cluster, seed)
            rate *= gpu_ratio
        hours = float(self.cfg.windows_h[int(rng.integers(len(self.cfg.windows_h)))])
        self.case_name, self.case_seed, self.cluster = case.name, seed, cluster
        return case_env(
            case,
            self.cfg.env,
            seed,
            rate,
            cluster=cluster,
            window_s=hours * 3600.0 if hours > 0 else None,
            time_scale_s=self.scales[case.name],
        )

    def _other_shape(self, case: Any, cluster: Any, seed: int) -> tuple[Any, float]:
        """A random other shape of ``cluster``'s fabric that fits the case's
        widest job, and its GPU count over the case's."""
        from ddl_gym.topology import Cluster

        key = (case.name, seed)
        if key not in self._widest:
            self._widest[key] = case.workload.build(seed).max_gpus
        widest = self._widest[key]
        g = cluster.gpus_per_server
        fits = [(r, s) for r, s in self.cfg.shapes_rs if r * s * g >= widest]
        if not fits:
            return cluster, 1.0
        r, s = fits[int(self.np_random.integers(len(fits)))]
        other = Cluster(int(r), int(s), g, cluster.fabric)
        return other, other.num_gpus / cluster.num_gpus

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None):
        super().reset(seed=seed)
        self._env = self._draw()
        self._steps = 0
        env_seed = int(self.np_random.integers(2**31))
        obs, info = self._env.reset(seed=env_seed)
        if self._labels is not None:
            self._labels.start(self.case_name, self._env, env_seed)
            info = {**info, **self._labels.info(self._env, False)}
        return obs, info

    def step(self, action):
        obs, reward, term, trunc, info = self._env.step(action)
        self._steps += 1
        if self._steps >= self.cfg.max_episode_steps:
            trunc = True
        if self._labels is not None:
            info = {**info, **self._labels.info(self._env, term or trunc)}
        return obs, reward, term, trunc, info

    def action_masks(self) -> np.ndarray:
        return self._env.action_masks()


def guided(cfg: SuitePPOConfig) -> bool:
    """Whether ``cfg`` trains with the imitation term (``agents.guide``)."""
    return bool(cfg.guide_teachers) or cfg.guide_self


def train_config(cfg: SuitePPOConfig) -> TrainConfig:
    """The ``TrainConfig`` saved beside each model: what ``load_policy``
    needs, and in ``split`` the traces the model has seen (for the
    evaluation-overlap warning): the starting model's, plus the files of
    the suite's train cases (synthetic cases have no file)."""
    from ddl_gym.agents.config import SplitConfig

    from ddl_gym.benchmarks.suite import get_suite

    split = SplitConfig(traces=[], val_traces=[], test_traces=[], train=(0.0, 1.0))
    init_config = Path(cfg.init).with_suffix(".json")
    if init_config.is_file():
        split = TrainConfig.load(init_config).split
    files = {c.workload.source for c in get_suite(cfg.suite).select("train")}
    files.discard("synthetic")
    traces = list(split.traces) + sorted(files - set(split.traces))
    split = dataclasses.replace(split, traces=traces)
    return TrainConfig(
        env=cfg.env, split=split, ppo=cfg.ppo, total_timesteps=cfg.total_timesteps, seed=cfg.seed
    )


def _make_env(cfg: SuitePPOConfig):
    def make() -> gym.Env:
        from ddl_gym.agents.envs import AgentEnv
        from ddl_gym.agents.threads import one_thread
        from stable_baselines3.common.monitor import Monitor

        one_thread()
        return Monitor(AgentEnv(SuiteCaseEnv(cfg), cfg.env.K, True, False, M=cfg.env.M))

    return make


def run_suite_ppo(
    cfg: SuitePPOConfig,
    out: str | Path,
    progress: bool = True,
    scorer: Callable[[Path, str, str], dict[str, Any]] = validation_score,
) -> Path:
    """Fine-tune ``cfg.init`` per ``cfg`` into ``out``; returns ``best.zip``.
    ``scorer(model_path, suite, heuristics_dir)`` scores a saved model on the
    validation split (``dagger.validation_score``; tests pass a stand-in)."""
    from ddl_gym.agents.threads import one_thread
    from sb3_contrib import MaskablePPO
    from stable_baselines3.common.callbacks import BaseCallback
    from stable_baselines3.common.vec_env import DummyVecEnv, VecNormalize

    one_thread()
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    (out / "suite_ppo_config.json").write_text(json.dumps(asdict(cfg), indent=2) + "\n")
    say = print if progress else (lambda *a, **k: None)
    tcfg = train_config(cfg)
    cpu0, wall0 = _cpu_s(), time.perf_counter()
    curve: list[dict[str, Any]] = []

    def score(model: Any, it: int, cpu_train: float) -> None:
        path = out / f"iter{it}.zip"
        model.save(str(path))
        tcfg.save_json(path.with_suffix(".json"))
        t = _cpu_s()
        val = scorer(path, cfg.suite, cfg.validation_dir)
        row = {
            "iteration": it,
            "timesteps": int(model.num_timesteps),
            "validation": val,
            "cpu_s_train": cpu_train,
            "cpu_s_validation": _cpu_s() - t,
        }
        curve.append(row)
        (out / "curve.json").write_text(json.dumps(curve, indent=1) + "\n")
        worst = max(val["per_case"].values())
        say(
            f"iteration {it} ({row['timesteps']} steps): validation IQM {val['iqm']:.3f}, "
            f"mean {val['mean']:.3f}, worst case {worst:.2f}",
            flush=True,
        )

    venv = VecNormalize(
        DummyVecEnv([_make_env(cfg) for _ in range(cfg.n_envs)]),
        norm_obs=False,
        norm_reward=True,
        gamma=cfg.ppo.gamma,
    )
    p = cfg.ppo
    model = MaskablePPO.load(
        cfg.init,
        env=venv,
        device="cpu",
        custom_objects={
            "learning_rate": p.learning_rate,
            "n_steps": p.n_steps,
            "batch_size": p.batch_size,
            "n_epochs": p.n_epochs,
            "gamma": p.gamma,
            "gae_lambda": p.gae_lambda,
            "ent_coef": p.ent_coef,
            "clip_range": p.clip_range,
        },
    )
    model.set_random_seed(cfg.seed)
    venv.seed(cfg.seed)
    model.num_timesteps = 0
    score(model, 0, 0.0)

    class Validate(BaseCallback):
        def __init__(self) -> None:
            super().__init__()
            self.last = 0
            self.cpu = _cpu_s()

        def _on_step(self) -> bool:
            if self.num_timesteps - self.last >= cfg.eval_freq:
                self.last = self.num_timesteps
                score(self.model, len(curve), _cpu_s() - self.cpu)
                self.cpu = _cpu_s()
            return True

    validate = Validate()
    callbacks: list[Any] = [validate]
    guide: Any = None
    if guided(cfg):
        guide = GuideCallback.make(
            frozen_logits(cfg.init) if cfg.guide_self else None,
            cfg.guide_coef,
            cfg.guide_epochs,
            cfg.guide_batch_size,
            cfg.guide_learning_rate,
            cfg.seed,
        )
        callbacks.append(guide)
    model.learn(total_timesteps=cfg.total_timesteps, callback=callbacks, reset_num_timesteps=True)
    if guide is not None:
        (out / "guide.json").write_text(json.dumps(guide.history, indent=1) + "\n")
    if curve[-1]["timesteps"] < model.num_timesteps:
        score(model, len(curve), _cpu_s() - validate.cpu)
    chosen = finalize(out, cpu_s=_cpu_s() - cpu0, wall_s=time.perf_counter() - wall0)
    say(f"best iteration on validation: {chosen}; {_cpu_s() - cpu0:.0f} CPU-s")
    return out / "best.zip"


def main(argv: Sequence[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description="PPO fine-tuning on a benchmark's train split.")
    ap.add_argument("--config", type=Path, help="TOML SuitePPOConfig (defaults otherwise)")
    ap.add_argument("--out", type=Path, required=True, help="run directory")
    ap.add_argument("--seed", type=int, help="override seed")
    ap.add_argument("--timesteps", type=int, help="override total_timesteps")
    ap.add_argument("--init", type=Path, help="override init: the model to start from")
    ap.add_argument("--finalize", action="store_true", help="only pick best.zip from --out's curve")
    args = ap.parse_args(argv)
    if args.finalize:
        print(f"best iteration: {finalize(args.out)}")
        return
    cfg = SuitePPOConfig.load(args.config) if args.config else SuitePPOConfig()
    if args.seed is not None:
        cfg.seed = args.seed
    if args.timesteps is not None:
        cfg.total_timesteps = args.timesteps
    if args.init is not None:
        if not args.init.is_file():
            ap.error(f"--init: no model file {args.init}")
        cfg.init = str(args.init)
    run_suite_ppo(cfg, args.out)


if __name__ == "__main__":
    main()
