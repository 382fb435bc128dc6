"""One (policy, case, seed) run and its score card record."""

from __future__ import annotations

import time
from typing import Any

from ddl_gym.benchmarks.policies import PolicySpec, supports
from ddl_gym.benchmarks.provenance import (
    actual_inputs,
    check_inputs,
    engine_settings,
    provenance,
    suite_pins_inputs,
)
from ddl_gym.benchmarks.suite import Case
from ddl_gym.engine import simulate

OK = "ok"
UNSUPPORTED = "unsupported"  # the policy cannot run on the case's cluster

# summary metrics copied into every record
CARD_METRICS = (
    "mean_jct_s",
    "p95_jct_s",
    "makespan_s",
    "comm_overhead",
    "preemptions",
    "mean_queueing_s",
    "jobs",
    "completed",
)


def run_settings(case: Case, policy: PolicySpec) -> dict[str, Any]:
    """The engine settings ``run_case`` passes to ``simulate`` for ``case``
    (the policy's own ``engine_kwargs()`` come on top of the defaults, these
    on top of them)."""
    return {
        "congestion": case.congestion,
        "clairvoyant": policy.clairvoyant,
        "record_series": False,
        "record_placements": False,
    }


def expected_provenance(
    policy: PolicySpec, agent: Any, case: Case, suite: str = "", check: bool = True
) -> dict[str, Any]:
    """The provenance a run of ``policy`` (instance ``agent``) on ``case`` gets
    now: input checksums of the files under the data dir, this code, the
    engine settings. ``check``: refuse inputs whose checksum differs from the
    data manifest when the suite pins its inputs (``Suite.hash_inputs``)."""
    inputs = actual_inputs(case)
    if check and suite and suite_pins_inputs(suite):
        check_inputs(case, inputs, suite)
    engine = engine_settings(agent, run_settings(case, policy))
    return provenance(suite, case, policy.name, engine, inputs)


def run_case(policy: PolicySpec, case: Case, seed: int, suite: str = "") -> dict[str, Any]:
    """Simulate ``case`` (workload seed ``seed``) under a fresh policy.

    A policy that cannot run on the case's cluster (see
    :func:`~ddl_gym.benchmarks.policies.supports`) gets a record with
    ``status = "unsupported"`` and the reason, and no metrics. Otherwise
    ``status = "ok"`` and the score card record: the summary metrics, the communication
    overhead of the jobs that ran on more than one server (the network
    effect), the policy's CPU time and where the run came from
    (``provenance``: :mod:`ddl_gym.benchmarks.provenance`).

    Raises :class:`~ddl_gym.benchmarks.provenance.InputChecksumError` when
    ``suite`` pins its inputs and an input file is not the pinned one.
    """
    cluster = case.cluster()
    agent = policy.factory()
    prov = expected_provenance(policy, agent, case, suite)
    record: dict[str, Any] = {
        "suite": suite,
        "case": case.name,
        "family": case.family,
        "split": case.split,
        "seed": seed,
        "policy": policy.name,
        "clairvoyant": policy.clairvoyant,
        "provenance": prov,
    }
    why_not = supports(agent, cluster)
    if why_not is not None:
        return record | {"status": UNSUPPORTED, "reason": why_not}
    trace = case.workload.build(seed)
    t0 = time.process_time()
    result = simulate(trace, cluster, agent, seed=seed, **run_settings(case, policy))
    cpu = time.process_time() - t0
    jobs = result.jobs
    multi = (jobs["starts_rack"] + jobs["starts_network"]) > 0
    compute = float(jobs.loc[multi, "compute_s"].sum())
    record |= {"status": OK, "cpu_s": cpu}
    record |= {key: float(result.summary[key]) for key in CARD_METRICS}
    record["multi_server_jobs"] = int(multi.sum())
    record["multi_server_comm_overhead"] = (
        float(jobs.loc[multi, "comm_s"].sum()) / compute if compute > 0 else 0.0
    )
    return record
