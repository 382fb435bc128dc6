"""Seed-faithful mode: the job, lease and offer semantics of the seed's simulator.

The seed paper's simulator (ArtISt-sim, aakash-sharma/cluster-sim @ 4cd660e)
differs from our default engine in how a job progresses, how GPUs are leased
and re-offered and where a job is put, not only in its performance model.
``docs/design.md`` section 1.1 states those semantics; this module re-states them
(facts, not the authors' code) as an event loop over individual GPUs, with
every difference to our default model a named switch
(:class:`~ddl_gym.seed.switches.SeedSwitches`):

* **batches** (``batch_iterations``): a job on ``N`` GPUs whose placement has
  slowdown ``d`` advances ``batch_iterations x N`` iterations every
  ``t_c x batch_iterations x d`` seconds; its ideal run time is single-GPU
  work / ``N``. Decisions happen only at batch ends and events.
* **leases** (``lease_s``): GPUs are granted for ``lease_s``. At the end of a
  batch a job gives back its GPUs if the lease has expired or would expire
  before ``batch / N`` more seconds (the seed's look-ahead divides the next
  batch by the GPU count); it then waits again (its wait clock restarts) and
  competes in the next offer like any waiting job.
* **checkpoint** (``checkpoint_s_per_gpu``, ``checkpoint_on_lookahead``):
  released GPUs are offered ``checkpoint_s_per_gpu x N`` seconds later (see
  ``unlease_on_release``) if the lease had expired, at once if the look-ahead
  released them.
* **offers** (``tick_s``, ``offer_scope``, ``tick``,
  ``offer_on_lease_expiry``): on arrivals, GPUs becoming free (a release's
  own offer, after its checkpoint) and a ``tick_s`` tick once the event queue
  runs empty while jobs wait, all free GPUs are offered to the waiting jobs in
  the policy's priority order, gang (all or nothing). A lease that expires
  while its batch runs is no offer point (the seed has no event for it).
* **release** (``unlease_on_release``): as the seed's ``GPU.markLeaseEnd``,
  released GPUs are unleased at once; any offer during the checkpoint may take
  them, and their own offer comes after it.
* **placement** (``placement``; Dally's ``domain_order``): ``first_fit``
  takes the first domain that fits (slot, machine, then rack and anywhere as
  the policy allows); Dally walks slots and machines in the order of the
  seed's hash maps (:func:`java_multikey_order`), racks in order, and takes
  the first free GPUs of the domain; ``best_fit`` uses our engine's packer.
* **performance** (``perf``): ``seed_astra`` looks the slowdown of the exact
  GPU set up in the authors' table (:mod:`ddl_gym.seed.astra`, no
  contention); ``closed_form`` uses our :class:`~ddl_gym.perf.PerfModel`,
  with ``contention`` sharing rack uplinks among the cross-rack jobs running
  when a lease starts and ``congestion`` as background traffic.

The seed's own policies (:mod:`ddl_gym.seed.policies`) choose the order and
the widest level; this loop does the rest.

The loop is one event per lease (not per batch): the batches a job runs
within one lease are summed in closed form, so the seed week's ~11,000 h
makespan takes seconds of CPU, not hours.
"""

from __future__ import annotations

import heapq
import math
from bisect import insort
from collections.abc import Callable
from typing import Any

import pandas as pd

from ddl_gym.engine.metrics import Result, summarize
from ddl_gym.perf import Level, PerfModel, Shape
from ddl_gym.seed.astra import SlowdownTable
from ddl_gym.seed.java_order import java_multikey_order
from ddl_gym.seed.policies import SeedPolicy, make_seed_policy
from ddl_gym.seed.switches import SeedSwitches
from ddl_gym.topology import Cluster, get_cluster, get_congestion
from ddl_gym.traces import Trace, check_fits

FREE, END, ARRIVAL, LEASE, TICK = range(5)
EPS = 1e-9


