"""Alibaba openb with GPU types: the typed node inventory and each pod's
accepted GPU types (cluster-trace-gpu-v2023).

* Node list (``openb_node_list_gpu_node.csv``): ``sn``, ``gpu`` (GPUs per
  node) and ``model`` (GPU model: P100, T4, V100M16, V100M32, A10, G2, G3).
  Nodes with ``gpu == 0`` are counted apart and need no model.
* Pod list (``openb_pod_list_*.csv``): ``gpu_spec`` is the set of accepted
  models, names joined by ``|`` (e.g. ``V100M16|V100M32``); empty means any
  type, and so does ``nan`` (how the trace's README writes "no constraint").
  Names are spelled as in the node list and mapped to the catalogue
  (:data:`ddl_gym.gpu_types.OPENB_NAMES`).

Bad input raises one :class:`TraceError` naming file, row (1-based data row,
header not counted) and field.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

from ..gpu_types import OPENB_NAMES
from ._io import read_csv_raw
from .schema import TraceError, where

__all__ = [
    "NODE_LIST",
    "POD_LIST",
    "NodeInventory",
    "OpenbTypes",
    "PodTypes",
    "check_openb_types",
    "parse_gpu_spec",
    "read_node_inventory",
    "read_pod_types",
]

NODE_LIST = "traces/alibaba_openb/openb_node_list_gpu_node.csv"
POD_LIST = "traces/alibaba_openb/openb_pod_list_default_dev.csv"


def _type_name(text: str, source: str, row: int, field_name: str) -> str:
    name = text.strip()
    if name not in OPENB_NAMES:
        raise TraceError(
            f"{where(source, row, field_name)}: unknown GPU type {name!r}; "
            f"known: {', '.join(OPENB_NAMES)}"
        )
    return OPENB_NAMES[name]


def parse_gpu_spec(text: str, source: str = "<gpu_spec>", row: int = 1) -> frozenset[str]:
    """Accepted catalogue types of one ``gpu_spec`` cell; empty = any (empty set)."""
    text = text.strip()
    if not text or text.lower() == "nan":
        return frozenset()
    parts = text.split("|")
    if any(not p.strip() for p in parts):
        raise TraceError(f"{where(source, row, 'gpu_spec')}: malformed spec {text!r} (empty name)")
    return frozenset(_type_name(p, source, row, "gpu_spec") for p in parts)


def _int(text: str, source: str, row: int, field_name: str) -> int:
    try:
        value = int(text.strip())
    except ValueError:
        raise TraceError(
            f"{where(source, row, field_name)}: not a whole number: {text!r}"
        ) from None
    if value < 0:
        raise TraceError(f"{where(source, row, field_name)}: must be >= 0, got {value}")
    return value


def _float(text: str, source: str, row: int, field_name: str) -> float | None:
    if not text.strip():
        return None
    try:
        return float(text)
    except ValueError:
        raise TraceError(f"{where(source, row, field_name)}: not a number: {text!r}") from None


def _require(columns: list[str], required: tuple[str, ...], source: str) -> None:
    missing = [c for c in required if c not in columns]
    if missing:
        raise TraceError(f"{source}: missing column(s) {', '.join(missing)}; header is {columns}")


@dataclass(frozen=True)
class NodeInventory:
    """Nodes and GPUs per catalogue type, the most GPUs one node of each type
    has, and the number of nodes without a GPU."""

    nodes: dict[str, int]
    gpus: dict[str, int]
    max_per_node: dict[str, int] = field(default_factory=dict)
    gpuless_nodes: int = 0

    @property
    def total_gpus(self) -> int:
        return sum(self.gpus.values())


def read_node_inventory(path: str | Path) -> NodeInventory:
    """The typed node inventory of an openb node list."""
    source = str(path)
    df, rows = read_csv_raw(path)
    _require(list(df.columns), ("sn", "gpu", "model"), source)
    nodes: Counter[str] = Counter()
    gpus: Counter[str] = Counter()
    largest: dict[str, int] = {}
    gpuless = 0
    for row, gpu_text, model in zip(rows, df["gpu"], df["model"], strict=True):
        n = _int(gpu_text, source, int(row), "gpu")
        if n == 0:
            gpuless += 1
            continue
        if not model.strip():
            raise TraceError(f"{where(source, int(row), 'model')}: empty model on a GPU node")
        t = _type_name(model, source, int(row), "model")
        nodes[t] += 1
        gpus[t] += n
        largest[t] = max(largest.get(t, 0), n)
    return NodeInventory(
        nodes=dict(sorted(nodes.items())),
        gpus=dict(sorted(gpus.items())),
        max_per_node=dict(sorted(largest.items())),
        gpuless_nodes=gpuless,
    )


@dataclass(frozen=True)
class PodTypes:
    """One pod's GPU request and accepted types (empty set = any type).

    ``gpu_hours`` = ``num_gpu * gpu_milli / 1000 * (deletion - scheduled) / 3600``
    (0 for CPU-only or never-scheduled pods).
    """

    name: str
    num_gpu: int
    accepted: frozenset[str]
    gpu_hours: float


def read_pod_types(path: str | Path) -> list[PodTypes]:
    """Every pod of an openb pod list with its accepted GPU types."""
    source = str(path)
    df, rows = read_csv_raw(path)
    need = ("name", "num_gpu", "gpu_milli", "gpu_spec", "scheduled_time", "deletion_time")
    _require(list(df.columns), need, source)
    out = []
    for i, row in enumerate(rows):
        r = int(row)
        cell = {c: str(df[c].iat[i]) for c in need}
        accepted = parse_gpu_spec(cell["gpu_spec"], source, r)
        n = _int(cell["num_gpu"], source, r, "num_gpu")
        milli = _int(cell["gpu_milli"], source, r, "gpu_milli") if n else 0
        if milli > 1000:
            raise TraceError(f"{where(source, r, 'gpu_milli')}: must be <= 1000, got {milli}")
        start = _float(cell["scheduled_time"], source, r, "scheduled_time")
        end = _float(cell["deletion_time"], source, r, "deletion_time")
        hours = 0.0
        if n and start is not None and end is not None:
            if end < start:
                raise TraceError(
                    f"{where(source, r, 'deletion_time')}: before scheduled_time ({end} < {start})"
                )
            # gpu_milli is the per-GPU share; whole-GPU pods carry 1000 (0 read as whole)
            hours = n * (milli / 1000 if milli else 1.0) * (end - start) / 3600
        out.append(PodTypes(cell["name"], n, accepted, hours))
    return out


@dataclass(frozen=True)
class OpenbTypes:
    """The check of pods' accepted types against the node inventory."""

    inventory: NodeInventory
    pods: int
    gpu_pods: int
    any_type_pods: int
    unplaceable: dict[str, int] = field(default_factory=dict)
    too_large: dict[str, int] = field(default_factory=dict)
    gpu_hours: dict[str, float] = field(default_factory=dict)


