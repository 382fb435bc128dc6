"""Multi-teacher DAgger (ddl_gym.agents.dagger, ddl_gym.agents.teachers).

The other properties issue 31 asks of the policy are tested beside the set
policy (tests/test_agents_set.py): invariance to the order of the queue
(``test_policy_output_is_invariant_to_the_order_of_jobs_in_the_queue``), one
checkpoint on several shapes and observations blind to future arrivals
(``test_no_observation_field_changes_when_only_future_arrivals_change``).
Here they are checked again on a model DAgger trained.
"""

from __future__ import annotations

import json

import numpy as np
import pytest

pytest.importorskip("sb3_contrib")

from ddl_gym.agents.config import EnvConfig  # noqa: E402
from ddl_gym.agents.dagger import DaggerConfig, case_env, rollout, run_dagger  # noqa: E402
from ddl_gym.agents.teachers import TeacherChoice, label, save_teachers  # noqa: E402
from ddl_gym.baselines import make_policy  # noqa: E402

from ddl_gym.benchmarks.suite import get_suite  # noqa: E402
from ddl_gym.env.set_observation import split_set_obs  # noqa: E402
from ddl_gym.topology import Cluster  # noqa: E402

SMALL_ENV = EnvConfig(
    obs="set", K=8, M=8, tick_s=1800.0, preempt=True, preempt_budget=1, window_s=None
)
QUICK = "quick-synthetic@pcie16"  # 60 jobs on 16 GPUs, heavy congestion


def _first_valid(obs: np.ndarray, mask: np.ndarray) -> int:
    return int(np.flatnonzero(mask)[0])


@pytest.mark.parametrize("teacher", ["tiresias", "gandiva", "dally"])
def test_relabelling_gives_the_teachers_action_on_the_teachers_own_states(teacher):
    case = get_suite().case(QUICK)
    # 1. the teacher acts (beta = 1): every executed action is its label
    played: list[int] = []

    def record(obs, mask):  # only where the teacher's decision is not expressible
        return _first_valid(obs, mask)

    first = rollout(
        case_env(case, SMALL_ENV, 0),
        make_policy(teacher),
        record,
        beta=1.0,
        rng=np.random.default_rng(0),
        max_steps=5000,
        seed=0,
    )
    assert first.labels == first.taken
    assert len(first.labels) > 50
    played = list(first.actions)

    # 2. replay those actions (beta = 0: the teacher never acts) and relabel
    # with a fresh teacher: its labels are the actions it took itself
    it = iter(played)
    second = rollout(
        case_env(case, SMALL_ENV, 0),
        make_policy(teacher),
        lambda obs, mask: next(it),
        beta=0.0,
        rng=np.random.default_rng(1),
        max_steps=5000,
        seed=0,
    )
    assert second.agent_steps == second.steps == first.steps
    assert second.labels == first.labels
    assert second.taken == second.labels


def test_label_is_none_when_the_env_cannot_express_the_decision():
    class Far:  # asks for a job index no row shows
        def act(self, view):
            from ddl_gym.engine import Place
            from ddl_gym.perf import Level

            return Place(10_000, Level.NETWORK)

    env = case_env(get_suite().case(QUICK), SMALL_ENV, 0)
    env.reset(seed=0)
    assert label(Far(), env) is None


@pytest.fixture(scope="module")
def tiny_run(tmp_path_factory):
    out = tmp_path_factory.mktemp("dagger")
    cases = ["pollux-3@seed64", "synthetic-train@v100x128"]
    teachers = out / "teachers.json"
    save_teachers(
        {
            cases[0]: TeacherChoice(cases[0], "tiresias", {}),
            cases[1]: TeacherChoice(cases[1], "gandiva", {}),
        },
        teachers,
    )
    cfg = DaggerConfig(
        teachers_file=str(teachers),
        cases=cases,
        iterations=2,
        episodes_per_iteration=2,
        max_episode_steps=300,
        samples_per_episode=200,
        arrival_jitter=0.2,
        epochs=2,
        hidden=8,
        validate=False,
        env=SMALL_ENV,
    )
    return run_dagger(cfg, out, progress=False)


