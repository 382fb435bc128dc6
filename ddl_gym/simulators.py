"""Which simulator runs a scenario: our engine, or the seed wing's re-stated
ArtISt-sim (``mode = "seed"``).

Both answer the same three questions (:class:`Simulator`): the policy a name
stands for, a run of a trace, and whether the policy saw true job sizes. A
scenario hands out the one that runs it (``Scenario.simulator``), so callers
such as the experiment cells make one call with no branch on the mode.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol

from ddl_gym.engine.metrics import Result
from ddl_gym.topology import Cluster
from ddl_gym.traces import Trace

if TYPE_CHECKING:
    from ddl_gym.seed import SeedSwitches

# called with the number of jobs that just finished
Progress = Callable[[int], None]


class Simulator(Protocol):
    """What runs a scenario's workload."""

    @property
    def records_placements(self) -> bool:
        """Whether ``Result.placements`` holds the placement history (read
        only: the simulators are frozen dataclasses)."""
        ...

    def make_policy(self, name: str) -> Any:
        """The policy ``name`` stands for in this simulator."""
        ...

    def clairvoyant(self, policy: Any) -> bool:
        """Whether ``policy`` reads true job sizes here."""
        ...

    def run(
        self,
        trace: Trace,
        cluster: Cluster,
        policy: Any,
        seed: int | None = 0,
        progress: Progress | None = None,
    ) -> Result:
        """Simulate ``trace``; ``progress`` hears of every job that finishes."""
        ...


@dataclass(frozen=True)
class EngineSimulator:
    """Our engine, with a scenario's settings (``Scenario.engine_kwargs()``);
    ``simulate`` adds the policy's own ``engine_kwargs()``, the scenario's
    fixed settings overriding them (with a ``PolicyEngineWarning`` where they
    differ)."""

    engine_kwargs: Mapping[str, Any] = field(default_factory=dict)
    records_placements: bool = True

    def make_policy(self, name: str) -> Any:
        """A baseline by registry name, or the learned agent (``agent[:PATH]``)."""
        from ddl_gym.experiments.grid import policy_from_name

        return policy_from_name(name)

    def clairvoyant(self, policy: Any) -> bool:
        from ddl_gym.experiments.grid import is_clairvoyant

        return is_clairvoyant(policy, self.engine_kwargs)

    def run(
        self,
        trace: Trace,
        cluster: Cluster,
        policy: Any,
        seed: int | None = 0,
        progress: Progress | None = None,
    ) -> Result:
        from ddl_gym.engine import simulate

        if progress is not None:
            policy = ProgressPolicy(policy, progress)
        return simulate(trace, cluster, policy, seed=seed, **self.engine_kwargs)


@dataclass(frozen=True)
class SeedSimulator:
    """The seed wing (``ddl_gym.seed.run``) with a scenario's switches. Its
    policies are the seed's own (``dally``, ``dally-1-2``, ``tiresias``),
    none clairvoyant; it keeps no placement history."""

    switches: SeedSwitches
    records_placements: bool = False

    def make_policy(self, name: str) -> Any:
        from ddl_gym.seed import make_seed_policy

        return make_seed_policy(name)

    def clairvoyant(self, policy: Any) -> bool:
        return False  # the seed simulator has no clairvoyant mode

    def run(
        self,
        trace: Trace,
        cluster: Cluster,
        policy: Any,
        seed: int | None = 0,
        progress: Progress | None = None,
    ) -> Result:
        from ddl_gym import seed as seed_wing

        # deterministic: the seed's policies draw no random numbers
        return seed_wing.run(trace, cluster, policy, self.switches, progress=progress)


class ProgressPolicy:
    """Wraps an engine policy and reports each change of the finished-job
    count (read at every decision point) to ``update``."""

    def __init__(self, policy: Any, update: Progress) -> None:
        self.policy = policy
        self._update = update
        self._done = 0

    def __getattr__(self, name: str) -> Any:
        return getattr(self.policy, name)

    def reset(self, view, seed: int | None = None) -> None:
        self._done = 0
        self.policy.reset(view, seed=seed)

    def act(self, view):
        done = view.n_done
        if done != self._done:
            self._update(done - self._done)
            self._done = done
        return self.policy.act(view)
