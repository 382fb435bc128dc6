"""Offline datasets: every heuristic's episodes on a suite split, as Minari datasets.

    ddl-gym benchmark datasets --suite ddl-gym-v1 --split train --root runs/minari
    MINARI_DATASETS_PATH=runs/minari python -c "import minari;
        d = minari.load_dataset('ddl-gym-v1-train/pollux-1_pcie128/gandiva-v0')
        env = d.recover_environment()"

One dataset per (case, heuristic), one episode per seed of the case, in the
bench env (``gymnasium.make("ddl_gym/Bench-v3", cases=[case], ...)``,
``ddl_gym.env.bench_env.BenchEnv``): the case's workload for that seed, its
cluster and congestion, the size-free set observation, and the heuristic's
own engine settings (Dally's leases, Gandiva's free migration; no periodic
ticks unless the heuristic asks for them), so an episode is the benchmark's
run of that (case, seed) and a complete episode's return is minus its total
JCT in hours. The heuristic acts on the env's view of the engine
(``env.view``) and its action is recorded as the env's discrete action
(``action_index``), so an offline learner sees the observations, actions and
rewards an online agent would.

What each dataset records beside the steps (``dataset.storage.metadata``):

* ``env_spec``: the registered id and its arguments, so
  ``dataset.recover_environment()`` rebuilds the env; each episode's reset
  ``seed`` and ``options`` (``{"case", "seed"}``) are in its episode
  metadata (``dataset.storage.get_episode_metadata``), so
  ``env.reset(seed=..., options=...)`` replays its start;
* ``ref_min_score`` / ``ref_max_score``: the worst and the best of the
  suite's heuristics (``Suite.heuristics``) on the case, each scored by its
  mean over the case's seeds of the whole-episode return (minus total JCT in
  hours, from the benchmark's records: the shipped reference records where
  they cover the case, else runs made here), so Minari's normalised score is
  0 at the worst heuristic and 1 at the best;
* ``code_permalink``: the repository (its ``origin`` remote when known) and
  the commit of the code that built it (``+dirty`` when the tree differed);
* ``ddl_gym``: suite, suite hash, split, case, seeds, policy, its engine
  settings, how many episodes are complete and how many truncated and why,
  and whether the seeds give distinct episodes.

An action the env cannot express (a job outside the ``K`` pending rows, a
running job outside the ``M`` running rows) ends that episode there,
truncated: what follows would not be the heuristic's. Such episodes are
counted in the metadata with the reason; larger windows (``K``, ``M``) make
them rarer. Needs ``minari`` and ``pyarrow`` (the ``datasets`` extra);
datasets go to ``root`` (``MINARI_DATASETS_PATH``), in Minari's Arrow format.
"""

from __future__ import annotations

import hashlib
import os
import re
import subprocess
import warnings
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from ddl_gym.benchmarks.policies import PolicySpec, resolve_policy
from ddl_gym.benchmarks.suite import Case, get_suite, suite_hash
from ddl_gym.engine import EngineView

if TYPE_CHECKING:
    import gymnasium as gym

ENV_ID = "ddl_gym/Bench-v3"
# engine settings a heuristic may ask for, which the env takes as arguments
ENV_ENGINE_KEYS = ("lease_s", "lazy_leases", "tick_s", "restore_s_per_gpu")
DEFAULT_K = 64  # the bench env's (and the shipped agent's) windows
DEFAULT_M = 64
OUTSIDE = "outside_windows"
MASKED = "masked"
TRUNCATION_REASONS = {
    OUTSIDE: "the policy chose a job outside the env's windows (a pending job past the K "
    "rows, or a running job past the M rows), which the env cannot express; the episode "
    "ends there, truncated",
    MASKED: "the policy chose an action the env's mask refuses (e.g. a preemption past the "
    "per-instant budget); the episode ends there, truncated",
}

REPLAY_NOTE = (
    "the policy asks the engine for decision points of its own (wake-ups at its timers, "
    "e.g. Tiresias' promotions, Dally's delay timers) or hints which instants matter; the "
    "recorded transitions are the benchmark's run, but after a WAIT the next observation "
    "may be at such an instant, which the env's WAIT alone does not schedule, so feeding "
    "the recorded actions to the recovered env diverges from the first such WAIT"
)


@dataclass(frozen=True)
class DatasetSummary:
    dataset_id: str
    episodes: int
    steps: int
    dropped: int  # episodes whose first action lay outside the env's windows
    cut: int = 0  # episodes truncated where the policy left the windows