@pytest.mark.needs_data
def test_tiny_dagger_run_records_a_learning_curve(tiny_run):
    curve = json.loads((tiny_run.parent / "curve.json").read_text())
    assert [row["iteration"] for row in curve] == [0, 1]
    assert curve[0]["beta"] == 1.0 and curve[1]["beta"] == 0.5
    assert curve[0]["agent_steps"] < curve[1]["agent_steps"]  # the agent acts more later
    assert curve[1]["dataset"] > curve[0]["dataset"]  # aggregated


@pytest.mark.needs_data
def test_one_dagger_checkpoint_acts_on_three_cluster_shapes(tiny_run):
    from ddl_gym.agents import load_policy

    from ddl_gym.engine import simulate

    agent = load_policy(tiny_run)
    trace = get_suite().case(QUICK).workload.build(0)
    for cluster in ("2x2x4", Cluster(2, 4, 8, "seed"), "nvswitch512"):
        result = simulate(trace, cluster, agent, congestion="heavy", **agent.engine_kwargs())
        assert result.summary["completed"] == len(trace)


@pytest.mark.needs_data
def test_dagger_policy_is_invariant_to_queue_order(tiny_run):
    import torch as th
    from ddl_gym.agents import load_policy

    agent = load_policy(tiny_run)
    K, M = SMALL_ENV.K, SMALL_ENV.M
    env = case_env(get_suite().case(QUICK), SMALL_ENV, 0)
    obs, _ = env.reset(seed=0)
    for _ in range(500):  # until several jobs wait
        if split_set_obs(obs, K, M)[0][:, 0].sum() >= 4:
            break
        obs, *_ = env.step(0 if env.action_masks()[0] else _first_valid(obs, env.action_masks()))
    mask = env.action_masks()
    p, r, g = split_set_obs(obs, K, M)
    assert p[:, 0].sum() >= 4
    perm = np.random.default_rng(0).permutation(K)
    shuffled = np.concatenate([p[perm].ravel(), r.ravel(), g])
    mask_s = mask.copy()
    mask_s[1 : 1 + 3 * K] = mask[1 : 1 + 3 * K].reshape(K, 3)[perm].ravel()
    policy = agent.model.policy

    def probs(x: np.ndarray, m: np.ndarray) -> np.ndarray:
        # read at once: SB3 reuses one distribution object across calls
        with th.no_grad():
            dist = policy.get_distribution(th.as_tensor(x)[None], action_masks=m[None])
            return dist.distribution.probs[0].numpy().copy()

    a, b = probs(obs, mask), probs(shuffled, mask_s)
    np.testing.assert_allclose(b[0], a[0], atol=1e-6)  # WAIT
    place, place_s = a[1 : 1 + 3 * K].reshape(K, 3), b[1 : 1 + 3 * K].reshape(K, 3)
    np.testing.assert_allclose(place_s, place[perm], atol=1e-6)
    np.testing.assert_allclose(b[1 + 3 * K :], a[1 + 3 * K :], atol=1e-6)


def test_the_self_teacher_labels_with_the_shipped_policys_own_decisions():
    from ddl_gym.agents import load_policy

    case = get_suite().case(QUICK)
    ep = rollout(
        case_env(case, SMALL_ENV, 0),
        load_policy(),  # what teacher "self" is for init = the shipped model
        _first_valid,
        beta=1.0,
        rng=np.random.default_rng(0),
        max_steps=400,
        seed=0,
    )
    assert len(ep.labels) > 50 and ep.labels == ep.taken


@pytest.mark.parametrize(
    ("override", "init", "error"),
    [
        ({"pollux-5@pcie128": "self"}, "agents/models/default.zip", "not train cases"),
        ({"pollux-3@seed64": "self"}, "", "needs init"),
    ],
)
def test_teacher_override_is_checked_before_any_rollout(tmp_path, override, init, error):
    cfg = DaggerConfig(teacher_override=override, init=init, validate=False, iterations=1)
    with pytest.raises(ValueError, match=error):
        run_dagger(cfg, tmp_path, progress=False)
