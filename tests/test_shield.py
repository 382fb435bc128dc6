"""The repacking rule a trained policy may carry (agents.shield)."""

from __future__ import annotations

import json
import shutil

import pytest
from ddl_gym.agents.shield import RepackWhenIdle

from ddl_gym.engine import WAIT, Action, EngineView, Place, simulate
from ddl_gym.perf import Level
from ddl_gym.topology import Cluster
from tests.helpers import make_trace

LONG = 3e4  # iterations: outlives the scenario


class SpreadThenShield:
    """Places the first waiting job anywhere (so it may be spread across
    racks); the shield, if given, acts first."""

    def __init__(self, shield: RepackWhenIdle | None) -> None:
        self.shield = shield
        self.name = "spread"

    def engine_kwargs(self) -> dict:
        return {"restore_s_per_gpu": 1.0}

    def reset(self, view: EngineView, seed: int | None = None) -> None:
        if self.shield is not None:
            self.shield.reset()

    def act(self, view: EngineView) -> Action:
        if self.shield is not None:
            forced = self.shield.action(view)
            if forced is not None:
                return forced
        for job in view.pending:
            if view.can_place(job, Level.NETWORK):
                return Place(job.index, Level.NETWORK)
        return WAIT


def _run(trace, shield):
    cl = Cluster(2, 1, 4, "seed")  # two racks of one 4-GPU server
    return simulate(trace, cl, SpreadThenShield(shield), congestion="heavy", record_series=False)


def _rows(trace, shield):
    return _run(trace, shield).jobs.set_index("job_id")


FRAGMENTED = [
    ("A", 0.0, 2, "resnet50", 100.0, 0.1),  # short, on server 0
    ("B", 0.0, 3, "resnet50", LONG, 0.1),  # long, on server 1
    ("C", 1.0, 3, "bert_large", 1e5, 0.1),  # 2 + 1 across racks
]


def test_a_spread_job_moves_to_one_machine_when_it_frees_and_nobody_waits():
    r = _rows(make_trace(FRAGMENTED), RepackWhenIdle())
    assert r.loc["C", "starts_network"] == 1 and r.loc["C", "starts_machine"] == 1
    assert r.loc["C", "preemptions"] == 1 and r.loc["C", "level"] == "machine"
    # moved at A's completion, with the checkpoint/restore cost of 3 GPUs
    assert r.loc["C", "overhead_s"] == pytest.approx(3.0)
    plain = _rows(make_trace(FRAGMENTED), None)
    assert plain.loc["C", "preemptions"] == 0 and plain.loc["C", "level"] == "network"
    assert r.loc["C", "end_s"] < plain.loc["C", "end_s"]


def test_no_move_while_a_job_waits():
    # D (4 GPUs) arrives before A completes and waits for a whole server: C
    # is not moved into the GPUs A frees; it moves only once D has started
    # (at B's completion) and nobody waits
    trace = make_trace([*FRAGMENTED, ("D", 2.0, 4, "resnet50", 100.0, 0.1)])
    result = _run(trace, RepackWhenIdle())
    jobs = result.jobs.set_index("job_id")
    c = result.placements[result.placements.job_id == "C"]
    first_stop = c.end_s.min()
    assert first_stop > jobs.loc["A", "end_s"]
    assert first_stop == pytest.approx(jobs.loc["B", "end_s"])
    assert first_stop >= jobs.loc["D", "start_s"]


def test_the_agent_applies_the_rule_its_config_asks_for(tmp_path):
    from ddl_gym.agents import load_policy
    from ddl_gym.agents.policy import DEFAULT_MODEL

    for name, on in (("off", False), ("on", True)):
        shutil.copy(DEFAULT_MODEL, tmp_path / f"{name}.zip")
        config = json.loads(DEFAULT_MODEL.with_suffix(".json").read_text())
        config["env"]["repack_idle"] = on
        (tmp_path / f"{name}.json").write_text(json.dumps(config))
    assert load_policy(tmp_path / "off.zip")._repack is None
    assert isinstance(load_policy(tmp_path / "on.zip")._repack, RepackWhenIdle)


def test_the_quantum_masks_only_the_preemptions_of_jobs_started_too_recently():
    from types import SimpleNamespace
    from typing import Any, cast

    import numpy as np
    from ddl_gym.agents.shield import quantum_mask

    # K = 1 pending row (actions 1-3), 3 running rows (actions 4-6)
    mask = np.array([True, True, False, True, True, True, False])
    running = cast(Any, [SimpleNamespace(started_at=t) for t in (0.0, 60.0, 20.0)])
    out = quantum_mask(mask, running, first=4, now=80.0, min_run_s=30.0)
    # ran 80 s: may go; ran 20 s: kept; ran 60 s but masked already: stays masked
    assert out.tolist() == [True, True, False, True, True, False, False]
    assert mask.tolist() == [True, True, False, True, True, True, False]  # input untouched
    same = quantum_mask(mask, running, first=4, now=1e6, min_run_s=30.0)
    assert same.tolist() == mask.tolist()