def dataset_id(suite: str, split: str, case: Case, policy: str) -> str:
    """``<suite>-<split>/<case>/<policy>-v0`` with Minari's allowed characters."""

    def clean(text: str) -> str:
        return re.sub(r"[^-\w]+", "_", text)

    return f"{clean(suite)}-{clean(split)}/{clean(case.name)}/{clean(policy)}-v0"


def env_kwargs(
    suite: str, split: str, case: Case, spec: PolicySpec, policy: Any, K: int, M: int
) -> dict[str, Any]:
    """The bench env's arguments for ``case`` run by ``policy``: that case
    only, its seeds, the windows, and the policy's engine settings (no ticks
    unless it asks for them, as in the benchmark). Plain data: they go into
    the dataset's env spec."""
    wanted = getattr(policy, "engine_kwargs", dict)()
    engine = {"tick_s": None} | {k: v for k, v in wanted.items() if k in ENV_ENGINE_KEYS}
    out = {
        "suite": suite,
        "split": split,
        "cases": [case.name],
        "seeds": [int(s) for s in case.seeds],
        "K": K,
        "M": M,
        # heuristics preempt several jobs at one instant (Tiresias' demotions):
        # as many as the env shows
        "preempt_budget": M,
        **engine,
    }
    if spec.clairvoyant:
        out["clairvoyant"] = True
    return out


def case_env(
    suite: str, split: str, case: Case, spec: PolicySpec, policy: Any, K: int, M: int
) -> gym.Env:
    """``gymnasium.make`` of the bench env for ``case`` and ``policy`` (see
    :func:`env_kwargs`): its ``spec`` is what the dataset records."""
    import gymnasium as gym

    import ddl_gym  # noqa: F401  (registers the ids)

    return gym.make(ENV_ID, **env_kwargs(suite, split, case, spec, policy, K, M))


@dataclass
class Recorded:
    """One recorded episode: the Minari ``EpisodeBuffer`` (None when the
    policy's first action is one the env cannot express), why it was cut
    short (a key of ``TRUNCATION_REASONS``; ``""``: it was not), and how
    often the policy asked the engine for decision points of its own
    (``wake_at``) or changed which instants are skipped (``hint``); for a
    complete episode, the engine's summary (the benchmark's record of the
    run: the same engine, the same decisions)."""

    buffer: Any | None
    cut: str = ""
    own_instants: int = 0
    summary: dict[str, Any] | None = None  # the engine's summary of a complete episode


class _WatchedView(EngineView):
    """The env's engine view, counting the calls that change which instants
    the engine stops at (a replay of the actions in the env lacks them)."""

    __slots__ = ("own_instants",)

    def __init__(self, engine: Any) -> None:
        super().__init__(engine)
        self.own_instants = 0

    def wake_at(self, t: float) -> None:
        self.own_instants += 1
        super().wake_at(t)

    def hint(self, hints: Any) -> None:
        self.own_instants += 1
        super().hint(hints)


def record_episode(
    env: Any, policy: Any, seed: int, episode_id: int, options: dict[str, Any] | None = None
) -> Recorded:
    """Run ``policy`` through ``env`` (reset with ``seed`` and ``options``);
    the episode as a Minari ``EpisodeBuffer`` (observations, actions,
    rewards, terminations, truncations, the reset seed and options, and the
    action mask of each observation in ``infos``), in a :class:`Recorded`.
    Built here rather than with Minari's ``DataCollector``, which needs jax
    to append steps."""
    from minari.data_collector import EpisodeBuffer

    base = env.unwrapped
    obs, info = env.reset(seed=seed, options=options)
    view = _WatchedView(base.engine)
    policy.reset(view, seed=seed)
    observations: list[np.ndarray] = [obs]
    # the valid actions at each observation (Minari keeps infos beside them)
    masks: list[np.ndarray] = [info["action_mask"]]
    actions: list[int] = []
    rewards: list[float] = []
    terminations: list[bool] = []
    truncations: list[bool] = []
    cut = ""
    while True:
        try:
            action = base.action_index(policy.act(view))
        except ValueError:
            cut = OUTSIDE
        else:
            if not masks[-1][action]:
                cut = MASKED
        if cut:
            # what follows would not be the heuristic's episode, so it ends
            # here, truncated (None if nothing was recorded)
            if not actions:
                return Recorded(None, cut, view.own_instants)
            truncations[-1] = True
            break
        obs, reward, terminated, truncated, info = env.step(action)
        if "invalid" in info:  # the mask allowed it: the env and the engine disagree
            raise RuntimeError(f"{policy.name} chose an invalid action: {info['invalid']}")
        observations.append(obs)
        masks.append(info["action_mask"])
        actions.append(int(action))
        rewards.append(float(reward))
        terminations.append(bool(terminated))
        truncations.append(bool(truncated))
        if terminated or truncated:
            break
    summary = info.get("summary") if terminations and terminations[-1] else None
    buffer = EpisodeBuffer(
        id=episode_id,
        seed=seed,
        options=options,
        observations=observations,
        actions=actions,
        rewards=rewards,
        terminations=terminations,
        truncations=truncations,
        infos={"action_mask": masks},
    )
    return Recorded(buffer, cut, view.own_instants, summary)


