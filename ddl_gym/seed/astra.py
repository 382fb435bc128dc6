"""Performance source ``seed_astra``: the seed authors' per-placement slowdowns.

The seed simulator looks its slowdowns up here; our engine takes a loaded
:class:`SlowdownTable` as its ``perf_source`` (it never imports this module).

The seed's simulator (ArtISt-sim, aakash-sharma/cluster-sim @ 4cd660e) turns
the exact GPU set of a job into a six-entry *dimension vector* and asks its
ASTRA-sim fork for the iteration-time inflation of that vector. The
developers' data set holds the result for every vector the simulator can
build on clusters up to 8 racks x 4 machines x 8 GPUs
(``profiles/dally_astra/slowdowns.csv``) and states the mapping
(``profiles/dally_astra/MAPPING.md``). This module re-states that mapping,
quirks included, and reads the table at run time (it is never bundled):

* an uneven split over racks puts *all* GPUs on the inter-rack switch;
* machines (and slots) are counted over all racks, so below the rack level
  the vector describes ``N / (R * M)`` GPUs per machine;
* a level whose per-unit count equals its unit count absorbs the rest.

Only the counts ``N`` (GPUs), ``R`` (racks), ``M`` (distinct machines) and
``S`` (distinct slots; a seed machine is 2 slots of 4 GPUs) matter. There is
no contention between jobs in this source: a slowdown is a property of the
placement alone.
"""

from __future__ import annotations

import csv
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

TABLE_REL = "profiles/dally_astra/slowdowns.csv"

# Slots per machine and GPUs per slot of the seed's NVSwitch machine file
# (Ring_FullyConnected_Ring_4g_2s-nvswitch.json).
SEED_SLOTS_PER_MACHINE = 2
SEED_GPUS_PER_SLOT = 4

# Our catalogue names -> the table's (the seed's Java) model names.
TABLE_MODELS: dict[str, str] = {
    "resnet50": "ResNet50",
    "resnet18": "ResNet18",
    "alexnet": "AlexNet",
    "mobilenet_v3": "MobileNetV3",
    "vgg11": "VGG",
    "bert_large": "BERT",
}

# Index order of the vector, as in the seed: gpu, dim2, dim1, slot, machine, rack.
GPU, DIM2, DIM1, SLOT, MACHINE, RACK = range(6)

DimVec = tuple[int, int, int, int, int, int]


class SeedTableError(RuntimeError):
    """The slowdown table is missing, malformed or lacks a needed row."""


def dim_vector(n: int, r: int, m: int, s: int) -> DimVec:
    """The seed's dimension vector of a placement of ``n`` GPUs spanning ``r``
    racks, ``m`` distinct machines and ``s`` distinct slots (all counted over
    the whole cluster). MAPPING.md section 1; ``n`` must be >= 2."""
    if n < 2:
        raise ValueError(f"a dimension vector needs >= 2 GPUs, got {n}")
    if not (1 <= r <= m <= s <= n):
        raise ValueError(f"need 1 <= racks <= machines <= slots <= gpus, got {(r, m, s, n)}")
    vec = [-1] * 6
    left = n
    if r > 1:
        if left % r != 0:  # uneven split: everything flattened onto the switch
            vec[RACK] = left
            return tuple(vec)  # type: ignore[return-value]
        vec[RACK] = r
        left //= r
    if m > 1:
        if left % m != 0 or left == m:
            vec[MACHINE] = left
            return tuple(vec)  # type: ignore[return-value]
        vec[MACHINE] = m
        left //= m
    if left % s != 0 or left == s:
        vec[SLOT] = left
        return tuple(vec)  # type: ignore[return-value]
    if s > 1:
        vec[SLOT] = s
    left //= s
    vec[GPU] = left
    return tuple(vec)  # type: ignore[return-value]


def counts(locations: Iterable[tuple[int, int, int]]) -> tuple[int, int, int, int]:
    """``(N, R, M, S)`` of a GPU set given as ``(rack, machine, slot)`` per GPU
    (``machine`` and ``slot`` may be global or per-rack indices: only
    distinctness matters)."""
    locs = list(locations)
    return (
        len(locs),
        len({loc[0] for loc in locs}),
        len({loc[:2] for loc in locs}),
        len(set(locs)),
    )


