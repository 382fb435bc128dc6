"""Train a scheduler with MaskablePPO (or plain PPO, the ablation).

One run writes into its ``out`` directory::

    config.json            the full TrainConfig (loadable by agents.load_policy; a copy
                           in best/ and checkpoints/, beside their models)
    tb/                    TensorBoard logs
    checkpoints/           periodic model + VecNormalize snapshots (for --resume)
    best/best_model.zip    best on the validation windows (MaskableEvalCallback)
    final.zip              the model at the end of training
    stats.json             wall time and env steps per second

Rewards are normalised by a running estimate of the return's scale
(``VecNormalize``, rewards only): raw JCT rewards differ by orders of
magnitude between traces and loads, which a fixed scale cannot fit.
"""

from __future__ import annotations

import argparse
import json
import re
import resource
import shutil
import time
from pathlib import Path
from typing import Any

from ddl_gym.agents.config import TrainConfig
from ddl_gym.agents.envs import describe_split, fixed_windows, make_env_fn, split_traces
from ddl_gym.agents.policy import DEFAULT_MODEL
from ddl_gym.agents.threads import one_thread
from stable_baselines3.common.callbacks import (
    BaseCallback,
    CallbackList,
    CheckpointCallback,
    EvalCallback,
)
from stable_baselines3.common.vec_env import DummyVecEnv, SubprocVecEnv, VecEnv, VecNormalize

CKPT_PREFIX = "model"


class TqdmCallback(BaseCallback):
    """A progress bar over env steps, with rate and ETA: the same tqdm bar as
    every other long job (``ddl_gym.experiments.runner.progress_bar``)."""

    def __init__(self, total: int, initial: int = 0) -> None:
        super().__init__()
        self.total = total
        self.initial = initial
        self.bar: Any = None

    def _on_training_start(self) -> None:
        from ddl_gym.experiments.runner import progress_bar

        self.bar = progress_bar(self.total, "train", False, initial=self.initial, unit="step")

    def _on_step(self) -> bool:
        self.bar.update(self.training_env.num_envs)
        return True

    def _on_training_end(self) -> None:
        self.bar.close()


class PrintValidation(BaseCallback):
    """Runs after each validation (``callback_after_eval``): prints its score
    as it comes, above the progress bar."""

    def _on_step(self) -> bool:
        from tqdm import tqdm

        ev = self.parent
        if not isinstance(ev, EvalCallback):
            raise TypeError("PrintValidation runs as an EvalCallback's callback_after_eval")
        tqdm.write(
            f"step {self.num_timesteps:,}: validation mean return {ev.last_mean_reward:.3f} "
            f"(best {ev.best_mean_reward:.3f})"
        )
        return True


def _one_thread_env(fn):
    """Wrap an env factory so each (sub-process) worker uses one torch thread."""

    def make():
        one_thread()
        return fn()

    return make


def _vec_env(cfg: TrainConfig, fns: list, subproc: bool) -> VecEnv:
    if subproc:
        # fork: the workers inherit the parsed traces instead of re-pickling them
        return SubprocVecEnv([_one_thread_env(f) for f in fns], start_method="fork")
    return DummyVecEnv(fns)


def _cpu_s() -> float:
    """CPU seconds of this process and its finished children (the machine is
    shared, so wall time says little about cost)."""
    own = resource.getrusage(resource.RUSAGE_SELF)
    kids = resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + kids.ru_utime + kids.ru_stime


def latest_checkpoint(out: Path) -> tuple[Path, Path | None] | None:
    """The newest (model, VecNormalize stats) pair under ``out/checkpoints``."""
    best: tuple[int, Path] | None = None
    for p in (out / "checkpoints").glob(f"{CKPT_PREFIX}_*_steps.zip"):
        m = re.search(r"_(\d+)_steps\.zip$", p.name)
        if m and (best is None or int(m.group(1)) > best[0]):
            best = (int(m.group(1)), p)
    if best is None:
        return None
    stats = out / "checkpoints" / f"{CKPT_PREFIX}_vecnormalize_{best[0]}_steps.pkl"
    return best[1], stats if stats.is_file() else None


