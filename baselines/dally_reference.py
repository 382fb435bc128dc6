"""A reference Dally that reads like the paper: the decisions of the fast
``DallyPolicy`` (``dally.py``, whose docstring and docs/design.md section 1 give
the model), written to be read, not to be fast.

Three layers, each a short method below:

1. **Delay timers** (``allowed_level``, ``ask_wakeups``): a waiting job
   accepts one machine until ``rack_timer`` leases have passed since its last
   resource change, one rack until ``network_timer``, then anything; the
   policy asks for a decision point when a timer fires.
2. **Network-sensitive re-offer** (``reoffer``): at lease expiry the expired
   jobs' GPUs and the free ones are offered, least efficient first, to the
   waiting jobs and the expired jobs themselves; a waiting job takes GPUs
   that are free now if they hold it, and competes for expired GPUs only
   if they do not (``reoffer_free_first``); an expired job whose GPUs
   someone before it took is preempted.
3. **Auto-tuner** (``AutoTuner``): per GPU demand, the timers follow the
   waits jobs had before a machine- and a rack-level placement.

Every decision is worked out afresh from the engine view: no state but the
model's own (the tuner's history, this instant's losers, the wake-ups asked).
Leases are eager (every expiry is a decision point, ``engine_kwargs``), so the
policy tells the engine nothing about which expiries matter. Tested equal,
bit for bit, to ``DallyPolicy`` (``tests/test_dally_reference.py``).
"""

from __future__ import annotations

import math
from collections import deque
from dataclasses import dataclass, field
from typing import Any

from ddl_gym.engine import WAIT, Action, EngineView, Job, Place, Preempt, Status
from ddl_gym.perf import Level, shape_of

from .common import DEFAULT_ENGINE_KWARGS, EPS, BasePolicy, WakeUps, placement_on, size_level
from .dally import SEED_LEASE_S, DallyPolicy

MACHINE, RACK, NETWORK = Level.MACHINE, Level.RACK, Level.NETWORK


@dataclass
class WaitWindow:
    """The waits (in leases) of one GPU demand at one level, oldest first."""

    samples: deque[tuple[float, float]] = field(default_factory=deque)  # (time placed, wait)
    # Running sums, not sums over ``samples``: the fast tuner keeps these, and
    # a sum taken afresh can differ in the last bit (and a timer by a lease).
    # A wait leaves before the next one comes (``add`` drops first), so the
    # sums see the same additions and subtractions however often they are read.
    total: float = 0.0
    total_sq: float = 0.0

    def drop_before(self, horizon: float) -> None:
        while self.samples and self.samples[0][0] < horizon:
            _, wait = self.samples.popleft()
            self.total -= wait
            self.total_sq -= wait * wait

    def add(self, t: float, wait: float, horizon: float) -> None:
        self.drop_before(horizon)
        self.samples.append((t, wait))
        self.total += wait
        self.total_sq += wait * wait

    def spread(self) -> int:
        """``ceil(mean + 2 std)``, population std; an empty window counts as
        one wait of 1 lease (-1e-9: a mean of k computed a hair above k is k)."""
        n = len(self.samples)
        if not n:
            return 1
        mean = self.total / n
        std = math.sqrt(max(0.0, self.total_sq / n - mean * mean))
        return math.ceil(mean + 2.0 * std - 1e-9)


@dataclass
class AutoTuner:
    """Layer 3: per GPU demand, a ``window_h``-hour window of waits per level
    and the paper's formula, the caps ``ceil(0.8 H)`` and ``H`` taken literally."""

    window_h: float = 24.0
    windows: dict[tuple[int, Level], WaitWindow] = field(default_factory=dict)

    def record(self, gpus: int, level: Level, wait_leases: float, now: float) -> None:
        """A job of ``gpus`` GPUs got a placement of ``level`` after waiting."""
        if level == NETWORK:
            return  # only the machine and rack waits set timers
        window = self.windows.setdefault((gpus, level), WaitWindow())
        window.add(now, wait_leases, now - self.window_h * 3600.0)

    def timers(self, gpus: int, now: float) -> tuple[int, int]:
        """``(rack_timer, network_timer)`` in leases for a job of ``gpus`` GPUs."""
        spreads = []
        for level in (MACHINE, RACK):
            window = self.windows.get((gpus, level))
            if window is None:
                spreads.append(1)
            else:
                window.drop_before(now - self.window_h * 3600.0)
                spreads.append(window.spread())
        H = self.window_h
        return int(min(math.ceil(0.8 * H), max(6, spreads[0]))), int(min(H, max(12, spreads[1])))


