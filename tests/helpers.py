"""Shared test helpers: small traces and an engine invariant checker."""

from __future__ import annotations

import math
from typing import Any

import pandas as pd

from ddl_gym.engine import Engine, Status


def make_trace(rows: list[tuple]) -> pd.DataFrame:
    """Rows of (job_id, arrival_s, gpus, model, iterations, iter_time_s)."""
    return pd.DataFrame(
        rows, columns=["job_id", "arrival_s", "gpus", "model", "iterations", "iter_time_s"]
    )


def flat_config(cfg: Any) -> dict:
    """A ``TrainConfig`` as one flat dict, ``"section.field"`` keys: two
    configs compare field by field."""
    return {
        sec if k is None else f"{sec}.{k}": v
        for sec, d in cfg.to_dict().items()
        for k, v in (d.items() if isinstance(d, dict) else [(None, d)])
    }


class InvariantChecker:
    """Checks the engine's invariants; call ``check(engine)`` after every step."""

    def __init__(self) -> None:
        self.last_time = -math.inf
        self.progress: dict[int, float] = {}
        self.arrived: set[int] = set()
        self.completed: set[int] = set()
        self.instant = -1

    def check(self, engine: Engine) -> None:
        c = engine.cluster
        assert engine.now >= self.last_time, "time went back"
        self.last_time = engine.now
        used = [0] * c.num_servers
        for job in engine.running.values():
            assert job.status == Status.RUNNING
            assert sum(g for _, g in job.placement) == job.gpus, "gang: all GPUs or none"
            for server, g in job.placement:
                used[server] += g
        for s in range(c.num_servers):
            assert engine.free[s] >= 0, f"server {s} over-booked"
            assert used[s] + engine.free[s] == c.gpus_per_server, f"server {s} books don't add up"
        for r in range(c.racks):
            servers = range(r * c.servers_per_rack, (r + 1) * c.servers_per_rack)
            assert engine.rack_free[r] == sum(engine.free[s] for s in servers)
        assert engine.total_free == sum(engine.free)
        assert engine.total_free + sum(used) == c.num_gpus
        pending = [j.index for j in engine.pending]
        assert len(pending) == len(set(pending)), "a job queued twice"
        running = set(engine.running)
        assert not running & set(pending), "a job both running and pending"
        for job in engine.pending:
            assert job.status == Status.PENDING and job.arrival <= engine.now
        # every event of this instant: each job arrives once and completes once
        new_instant = engine.instant != self.instant
        self.instant = engine.instant
        for kind, j in engine.events_now if new_instant else ():
            if kind == "arrival":
                assert j not in self.arrived, "a job arrived twice"
                self.arrived.add(j)
            elif kind == "completion":
                assert j not in self.completed, "a job completed twice"
                assert engine.jobs[j].status == Status.DONE
                self.completed.add(j)
        assert len(self.completed) == engine.n_done
        assert not running & self.completed and not set(pending) & self.completed
        assert running <= self.arrived and set(pending) <= self.arrived
        for job in engine.running.values():
            done = job.iterations - engine.remaining_iterations(job)
            assert done >= self.progress.get(job.index, 0.0) - 1e-9 * job.iterations, (
                "progress went back"
            )
            self.progress[job.index] = done

    def finish(self, engine: Engine) -> None:
        self.check(engine)
        n = len(engine.jobs)
        assert len(self.arrived) == n and len(self.completed) == n
        assert all(job.status == Status.DONE for job in engine.jobs)