def check_openb_types(node_list: str | Path, pod_list: str | Path) -> OpenbTypes:
    """Load both files; count GPU pods whose accepted types name no node in
    the inventory (``unplaceable``, by spec), GPU pods larger than every node
    of their accepted types (``too_large``; openb pods run on one node), and
    GPU-hours per accepted-type
    set (``'any'`` for an empty spec, else names joined by ``|``)."""
    inv = read_node_inventory(node_list)
    pods = read_pod_types(pod_list)
    unplaceable: Counter[str] = Counter()
    too_large: Counter[str] = Counter()
    hours: dict[str, float] = {}
    gpu_pods = [p for p in pods if p.num_gpu > 0]
    for p in gpu_pods:
        key = "|".join(sorted(p.accepted)) or "any"
        hours[key] = hours.get(key, 0.0) + p.gpu_hours
        if p.accepted and not any(inv.gpus.get(t, 0) >= 1 for t in p.accepted):
            unplaceable[key] += 1
            continue
        types = p.accepted or set(inv.max_per_node)
        if p.num_gpu > max((inv.max_per_node.get(t, 0) for t in types), default=0):
            too_large[key] += 1
    return OpenbTypes(
        inventory=inv,
        pods=len(pods),
        gpu_pods=len(gpu_pods),
        any_type_pods=sum(1 for p in gpu_pods if not p.accepted),
        unplaceable=dict(sorted(unplaceable.items())),
        too_large=dict(sorted(too_large.items())),
        gpu_hours=dict(sorted(hours.items())),
    )
