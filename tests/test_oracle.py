"""The SRSF oracle (baselines/srsf.py): least remaining service first on hand
traces, consolidation, migration, no double booking, every quick case."""

from __future__ import annotations

import pandas as pd
import pytest
from ddl_gym.baselines import ORACLES, POLICY_NAMES, make_policy
from ddl_gym.baselines.srsf import SrsfPolicy

from ddl_gym.engine import simulate
from ddl_gym.engine.simulate import PolicyEngineWarning
from ddl_gym.profiles import get_profile
from ddl_gym.topology import FABRICS, Cluster

HOUR = 3600.0


def _trace(jobs: list[tuple[float, int, float, str]]) -> pd.DataFrame:
    """Jobs as (arrival, GPUs, single-GPU work in seconds, model)."""
    t = {m: get_profile(m).iter_time_s for _, _, _, m in jobs}
    return pd.DataFrame(
        {
            "job_id": [f"j{i}" for i in range(len(jobs))],
            "arrival_s": [a for a, _, _, _ in jobs],
            "gpus": [g for _, g, _, _ in jobs],
            "model": [m for _, _, _, m in jobs],
            "iterations": [w / t[m] for _, _, w, m in jobs],
            "iter_time_s": [t[m] for _, _, _, m in jobs],
        }
    )


def _run(trace: pd.DataFrame, cluster: Cluster, policy=None, **kw):
    policy = policy if policy is not None else SrsfPolicy()
    return simulate(trace, cluster, policy, record_series=False, **kw)


def test_registered_as_an_oracle():
    assert "srsf" in POLICY_NAMES and "srsf" in ORACLES
    policy = make_policy("srsf")
    assert isinstance(policy, SrsfPolicy)
    assert policy.engine_kwargs()["clairvoyant"] is True


def test_without_clairvoyance_it_orders_by_attained_service():
    """As SRTF does: on an engine that hides job sizes the key is the
    GPU-service attained so far (least first), never the remaining work.
    One 1-GPU server: the long job arrives first and holds it; the short one
    arrives with nothing attained, less than the long one's, and preempts."""
    cluster = Cluster(1, 1, 1, fabric=FABRICS["seed"])
    trace = _trace([(0.0, 1, 10 * HOUR, "resnet50"), (HOUR, 1, HOUR, "resnet50")])
    with pytest.warns(PolicyEngineWarning, match="clairvoyant"):
        jobs = _run(trace, cluster, clairvoyant=False).jobs.set_index("job_id")
    assert jobs.loc["j1", "start_s"] == pytest.approx(HOUR)
    assert jobs.loc["j0", "preemptions"] == 1


def test_least_remaining_service_first_by_hand():
    """One 4-GPU server. A (4 GPUs, 40 GPU-h) runs from 0; B (4 GPUs, 4 GPU-h)
    arrives at 1 h, has less service left (4 < 36), preempts A and runs 1 h;
    C (1 GPU, 3 GPU-h) and D (2 GPUs, 8 GPU-h) arrive at 1.5 h, when B has
    2 GPU-h left: neither preempts it; at 2 h C (3) then D (8) start, A (36
    left) does not fit beside them and may not preempt them: C ends at 5 h,
    D at 6 h, then A resumes, pays its restore (1 s per GPU) and ends 9 h later."""
    cluster = Cluster(1, 1, 4, fabric=FABRICS["seed"])
    trace = _trace(
        [
            (0.0, 4, 40 * HOUR, "resnet50"),
            (1 * HOUR, 4, 4 * HOUR, "resnet50"),
            (1.5 * HOUR, 1, 3 * HOUR, "resnet50"),
            (1.5 * HOUR, 2, 8 * HOUR, "resnet50"),
        ]
    )
    jobs = _run(trace, cluster).jobs.set_index("job_id")
    # resnet50 on one server: the all-reduce is hidden by the backward pass
    assert jobs.loc["j1", "start_s"] == pytest.approx(1 * HOUR)
    assert jobs.loc["j1", "end_s"] == pytest.approx(2 * HOUR)
    assert jobs.loc["j2", "start_s"] == pytest.approx(2 * HOUR)
    assert jobs.loc["j3", "start_s"] == pytest.approx(2 * HOUR)
    assert jobs.loc["j2", "end_s"] == pytest.approx(5 * HOUR)
    assert jobs.loc["j3", "end_s"] == pytest.approx(6 * HOUR)
    assert jobs.loc["j0", "preemptions"] == 1
    assert jobs.loc["j0", "end_s"] == pytest.approx(6 * HOUR + 4.0 + 9 * HOUR)


def test_width_does_not_hide_service():
    """A wide short job (4 GPUs x 1 h = 4 GPU-h) before a narrow long one
    (1 GPU x 10 h): the key is the GPU-seconds left, not the run time left."""
    cluster = Cluster(1, 1, 4, fabric=FABRICS["seed"])
    trace = _trace([(0.0, 1, 10 * HOUR, "resnet50"), (0.0, 4, 4 * HOUR, "resnet50")])
    jobs = _run(trace, cluster).jobs.set_index("job_id")
    assert jobs.loc["j1", "start_s"] == pytest.approx(0.0)
    assert jobs.loc["j0", "start_s"] == pytest.approx(jobs.loc["j1", "end_s"])


def test_a_rack_sized_job_is_kept_in_one_rack():
    """Two racks of one 4-GPU server, 3 GPUs busy in each; a communicating
    2-GPU job with more service left than both could run 1 + 1 across the
    racks now: SRTF starts it there, SRSF waits for one rack."""
    cluster = Cluster(2, 1, 4, fabric=FABRICS["pcie_25gbe"])
    trace = _trace(
        [
            (0.0, 3, 3 * HOUR, "resnet50"),
            (0.0, 3, 6 * HOUR, "resnet50"),
            (60.0, 2, 40 * HOUR, "vgg16"),
        ]
    )
    srsf = _run(trace, cluster).jobs.set_index("job_id")
    assert srsf.loc["j2", "starts_network"] == 0
    assert srsf.loc["j2", "start_s"] == pytest.approx(srsf.loc["j0", "end_s"])
    srtf = _run(trace, cluster, make_policy("srtf"), clairvoyant=True).jobs.set_index("job_id")
    assert srtf.loc["j2", "starts_network"] == 1


def _never_double_booked(result, cluster: Cluster) -> None:
    """At every instant, no server holds more GPUs than it has."""
    p = result.placements
    events = sorted(
        [(s, 1, srv, g) for srv, g, s in zip(p["server"], p["gpus"], p["start_s"], strict=True)]
        + [(e, 0, srv, -g) for srv, g, e in zip(p["server"], p["gpus"], p["end_s"], strict=True)]
    )  # ends before starts at the same instant
    held = [0] * cluster.num_servers
    for _, _, server, g in events:
        held[server] += g
        assert 0 <= held[server] <= cluster.gpus_per_server


def test_every_quick_case_runs_and_never_double_books(data_dir):
    from ddl_gym.benchmarks.bounds import case_lower_bound
    from ddl_gym.benchmarks.suite import get_suite

    for case in get_suite("ddl-gym-v1").quick:
        for seed in case.seeds:
            trace = case.workload.build(seed)
            cluster = case.cluster()
            policy = make_policy("srsf")
            result = simulate(trace, cluster, policy, seed=seed, congestion=case.congestion)
            assert int(result.summary["completed"]) == len(trace.jobs)
            _never_double_booked(result, cluster)
            assert result.summary["mean_jct_s"] >= case_lower_bound(case, seed)
