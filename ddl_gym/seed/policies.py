"""The seed's own scheduling policies and the protocol the seed simulator
calls them by.

Dally orders by time-averaged placement efficiency (new jobs 0; ties: fewer
GPUs held, earlier last assignment, lower id) with delay timers counted in
leases from the last resource change (a job larger than a machine may take a
rack, one larger than a rack the network, at once) and an optional
auto-tuner whose history ``H`` is counted in leases; Tiresias orders by
attained GPU service (least first) and keeps a static set of
consolidation-sensitive models within a rack.

They are not our engine's policies (``ddl_gym.baselines``): they read the
seed simulator's state (:class:`~ddl_gym.seed.simulator.SeedSim`) and answer
its questions (order, widest level, first-free-anywhere), they do not act.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol

from ddl_gym.perf import Level

if TYPE_CHECKING:
    from ddl_gym.seed.simulator import SeedSim

EPS = 1e-9


class SeedPolicy(Protocol):
    """What the seed simulator asks a policy. ``reset`` once per run; at each
    offer, waiting jobs in ``key`` order are asked the ``widest`` level they
    may take (or, with ``anywhere``, simply the first free GPUs) and told where
    they were ``placed``."""

    name: str

    @property
    def domain_order(self) -> str:
        """How Dally's first fit walks slots and machines: "java_hash" or
        "cluster" (read only: a field or a class constant will do)."""
        ...

    def reset(self) -> None: ...

    def key(self, sim: SeedSim, j: int) -> tuple: ...

    def widest(self, sim: SeedSim, j: int) -> Level: ...

    def anywhere(self, sim: SeedSim, j: int) -> bool: ...

    def placed(self, sim: SeedSim, j: int, level: Level) -> None: ...


@dataclass
class _History:
    """Waits (in leases) of one GPU demand at one level, oldest first.

    ``prune="java"`` keeps the seed's bookkeeping
    (``DallyInterJobScheduler.setDemandDelay``): old waits are dropped only
    when a new one is added, by a loop that removes by index while it walks,
    so it skips the entry after each removal. ``prune="window"`` drops every
    wait older than the window whenever the timers are read."""

    samples: list[tuple[float, float]] = field(default_factory=list)

    def add(self, t: float, wait: float, horizon: float, prune: str) -> None:
        self.samples.append((t, wait))
        if prune == "java":
            # waits come in time order: the walk can stop at the first one
            # inside the window (none after it is removed)
            i = 0
            while i < len(self.samples) and self.samples[i][0] < horizon:
                del self.samples[i]
                i += 1

    def spread(self, horizon: float, prune: str) -> float:
        """Mean + 2 population standard deviations; 1 with no waits
        (``getMcDemandDelay`` / ``getRackDemandDelay``)."""
        if prune == "window":
            self.samples = [s for s in self.samples if s[0] >= horizon]
        n = len(self.samples)
        if not n:
            return 1.0
        mean = sum(w for _, w in self.samples) / n
        var = sum((w - mean) ** 2 for _, w in self.samples) / n
        return mean + 2.0 * math.sqrt(var)


@dataclass
class SeedDally:
    """Dally as the seed runs it.

    ``auto_tune``: timers from the history of waits (``tuneDelayTimers``):
    rack timer ``min(ceil(0.8 H), max(1, ceil(m)))`` and network timer
    ``min(H, max(2, ceil(r)))`` leases, ``m`` / ``r`` the mean + 2 std of the
    machine-level / rack-level waits of the same GPU demand over the last
    ``H = history`` leases (only waits of >= 1 lease recorded).
    ``tuner_caps="6_12"`` is the earlier version's fixed caps 6 and 12.
    Otherwise fixed ``rack_timer`` / ``network_timer`` leases.
    ``skip_waits``: ``all`` (the seed's code: a job larger than a machine
    may take a rack at once, a job larger than a rack the network at once),
    ``network`` (only the latter) or ``none`` (every wider level waits).
    ``domain_order``: ``java_hash`` walks slots and machines in the order of
    the seed's ``MultiKeyMap`` key sets (``consolidatedGPUAllocation``),
    ``cluster`` in cluster order. ``timer_clock``: waits count from the last
    release (``getLastResourceAssignment``) or from arrival. ``tie_id``: the
    last tie-break, lower first: the job's place in the trace (``index``,
    arrival order) or its trace id (``job_id``, the seed's ``getJobId`` in
    ``InterJobScheduler.PerGPUBidComparator``; the seed's traces are not in id
    order). With exact priorities it also orders equal efficiencies the seed
    tells apart by their last bits (``SeedSwitches.priority_arith``)."""

    rack_timer: float = 1.0
    network_timer: float = 2.0
    auto_tune: bool = False
    history: int = 24
    tuner_caps: str = "history"
    history_prune: str = "java"
    skip_waits: str = "all"
    domain_order: str = "java_hash"
    timer_clock: str = "release"  # "arrival": timers count from arrival, not release
    tie_id: str = "index"  # or "job_id"
    name: str = "dally"
    _hist: dict[tuple[int, int], _History] = field(default_factory=dict, repr=False)

    def __post_init__(self) -> None:
        checks = (
            ("tuner_caps", ("history", "6_12")),
            ("history_prune", ("java", "window")),
            ("skip_waits", ("all", "network", "none")),
            ("domain_order", ("java_hash", "cluster")),
            ("timer_clock", ("release", "arrival")),
            ("tie_id", ("index", "job_id")),
        )
        for name, allowed in checks:
            if getattr(self, name) not in allowed:
                raise ValueError(f"{name} must be one of {allowed}, got {getattr(self, name)!r}")

    def reset(self) -> None:
        self._hist = {}

    def key(self, sim: SeedSim, j: int) -> tuple:
        tie = sim.java_ids[j] if self.tie_id == "job_id" else j
        return (sim.efficiency(j), 0, sim.last_assign[j], tie)

    def _horizon(self, sim: SeedSim) -> float:
        return sim.now - self.history * sim.sw.lease_s

    def timers(self, sim: SeedSim, gpus: int) -> tuple[float, float]:
        if not self.auto_tune:
            return self.rack_timer, self.network_timer
        horizon = self._horizon(sim)
        m = self._hist.get((gpus, Level.MACHINE))
        r = self._hist.get((gpus, Level.RACK))
        ms = m.spread(horizon, self.history_prune) if m else 1.0
        rs = r.spread(horizon, self.history_prune) if r else 1.0
        if self.tuner_caps == "6_12":
            rack_cap, net_cap = 6.0, 12.0
        else:
            rack_cap, net_cap = float(math.ceil(0.8 * self.history)), float(self.history)
        rack = min(rack_cap, max(1.0, math.ceil(ms - 1e-12)))
        net = min(net_cap, max(2.0, math.ceil(rs - 1e-12)))
        return rack, net

    def _since(self, sim: SeedSim, j: int) -> float:
        start = sim.arrival[j] if self.timer_clock == "arrival" else sim.last_assign[j]
        return (sim.now - start) / sim.sw.lease_s

    def widest(self, sim: SeedSim, j: int) -> Level:
        waited = self._since(sim, j) + EPS
        tight = sim.size_level(sim.n[j])
        if self.skip_waits != "none" and tight == Level.NETWORK:
            return Level.NETWORK
        rack_t, net_t = self.timers(sim, sim.n[j])
        if waited >= net_t:
            return Level.NETWORK
        if self.skip_waits == "all" and tight == Level.RACK:
            return Level.RACK
        if waited >= rack_t:
            return Level.RACK
        return Level.MACHINE

    def anywhere(self, sim: SeedSim, j: int) -> bool:
        return False  # Dally always looks for the tightest domain first

    def placed(self, sim: SeedSim, j: int, level: Level) -> None:
        if level == Level.NETWORK:
            return
        wait = self._since(sim, j)
        if wait >= 1.0 - EPS:
            h = self._hist.setdefault((sim.n[j], level), _History())
            h.add(sim.now, wait, self._horizon(sim), self.history_prune)


# The seed's static consolidation-sensitive class (docs/design.md section 1.1).
SEED_SENSITIVE = frozenset({"vgg11", "alexnet", "mobilenet_v3"})


@dataclass
class SeedTiresias:
    """Tiresias as the seed runs it: least attained GPU service first (counted
    per started batch); ``sensitive`` models never cross racks unless larger
    than a rack; the others take the tightest first-fitting domain at any
    level or, with ``insensitive_anywhere``, simply the first free GPUs in
    cluster order (closer to the authors' figures without it)."""

    sensitive: frozenset[str] = SEED_SENSITIVE
    insensitive_anywhere: bool = False
    name: str = "tiresias"
    domain_order = "cluster"  # (not a field: a class constant)

    def reset(self) -> None:
        pass

    def key(self, sim: SeedSim, j: int) -> tuple:
        return (sim.service[j], 0, sim.last_assign[j], j)

    def widest(self, sim: SeedSim, j: int) -> Level:
        tight = sim.size_level(sim.n[j])
        if sim.model[j] in self.sensitive and tight < Level.NETWORK:
            return Level.RACK
        return Level.NETWORK

    def anywhere(self, sim: SeedSim, j: int) -> bool:
        return self.insensitive_anywhere and sim.model[j] not in self.sensitive

    def placed(self, sim: SeedSim, j: int, level: Level) -> None:
        pass


SEED_POLICIES = ("dally", "dally-1-2", "tiresias")


def make_seed_policy(name: str, **kwargs: Any) -> SeedPolicy:
    """``dally`` (auto-tuned, H = 24 leases), ``dally-1-2`` (fixed timers),
    ``tiresias``."""
    if name == "dally":
        return SeedDally(**{"auto_tune": True, **kwargs})
    if name == "dally-1-2":
        return SeedDally(**{"rack_timer": 1, "network_timer": 2, "name": "dally-1-2", **kwargs})
    if name == "tiresias":
        return SeedTiresias(**kwargs)
    raise ValueError(f"no seed-mode policy {name!r}; known: {', '.join(SEED_POLICIES)}")