def reference_returns(
    suite: str,
    split: str,
    case: Case,
    known: dict[tuple[str, int], dict[str, Any]] | None = None,
) -> dict[str, float]:
    """Per heuristic of the suite (``Suite.heuristics``), its mean over the
    case's seeds of the whole-episode return (minus total JCT in hours), from
    the benchmark's records: ``known`` ((policy, seed) -> summary, e.g. of
    complete recorded episodes), else the shipped reference records where
    they cover the (case, seed), else a run of ``run_case`` here."""
    from ddl_gym.benchmarks.runner import OK, run_case

    the_suite = get_suite(suite)
    stored: dict[tuple[str, int], dict[str, Any]] = {}
    try:
        from ddl_gym.benchmarks.reference import ReferenceError, load_reference

        try:
            part = load_reference(suite).split(split)
        except (ReferenceError, KeyError, FileNotFoundError):
            part = None
        if part is not None:
            for r in part.records:
                if r.get("case") == case.name and r.get("status", OK) == OK:
                    stored[(str(r["policy"]), int(r["seed"]))] = r
    except ImportError:  # an older tree without shipped references
        pass
    out: dict[str, float] = {}
    for name in the_suite.heuristics:
        returns = []
        for seed in case.seeds:
            record = (known or {}).get((name, int(seed))) or stored.get((name, int(seed)))
            if record is None:
                record = run_case(resolve_policy(name), case, int(seed), suite=suite)
            if record.get("status") != OK:
                break
            returns.append(-float(record["mean_jct_s"]) * float(record["jobs"]) / 3600.0)
        else:
            out[name] = float(np.mean(returns))
    return out


def code_permalink() -> str:
    """The repository and commit of the code running now: ``<origin
    URL>/tree/<commit>`` for a GitHub-style remote, else ``<origin or
    'ddl-gym'>@<commit>`` (``+dirty``: the tree differed from the commit)."""
    from ddl_gym.benchmarks.provenance import code_commit

    commit = code_commit()
    root = Path(__file__).resolve().parents[2]
    url = ""
    try:
        url = subprocess.run(
            ["git", "-C", str(root), "remote", "get-url", "origin"],
            capture_output=True, text=True, timeout=10, check=False,
        ).stdout.strip()  # fmt: skip
    except (OSError, subprocess.SubprocessError):
        pass
    if url.startswith("git@github.com:"):
        url = "https://github.com/" + url.removeprefix("git@github.com:")
    url = url.removesuffix(".git")
    if url.startswith("https://") and "+" not in commit and commit != "unknown":
        return f"{url}/tree/{commit}"
    return f"{url or 'ddl-gym'}@{commit}"


def _trace_digest(case: Case, seed: int) -> str:
    jobs = case.workload.build(seed).jobs
    return hashlib.sha256(jobs.to_csv(index=False).encode()).hexdigest()