@dataclass
class ReferenceDally(BasePolicy):
    """Dally as the paper tells it; ``DallyPolicy``'s parameters and results.
    ``preempt`` switches layer 2 on, ``auto_tune`` layer 3 (then
    ``rack_timer``/``network_timer`` are unused)."""

    rack_timer: float = 1.0
    network_timer: float = 2.0
    preempt: bool = True
    auto_tune: bool = False
    lease_s: float = SEED_LEASE_S
    window_h: float = 24.0
    margin: float = 0.05
    # a waiting job takes free GPUs before expired ones (False: the old rule,
    # the packer on free + expired GPUs at once; see ``DallyPolicy``)
    reoffer_free_first: bool = True
    name: str = "dally-reference"
    tuner: AutoTuner = field(init=False, repr=False)
    _wakeups: WakeUps = field(default_factory=WakeUps, repr=False)
    _losers: list[int] = field(default_factory=list, repr=False)  # this instant's, to preempt
    _reoffered_at: float = field(default=-math.inf, repr=False)

    @classmethod
    def like(cls, fast: DallyPolicy) -> ReferenceDally:
        """The reference twin of a ``DallyPolicy`` (same parameters)."""
        same = (
            "rack_timer",
            "network_timer",
            "preempt",
            "auto_tune",
            "lease_s",
            "window_h",
            "margin",
            "reoffer_free_first",
        )
        return cls(**{p: getattr(fast, p) for p in same}, name=f"{fast.name}-reference")

    def __post_init__(self) -> None:
        self.tuner = AutoTuner(self.window_h)

    def engine_kwargs(self) -> dict[str, Any]:
        # leases drive layer 2 only (without it the timers fire through
        # wake-ups); eager, so every expiry is a decision point
        lease = self.lease_s if self.preempt else None
        return {**DEFAULT_ENGINE_KWARGS, "lease_s": lease, "lazy_leases": False}

    def reset(self, view: EngineView, seed: int | None = None) -> None:
        self.tuner = AutoTuner(self.window_h)
        self._wakeups.clear()
        self._losers = []
        self._reoffered_at = -math.inf

    # -- layers 1 and 3: admission by delay timers ---------------------------
    def timers(self, gpus: int, now: float) -> tuple[float, float]:
        if self.auto_tune:
            return self.tuner.timers(gpus, now)
        return self.rack_timer, self.network_timer

    def allowed_level(self, view: EngineView, job: Job) -> Level:
        """The widest placement the job accepts now. A job larger than a
        server skips the machine wait, larger than a rack both waits."""
        cluster = view.cluster
        if job.gpus > cluster.gpus_per_rack:
            return NETWORK
        rack_timer, network_timer = self.timers(job.gpus, view.now)
        waited = view.waited(job) / self.lease_s  # since arrival or preemption
        # (- EPS: at its wake-up, a hair short of the timer by rounding, it is due)
        if job.gpus <= cluster.gpus_per_server and waited < rack_timer - EPS:
            return MACHINE
        if waited < network_timer - EPS:
            return RACK
        return NETWORK

    def ask_wakeups(self, view: EngineView) -> None:
        """A decision point when a waiting job's timer fires: it takes the
        wider placement exactly then (asked with the timers as they are now)."""
        for job in view.pending:
            tightest = size_level(view.cluster, job.gpus)
            if tightest == NETWORK:
                continue
            rack_timer, network_timer = self.timers(job.gpus, view.now)
            fires = [network_timer] if tightest == RACK else [rack_timer, network_timer]
            for timer in fires:
                self._wakeups.at(view, job.queued_since + timer * self.lease_s)

    # -- layer 2: re-offer expired leases by efficiency ----------------------
    @staticmethod
    def queue(view: EngineView) -> list[Job]:
        """The waiting jobs, least efficient first, then earlier arrival (every
        placement pass serves them in this order, not only re-offers). A
        waiting job's efficiency is frozen: it changes only while it runs."""
        return sorted(view.pending, key=lambda job: (job.efficiency, job.arrival, job.index))

    def reoffer(self, view: EngineView) -> list[int]:
        """The jobs whose leases expired now that lose their GPUs: the pool
        (free GPUs plus the expired jobs') goes, least efficient first, to
        the waiting jobs and back to the expired ones; an expired job loses
        if a waiting job before it took any of its GPUs (a dry run on plain
        counts with the engine's packer; the winners start in the
        placement pass that follows). A waiting job first looks for room
        among the GPUs free now (less what the jobs before it took): only if
        they cannot hold it at its level does it compete for the expired
        GPUs, packed on free and expired GPUs together (with
        ``reoffer_free_first`` off it always packs on both: best fit then
        picks an expired job's server over an empty one, and preempts it
        for nothing)."""
        # a job still restoring from its last preemption is not re-offered
        now = view.now
        expired = [
            job
            for job in view.lease_expired
            if job.status == Status.RUNNING and job.busy_until <= now
        ]
        free = list(view.free_per_server)  # free now, less what challengers took
        pool = list(free)  # plus the expired jobs' GPUs
        for job in expired:
            for server, g in job.placement:
                pool[server] += g
        offered = sorted(  # ascending efficiency, ties to the earlier arrival
            (eff, job.arrival, job.index, job)
            for eff, job in zip(view.efficiencies(expired), expired, strict=True)
        )
        waiting = iter(self.queue(view))
        challenger = next(waiting, None)
        losers = []
        for eff, _, _, incumbent in offered:
            # a waiting job comes first only if less efficient by more than
            # ``margin``: the incumbent wins ties and near-ties (no churn)
            while challenger is not None and challenger.efficiency < eff - self.margin:
                if challenger.gpus <= sum(pool):  # (else it takes nothing: spare the packer)
                    level = self.allowed_level(view, challenger)
                    won = None
                    if self.reoffer_free_first:
                        won = placement_on(view.cluster, free, challenger.gpus, level)
                    if won is None:  # it needs expired GPUs (or the old rule)
                        won = placement_on(view.cluster, pool, challenger.gpus, level)
                    for server, g in won or ():
                        pool[server] -= g
                        free[server] -= min(g, free[server])  # free GPUs go first
                challenger = next(waiting, None)
            if all(pool[server] >= g for server, g in incumbent.placement):
                for server, g in incumbent.placement:
                    pool[server] -= g  # it keeps its own GPUs
            else:
                losers.append(incumbent.index)
        return losers

    # -- the policy ----------------------------------------------------------
    def act(self, view: EngineView) -> Action:
        if not view.pending:
            return WAIT  # the re-offer and the timers concern waiting jobs only
        if self._reoffered_at != view.now:  # the instant's first call
            self._reoffered_at = view.now
            self._losers = []
            if self.preempt and view.lease_expired:
                self._losers = self.reoffer(view)
                # Nothing but leases expired and nobody lost: the GPUs are as
                # at the last decision point, where nothing fit, so no
                # placement pass (as the fast policy; it matters e.g. when a wait
                # leaving the tuner's window lowered a timer in between: the
                # job then starts at the next event, not at this expiry).
                if not self._losers and all(kind == "lease" for kind, _ in view.events):
                    return WAIT
        while self._losers:
            loser = view.job(self._losers.pop(0))
            if loser.status == Status.RUNNING:
                return Preempt(loser.index)
        for job in self.queue(view):  # the placement pass: first fit in queue order
            if job.gpus > view.total_free:
                continue  # fits nowhere (spares the timers)
            level = self.allowed_level(view, job)
            placement = view.placement_for(job, level)
            if placement is not None:
                if self.auto_tune:
                    got = shape_of(placement, view.cluster.servers_per_rack).level
                    self.tuner.record(job.gpus, got, view.waited(job) / self.lease_s, view.now)
                return Place(job.index, level)
        self.ask_wakeups(view)
        return WAIT