@dataclass(frozen=True)
class SlowdownTable:
    """``(table model, dimension vector) -> slowdown`` (iteration-time inflation)."""

    rows: dict[tuple[str, DimVec], float]
    source: str = ""

    @classmethod
    def load(cls, path: str | Path | None = None) -> SlowdownTable:
        """Read the table; ``path`` defaults to the data dir's copy."""
        if path is None:
            from ddl_gym.traces import find_data_dir

            data = find_data_dir()
            if data is None or not (data / TABLE_REL).is_file():
                raise SeedTableError(
                    f"the seed_astra performance source needs {TABLE_REL} under the data dir "
                    "(../shared/data or $DDL_GYM_DATA), which was not found"
                )
            path = data / TABLE_REL
        path = Path(path)
        if not path.is_file():
            raise SeedTableError(f"{path}: slowdown table not found")
        rows: dict[tuple[str, DimVec], float] = {}
        needed = ("model", "dim_gpu", "dim_dim2", "dim_dim1", "dim_slot", "dim_machine")
        with open(path, newline="", encoding="utf-8") as fh:
            reader = csv.DictReader(fh)
            header = reader.fieldnames or []
            missing = [c for c in (*needed, "dim_rack", "slowdown") if c not in header]
            if missing:
                raise SeedTableError(f"{path}: missing column(s) {missing}")
            for lineno, rec in enumerate(reader, start=2):
                try:
                    vec = tuple(
                        int(rec[c])
                        for c in (
                            "dim_gpu",
                            "dim_dim2",
                            "dim_dim1",
                            "dim_slot",
                            "dim_machine",
                            "dim_rack",
                        )
                    )
                    slowdown = float(rec["slowdown"])
                except (TypeError, ValueError) as exc:
                    raise SeedTableError(f"{path}: row {lineno}: bad number ({exc})") from exc
                if not slowdown >= 1.0 - 1e-9:
                    raise SeedTableError(
                        f"{path}: row {lineno}, field 'slowdown': must be >= 1, got {slowdown}"
                    )
                rows[(rec["model"], vec)] = slowdown  # type: ignore[index]
        return cls(rows, str(path))

    def models(self) -> set[str]:
        return {m for m, _ in self.rows}

    def lookup(self, model: str, vec: DimVec) -> float:
        """Slowdown of ``vec`` for catalogue (or table) model ``model``."""
        name = TABLE_MODELS.get(model, model)
        try:
            return self.rows[(name, vec)]
        except KeyError:
            raise SeedTableError(
                f"{self.source}: no row for model {name!r} and dimension vector {list(vec)} "
                f"(the table covers jobs of <= 64 GPUs on up to 8x4x8 clusters)"
            ) from None

    def slowdown(self, model: str, n: int, r: int, m: int, s: int) -> float:
        """Slowdown of a placement with counts ``(n, r, m, s)``; 1 for one GPU."""
        if n <= 1:
            return 1.0
        return self.lookup(model, dim_vector(n, r, m, s))

    def slowdown_of(self, model: str, locations: Iterable[tuple[int, int, int]]) -> float:
        """Slowdown of a GPU set given as ``(rack, machine, slot)`` per GPU."""
        return self.slowdown(model, *counts(locations))

    def placement_slowdown(
        self, model: str, placement: Iterable[tuple[int, int]], servers_per_rack: int
    ) -> float:
        """Slowdown of a count-only placement ``[(server, gpus), ...]``, slots
        filled whole (:func:`compact_counts`): what our engine asks of a
        performance source (``ddl_gym.engine.perf_source.SlowdownSource``)."""
        n, r, m, s = compact_counts(placement, servers_per_rack, SEED_GPUS_PER_SLOT)
        return self.slowdown(model, n, r, m, s)


def compact_counts(
    placement: Iterable[tuple[int, int]], servers_per_rack: int, gpus_per_slot: int
) -> tuple[int, int, int, int]:
    """``(N, R, M, S)`` of a count-only placement ``[(server, gpus), ...]``,
    assuming each server's GPUs fill whole slots first (fewest slots). Our
    default engine tracks free GPU counts, not which GPUs: this is the
    tightest slot use consistent with them."""
    n = 0
    racks: set[int] = set()
    machines = slots = 0
    for server, g in placement:
        if g <= 0:
            continue
        n += g
        racks.add(server // servers_per_rack)
        machines += 1
        slots += -(-g // gpus_per_slot)
    return n, len(racks), machines, slots