def test_repacking_keeps_the_engine_invariants_on_a_whole_trace():
    from ddl_gym.engine import Engine, run_policy
    from ddl_gym.traces import default_trace
    from tests.helpers import InvariantChecker

    class Checked(SpreadThenShield):
        def act(self, view: EngineView) -> Action:
            checker.check(engine)
            action = super().act(view)
            assert action is WAIT or engine.check(action) is None, f"invalid {action}"
            return action

    trace = default_trace(seed=0)
    engine = Engine(trace, Cluster(4, 2, 8, "seed"), congestion="heavy", restore_s_per_gpu=1.0)
    checker = InvariantChecker()
    policy = Checked(RepackWhenIdle())
    policy.reset(EngineView(engine))
    run_policy(engine, policy)
    checker.finish(engine)
    moved = [job for job in engine.jobs if job.preemptions > 0]
    assert moved, "no job was repacked: the scenario does not exercise the rule"
    assert len(engine.jobs) == len(trace)


def _pending_obs(rows: list[tuple[float, float]], K: int, M: int):
    """A flat set observation whose pending rows have (fits_rack, network slowdown)."""
    import numpy as np

    from ddl_gym.env.set_observation import (
        SET_GLOBAL_FIELDS,
        SET_PENDING_FIELDS,
        SET_RUNNING_FIELDS,
    )

    pending = np.zeros((K, len(SET_PENDING_FIELDS)), dtype=np.float32)
    for k, (fits, slowdown) in enumerate(rows):
        pending[k, SET_PENDING_FIELDS.index("present")] = 1.0
        pending[k, SET_PENDING_FIELDS.index("fits_rack")] = fits
        pending[k, SET_PENDING_FIELDS.index("slowdown_network")] = 1.0 - 1.0 / slowdown
    rest = np.zeros(M * len(SET_RUNNING_FIELDS) + len(SET_GLOBAL_FIELDS), dtype=np.float32)
    return np.concatenate([pending.ravel(), rest])


def test_the_cross_rack_guard_refuses_only_slow_cross_rack_starts_of_jobs_that_fit_a_rack():
    import numpy as np
    from ddl_gym.agents.shield import cross_rack_mask

    K, M = 3, 1
    # row 0 fits a rack, 3x slower across racks: refused at 2; row 1 fits a
    # rack, 1.5x: allowed; row 2 is wider than a rack, 5x: allowed (no other level)
    obs = _pending_obs([(1.0, 3.0), (1.0, 1.5), (0.0, 5.0)], K, M)
    mask = np.ones(1 + 3 * K + M, dtype=bool)
    out = cross_rack_mask(mask, obs, K, M, max_slowdown=2.0)
    expected = mask.copy()
    expected[1 + 3 * 0 + 2] = False
    assert out.tolist() == expected.tolist()
    assert mask.all()  # input untouched
    # at 4, row 0's 3x passes
    assert cross_rack_mask(mask, obs, K, M, max_slowdown=4.0).all()
    # the guard never leaves the agent without an action
    only = np.zeros_like(mask)
    only[3] = True
    assert cross_rack_mask(only, obs, K, M, max_slowdown=2.0).tolist() == only.tolist()


def test_cross_rack_guard_must_be_a_slowdown_factor():
    from ddl_gym.agents.config import EnvConfig

    with pytest.raises(ValueError, match="cross_rack_guard"):
        EnvConfig(cross_rack_guard=0.5)
    assert EnvConfig(cross_rack_guard=1.0).cross_rack_guard == 1.0


def test_the_agent_under_the_cross_rack_guard_never_starts_a_refused_placement(tmp_path):
    import numpy as np
    from ddl_gym.agents import load_policy
    from ddl_gym.agents.policy import DEFAULT_MODEL
    from ddl_gym.agents.shield import _FITS_RACK, _SLOWDOWN_NETWORK

    from ddl_gym.env.set_observation import split_set_obs
    from ddl_gym.traces import default_trace

    shutil.copy(DEFAULT_MODEL, tmp_path / "guarded.zip")
    config = json.loads(DEFAULT_MODEL.with_suffix(".json").read_text())
    config["env"]["cross_rack_guard"] = 1.2
    (tmp_path / "guarded.json").write_text(json.dumps(config))
    policy = load_policy(tmp_path / "guarded.zip")
    K, M = policy.config.env.K, policy.config.env.M
    seen = {"refusable": 0, "choices": 0}
    choose = policy.choose

    def checked(obs, mask):
        pending, _, _ = split_set_obs(obs, K, M)
        slow = (pending[:, _FITS_RACK] > 0.5) & (pending[:, _SLOWDOWN_NETWORK] > 1 - 1 / 1.2)
        seen["refusable"] += int(slow.sum())
        seen["choices"] += 1
        refused = 3 + 3 * np.flatnonzero(slow)
        others = mask.copy()
        others[refused] = False
        if others.any():  # not the fallback (nothing else possible): those starts are masked
            assert not mask[refused].any()
        return choose(obs, mask)

    policy.choose = checked
    trace = default_trace(seed=0)
    result = simulate(trace, Cluster(4, 2, 8, "seed"), policy, seed=0, congestion="heavy")
    assert seen["refusable"] > 0 and seen["choices"] > 0  # the guard had work to do
    assert result.summary["completed"] == len(trace.jobs)