class SeedSim:
    """One run of the seed-faithful mode. ``run()`` returns the per-job table
    and summary in our engine's format (``ddl_gym.engine.metrics``)."""

    def __init__(
        self,
        trace: Trace,
        cluster: Cluster | str,
        policy: SeedPolicy,
        switches: SeedSwitches | None = None,
        table: SlowdownTable | None = None,
        progress: Callable[[int], None] | None = None,
    ) -> None:
        self.cluster = c = get_cluster(cluster)
        self.sw = sw = switches or SeedSwitches()
        self.policy = policy
        self._progress = progress  # told of every job that finishes
        check_fits(trace, c.num_gpus)
        jobs = trace.jobs
        self.ids = [str(x) for x in jobs["job_id"]]
        # the seed's getJobId (an int parsed from the trace), where the id is one
        self.java_ids = [int(x) if x.lstrip("-").isdigit() else j for j, x in enumerate(self.ids)]
        self.arrival = jobs["arrival_s"].astype(float).tolist()
        self.n = jobs["gpus"].astype(int).tolist()
        self.model = [str(x) for x in jobs["model"]]
        self.iters = jobs["iterations"].astype(float).tolist()
        self.tpi = jobs["iter_time_s"].astype(float).tolist()
        self.table = (table or SlowdownTable.load()) if sw.perf == "seed_astra" else None
        self.perf = PerfModel(c) if sw.perf == "closed_form" else None
        self.background = get_congestion(sw.congestion).at(0.0)
        G, S = c.gpus_per_server, c.servers_per_rack
        # GPU g in cluster order: rack, machine, slot
        self.loc = [
            (g // (G * S), g // G, (g // G) * 10_000 + (g % G) // sw.gpus_per_slot)
            for g in range(c.num_gpus)
        ]
        self._sd_cache: dict[tuple, float] = {}
        # the seed's GPULocation ids: rack, machine within the rack, slot within the machine
        self.jloc = [
            (g // (G * S), (g // G) % S, (g % G) // sw.gpus_per_slot) for g in range(c.num_gpus)
        ]
        self._free_ver = 0
        self._dom_ver = -1
        self._dom: tuple[list[list[int]], list[list[int]]] = ([], [])

    def size_level(self, gpus: int) -> Level:
        c = self.cluster
        if gpus <= c.gpus_per_server:
            return Level.MACHINE
        if gpus <= c.gpus_per_rack:
            return Level.RACK
        return Level.NETWORK

    # -- performance ---------------------------------------------------------
    def slowdown(self, j: int, gpus: list[int]) -> float:
        n = len(gpus)
        if n <= 1:
            return 1.0
        loc = self.loc
        racks = {loc[g][0] for g in gpus}
        machines = {loc[g][1] for g in gpus}
        if self.table is not None:
            slots = len({loc[g][2] for g in gpus})
            key = (self.model[j], n, len(racks), len(machines), slots)
            sd = self._sd_cache.get(key)
            if sd is None:
                sd = self._sd_cache[key] = self.table.slowdown(*key)
            return sd
        S = self.cluster.servers_per_rack
        per_server: dict[int, int] = {}
        per_rack: dict[int, int] = {}
        for g in gpus:
            per_server[loc[g][1]] = per_server.get(loc[g][1], 0) + 1
        for m in per_server:
            per_rack[m // S] = per_rack.get(m // S, 0) + 1
        shape = Shape(n=n, g=max(per_server.values()), s=max(per_rack.values()), r=len(racks))
        perf = self.perf
        assert perf is not None
        bw = alpha = None
        if shape.r > 1:
            sharing = 1
            if self.sw.contention:
                sharing = 1 + max(self.uplink[r] for r in racks)
            bw = perf.uplink_share(self.background, sharing)
            alpha = perf.uplink_latency(self.background)
        tc = self.tpi[j]
        return perf.iter_time(self.model[j], tc, shape, bw, alpha) / tc

    # -- placement -------------------------------------------------------------
    def _first_free(self, lo: int, hi: int, k: int) -> list[int]:
        free = self.free
        out = []
        for g in range(lo, hi):
            if free[g]:
                out.append(g)
                if len(out) == k:
                    break
        return out

    def _domains(self) -> tuple[list[list[int]], list[list[int]]]:
        """Free GPUs per slot and per machine, each list in the order the
        seed's ``MultiKeyMap`` key sets walk them (keys inserted in cluster
        order of the free GPUs); cached until the free set changes."""
        if self._dom_ver == self._free_ver:
            return self._dom
        # keys (rack, machine, slot) and (rack, machine)
        slots: dict[tuple[int, ...], list[int]] = {}
        machines: dict[tuple[int, ...], list[int]] = {}
        for g in range(len(self.free)):
            if self.free[g]:
                r, m, s = self.jloc[g]
                slots.setdefault((r, m, s), []).append(g)
                machines.setdefault((r, m), []).append(g)
        self._dom = (
            [slots[k] for k in java_multikey_order(tuple(slots))],
            [machines[k] for k in java_multikey_order(tuple(machines))],
        )
        self._dom_ver = self._free_ver
        return self._dom

    def find(
        self, j: int, widest: Level, anywhere: bool = False, order: str = "cluster"
    ) -> tuple[list[int], Level] | None:
        """GPUs for job ``j`` and the stage that found them (MACHINE: a slot
        or machine; RACK: one rack; NETWORK: anywhere), or None."""
        c = self.cluster
        k = self.n[j]
        if k > self.n_free:
            return None
        G, S = c.gpus_per_server, c.servers_per_rack
        if self.sw.placement == "best_fit":
            from ddl_gym.engine.packer import find_placement

            free_srv = self.free_srv
            rack_free = [sum(free_srv[r * S : (r + 1) * S]) for r in range(c.racks)]
            p = find_placement(list(free_srv), rack_free, S, G, k, widest)
            if p is None:
                return None
            gpus: list[int] = []
            for server, cnt in p:
                gpus.extend(self._first_free(server * G, (server + 1) * G, cnt))
            return gpus, self._level(gpus)
        if anywhere:
            gpus = self._first_free(0, c.num_gpus, k)
            return gpus, Level.NETWORK
        if k <= G:
            P = self.sw.gpus_per_slot
            if order == "java_hash":
                slot_lists, machine_lists = self._domains()
                for domains in (slot_lists, machine_lists):
                    for free in domains:
                        if len(free) >= k:
                            return free[:k], Level.MACHINE
            else:
                if k <= P:  # the first slot holding it
                    for s0 in range(0, c.num_gpus, P):
                        if sum(self.free[s0 : s0 + P]) >= k:
                            return self._first_free(s0, s0 + P, k), Level.MACHINE
                for m in range(c.num_servers):
                    if self.free_srv[m] >= k:
                        return self._first_free(m * G, (m + 1) * G, k), Level.MACHINE
        if widest >= Level.RACK and k <= G * S:
            for r in range(c.racks):
                if self.free_rack[r] >= k:
                    gpus = self._first_free(r * G * S, (r + 1) * G * S, k)
                    return gpus, Level.RACK
        if widest >= Level.NETWORK:
            gpus = self._first_free(0, c.num_gpus, k)
            return gpus, Level.NETWORK
        return None

    def _level(self, gpus: list[int]) -> Level:
        loc = self.loc
        if len({loc[g][0] for g in gpus}) > 1:
            return Level.NETWORK
        if len({loc[g][1] for g in gpus}) > 1:
            return Level.RACK
        return Level.MACHINE

    # -- events ------------------------------------------------------------------
    def _push(self, t: float, kind: int, payload: Any) -> None:
        self._seq += 1
        heapq.heappush(self._heap, (t, kind, self._seq, payload))

    def _set_gpus(self, gpus: list[int], free: bool) -> None:
        G, S = self.cluster.gpus_per_server, self.cluster.servers_per_rack
        d = 1 if free else -1
        for g in gpus:
            self.free[g] = free
            self.free_srv[g // G] += d
            self.free_rack[g // (G * S)] += d
        self.n_free += d * len(gpus)
        self._free_ver += 1

    def _assign(self, j: int, gpus: list[int], level: Level) -> None:
        sw = self.sw
        now = self.now
        self._set_gpus(gpus, False)
        self.held[j] = gpus
        self.level[j] = level
        self.starts[j][level] += 1
        self.queued[j] += now - self.last_assign[j]
        if math.isnan(self.first_start[j]):
            self.first_start[j] = now
            self.first_gpus[j] = list(gpus)
        racks = sorted({self.loc[g][0] for g in gpus})
        sd = self.slowdown(j, gpus)
        if len(racks) > 1:
            self.job_racks[j] = racks
            for r in racks:
                self.uplink[r] += 1
        n = len(gpus)
        tc = self.tpi[j]
        left = self.iters[j] - self.done_iters[j]
        bi = sw.batch_iterations
        if bi > 0:
            batch = tc * bi * sd
            need = math.ceil(left / (bi * n) - 1e-9)
            # batches until the lease forces a release: the first batch end at
            # which it has expired or would expire within batch / n
            # (k batch > lease - batch / n; an expired lease implies it)
            k_rel = max(1, math.floor((sw.lease_s - batch / n) / batch) + 1)
            k = min(need, k_rel)
            dt = k * batch
            iters = min(left, k * bi * n)
            finished = k >= need
            # released by the look-ahead while the lease still runs (not expired)
            early = not finished and dt < sw.lease_s
            self.service[j] += k * n * batch
            if sw.priority_arith != "exact":
                self._java_batches(j, k, n, sd)
        else:
            rate = n / (tc * sd)
            t_done = left / rate
            dt = min(t_done, sw.lease_s)
            finished = t_done <= sw.lease_s + EPS
            early = False
            iters = left if finished else dt * rate
            self.service[j] += n * dt
        self._push(now + dt, END, (j, iters, dt, dt / sd, finished, early))
        if sw.offer_on_lease_expiry and dt > sw.lease_s:
            self._push(now + sw.lease_s, LEASE, None)

    def _java_batches(self, j: int, k: int, n: int, sd: float) -> None:
        """The seed's per-batch bookkeeping of ``k`` batches on ``n`` GPUs, in
        its order of double operations (``IntraJobScheduler.endIteration``:
        GPU time += time per iteration / speed x granularity, one batch at a
        time; remaining iterations -= granularity x GPUs, floored at 0). The
        seed's speed is compute / (compute + comm), 1 for one GPU; ours is
        1 / slowdown. Read back at the batch end by :meth:`efficiency`."""
        bi = self.sw.batch_iterations
        inc = self.tpi[j] / (1.0 if n == 1 else 1.0 / sd) * bi
        g = self._jv_gpu[j]
        for _ in range(k):
            g += inc
        self._jv_gpu[j] = g
        self._jv_rem[j] = max(0, self._jv_rem[j] - k * bi * n)

    def efficiency(self, j: int) -> float:
        """Dally's priority of job ``j``: its time-averaged placement
        efficiency, work done / (GPU time held / ideal run time), 0 before
        its first batch (``DallyIntraJobScheduler.endIteration``)."""
        arith = self.sw.priority_arith
        if self.sw.batch_iterations > 0 and (
            arith == "java" or (arith == "java_one_gpu" and self.n[j] == 1)
        ):
            g = self._jv_gpu[j]
            if g <= 0:
                return 0.0
            total = self._jv_total[j]
            work = 1 - self._jv_rem[j] / total
            ideal = self.tpi[j] * total / self.n[j]
            return work / (g / ideal)
        busy = self.gpu_time[j]
        return self.comp_time[j] / busy if busy > 0 else 0.0

    def _end(
        self, j: int, iters: float, dt: float, comp: float, finished: bool, early: bool
    ) -> None:
        gpus = self.held[j]
        self.held[j] = []
        for r in self.job_racks.pop(j, ()):
            self.uplink[r] -= 1
        self.done_iters[j] += iters
        self.gpu_time[j] += dt
        self.comp_time[j] += comp
        self.last_assign[j] = self.now
        delay = self.sw.checkpoint_s_per_gpu * len(gpus)
        if early and not self.sw.checkpoint_on_lookahead:
            delay = 0.0
        if finished and not self.sw.checkpoint_on_completion:
            delay = 0.0
        if delay > 0:
            if self.sw.unlease_on_release:
                self._set_gpus(gpus, True)  # unleased now, offered after the checkpoint
            self._push(self.now + delay, FREE, gpus)
        else:
            self._set_gpus(gpus, True)
            self._offer_due = True
            self._released_now.extend(gpus)
        if finished:
            self.end[j] = self.now
            self.n_done += 1
            if self._progress is not None:
                self._progress(1)
        else:
            insort(self.waiting, (self.policy.key(self, j), j))

    def _offer_only(self, gpus: list[int]) -> None:
        """Offer only ``gpus`` (the seed offers a release's GPUs on their own)."""
        scope = set(gpus)
        others = [g for g in range(len(self.free)) if self.free[g] and g not in scope]
        self._set_gpus(others, False)
        try:
            self._offer()
        finally:
            self._set_gpus(others, True)

    def _offer(self) -> None:
        policy = self.policy
        order = policy.domain_order
        G = self.cluster.gpus_per_server
        placed: list[int] = []
        for pos, (_, j) in enumerate(self.waiting):
            if self.n_free == 0:
                break
            if self.n[j] > self.n_free:
                continue
            anywhere = policy.anywhere(self, j)
            got = None
            if not anywhere and self.n[j] <= G and self.sw.placement == "first_fit":
                # a slot or machine is tried first whatever the timers say:
                # ask the policy for its widest level only if none fits (as
                # the seed tunes its timers only then); same answer, and a
                # one-GPU job never reads the tuner's history
                got = self.find(j, Level.MACHINE, False, order)
            if got is None:
                got = self.find(j, policy.widest(self, j), anywhere, order)
            if got is None:
                continue
            gpus, stage = got
            policy.placed(self, j, stage)
            self._assign(j, gpus, self._level(gpus))
            placed.append(pos)
        for pos in reversed(placed):
            del self.waiting[pos]

    def run(self, max_events: int = 50_000_000) -> pd.DataFrame:
        c = self.cluster
        J = len(self.ids)
        self.now = 0.0
        self.free = [True] * c.num_gpus
        self.free_srv = [c.gpus_per_server] * c.num_servers
        self.free_rack = [c.gpus_per_rack] * c.racks
        self.n_free = c.num_gpus
        self.uplink = [0] * c.racks
        self.job_racks: dict[int, list[int]] = {}
        self.held: list[list[int]] = [[] for _ in range(J)]
        self.level: list[Level | None] = [None] * J
        self.starts = [[0, 0, 0] for _ in range(J)]
        self.done_iters = [0.0] * J
        self.gpu_time = [0.0] * J
        self.comp_time = [0.0] * J
        # the seed's own double bookkeeping of Dally's priority (priority_arith)
        self._jv_gpu = [0.0] * J
        self._jv_total = [max(1, round(x)) for x in self.iters]
        self._jv_rem = list(self._jv_total)
        self.service = [0.0] * J
        self.queued = [0.0] * J
        self.last_assign = list(self.arrival)
        self.first_start = [math.nan] * J
        self.first_gpus: list[list[int]] = [[] for _ in range(J)]
        self.end = [math.nan] * J
        self.n_done = 0
        self.waiting: list[tuple[tuple, int]] = []
        self._heap: list[tuple[float, int, int, Any]] = []  # (t, kind, seq, payload)
        self._seq = 0
        self._tick_at: float | None = None
        self.policy.reset()
        self.events = 0
        for j in range(J):
            self._push(self.arrival[j], ARRIVAL, j)
        heap = self._heap
        while heap:
            t = heap[0][0]
            self.now = t
            self._offer_due = False
            offer_all = False
            released: list[int] = []
            self._released_now = released
            while heap and heap[0][0] == t:
                _, kind, _, payload = heapq.heappop(heap)
                self.events += 1
                if kind == END:
                    self._end(*payload)
                elif kind == FREE:
                    if self.sw.unlease_on_release:
                        # offer those of them nobody took meanwhile
                        payload = [g for g in payload if self.free[g]]
                    else:
                        self._set_gpus(payload, True)
                    released.extend(payload)
                    taken = self.sw.offer_taken_release and self.sw.offer_scope == "all"
                    self._offer_due = self._offer_due or bool(payload) or taken
                elif kind == ARRIVAL:
                    insort(self.waiting, (self.policy.key(self, payload), payload))
                    self._offer_due = offer_all = True
                elif kind == LEASE:
                    self._offer_due = offer_all = True
                elif kind == TICK and t == self._tick_at:
                    self._tick_at = None
                    self._offer_due = offer_all = True
            if self.events > max_events:
                raise RuntimeError(f"seed mode: more than {max_events} events at t={t:.6g}s")
            if self._offer_due and self.waiting and self.n_free:
                if self.sw.offer_scope == "released" and not offer_all and released:
                    self._offer_only(released)
                else:
                    self._offer()
            idle = self.sw.tick == "waiting" or not heap
            if self.waiting and self._tick_at is None and idle:
                self._tick_at = t + self.sw.tick_s
                self._push(self._tick_at, TICK, None)
            if self.n_done == J:
                break
        if self.n_done != J:
            raise RuntimeError(f"seed mode stalled: {J - self.n_done} job(s) never finished")
        return self._jobs_table()

    def _jobs_table(self) -> pd.DataFrame:
        rows = []
        for j in range(len(self.ids)):
            ideal = self.tpi[j] * self.iters[j] / self.n[j]
            run = self.gpu_time[j]
            lvl = self.level[j]
            rows.append(
                {
                    "job_id": self.ids[j],
                    "model": self.model[j],
                    "gpus": self.n[j],
                    "arrival_s": self.arrival[j],
                    "start_s": self.first_start[j],
                    "end_s": self.end[j],
                    "jct_s": self.end[j] - self.arrival[j],
                    "queueing_s": self.end[j] - self.arrival[j] - run,
                    "run_s": run,
                    "gpu_time_s": run * self.n[j],
                    "compute_s": ideal,
                    # their communication metric: wall running time - ideal compute
                    "comm_s": run - ideal,
                    "overhead_s": 0.0,
                    "ideal_s": ideal,
                    "preemptions": sum(self.starts[j]) - 1,
                    "level": lvl.name.lower() if lvl is not None else "",
                    "starts_machine": self.starts[j][0],
                    "starts_rack": self.starts[j][1],
                    "starts_network": self.starts[j][2],
                }
            )
        return pd.DataFrame(rows)


def run(
    trace: Trace,
    cluster: Cluster | str,
    policy: str | SeedPolicy,
    switches: SeedSwitches | None = None,
    table: SlowdownTable | None = None,
    progress: Callable[[int], None] | None = None,
    **policy_kwargs: Any,
) -> Result:
    """Simulate ``trace`` in the seed-faithful mode (see module docstring).

    ``policy`` is a seed policy or its name (``make_seed_policy``, with
    ``policy_kwargs``); ``table`` the slowdown table (default: the data
    dir's); ``progress`` is called with 1 as each job finishes. Returns our
    engine's ``Result`` (no time series or placement history); ``comm_s``
    per job is the seed's communication metric, wall running time minus
    ideal compute time, and the summary adds ``comm_h`` (its sum in hours)
    and ``events``."""
    if isinstance(policy, str):
        policy = make_seed_policy(policy, **policy_kwargs)
    sim = SeedSim(trace, cluster, policy, switches, table, progress)
    jobs = sim.run()
    series = pd.DataFrame(columns=["time_s", "used_gpus", "queue_length", "running", "background"])
    summary = summarize(jobs, series, sim.cluster.num_gpus)
    summary["comm_h"] = float(jobs["comm_s"].sum()) / 3600.0
    summary["events"] = float(sim.events)
    return Result(jobs, series, summary)
