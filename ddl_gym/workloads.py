"""The named workloads: a trace of the data dir (or the bundled synthetic
default) and the cluster it runs on. The names ``ddl-gym compare --workloads``,
``traces inspect`` and a scenario's ``trace`` all take. Kept free of heavy
imports: the scenarios and the CLI's help read it."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Workload:
    """A named trace and the cluster it runs on. ``path`` is relative to the
    data dir; ``None`` means the bundled synthetic default."""

    name: str
    path: str | None
    cluster: str

    @property
    def seeded(self) -> bool:
        """Whether the seed changes the trace itself."""
        return self.path is None


DEFAULT_WORKLOAD = Workload("default", None, "seed64")
_DALLY_DIR = "traces/dally/sense_500jobs_poisson"
DATA_WORKLOADS: tuple[Workload, ...] = (
    # the 1-process-per-GPU week: the scenarios' (and `ddl-gym traces`') "seed-week"
    Workload("seed-week", f"{_DALLY_DIR}_1proc-week.json", "seed64"),
    Workload("seed-3proc-week", f"{_DALLY_DIR}_3proc-week.json", "seed64"),
    *(
        Workload(f"sweep-{n}", f"{_DALLY_DIR}-{n}jobsPday.json", "seed64")
        for n in (25, 50, 75, 100)
    ),
    Workload("philly-week", "traces/philly/philly_2017-11-13_to_2017-11-19.csv", "seed512"),
    *(
        Workload(f"pollux-{i}", f"traces/pollux_workloads/workload-{i}.csv", "seed512")
        for i in range(1, 9)
    ),
)
WORKLOADS = {w.name: w for w in (DEFAULT_WORKLOAD, *DATA_WORKLOADS)}