def train(cfg: TrainConfig, out: str | Path, resume: bool = False, progress: bool = True) -> Path:
    """Train per ``cfg`` into ``out``; returns the best model's path."""
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    one_thread()  # the env workers own the other core(s); see ddl_gym.agents.threads
    maskable = cfg.ppo.algo == "maskable_ppo"
    if cfg.ppo.algo not in ("maskable_ppo", "ppo"):
        raise ValueError(f"unknown algo {cfg.ppo.algo!r}")

    parts = split_traces(cfg.split)
    print(describe_split(cfg.split, parts))
    val = fixed_windows(parts["val"], cfg.split.n_val_windows, cfg.env.window_s, seed=cfg.seed)
    val += parts["val_whole"]  # held-out whole traces: selection on whole-trace behaviour too
    print(f"validation: {len(val)} fixed windows, {sum(len(w) for w in val)} jobs")
    cfg.save_json(out / "config.json")
    # load_policy reads a model's config from the model's own folder only
    for folder in ("best", "checkpoints"):
        (out / folder).mkdir(exist_ok=True)
        cfg.save_json(out / folder / "config.json")

    invalid_to_wait = not maskable
    train_fns = [
        make_env_fn(cfg.env, parts["train"], invalid_to_wait=invalid_to_wait)
        for _ in range(cfg.n_envs)
    ]
    venv = _vec_env(cfg, train_fns, cfg.vec_env == "subproc")
    # eval stack mirrors the training stack so SB3 can sync the wrappers
    eval_env = DummyVecEnv([make_env_fn(cfg.env, val, invalid_to_wait=invalid_to_wait, cycle=True)])
    eval_env = VecNormalize(eval_env, training=False, norm_obs=False, norm_reward=False)

    if maskable:
        from sb3_contrib import MaskablePPO as Algo
        from sb3_contrib.common.maskable.callbacks import MaskableEvalCallback as Eval
    else:
        from stable_baselines3 import PPO as Algo

        Eval = EvalCallback

    ckpt = latest_checkpoint(out) if resume else None
    if resume and ckpt is None:
        print(f"--resume: no checkpoint under {out / 'checkpoints'}; starting fresh")
    if ckpt is not None:
        model_path, stats_path = ckpt
        if stats_path is not None:
            venv = VecNormalize.load(str(stats_path), venv)
        else:
            venv = VecNormalize(venv, norm_obs=False, norm_reward=True, gamma=cfg.ppo.gamma)
        model = Algo.load(str(model_path), env=venv, device="cpu", tensorboard_log=str(out / "tb"))
        print(f"resuming from {model_path.name} at {model.num_timesteps} steps")
    else:
        venv = VecNormalize(venv, norm_obs=False, norm_reward=True, gamma=cfg.ppo.gamma)
        p = cfg.ppo
        if p.policy == "set":
            if cfg.env.obs != "set":
                raise ValueError('ppo.policy = "set" needs env.obs = "set"')
            from ddl_gym.agents.set_policy import SetPolicy

            policy: Any = SetPolicy
            policy_kwargs: dict[str, Any] = {
                "features_extractor_kwargs": {"K": cfg.env.K, "M": cfg.env.M, "hidden": p.hidden}
            }
        elif p.policy == "mlp":
            policy, policy_kwargs = "MlpPolicy", {"net_arch": list(p.net_arch)}
        else:
            raise ValueError(f"unknown ppo.policy {p.policy!r}: 'mlp' or 'set'")
        model = Algo(
            policy,
            venv,
            learning_rate=p.learning_rate,
            n_steps=p.n_steps,
            batch_size=p.batch_size,
            n_epochs=p.n_epochs,
            gamma=p.gamma,
            gae_lambda=p.gae_lambda,
            ent_coef=p.ent_coef,
            clip_range=p.clip_range,
            policy_kwargs=policy_kwargs,
            tensorboard_log=str(out / "tb"),
            seed=cfg.seed,
            device="cpu",
            verbose=0,
        )

    start = time.perf_counter()
    cpu0 = _cpu_s()
    bc_val: float | None = None
    if (cfg.bc.teacher or cfg.bc.datasets) and ckpt is None:
        if not maskable:
            raise ValueError("bc.teacher / bc.datasets need ppo.algo = 'maskable_ppo'")
        bc_val = warm_start(cfg, model, parts["train"], eval_env, len(val), out)

    done = model.num_timesteps
    left = max(0, cfg.total_timesteps - done)
    per_env = max(1, cfg.n_envs)
    validation = Eval(
        eval_env,
        n_eval_episodes=len(val),
        eval_freq=max(1, cfg.eval_freq // per_env),
        best_model_save_path=str(out / "best"),
        log_path=str(out / "eval"),
        deterministic=True,
        verbose=0,
        callback_after_eval=PrintValidation() if progress else None,
    )
    callbacks: list[BaseCallback] = [
        CheckpointCallback(
            save_freq=max(1, cfg.checkpoint_freq // per_env),
            save_path=str(out / "checkpoints"),
            name_prefix=CKPT_PREFIX,
            save_vecnormalize=True,
        ),
        validation,
    ]
    if bc_val is not None:  # PPO's checkpoints must beat the warm start on validation
        validation.best_mean_reward = bc_val
    if progress:
        callbacks.append(TqdmCallback(cfg.total_timesteps, initial=done))

    if left > 0:
        model.learn(
            total_timesteps=left,
            callback=CallbackList(callbacks),
            tb_log_name="run",
            reset_num_timesteps=False,
        )
    wall = time.perf_counter() - start
    model.save(str(out / "final.zip"))
    venv.save(str(out / "vecnormalize.pkl"))
    venv.close()
    eval_env.close()
    cpu = _cpu_s() - cpu0

    steps = model.num_timesteps - done
    stats = {
        "steps": steps,
        "total_timesteps": model.num_timesteps,
        "wall_s": wall,
        "steps_per_s": steps / wall if wall > 0 else 0.0,
        "cpu_s": cpu,  # this process and its (closed) env workers, validation included
        "steps_per_cpu_s": steps / cpu if cpu > 0 else 0.0,
        "n_envs": cfg.n_envs,
        "vec_env": cfg.vec_env,
        "bc_validation": bc_val,
    }
    (out / "stats.json").write_text(json.dumps(stats, indent=2) + "\n")
    print(
        f"trained {steps} steps in {wall:.0f} s wall, {cpu:.0f} s CPU "
        f"({stats['steps_per_cpu_s']:.0f} steps per CPU second)"
    )
    best = out / "best" / "best_model.zip"
    if not best.is_file():  # training ended before its first validation
        best.parent.mkdir(exist_ok=True)
        shutil.copyfile(out / "final.zip", best)
        print("no validation ran before the end (eval_freq > steps): best/ holds the final model")
    return best


def warm_start(
    cfg: TrainConfig, model: Any, train_parts: list, eval_env: VecEnv, n_val: int, out: Path
) -> float:
    """Behaviour cloning (``agents.bc``) of ``cfg.bc.teacher`` into ``model``'s
    policy; saves ``bc.zip`` (also the best model until PPO beats it on
    validation) and ``bc_stats.json`` (not ``bc.json``: ``load_policy`` would
    read that as the model's config); returns its validation mean return."""
    from ddl_gym.agents.bc import collect, from_minari, pretrain
    from sb3_contrib.common.maskable.evaluation import evaluate_policy

    cpu0 = _cpu_s()
    if cfg.bc.datasets:
        ids = [d.strip() for d in cfg.bc.datasets.split(",") if d.strip()]
        demos = from_minari(ids, cfg.ppo.gamma)
        want = model.policy.observation_space.shape
        if demos.obs.shape[1:] != want:
            raise ValueError(
                f"Minari datasets {ids}: observations of shape {demos.obs.shape[1:]}, the "
                f"agent's are {want} (record them with the agent's cluster, K and M)"
            )
    else:
        demos = collect(cfg.env, train_parts, cfg.bc, cfg.ppo.gamma, cfg.seed)
    cpu_collect = _cpu_s() - cpu0
    print(f"bc: {demos.stats} ({cpu_collect:.0f} CPU-s)", flush=True)
    fit = pretrain(model.policy, demos, cfg.bc, cfg.seed)
    cpu_fit = _cpu_s() - cpu0 - cpu_collect
    model.save(str(out / "bc.zip"))
    (out / "best").mkdir(exist_ok=True)
    shutil.copyfile(out / "bc.zip", out / "best" / "best_model.zip")
    mean, _ = evaluate_policy(
        model, eval_env, n_eval_episodes=n_val, deterministic=True, use_masking=True
    )
    if isinstance(mean, list):  # (per-episode lists only with return_episode_rewards)
        raise TypeError("evaluate_policy returned per-episode rewards, not their mean")
    cpu_val = _cpu_s() - cpu0 - cpu_collect - cpu_fit
    report = {
        "teacher": cfg.bc.teacher,
        "datasets": cfg.bc.datasets,
        **demos.stats,
        **fit,
        "validation": float(mean),
        "cpu_s_collect": cpu_collect,
        "cpu_s_fit": cpu_fit,
        "cpu_s_validation": cpu_val,
    }
    (out / "bc_stats.json").write_text(json.dumps(report, indent=2) + "\n")
    print(f"bc: validation mean return {mean:.3f} ({cpu_fit:.0f} CPU-s fit)", flush=True)
    return float(mean)


def apply_overrides(
    cfg: TrainConfig,
    *,
    timesteps: int | None = None,
    seed: int | None = None,
    algo: str | None = None,
    vec_env: str | None = None,
    teacher: str | None = None,
) -> TrainConfig:
    """``cfg`` with the command line's overrides (None: keep); ``teacher``
    ``"none"`` turns the behaviour-cloning warm start off."""
    if timesteps is not None:
        cfg.total_timesteps = timesteps
    if seed is not None:
        cfg.seed = seed
    if algo:
        cfg.ppo.algo = algo
    if vec_env:
        cfg.vec_env = vec_env
    if teacher is not None:
        cfg.bc.teacher = "" if teacher == "none" else teacher
    return cfg


def ship(best: Path, cfg: TrainConfig, name: str) -> Path:
    """Copy a trained model (and its config) to ``agents/models/NAME.zip``."""
    dest = DEFAULT_MODEL.parent / f"{name}.zip"
    shutil.copyfile(best, dest)
    cfg.save_json(dest.with_suffix(".json"))
    print(f"shipped: {dest} (+ {dest.with_suffix('.json').name})")
    return dest


def add_train_options(ap: argparse.ArgumentParser) -> None:
    """The run options shared by ``scripts/train.py`` and ``ddl-gym train``."""
    ap.add_argument("--resume", action="store_true", help="continue from the last checkpoint")
    ap.add_argument("--timesteps", type=int, help="override total_timesteps")
    ap.add_argument("--algo", choices=["maskable_ppo", "ppo"], help="override ppo.algo")
    ap.add_argument(
        "--teacher", help="override bc.teacher (behaviour-cloning warm start; 'none': off)"
    )
    ap.add_argument("--vec-env", choices=["subproc", "dummy"], help="override vec_env")
    ap.add_argument("--ship", metavar="NAME", help="copy the best model to agents/models/NAME.zip")
    ap.add_argument("--no-progress", action="store_true", help="no progress bar")


def train_and_ship(cfg: TrainConfig, args: argparse.Namespace) -> Path:
    """Train with the options of :func:`add_train_options`; returns the best model."""
    apply_overrides(
        cfg,
        timesteps=args.timesteps,
        seed=args.seed,
        algo=args.algo,
        vec_env=args.vec_env,
        teacher=args.teacher,
    )
    best = train(cfg, args.out, resume=args.resume, progress=not args.no_progress)
    print(f"best model: {best}")
    if args.ship:
        ship(best, cfg, args.ship)
    return best


# -- command line (scripts/train.py; ddl-gym train is ddl_gym.cli.train) -----
def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(
        description="Train a learned scheduler (MaskablePPO; plain PPO as an ablation)."
    )
    ap.add_argument("--config", type=Path, help="TOML or JSON TrainConfig (defaults otherwise)")
    ap.add_argument("--out", type=Path, required=True, help="run directory")
    ap.add_argument("--seed", type=int, help="override seed")
    add_train_options(ap)
    args = ap.parse_args(argv)
    cfg = TrainConfig.load(args.config) if args.config else TrainConfig()
    train_and_ship(cfg, args)
