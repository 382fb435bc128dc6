"""Choosing between agent configurations on validation data: the candidate
configs, the preemption cost, best-teacher behaviour cloning, the
selection cases and the selection rule (docs/agents.md, "Choosing the
configuration")."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

pytest.importorskip("sb3_contrib")

from ddl_gym.agents.bc import best_teacher, teachers  # noqa: E402
from ddl_gym.agents.config import EnvConfig, TrainConfig  # noqa: E402
from ddl_gym.agents.envs import AgentEnv, resolve_traces, split_traces  # noqa: E402
from ddl_gym.agents.policy import DEFAULT_MODEL  # noqa: E402
from ddl_gym.baselines import make_policy  # noqa: E402

from ddl_gym.engine import Engine, simulate  # noqa: E402
from ddl_gym.env.set_env import SetClusterEnv  # noqa: E402
from ddl_gym.traces import find_data_dir, synthetic_trace  # noqa: E402
from research.heldout import (  # noqa: E402
    choose_configuration,
    heldout_cases,
    selection_cases,
    selection_scores,
)
from tests.helpers import flat_config  # noqa: E402

MODELS = DEFAULT_MODEL.parent


@pytest.mark.parametrize(
    ("name", "base", "changed"),
    [
        ("candidate_best_teacher", "ablation_no_curriculum", {"bc.teacher": "gandiva,tiresias"}),
        ("candidate_preempt_cost", "ablation_no_curriculum", {"env.preempt_cost": 4.0}),
        (
            "select",
            "default",
            {
                "split.select_traces": ["traces/alibaba_openb/openb_pod_list_default_dev.csv*8"],
                "split.select_parts": ["sense_", "workload-", "long:"],
            },
        ),
    ],
)
def test_candidate_configs_change_only_their_lever(name, base, changed):
    """Each candidate is its base with one thing changed, and the selection
    config is the shipped split plus the selection cases only."""
    a = flat_config(TrainConfig.load(MODELS / f"{base}.toml"))
    b = flat_config(TrainConfig.load(MODELS / f"{name}.toml"))
    assert {k: b[k] for k in b if b[k] != a[k]} == changed


def _preempt_run(cost: float) -> list[tuple[int, float]]:
    trace = synthetic_trace(
        n_jobs=40,
        seed=1,
        arrival_rate_per_h=6.0,
        gpu_mix={4: 0.5, 8: 0.3, 16: 0.2},
        duration_median_s=6 * 3600.0,
    )
    base = SetClusterEnv(trace, "seed64", congestion="heavy", K=8, M=8, preempt_budget=1)
    env = AgentEnv(base, 8, preempt=True, invalid_to_wait=False, preempt_cost=cost)
    env.reset(seed=0)
    out = []
    for t in range(200):
        m = env.action_masks()
        pre = np.flatnonzero(m[1 + 3 * 8 :])
        place = np.flatnonzero(m[1 : 1 + 3 * 8])
        # deterministic: preempt every 5th step when possible, else place, else wait
        if t % 5 == 4 and len(pre):
            a = int(pre[0]) + 1 + 3 * 8
        elif len(place):
            a = int(place[0]) + 1
        else:
            a = 0
        _, r, term, trunc, _ = env.step(a)
        out.append((a, float(r)))
        if term or trunc:
            break
    return out


def test_preemption_cost_is_charged_once_per_chosen_preemption_only():
    free = _preempt_run(0.0)
    paid = _preempt_run(2.5)
    assert [a for a, _ in free] == [a for a, _ in paid]  # the cost never changes the dynamics
    pre = [a > 3 * 8 for a, _ in free]
    assert sum(pre) >= 3
    for (_a, r0), (_, r1), p in zip(free, paid, pre, strict=True):
        assert r1 == pytest.approx(r0 - (2.5 if p else 0.0), abs=1e-9)
    with pytest.raises(ValueError, match="preempt_cost"):
        AgentEnv(SetClusterEnv(synthetic_trace(n_jobs=3, seed=0)), 64, True, False, -1.0)


def test_validation_env_has_no_preemption_cost():
    from ddl_gym.agents.envs import make_env_fn

    cfg = TrainConfig.load(MODELS / "candidate_preempt_cost.toml").env
    trace = [synthetic_trace(n_jobs=5, seed=0)]
    train_env = make_env_fn(cfg, trace, invalid_to_wait=False)()
    val_env = make_env_fn(cfg, trace, invalid_to_wait=False, cycle=True)()
    assert train_env.env.preempt_cost == 4.0
    assert val_env.env.preempt_cost == 0.0


@pytest.mark.filterwarnings("ignore::ddl_gym.engine.simulate.PolicyEngineWarning")
def test_best_teacher_is_the_one_with_the_lower_mean_jct_on_the_window():
    assert teachers("gandiva, tiresias") == ["gandiva", "tiresias"]
    with pytest.raises(ValueError, match="names no policy"):
        teachers(" , ")
    env_cfg = EnvConfig(obs="set", K=64, M=64, tick_s=1800.0, congestion="heavy")
    picked = set()
    for seed in range(4):
        trace = synthetic_trace(
            n_jobs=30,
            seed=seed,
            arrival_rate_per_h=8.0,
            gpu_mix={1: 0.3, 4: 0.3, 8: 0.2, 16: 0.2},
            duration_median_s=4 * 3600.0,
        )
        engine = Engine(trace, "seed64")
        name, jct = best_teacher(["gandiva", "tiresias"], engine, env_cfg)
        for h in ("gandiva", "tiresias"):  # the same numbers as simulate() itself
            r = simulate(
                trace,
                "seed64",
                make_policy(h),
                congestion="heavy",
                tick_s=1800.0,
                restore_s_per_gpu=env_cfg.restore_s_per_gpu,
            )
            assert jct[h] == pytest.approx(r.summary["mean_jct_s"])
        assert jct[name] == min(jct.values())
        picked.add(name)
    assert picked == {"gandiva", "tiresias"}  # these windows do not all favour one teacher
    assert best_teacher(["gandiva"], engine, env_cfg) == ("gandiva", {})  # one: no simulation


def test_scaled_trace_spec_multiplies_the_arrival_rate():
    (a,) = resolve_traces(["long:0"])
    (b,) = resolve_traces(["long:0*4"])
    x, y = a.jobs["arrival_s"].to_numpy(), b.jobs["arrival_s"].to_numpy()
    np.testing.assert_allclose(y - y[0], (x - x[0]) / 4.0)
    assert list(a.jobs["gpus"]) == list(b.jobs["gpus"])


def _rows(case: str, jcts: dict[str, float]) -> list[dict]:
    return [
        {"policy": p, "group": "select", "case": case, "mean_jct_s": v} for p, v in jcts.items()
    ]


def test_selection_score_by_hand():
    """Two families; the seed family has two cases, Pollux one. Ratios to the
    best heuristic per case, geometric mean per family, then over families."""
    df = pd.DataFrame(
        _rows("sense_a", {"gandiva": 10.0, "tiresias": 20.0, "x[s0]": 5.0})
        + _rows("sense_b", {"gandiva": 40.0, "tiresias": 20.0, "x[s0]": 80.0})
        + _rows("workload-1[val]", {"gandiva": 3.0, "tiresias": 2.0, "x[s0]": 2.0})
        + _rows("unfinished", {"gandiva": 1.0})  # not every policy ran it: ignored
    )
    s = selection_scores(df, ["gandiva", "tiresias"])
    # seed: sqrt(0.5 * 4) = sqrt(2); pollux: 1; score sqrt(sqrt(2) * 1)
    assert s.loc["x[s0]", "seed"] == pytest.approx(2**0.5)
    assert s.loc["x[s0]", "pollux"] == pytest.approx(1.0)
    assert s.loc["x[s0]", "score"] == pytest.approx(2**0.25)


def test_selection_ignores_oracles():
    """An oracle (true job sizes) is neither the baseline nor a candidate:
    here SRTF is better than every heuristic and the agent."""
    df = pd.DataFrame(
        _rows("sense_a", {"gandiva": 10.0, "srtf": 1.0, "x[s0]": 5.0})
        + _rows("workload-1[val]", {"gandiva": 4.0, "srtf": 1.0, "x[s0]": 8.0})
    )
    s = selection_scores(df, ["gandiva"], ["srtf"])
    assert list(s.index) == ["x[s0]"]
    assert s.loc["x[s0]", "score"] == pytest.approx(1.0)  # sqrt(0.5 * 2)


def test_selection_rule_keeps_the_incumbent_unless_clearly_better():
    scores = pd.Series({"default[s0]": 1.0, "default[s1]": 1.2, "b[s0]": 1.08, "b[s1]": 1.1})
    # b: 1.09 vs default 1.10: 1% better, under the 2% margin
    assert choose_configuration(scores, "default")[:2] == ("default", "default[s0]")
    scores["b[s1]"] = 0.9  # b: 0.99, 10% better: it wins, its best seed ships
    config, model, table = choose_configuration(scores, "default")
    assert (config, model) == ("b", "b[s1]")
    assert table.loc["b", "count"] == 2


@pytest.mark.skipif(find_data_dir() is None, reason="needs ../shared/data")
def test_selection_cases_are_never_trained_on_nor_test_cases():
    cfg = TrainConfig.load(MODELS / "select.toml")
    cases = selection_cases(cfg)
    names = [c.name for c in cases]
    assert "sense_500jobs_poisson-75jobsPday" in names
    assert any("openb" in n for n in names) and not any("philly" in n for n in names)
    parts = split_traces(cfg.split)
    train_ids = {(t.name, len(t)) for t in parts["train"]}
    test = {c.name for c in heldout_cases(cfg, n_windows=2)}
    fresh = TrainConfig.load(MODELS / "eval_fresh.toml").split.test_traces
    for c in cases:
        assert c.name not in test and (c.name, len(c.trace)) not in train_ids
        assert not any(f.rsplit("/", 1)[-1].split(".")[0] in c.name for f in fresh)
    # a validation part starts where the training part ends (arrival fractions)
    for c in cases:
        if c.name.endswith("[val]"):
            assert len(c.trace) > 0


def test_slowdown_guard_masks_only_the_slow_placements_and_never_stalls():
    from ddl_gym.agents.envs import slowdown_guard

    from ddl_gym.env.set_observation import (
        SET_PENDING_FIELDS,
        SetObsConfig,
        set_obs_size,
        split_set_obs,
    )

    K, M = 4, 2
    obs = np.zeros(set_obs_size(SetObsConfig(K=K, M=M)), dtype=np.float32)
    pending, _, _ = split_set_obs(obs, K, M)  # a view: writes land in obs
    first = SET_PENDING_FIELDS.index("slowdown_machine")
    # row 0: slowdowns 1x, 2x, 10x; row 1: 4x at every level
    pending[0, first : first + 3] = [0.0, 1 - 1 / 2, 1 - 1 / 10]
    pending[1, first : first + 3] = 1 - 1 / 4
    mask = np.zeros(1 + 3 * K + M, dtype=bool)
    mask[[0, 1, 2, 3, 4, 5, 6, 1 + 3 * K]] = True
    out = slowdown_guard(mask, obs, K, M, 3.0)
    expect = mask.copy()
    expect[[3, 4, 5, 6]] = False  # row 0 network (10x), row 1 every level (4x)
    np.testing.assert_array_equal(out, expect)
    only_slow = np.zeros_like(mask)
    only_slow[[4, 5, 6]] = True  # nothing runs, only row 1 can go: kept
    np.testing.assert_array_equal(slowdown_guard(only_slow, obs, K, M, 3.0), only_slow)
    np.testing.assert_array_equal(slowdown_guard(mask, obs, K, M, 11.0), mask)  # x = 10 passes


def test_guarded_agent_never_places_above_the_bound_when_it_has_a_choice():
    from ddl_gym.agents import load_policy
    from ddl_gym.agents.envs import slowdown_guard

    agent = load_policy()
    agent.config.env.max_slowdown = 3.0
    seen, bound = [], []
    choose = agent.choose

    def spy(obs, mask):  # the mask the network chooses from is the guarded one
        env = agent.config.env
        seen.append(np.array_equal(mask, slowdown_guard(mask, obs, env.K, env.M, 3.0)))
        bound.append(not np.array_equal(mask, agent._builder.mask))  # the guard removed some
        return choose(obs, mask)

    agent.choose = spy
    trace = synthetic_trace(
        n_jobs=40,
        seed=3,
        arrival_rate_per_h=10.0,
        gpu_mix={4: 0.3, 8: 0.3, 16: 0.4},
        duration_median_s=8 * 3600.0,
    )
    result = simulate(trace, "seed64", agent, congestion="heavy")
    assert result.summary["completed"] == 40
    assert len(seen) > 10 and all(seen)
    assert any(bound)  # the load is heavy enough that the guard binds
