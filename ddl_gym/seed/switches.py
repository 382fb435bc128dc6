"""The seed simulator's switches: every difference between the seed authors'
simulator and our default model, one named field each (``docs/design.md`` 1.1)."""

from __future__ import annotations

from dataclasses import dataclass

from ddl_gym.seed.astra import SEED_GPUS_PER_SLOT
from ddl_gym.topology import get_congestion


@dataclass(frozen=True)
class SeedSwitches:
    """Every difference between the seed's simulator and our default model.

    The defaults are the seed's (ArtISt-sim as run for the reference results).
    """

    perf: str = "seed_astra"  # or "closed_form"
    contention: bool = False  # closed_form only: share rack uplinks
    congestion: str | float = "none"  # closed_form only: background traffic
    placement: str = "first_fit"  # or "best_fit"
    batch_iterations: int = 1000  # 0: continuous progress (no batches)
    lease_s: float = 20.0
    checkpoint_s_per_gpu: float = 1.0
    tick_s: float = 60.0
    # every free GPU is offered (docs/design.md 1.1: "all"), or a release's GPUs
    # alone, as the stored ResourceAvailableEvent does ("released")
    offer_scope: str = "all"
    checkpoint_on_completion: bool = True  # a finished job's GPUs wait too
    offer_on_lease_expiry: bool = True  # a lease's end is an offer point (docs/design.md 1.1)
    # a tick every tick_s while a job waits ("waiting", docs/design.md 1.1), or only
    # when the event queue runs empty, as the stored ClusterEventQueue.start ("idle")
    tick: str = "waiting"
    # GPU.markLeaseEnd at the batch end: released GPUs are unleased at once
    # (an arrival's or tick's offer may take them) and offered by their own
    # event after the checkpoint; False: nobody can use them meanwhile
    unlease_on_release: bool = True
    gpus_per_slot: int = SEED_GPUS_PER_SLOT

    def __post_init__(self) -> None:
        if self.perf not in ("seed_astra", "closed_form"):
            raise ValueError(f"perf must be 'seed_astra' or 'closed_form', got {self.perf!r}")
        if self.placement not in ("first_fit", "best_fit"):
            raise ValueError(f"placement must be 'first_fit' or 'best_fit', got {self.placement!r}")
        if self.perf == "seed_astra" and (self.contention or get_congestion(self.congestion).at(0)):
            raise ValueError("seed_astra has no contention or congestion: use perf='closed_form'")
        for name in ("lease_s", "tick_s"):
            if not getattr(self, name) > 0:
                raise ValueError(f"{name} must be positive, got {getattr(self, name)}")
        if self.batch_iterations < 0 or self.checkpoint_s_per_gpu < 0:
            raise ValueError("batch_iterations and checkpoint_s_per_gpu must be >= 0")
        if self.offer_scope not in ("released", "all"):
            raise ValueError(f"offer_scope must be 'released' or 'all', got {self.offer_scope!r}")
        if self.tick not in ("idle", "waiting"):
            raise ValueError(f"tick must be 'idle' or 'waiting', got {self.tick!r}")