def build_datasets(
    suite: str = "ddl-gym-v1",
    split: str = "train",
    policies: Sequence[str] | None = None,
    root: str | Path | None = None,
    quick: bool = False,
    cases: Sequence[str] | None = None,
    K: int = DEFAULT_K,
    M: int = DEFAULT_M,
    progress: bool = True,
) -> list[DatasetSummary]:
    """Record every policy's episodes (default: the suite's heuristics) on
    every case of the split (or of the quick sub-suite) as Minari datasets
    under ``root``."""
    import minari

    if root is not None:
        os.environ["MINARI_DATASETS_PATH"] = str(Path(root).resolve())
    the_suite = get_suite(suite)
    names = tuple(policies) if policies is not None else the_suite.heuristics
    part = "quick" if quick else split
    chosen = the_suite.select(split, quick=quick)
    if cases is not None:
        unknown = sorted(set(cases) - {c.name for c in chosen})
        if unknown:
            raise ValueError(f"no such case in {suite} {part}: {unknown}")
        chosen = tuple(c for c in chosen if c.name in set(cases))
    permalink = code_permalink()
    out: list[DatasetSummary] = []
    for case in chosen:
        digests = {_trace_digest(case, int(s)) for s in case.seeds}
        known: dict[tuple[str, int], dict[str, Any]] = {}
        made: list[tuple[str, dict[str, Any]]] = []
        for name in names:
            spec = resolve_policy(name)
            buffers, dropped, cut, own = [], 0, 0, 0
            reasons: dict[str, int] = {}
            env = case_env(suite, part, case, spec, spec.factory(), K, M)
            for seed in case.seeds:
                policy = spec.factory()
                options = {"case": case.name, "seed": int(seed)}
                got = record_episode(env, policy, int(seed), len(buffers), options)
                own += got.own_instants
                if got.cut:
                    reasons[got.cut] = reasons.get(got.cut, 0) + 1
                if got.summary is not None:
                    known[(spec.name, int(seed))] = {"status": "ok", **got.summary}
                if got.buffer is None:
                    dropped += 1
                    continue
                buffers.append(got.buffer)
                cut += int(not got.buffer.terminations[-1])
            ident = dataset_id(suite, part, case, spec.name)
            if buffers:
                extra = {
                    "suite": suite,
                    "suite_hash": suite_hash(the_suite),
                    "split": part,
                    "case": case.name,
                    "seeds": [int(s) for s in case.seeds],
                    "policy": spec.name,
                    # the engine settings the episodes ran with (the env's, which
                    # are the policy's where it asks for any)
                    "engine_settings": {
                        k: v for k, v in _engine_kwargs(env).items() if k in ENV_ENGINE_KEYS
                    },
                    "complete_episodes": len(buffers) - cut,
                    "truncated_episodes": cut,
                    "dropped_episodes": dropped,
                    # episodes cut short (or dropped) per reason, and the reasons in words
                    "truncations": reasons,
                    "truncation_reasons": {k: TRUNCATION_REASONS[k] for k in reasons},
                    # whether the recovered env, reset with an episode's seed and
                    # options, gives the recorded transitions when fed its actions
                    "replayable": own == 0,
                    "replay_note": "" if own == 0 else REPLAY_NOTE,
                    "distinct_traces": len(digests),
                    "seeds_note": (
                        "every seed is a distinct draw of the case's jobs"
                        if len(digests) == len(case.seeds)
                        else f"the case's seeds give {len(digests)} distinct trace(s) for "
                        f"{len(case.seeds)} seeds (a fixed trace file, no resampling): "
                        "episodes of the same trace differ only where the policy uses its seed"
                    ),
                }
                with warnings.catch_warnings():
                    # Minari warns of what is expected here: no author e-mail, no
                    # separate evaluation env
                    warnings.filterwarnings("ignore", category=UserWarning, module="minari")
                    _create(minari, ident, buffers, env, spec.name, case, suite, part, K, M,
                            permalink)  # fmt: skip
                made.append((ident, extra))
            env.close()
            steps = sum(len(b.rewards) for b in buffers)
            out.append(DatasetSummary(ident, len(buffers), steps, dropped, cut))
            if progress:
                print(
                    f"{ident}: {len(buffers)} episodes ({cut} cut short), {steps} steps, "
                    f"{dropped} dropped"
                )
        # the reference scores need every heuristic's runs: the case's complete
        # episodes give theirs (the same runs), the others come from records
        refs = reference_returns(suite, part, case, known)
        for ident, extra in made:
            _set_scores(minari, ident, extra, refs)
    return out


REF_SCORE_DEFINITION = (
    "ref_min_score / ref_max_score: the worst / best of the suite's heuristics on this "
    "case, each scored by its mean over the case's seeds of the whole-episode return "
    "(minus total JCT in hours) in the benchmark's runs"
)


def _set_scores(minari: Any, ident: str, extra: dict[str, Any], refs: dict[str, float]) -> None:
    scores: dict[str, Any] = {}
    if refs:
        scores = {"ref_min_score": min(refs.values()), "ref_max_score": max(refs.values())}
    ours = {**extra, "ref_scores": refs, "ref_score_definition": REF_SCORE_DEFINITION}
    minari.load_dataset(ident).storage.update_metadata({**scores, "ddl_gym": ours})


def _engine_kwargs(env: Any) -> dict[str, Any]:
    return dict(env.unwrapped._engine_kwargs)  # noqa: SLF001  (the env's own settings)


def _create(minari: Any, ident: str, buffers: list, env: Any, policy: str, case: Case,
            suite: str, split: str, K: int, M: int, permalink: str) -> None:  # fmt: skip
    minari.create_dataset_from_buffers(
        dataset_id=ident,
        buffer=buffers,
        env=env,
        algorithm_name=policy,
        author="ddl-gym",
        code_permalink=permalink,
        description=f"{policy} on {suite} {split} case {case.name} (seeds "
        f"{', '.join(map(str, case.seeds))}); {ENV_ID} K={K}, M={M}",
        data_format="arrow",
    )
