"""Fuzzing harness over the public API: env, ``simulate``, trace files, scenarios, CLI.

Every case is drawn from ``numpy.random.default_rng([profile_seed, kind, i])``,
so a failure is replayed from the seed printed with it. Four families:

* **env**: random cluster shapes, fabric presets, congestion (presets,
  fractions, schedules with periods not exact in binary floating point),
  workloads (synthetic specs, synthetic traces, windows of the real traces,
  awkward frames) and env arguments from the documented ranges, driven by
  random valid and invalid actions. After every step: no exception, the step
  within a CPU-time bound, GPUs conserved (no server over- or double-booked),
  every job in exactly one state and none dropped, time monotone, progress
  monotone, the mask equal to what the engine accepts, an invalid action a
  no-op, and the summed reward equal to its documented total as of now.
  At the end of an episode: every job done, JCT >= ideal run time.
* **simulate**: random configurations x every baseline, with the engine
  invariants checked at every decision and determinism across two runs.
* **trace files**: valid templates of every family mutated into malformed
  or awkward files: each must load or raise ``TraceError`` /
  ``FileNotFoundError`` naming the file.
* **scenarios and CLI**: random scenario TOML files and command lines: a
  ``Scenario`` or a ``ScenarioError`` naming the file; exit status 0 or 2.

``run_profile`` runs a number of each and returns :class:`FuzzStats`;
``scripts/fuzz.py`` is the command line (``--long`` for 10^6 actions).
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import io
import json
import math
import signal
import tempfile
import time
import traceback
import warnings
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
from ddl_gym.baselines import POLICY_NAMES, make_policy

from ddl_gym.engine import Engine, Place, Preempt, Status, simulate
from ddl_gym.engine.simulate import PolicyEngineWarning
from ddl_gym.engine.view import EngineView
from ddl_gym.env import ClusterEnv
from ddl_gym.topology import Cluster, Congestion
from ddl_gym.traces import (
    TraceError,
    TraceWarning,
    discover_traces,
    find_data_dir,
    load_trace,
    synthetic_trace,
)

ENV, SIMULATE, FILES, SCENARIOS = range(4)
FABRICS = ("seed", "nvswitch_ib", "pcie_25gbe", "fitted_chronus", "fitted_gavel_v100")
MODELS = ("resnet50", "resnet18", "alexnet", "mobilenet_v3", "vgg11", "bert_large", "yolov3")
# periods and times that are not exact in binary floating point
AWKWARD = (0.1, 0.3, 0.7, 1.1, 33.3, 100.1, 299.9, 3600.1, 86400.7)


class StepTimeout(Exception):
    """A step used more CPU time than the bound: reported as a hang."""


class InvariantBreak(AssertionError):
    """A documented invariant does not hold."""


@contextlib.contextmanager
def cpu_limit(seconds: float) -> Iterator[None]:
    """Raise :class:`StepTimeout` once the process has used ``seconds`` of CPU.

    CPU time (``ITIMER_VIRTUAL``), not wall time, so a loaded machine does not
    turn a slow step into a false hang. Only in the main thread (pytest's).
    """

    def handler(signum: int, frame: Any) -> None:
        raise StepTimeout(f"no progress after {seconds:g} s of CPU")

    old = signal.signal(signal.SIGVTALRM, handler)
    signal.setitimer(signal.ITIMER_VIRTUAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_VIRTUAL, 0)
        signal.signal(signal.SIGVTALRM, old)


@dataclass
class FuzzStats:
    """What a profile did and what broke (each failure: kind, seed, message)."""

    configs: int = 0
    actions: int = 0
    invalid_actions: int = 0
    episodes: int = 0
    simulate_runs: int = 0
    trace_files: int = 0
    trace_files_loaded: int = 0
    scenario_cases: int = 0
    cli_cases: int = 0
    exceptions: list[str] = field(default_factory=list)
    hangs: list[str] = field(default_factory=list)
    invariant_breaks: list[str] = field(default_factory=list)
    on_failure: Callable[[str], None] | None = None  # e.g. print at once in long runs

    @property
    def failures(self) -> list[str]:
        return self.exceptions + self.hangs + self.invariant_breaks

    def record(self, what: str, err: BaseException) -> None:
        if isinstance(err, StepTimeout):
            self._add(self.hangs, f"{what}: {err}")
        elif isinstance(err, (InvariantBreak, AssertionError)):
            self.broke(f"{what}: {err}")
        else:
            tb = "".join(traceback.format_exception(err)[-4:])
            self._add(self.exceptions, f"{what}: {type(err).__name__}: {err}\n{tb}")

    def broke(self, message: str) -> None:
        """Record an invariant break found outside an exception."""
        self._add(self.invariant_breaks, message)

    def _add(self, where: list[str], message: str) -> None:
        where.append(message)
        if self.on_failure is not None:
            self.on_failure(message)

    def summary(self) -> dict[str, int]:
        return {
            "configs": self.configs,
            "actions": self.actions,
            "invalid_actions": self.invalid_actions,
            "episodes": self.episodes,
            "simulate_runs": self.simulate_runs,
            "trace_files": self.trace_files,
            "trace_files_loaded": self.trace_files_loaded,
            "scenario_cases": self.scenario_cases,
            "cli_cases": self.cli_cases,
            "exceptions": len(self.exceptions),
            "hangs": len(self.hangs),
            "invariant_breaks": len(self.invariant_breaks),
        }


def check(cond: bool, message: str) -> None:
    if not cond:
        raise InvariantBreak(message)


# -- random configurations -------------------------------------------------------
def random_cluster(rng: np.random.Generator) -> Cluster:
    return Cluster(
        int(rng.integers(1, 5)),
        int(rng.integers(1, 4)),
        int(rng.choice([1, 2, 4, 8])),
        str(rng.choice(FABRICS)),
    )


def random_congestion(rng: np.random.Generator) -> str | float | Congestion:
    kind = int(rng.integers(4))
    if kind == 0:
        return str(rng.choice(["none", "moderate", "heavy", "diurnal"]))
    if kind == 1:
        return float(rng.choice([0.0, 0.95, float(rng.uniform(0, 0.95))]))
    n = int(rng.integers(1, 5))
    # Each change is an event, so a schedule stepping every 0.1 s is slow by
    # construction on day-long jobs (as tiny leases are): steps from 33.3 s up,
    # still inexact in binary.
    unit = float(rng.choice(AWKWARD[4:]))
    times = sorted({0.0, *(unit * int(k) for k in rng.integers(1, 30, size=n - 1))})
    schedule = tuple((t, float(rng.uniform(0, 0.95))) for t in times)
    period = None
    if kind == 3 or rng.random() < 0.5:
        period = times[-1] + float(rng.choice(AWKWARD)) * int(rng.integers(1, 5))
    return Congestion(f"fuzz-{n}", schedule=schedule, period=period)


@cache
def _real_traces() -> tuple[tuple[str, pd.DataFrame], ...]:
    data = find_data_dir()
    if data is None:
        return ()
    out = []
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", TraceWarning)
        for name, path in sorted(discover_traces(data).items()):
            out.append((name, load_trace(path).jobs))
    return tuple(out)


def random_frame(rng: np.random.Generator, cluster: Cluster, n: int) -> pd.DataFrame:
    """A workload frame with awkward but valid values: equal or unsorted
    arrivals, tiny and large jobs, jobs as large as the cluster."""
    sizes = [g for g in (1, 2, 3, 4, 8, 16, cluster.num_gpus) if g <= cluster.num_gpus]
    arrivals = rng.choice([0.0, 1.0, 100.1], size=n) * rng.integers(0, 50, size=n)
    if rng.random() < 0.5:
        arrivals = np.sort(arrivals)
    iterations = 10.0 ** rng.uniform(-3, 5, size=n)
    return pd.DataFrame(
        {
            "job_id": [f"j{i}" for i in range(n)],
            "arrival_s": arrivals,
            "gpus": rng.choice(sizes, size=n),
            "model": rng.choice(MODELS, size=n),
            "iterations": iterations,
            "iter_time_s": 10.0 ** rng.uniform(-3, 0.5, size=n),
        }
    )


def random_workload(rng: np.random.Generator, cluster: Cluster, allow_spec: bool = True) -> Any:
    """A synthetic spec (env only), a synthetic trace, a real-trace window or a frame."""
    n = int(rng.integers(1, 25))
    kinds = ["trace", "frame"] + (["spec"] if allow_spec else []) + (["real"] * 2)
    kind = str(rng.choice(kinds))
    mix = {1: 4, 2: 2, 3: 1, 4: 2, 8: 1, 16: 1, 64: 1}
    mix = {g: w for g, w in mix.items() if g <= cluster.num_gpus}
    spec = {
        "n_jobs": n,
        "arrival_rate_per_h": float(rng.choice([2.0, 60.0, 3600.0])),
        "duration_median_s": float(rng.choice([30.0, 600.0, 7200.0])),
        "duration_sigma": float(rng.uniform(0, 2)),
        "max_duration_s": 20000.0,
        "gpu_mix": mix,
    }
    if kind == "spec":
        return spec
    if kind == "trace":
        return synthetic_trace(seed=int(rng.integers(2**31)), **spec)
    if kind == "real" and _real_traces():
        name, jobs = _real_traces()[int(rng.integers(len(_real_traces())))]
        fits = jobs[jobs["gpus"] <= cluster.num_gpus]
        if len(fits):
            start = int(rng.integers(max(1, len(fits) - n)))
            part = fits.iloc[start : start + n].copy()
            part["arrival_s"] -= part["arrival_s"].min()
            return part.reset_index(drop=True)
    return random_frame(rng, cluster, n)


def random_env_kwargs(rng: np.random.Generator) -> dict[str, Any]:
    cluster = random_cluster(rng)
    trace = random_workload(rng, cluster)
    kwargs: dict[str, Any] = {
        "trace": trace,
        "cluster": cluster,
        "congestion": random_congestion(rng),
        "K": int(rng.integers(1, 9)),
        "M": int(rng.integers(0, 9)),
        # leases and ticks from a minute up: a step skips every instant where the
        # agent has no choice, so a 0.7 s lease on a multi-day job (with M = 0)
        # is ~10^5 lease events in one step: slow by construction, not a hang
        "lease_s": [None, float(rng.choice([60.0, 600.1, 3600.1]))][int(rng.integers(2))],
        "tick_s": [None, float(rng.choice([60.1, 300.0, 3600.1]))][int(rng.integers(2))],
        "restore_s_per_gpu": float(rng.choice([0.0, 1.0, 30.0])),
        "reward": str(rng.choice(["jct", "makespan", "comm", "slowdown"])),
        "reward_scale": float(rng.choice([1.0, 0.01, 7.5])),
        "time_scale_s": float(rng.choice([1.0, 3600.0, 86400.0])),
        "max_steps": [None, int(rng.integers(1, 400))][int(rng.random() < 0.2)],
        "max_time_s": [None, float(rng.uniform(1, 1e5))][int(rng.random() < 0.2)],
        "queue_order": str(rng.choice(["arrival", "small_first", "las"])),
        "clairvoyant": bool(rng.integers(2)),
    }
    if isinstance(trace, pd.DataFrame) and len(trace) and rng.random() < 0.2:
        span = float(trace["arrival_s"].max() - trace["arrival_s"].min())
        kwargs["window_s"] = span * float(rng.uniform(0.5, 1.5)) + 1.0
    return kwargs


# -- env invariants --------------------------------------------------------------
def _snapshot(env: ClusterEnv) -> tuple:
    e = env.engine
    return (
        e.now,
        e.n_done,
        e.instant,
        tuple(j.index for j in e.pending),
        tuple(sorted(e.running)),
        tuple(e.free),
        tuple(j.progress for j in e.jobs),
    )


def expected_return(env: ClusterEnv) -> float:
    """The documented total of the env's reward over the episode so far."""
    e = env.engine
    now = e.now
    kind = env.reward_kind
    if kind == "makespan":
        total = (now - env._start) / env.time_scale_s
    elif kind == "comm":
        comm = 0.0
        for j in e.jobs:
            c = j.comm_time
            if j.status == Status.RUNNING:
                dt = now - max(j.last_update, j.busy_until)
                if dt > 0:
                    c += dt * j.exposed / j.t_iter
            comm += j.gpus * c
        total = comm / env.time_scale_s
    else:
        in_system = [
            max(0.0, (j.end if j.status == Status.DONE else now) - j.arrival)
            for j in e.jobs
            if j.status != Status.FUTURE
        ]
        arrived = [j for j in e.jobs if j.status != Status.FUTURE]
        if kind == "jct":
            total = sum(in_system) / env.time_scale_s
        else:  # slowdown: time in system over the bounded ideal run time
            total = sum(
                t / max(j.work / j.gpus, 10.0) for t, j in zip(in_system, arrived, strict=True)
            )
    return -total * env.reward_scale


class EnvChecker:
    """Invariants of one episode, checked after reset and every step."""

    def __init__(self, env: ClusterEnv) -> None:
        self.env = env
        self.now = -math.inf
        self.status = [Status.FUTURE] * len(env.engine.jobs)
        self.progress = [0.0] * len(env.engine.jobs)
        self.total = 0.0

    def check(self, check_mask: bool = True) -> None:
        env = self.env
        e = env.engine
        c = e.cluster
        G, S = c.gpus_per_server, c.servers_per_rack
        check(e.now >= self.now, f"time went back: {e.now} < {self.now}")
        self.now = e.now
        used = [0] * c.num_servers
        for job in e.running.values():
            check(job.status == Status.RUNNING, f"job {job.job_id} in running but {job.status}")
            check(sum(g for _, g in job.placement) == job.gpus, "a gang is not whole")
            for s, g in job.placement:
                used[s] += g
        for s in range(c.num_servers):
            check(e.free[s] >= 0 and e.free[s] + used[s] == G, f"server {s} double-booked")
        for r in range(c.racks):
            check(e.rack_free[r] == sum(e.free[r * S : (r + 1) * S]), f"rack {r} books")
        check(e.total_free == sum(e.free), "total free GPUs do not add up")
        pending = {j.index for j in e.pending}
        check(len(pending) == len(e.pending), "a job queued twice")
        n_done = 0
        for job in e.jobs:
            before, now = self.status[job.index], job.status
            check(before != Status.DONE or now == Status.DONE, "a job completed twice")
            check(before == Status.FUTURE or now != Status.FUTURE, "a job arrived twice")
            if now == Status.FUTURE:
                check(job.arrival > e.now, f"job {job.job_id} dropped: arrived, never queued")
            else:
                check(job.arrival <= e.now, f"job {job.job_id} arrived early")
            check((now == Status.PENDING) == (job.index in pending), "pending set wrong")
            check((now == Status.RUNNING) == (job.index in e.running), "running set wrong")
            if now == Status.DONE and before != Status.DONE:
                ideal = job.work / job.gpus
                check(
                    job.end - job.arrival >= ideal * (1 - 1e-9) - 1e-9,
                    f"job {job.job_id} JCT {job.end - job.arrival} < ideal {ideal}",
                )
            self.status[job.index] = now
            done_work = job.iterations - e.remaining_iterations(job)
            check(
                done_work >= self.progress[job.index] - 1e-9 * max(1.0, job.iterations),
                "progress went back",
            )
            self.progress[job.index] = max(done_work, self.progress[job.index])
            n_done += now == Status.DONE
        check(n_done == e.n_done, "done count wrong")
        want = expected_return(env)
        check(
            math.isclose(self.total, want, rel_tol=1e-7, abs_tol=1e-9 * max(1.0, abs(want))),
            f"{env.reward_kind} return {self.total!r} != documented total {want!r} at t={e.now}",
        )
        if check_mask:
            mask = env.action_masks()
            for a in range(1, env.action_space.n):
                try:
                    action = env.engine_action(a)
                except ValueError:
                    check(not mask[a], f"action {a} masked valid but has no engine action")
                    continue
                valid = e.check(action) is None
                if isinstance(action, Preempt) and e.jobs[action.job].started_at == e.now:
                    valid = False
                check(bool(mask[a]) == valid, f"mask[{a}]={mask[a]} but engine says {valid}")

    def finish(self) -> None:
        e = self.env.engine
        check(all(j.status == Status.DONE for j in e.jobs), "episode over, jobs not done")


def _pick_action(rng: np.random.Generator, mask: np.ndarray, p_invalid: float) -> int:
    n = len(mask)
    if rng.random() < p_invalid:
        r = rng.random()
        if r < 0.1:
            return int(rng.choice([-1, n, n + 7, 2**40, -(2**40)]))
        return int(rng.integers(n))
    valid = np.flatnonzero(mask)
    if len(valid) == 0:
        return 0
    if mask[0] and rng.random() < 0.3:
        return 0
    return int(rng.choice(valid))


def run_env_config(
    seed: tuple[int, ...], max_actions: int, stats: FuzzStats, step_cpu_s: float = 20.0
) -> None:
    """One random env configuration driven by ``max_actions`` actions."""
    rng = np.random.default_rng(list(seed))
    what = f"env config seed={list(seed)}"
    stats.configs += 1
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", TraceWarning)  # unsorted frames are sorted
            with cpu_limit(step_cpu_s):
                env = ClusterEnv(**random_env_kwargs(rng))
    except Exception as err:
        stats.record(f"{what} (construction)", err)
        return
    p_invalid = float(rng.choice([0.0, 0.05, 0.3, 1.0]))
    check_mask = bool(rng.random() < 0.3)  # the costliest check: a share of configs
    actions = 0
    episode = 0
    while actions < max_actions:
        try:
            with cpu_limit(step_cpu_s):
                _, info = env.reset(seed=int(rng.integers(2**31)))
            stats.episodes += 1
            episode += 1
            checker = EnvChecker(env)
            checker.total = float(info.get("skipped_reward", 0.0))
            checker.check(check_mask)
            while actions < max_actions:
                mask = info["action_mask"]
                a = _pick_action(rng, mask, p_invalid)
                was_valid = 0 <= a < len(mask) and bool(mask[a]) and not env.engine.done
                before = _snapshot(env)
                with cpu_limit(step_cpu_s):
                    obs, reward, term, trunc, info = env.step(a)
                actions += 1
                stats.actions += 1
                checker.total += reward
                if not was_valid:
                    stats.invalid_actions += 1
                    check("invalid" in info and reward == 0.0, f"invalid action {a} accepted")
                    check(_snapshot(env) == before, f"invalid action {a} changed the state")
                else:
                    check("invalid" not in info, f"valid action {a} refused: {info.get('invalid')}")
                if actions % 16 == 0 or term or trunc:
                    check(env.observation_space.contains(obs), "observation outside its space")
                checker.check(check_mask)
                if term:
                    checker.finish()
                    check(info["summary"]["completed"] == len(env.engine.jobs), "summary")
                if term or trunc:
                    break
        except Exception as err:
            stats.record(f"{what} episode {episode} after {actions} actions", err)
            return


# -- simulate() over every baseline -------------------------------------------------
class CheckingPolicy:
    """Wraps a policy; checks the engine's invariants at every decision."""

    def __init__(self, policy: Any, engine_ref: list[Engine]) -> None:
        self.policy = policy
        self.engine_ref = engine_ref
        self.now = -math.inf

    def __getattr__(self, name: str) -> Any:
        return getattr(self.policy, name)

    def reset(self, view: EngineView, seed: int | None = None) -> None:
        self.engine_ref.append(view._engine)
        self.policy.reset(view, seed=seed)

    def act(self, view: EngineView) -> Any:
        e = view._engine
        check(e.now >= self.now, "time went back")
        self.now = e.now
        used = sum(j.gpus for j in e.running.values())
        check(e.total_free + used == e.cluster.num_gpus, "GPUs not conserved")
        check(min(e.free) >= 0, "a server over-booked")
        action = self.policy.act(view)
        if isinstance(action, (Place, Preempt)):
            check(e.check(action) is None, f"policy chose an invalid action {action}")
        return action


def run_simulate_config(
    seed: tuple[int, ...],
    stats: FuzzStats,
    policies: tuple[str, ...] | None = None,
    run_cpu_s: float = 120.0,
) -> None:
    """One random configuration under every baseline (or ``policies``)."""
    rng = np.random.default_rng(list(seed))
    stats.configs += 1
    cluster = random_cluster(rng)
    trace = random_workload(rng, cluster, allow_spec=False)
    kwargs = {"congestion": random_congestion(rng)}
    if rng.random() < 0.3:
        kwargs["lease_s"] = float(rng.choice([60.0, 600.1, 3600.1]))
    if rng.random() < 0.3:
        kwargs["tick_s"] = float(rng.choice([60.1, 300.0]))
    kwargs["restore_s_per_gpu"] = float(rng.choice([0.0, 1.0, 30.0]))
    for name in policies or tuple(POLICY_NAMES):
        what = f"simulate seed={list(seed)} policy={name}"
        try:
            results = []
            for _ in range(2 if name == "random" or rng.random() < 0.1 else 1):
                policy = make_policy(name)
                run_kwargs = {**policy.engine_kwargs(), **kwargs}
                ref: list[Engine] = []
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore", TraceWarning)
                    # the fuzz overrides policies' engine settings on purpose
                    warnings.simplefilter("ignore", PolicyEngineWarning)
                    with cpu_limit(run_cpu_s):
                        res = simulate(
                            trace, cluster, CheckingPolicy(policy, ref), seed=3, **run_kwargs
                        )
                stats.simulate_runs += 1
                jobs = res.jobs
                check(len(jobs) == len(ref[0].jobs), "jobs missing from the result")
                check(res.summary["completed"] == len(jobs), "not every job completed")
                ideal = jobs["ideal_s"].to_numpy()
                jct = jobs["jct_s"].to_numpy()
                check(bool(np.all(jct >= ideal * (1 - 1e-9) - 1e-9)), "a JCT below ideal")
                results.append(jobs)
            if len(results) == 2:
                check(results[0].equals(results[1]), "same seed, different per-job table")
        except Exception as err:
            stats.record(what, err)


# -- trace files -----------------------------------------------------------------
_TEMPLATES: dict[str, tuple[str, list[str], list[list[Any]]]] = {
    # family: (suffix, header, rows)
    "philly": (
        ".csv",
        ["timestamp", "duration", "num_gpus", "gpu_time", "cluster"],
        [
            ["2017-11-13 00:02:12", "67.0", "1", "67.0", "11cb48"],
            ["2017-11-13 00:12:12", "680.0", "4", "2720.0", "11cb48"],
            ["2017-11-13 01:00:00", "3600.0", "8", "28800.0", "6214e9"],
        ],
    ),
    "tiresias": (
        ".csv",
        ["job_id", "num_gpu", "submit_time", "iterations", "model_name", "duration", "interval"],
        [
            ["1", "4", "0", "1000", "vgg16", "500", "10"],
            ["2", "1", "10", "200", "resnet50", "100", "5"],
            ["3", "8", "15", "5000", "inception3", "900", "0"],
        ],
    ),
    "pollux": (
        ".csv",
        ["name", "time", "application", "num_replicas", "batch_size"],
        [
            ["cifar10-1", "0", "cifar10", "1", "128"],
            ["bert-2", "30", "bert", "4", "12"],
            ["imagenet-3", "60", "imagenet", "8", "256"],
        ],
    ),
    "alibaba": (
        ".csv",
        ["name", "num_gpu", "gpu_milli", "creation_time", "scheduled_time", "deletion_time"],
        [
            ["pod-1", "1", "1000", "0", "5", "600"],
            ["pod-2", "2", "1000", "10", "20", "4000"],
            ["pod-3", "1", "500", "30", "31", "90"],
            ["pod-4", "0", "0", "40", "41", "90"],
        ],
    ),
    "normalised": (
        ".csv",
        ["job_id", "arrival_s", "gpus", "model", "iterations", "iter_time_s"],
        [
            ["a", "0", "2", "resnet50", "1000", "0.1"],
            ["b", "5.5", "8", "bert_large", "20", "1.5"],
            ["c", "9", "1", "alexnet", "300", "0.02"],
        ],
    ),
    "dally": (
        ".json",
        [
            "job_id",
            "arrival_time",
            "max_parallelism",
            "total_iterations",
            "time_per_iteration",
            "model",
            "duration",
            "user",
        ],
        [
            ["0", "100", "8", "5000", "0.2", "ResNet50", "1000", "u1"],
            ["1", "50", "4", "300", "0.5", "BERT", "200", "u2"],
            ["2", "200", "16", "900", "0.1", "VGG", "100", "u1"],
        ],
    ),
}

_BAD_VALUES = (
    "",
    "nan",
    "abc",
    "-1",
    "0",
    "1e400",
    "inf",
    "-inf",
    "9223372036854775807",
    "1e30",
    "3.5",
    " 7 ",
    "0x10",
    "NULL",
    "１",
    "1,5",
    '"',
    "true",
)


def _write(
    path: Path, suffix: str, header: list[str], rows: list[list[Any]], rng: np.random.Generator
) -> bytes:
    if suffix == ".json":
        records = [dict(zip(header, r, strict=False)) for r in rows]
        return json.dumps(records).encode()
    sep = "\r\n" if rng.random() < 0.2 else "\n"
    lines = [",".join(header)] + [",".join(str(v) for v in r) for r in rows]
    return (sep.join(lines) + sep).encode()


def mutate_trace_file(rng: np.random.Generator, folder: Path) -> tuple[Path, str]:
    """Write one malformed or awkward trace file; returns its path and the mutation."""
    family = str(rng.choice(list(_TEMPLATES)))
    suffix, header, rows = _TEMPLATES[family]
    header = list(header)
    rows = [list(r) for r in rows]
    op = str(
        rng.choice(
            [
                "cell",
                "cell",
                "cell",
                "drop_column",
                "extra_column",
                "reorder",
                "shuffle_rows",
                "header_only",
                "empty",
                "garbage",
                "bom",
                "duplicate_row",
                "blank_lines",
                "short_row",
                "json_types",
                "deep_json",
                "directory",
                "huge_gpus",
                "parquet",
            ]
        )
    )
    path = folder / f"case-{int(rng.integers(1 << 40))}-{family}{suffix}"
    data: bytes | None = None
    if op == "cell":
        for _ in range(int(rng.integers(1, 3))):
            r, c = int(rng.integers(len(rows))), int(rng.integers(len(header)))
            rows[r][c] = str(rng.choice(_BAD_VALUES))
    elif op == "drop_column":
        c = int(rng.integers(len(header)))
        header.pop(c)
        for r in rows:
            r.pop(c)
    elif op == "extra_column":
        header.append("extra")
        for r in rows:
            r.append("x")
    elif op == "reorder":
        order = rng.permutation(len(header))
        header = [header[i] for i in order]
        rows = [[r[i] for i in order] for r in rows]
    elif op == "shuffle_rows":
        rows = [rows[i] for i in rng.permutation(len(rows))]
    elif op == "header_only":
        rows = []
    elif op == "empty":
        data = b""
    elif op == "garbage":
        data = bytes(rng.integers(0, 256, size=int(rng.integers(1, 200)), dtype=np.uint8))
    elif op == "duplicate_row":
        rows.append(list(rows[0]))
    elif op == "short_row":
        rows[0] = rows[0][:-2]
    elif op == "huge_gpus":
        gpu_col = next(
            i
            for i, h in enumerate(header)
            if h in ("num_gpus", "num_gpu", "num_replicas", "gpus", "max_parallelism")
        )
        rows[int(rng.integers(len(rows)))][gpu_col] = str(
            rng.choice(["9223372036854775807", "9.3e18", "100000000", "1e12"])
        )
    elif op == "directory":
        path.mkdir()
        return path, op
    if data is None:
        data = _write(path, suffix, header, rows, rng)
    if op == "bom":
        data = b"\xef\xbb\xbf" + data
    elif op == "blank_lines" and suffix == ".csv":
        data = data.replace(b"\n", b"\n\n", 2)
    elif op == "json_types" and suffix == ".json":
        records = json.loads(data)
        key = str(rng.choice(header))
        records[int(rng.integers(len(records)))][key] = [
            True,
            None,
            3,
            2.5,
            [1],
            {"a": 1},
            -4,
            1e300,
        ][int(rng.integers(8))]
        data = json.dumps(records).encode()
    elif op == "deep_json":
        depth = int(rng.choice([10, 5000, 200000]))
        data = ("[" * depth + "]" * depth).encode()
    elif op == "parquet":
        frame = pd.DataFrame(rows, columns=header)
        if family == "normalised":
            for col in ("arrival_s", "iterations", "iter_time_s"):
                frame[col] = frame[col].astype(float)
            frame["gpus"] = frame["gpus"].astype(int)
        path = path.with_suffix(".parquet")
        frame.to_parquet(path, index=False)
        return path, op
    path.write_bytes(data)
    return path, op


def check_trace_file(path: Path, op: str, stats: FuzzStats, cpu_s: float = 30.0) -> None:
    """Loading ``path`` gives a valid trace or a one-line error naming the file."""
    stats.trace_files += 1
    what = f"trace file {path.name} ({op})"
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", TraceWarning)
            with cpu_limit(cpu_s):
                trace = load_trace(path)
    except (TraceError, FileNotFoundError) as err:
        msg = str(err)
        if not msg.startswith(str(path)) or "\n" in msg:
            stats.broke(f"{what}: error does not start with the file: {msg!r}")
        return
    except Exception as err:
        stats.record(what, err)
        return
    stats.trace_files_loaded += 1
    jobs = trace.jobs
    try:
        check(len(jobs) > 0, "an empty workload loaded")
        check(
            bool((jobs["gpus"] >= 1).all()) and int(jobs["gpus"].max()) <= 1_000_000,
            "GPU count out of range",
        )
        for col in ("arrival_s", "iterations", "iter_time_s"):
            check(bool(np.isfinite(jobs[col]).all()), f"non-finite {col}")
        check(bool((np.diff(jobs["arrival_s"]) >= 0).all()), "arrivals not sorted")
        check(jobs["job_id"].is_unique, "duplicate job ids")
    except InvariantBreak as err:
        stats.broke(f"{what}: {err}")


# -- scenarios and the CLI ------------------------------------------------------------
def random_scenario_toml(rng: np.random.Generator) -> str:
    """A scenario file, valid or not (unknown keys, wrong types, bad names)."""
    good: dict[str, str] = {
        "trace": '"synthetic"',
        "cluster": '"2x2x4"',
        "congestion": '"moderate"',
        "jobs": "5",
        "seeds": "[0, 1]",
    }
    synthetic: dict[str, str] = {"n_jobs": "6", "gpu_mix": "{ 1 = 1, 2 = 1 }"}
    bad = [
        ("jobs", '"a"'),
        ("jobs", "-3"),
        ("jobs", "true"),
        ("jobs", "1.5"),
        ("cluster", '"9x9"'),
        ("cluster", "3"),
        ("fabric", '"nope"'),
        ("congestion", '"storm"'),
        ("congestion", "1.5"),
        ("congestion", "nan"),
        ("lease_s", "0"),
        ("lease_s", '"a"'),
        ("tick_s", "-inf"),
        ("restore_s_per_gpu", "-1"),
        ("clairvoyant", '"yes"'),
        ("seeds", "[-1]"),
        ("seeds", '["a"]'),
        ("seeds", "[]"),
        ("policies", "[1]"),
        ("congestions", '["storm"]'),
        ("trace", '"missing.csv"'),
        ("trace", '"."'),
        ("typo_key", "1"),
        ("name", "3"),
    ]
    bad_synth = [
        ("n_jobs", '"a"'),
        ("n_jobs", "0"),
        ("n_jobs", "true"),
        ("bogus", "1"),
        ("model_mix", '{ "not_a_model" = 1 }'),
        ("gpu_mix", "{ a = 1 }"),
        ("gpu_mix", "{ 1 = -1 }"),
        ("gpu_mix", "{ 4096 = 1 }"),
        ("gpu_mix", "{ 1 = 0 }"),
        ("arrival_rate_per_h", "0"),
        ("duration_sigma", '"x"'),
        ("max_gpus", "0"),
    ]
    for _ in range(int(rng.integers(0, 3))):
        if rng.random() < 0.5:
            k, v = bad[int(rng.integers(len(bad)))]
            good[k] = v
        else:
            k, v = bad_synth[int(rng.integers(len(bad_synth)))]
            synthetic[k] = v
    lines = [f"{k} = {v}" for k, v in good.items()]
    lines += ["", "[synthetic]"] + [f"{k} = {v}" for k, v in synthetic.items()]
    if rng.random() < 0.1:
        lines.insert(0, "this is = = not toml")
    return "\n".join(lines) + "\n"


def check_scenario_case(rng: np.random.Generator, folder: Path, stats: FuzzStats) -> None:
    from ddl_gym.scenarios import ScenarioError, load_scenario_file

    stats.scenario_cases += 1
    path = folder / f"scenario-{int(rng.integers(1 << 40))}.toml"
    path.write_text(random_scenario_toml(rng), encoding="utf-8")
    what = f"scenario {path.name}: {path.read_text()!r}"
    try:
        with cpu_limit(30.0):
            scenario, _ = load_scenario_file(path)
            trace = scenario.build_trace(seed=0)
        check(len(trace) > 0, "a scenario built an empty workload")
    except ScenarioError as err:
        if not str(err).startswith(str(path)):
            stats.broke(f"{what}: error does not name the file: {err}")
    except Exception as err:
        stats.record(what, err)


def random_cli_args(rng: np.random.Generator, folder: Path) -> list[str]:
    """A ``ddl-gym`` command line, often with one bad argument."""
    out = str(folder / "runs")
    args = ["simulate", "-s", "small", "--jobs", "4", "--no-progress", "--no-save"]
    choices: list[list[str]] = [
        [],
        ["--jobs", "0"],
        ["--jobs", "abc"],
        ["--cluster", "0x1x1"],
        ["--cluster", "bogus"],
        ["--fabric", "nope"],
        ["--congestion", "storm"],
        ["--congestion", "2"],
        ["--congestion", "nan"],
        ["--policy", "nope"],
        ["--seed", "-1"],
        ["--seed", "x"],
        ["--trace", str(folder)],
        ["--trace", str(folder / "missing.csv")],
        ["--config", str(folder / "missing.toml")],
        ["-s", "nope"],
        ["-s", str(folder / "missing.toml")],
        ["--bogus-flag"],
    ]
    extra = choices[int(rng.integers(len(choices)))]
    if rng.random() < 0.15:
        blocker = folder / "a-file"
        blocker.write_text("x")
        args = [a for a in args if a != "--no-save"] + ["--out", str(blocker)]
    elif rng.random() < 0.1:
        args = [a for a in args if a != "--no-save"] + ["--out", out]
    return args + extra


def run_cli(argv: list[str]) -> tuple[int, str]:
    """``ddl-gym argv`` in-process: (exit status, stderr)."""
    from ddl_gym.cli import main

    err = io.StringIO()
    with contextlib.redirect_stderr(err), contextlib.redirect_stdout(io.StringIO()):
        try:
            code = main(argv)
        except SystemExit as exc:  # argparse's usage errors
            code = exc.code if isinstance(exc.code, int) else 2
    return int(code), err.getvalue()


def check_cli_case(rng: np.random.Generator, folder: Path, stats: FuzzStats) -> None:
    stats.cli_cases += 1
    argv = random_cli_args(rng, folder)
    what = f"ddl-gym {' '.join(argv)}"
    try:
        with cpu_limit(60.0):
            code, err = run_cli(argv)
    except Exception as exc:
        stats.record(what, exc)
        return
    if code not in (0, 2) or "Traceback" in err:
        stats.broke(f"{what}: exit {code}: {err[-500:]}")


# -- profiles ----------------------------------------------------------------------
@dataclass(frozen=True)
class Profile:
    env_configs: int
    actions_per_config: int
    simulate_configs: int
    trace_files: int
    scenario_cases: int
    cli_cases: int
    seed: int = 0


SHORT = Profile(
    env_configs=12,
    actions_per_config=150,
    simulate_configs=2,
    trace_files=60,
    scenario_cases=30,
    cli_cases=6,
)
LONG = Profile(
    env_configs=1000,
    actions_per_config=1000,
    simulate_configs=120,
    trace_files=600,
    scenario_cases=300,
    cli_cases=120,
)


def run_profile(
    profile: Profile,
    folder: Path,
    progress: Callable[[str], None] | None = None,
    shard: int = 0,
    shards: int = 1,
) -> FuzzStats:
    """Run every family of ``profile``; files go to ``folder``.

    ``shard`` of ``shards`` runs every ``shards``-th case, so that separate
    processes together run exactly the whole profile (same seeds).
    """
    stats = FuzzStats(on_failure=(lambda m: progress(f"FAILURE {m}")) if progress else None)
    s = profile.seed
    mine = range(shard, profile.env_configs, shards)
    for n, i in enumerate(mine, start=1):
        run_env_config((s, ENV, i), profile.actions_per_config, stats)
        if progress and n % 25 == 0:
            progress(f"env {n}/{len(mine)}: {stats.summary()}")
    mine = range(shard, profile.simulate_configs, shards)
    for n, i in enumerate(mine, start=1):
        run_simulate_config((s, SIMULATE, i), stats)
        if progress and n % 10 == 0:
            progress(f"simulate {n}/{len(mine)}: {stats.summary()}")
    files = folder / "traces"
    files.mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng([s, FILES, shard])
    for _ in range(shard, profile.trace_files, shards):
        path, op = mutate_trace_file(rng, files)
        check_trace_file(path, op, stats)
    rng = np.random.default_rng([s, SCENARIOS, shard])
    scen = folder / "scenarios"
    scen.mkdir(parents=True, exist_ok=True)
    for _ in range(shard, profile.scenario_cases, shards):
        check_scenario_case(rng, scen, stats)
    for _ in range(shard, profile.cli_cases, shards):
        check_cli_case(rng, scen, stats)
    return stats


# -- command line (scripts/fuzz.py) ----------------------------------------------
FUZZ_HELP = (
    "Fuzz the public API: random env configurations x random and invalid actions,\n"
    "simulate() x every baseline, malformed trace files, scenario files, CLI arguments.\n"
    "Exit status 1 if anything broke; each failure prints with the seed that replays it."
)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(
        description=FUZZ_HELP,
        formatter_class=argparse.RawTextHelpFormatter,
    )
    p.add_argument("--long", action="store_true", help="the long profile (>= 10^6 actions)")
    p.add_argument("--seed", type=int, default=0, help="profile seed (default 0)")
    p.add_argument("--env-configs", type=int, help="override: env configurations")
    p.add_argument("--actions", type=int, help="override: actions per env configuration")
    p.add_argument("--simulate-configs", type=int, help="override: simulate() configurations")
    p.add_argument("--json", type=Path, help="write the figures and failures here")
    p.add_argument(
        "--shard", default="0/1", help="K/N: run every N-th case from K (parallel processes)"
    )
    args = p.parse_args(argv)
    profile = dataclasses.replace(LONG if args.long else SHORT, seed=args.seed)
    for key, value in (
        ("env_configs", args.env_configs),
        ("actions_per_config", args.actions),
        ("simulate_configs", args.simulate_configs),
    ):
        if value is not None:
            profile = dataclasses.replace(profile, **{key: value})
    try:
        shard, shards = (int(x) for x in args.shard.split("/"))
        assert 0 <= shard < shards
    except (ValueError, AssertionError):
        p.error(f"--shard must be K/N with 0 <= K < N, got {args.shard!r}")
    print(f"profile: {profile}, shard {shard}/{shards}", flush=True)
    cpu = time.process_time()
    with tempfile.TemporaryDirectory(prefix="ddl-gym-fuzz-") as folder:
        stats = run_profile(
            profile, Path(folder), lambda m: print(m, flush=True), shard=shard, shards=shards
        )
    cpu = time.process_time() - cpu
    summary = {**stats.summary(), "cpu_s": round(cpu, 1)}
    print(json.dumps(summary, indent=1))
    for failure in stats.failures:
        print("----", failure, sep="\n")
    if args.json:
        record = {
            "profile": dataclasses.asdict(profile),
            "shard": f"{shard}/{shards}",
            **summary,
            "failures": stats.failures,
        }
        args.json.write_text(json.dumps(record, indent=1))
    return 1 if stats.failures else 0
