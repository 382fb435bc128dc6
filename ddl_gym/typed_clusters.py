"""Typed cluster presets: clusters of several GPU generations, as data.

Three presets, each a :class:`~ddl_gym.topology.Cluster` whose
``description`` says where its numbers come from (``get_cluster(name)``
finds them by name):

* ``openb``: Alibaba's openb GPU nodes (:func:`openb_cluster`), one server
  per node of ``openb_node_list_gpu_node.csv`` with its GPU count and model,
  read from the data dir when first asked for.
* ``gavel-kpv``: a Gavel-like cluster of 36 K80, 36 P100 and 36 V100
  (:func:`gavel_cluster`).
* ``v100-a100-h100``: today's 8-GPU servers of three generations
  (:func:`generations_cluster`).

Each type's intra-server GPU link is its datasheet link (the catalogue's
``link``, :mod:`ddl_gym.gpu_types`, read as the interconnect class of
:data:`ddl_gym.fidelity.links.INTRA`: bandwidth per direction per GPU and
its typical latency) times the project's default efficiency
(:data:`ddl_gym.fidelity.hardware.DEFAULT_EFFICIENCY`, 0.25: what training
reaches of a datasheet link no bundled table measured; the bundled tables'
links reached 0.07-0.52, docs/calibration.md). Both are estimates: a
datasheet figure and an assumed efficiency. Types the catalogue has no link
for (openb's undisclosed G2, G3) use the fabric's GPU link.

Compute speeds per model and type are :mod:`ddl_gym.type_speed`'s (Gavel
measured where Gavel measured, datasheet estimates elsewhere); openb's G2
and G3 get an assumed speed (:data:`OPENB_ASSUMED_SPEED`), stated in the
cluster's description.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from functools import lru_cache
from pathlib import Path

from ddl_gym.fidelity.hardware import DEFAULT_EFFICIENCY
from ddl_gym.fidelity.links import INTRA
from ddl_gym.gpu_types import CATALOGUE, get_gpu_type
from ddl_gym.topology import Cluster, Fabric, GpuKind, Link, get_fabric
from ddl_gym.traces.openb_types import NODE_LIST
from ddl_gym.traces.schema import TraceError, where

__all__ = [
    "GAVEL_GPUS_PER_TYPE",
    "OPENB_ASSUMED_SPEED",
    "OPENB_RACK_NODES",
    "TYPED_CLUSTER_NAMES",
    "gavel_cluster",
    "generations_cluster",
    "get_typed_cluster",
    "intra_link",
    "openb_cluster",
    "openb_nodes",
]

# The catalogue's link names -> the interconnect class of fidelity.links.INTRA.
# The catalogue gives PCIe per direction and NVLink as the total over both
# directions; INTRA gives bandwidth per direction (the fabric's unit).
_LINK_CLASS = {
    "PCIe3": "pcie3",
    "PCIe4": "pcie4",
    "PCIe5": "pcie5",
    "NVLink2": "nvlink2",
    "NVLink3": "nvlink3",
    "NVLink4": "nvlink4",
}

# Gavel's OSDI'20 simulations (stanford-futuredata/gavel EXPERIMENTS.md,
# figures 8-10 and the makespan runs: ``--cluster_spec 36:36:36``).
GAVEL_GPUS_PER_TYPE = 36

# openb's undisclosed GPU models: speed relative to a V100, an assumption
# (nothing is published about them; a V100's speed is the neutral choice).
OPENB_ASSUMED_SPEED: dict[str, float] = {"G2": 1.0, "G3": 1.0}

# openb lists no racks: nodes of one type, in node-list order, 16 to a rack.
OPENB_RACK_NODES = 16

# Types in the order a cluster lists them: the catalogue's (the engine's
# type-blind rule breaks ties to the type listed first).
_CATALOGUE_ORDER = {name: i for i, name in enumerate(CATALOGUE)}


def intra_link(type_name: str, efficiency: float = DEFAULT_EFFICIENCY) -> Link | None:
    """The intra-server GPU link of a GPU type: its datasheet class (the
    catalogue's ``link``) at ``efficiency`` of the datasheet bandwidth, with
    the class's latency; None for a type without a link in the catalogue."""
    t = get_gpu_type(type_name)
    if t.link is None:
        return None
    if not 0 < efficiency <= 1:
        raise ValueError(f"efficiency must be in (0, 1], got {efficiency}")
    cls = INTRA[_LINK_CLASS[t.link]]
    return Link(cls.bandwidth * efficiency, cls.latency)


def _kind(name: str, efficiency: float, speed: float | None = None) -> GpuKind:
    return GpuKind(name, intra_link(name, efficiency), speed)


def _link_note(names: list[str], efficiency: float) -> str:
    parts = []
    for name in names:
        t = get_gpu_type(name)
        if t.link is None:
            parts.append(f"{name} the fabric's")
            continue
        cls = INTRA[_LINK_CLASS[t.link]]
        parts.append(f"{name} {cls.name} {cls.bandwidth / 1e9:g} GB/s")
    return (
        "intra-server GPU links, datasheet per direction x an assumed efficiency "
        f"{efficiency:g} (ddl_gym.fidelity default; estimates): " + ", ".join(parts)
    )


# -- Gavel-like K80 / P100 / V100 ---------------------------------------------
def gavel_cluster(
    gpus_per_type: int = GAVEL_GPUS_PER_TYPE,
    gpus_per_server: int = 4,
    fabric: str | Fabric = "pcie_25gbe",
    efficiency: float = DEFAULT_EFFICIENCY,
) -> Cluster:
    """Equal numbers of K80, P100 and V100 (16 GB) GPUs, one rack per type.

    Gavel's simulations use 36 of each (``--cluster_spec 36:36:36``,
    stanford-futuredata/gavel EXPERIMENTS.md); Gavel models no servers or
    network, so 4-GPU servers (Gavel jobs ask for 1, 2, 4 or 8 GPUs: 8 span
    two servers), a rack per type and the ``pcie_25gbe`` fabric between them
    are assumptions."""
    if gpus_per_type < 1 or gpus_per_server < 1 or gpus_per_type % gpus_per_server:
        raise ValueError(
            f"gpus_per_type ({gpus_per_type}) must be a positive multiple of "
            f"gpus_per_server ({gpus_per_server})"
        )
    names = ["K80", "P100", "V100-16GB"]
    servers = gpus_per_type // gpus_per_server
    fab = get_fabric(fabric)
    description = (
        f"Gavel-like: {gpus_per_type} K80, {gpus_per_type} P100, {gpus_per_type} V100-16GB "
        "(Gavel OSDI'20 simulations use 36 of each: stanford-futuredata/gavel EXPERIMENTS.md, "
        f"--cluster_spec 36:36:36); assumed: one rack per type of {servers} servers x "
        f"{gpus_per_server} GPUs, fabric {fab.name}; speeds: Gavel's measured throughputs "
        f"(ddl_gym.type_speed); {_link_note(names, efficiency)}"
    )
    return Cluster(
        racks=3,
        servers_per_rack=servers,
        gpus_per_server=gpus_per_server,
        fabric=fab,
        gpu_kinds=tuple(_kind(n, efficiency) for n in names),
        server_kind=tuple(k for k in range(3) for _ in range(servers)),
        description=description,
    )


# -- today's 8-GPU servers of three generations ----------------------------------
def generations_cluster(
    racks_per_type: int = 2,
    servers_per_rack: int = 8,
    fabric: str | Fabric = "a100_nvlink_ib",
    efficiency: float = DEFAULT_EFFICIENCY,
) -> Cluster:
    """8-GPU V100 (32 GB), A100 (80 GB) and H100 servers (DGX/HGX form), the
    same number of racks of each generation, racks uniform (one generation
    per rack, as a cluster grown by buying whole racks)."""
    if racks_per_type < 1:
        raise ValueError(f"racks_per_type must be >= 1, got {racks_per_type}")
    names = ["V100-32GB", "A100-80GB", "H100"]
    fab = get_fabric(fabric)
    per_type = racks_per_type * servers_per_rack * 8
    description = (
        f"V100/A100/H100 generations: {per_type} GPUs of each of V100-32GB, A100-80GB, H100 "
        f"in 8-GPU servers (DGX-1 / HGX A100 / HGX H100 datasheets), {racks_per_type} "
        f"rack(s) of {servers_per_rack} servers per generation (assumed), fabric {fab.name} "
        "for all (assumed); speeds: A100 and H100 datasheet estimates relative to V100 "
        f"(ddl_gym.gpu_types); {_link_note(names, efficiency)}"
    )
    n_per_type = racks_per_type * servers_per_rack
    return Cluster(
        racks=3 * racks_per_type,
        servers_per_rack=servers_per_rack,
        gpus_per_server=8,
        fabric=fab,
        gpu_kinds=tuple(_kind(n, efficiency) for n in names),
        server_kind=tuple(k for k in range(3) for _ in range(n_per_type)),
        description=description,
    )


# -- Alibaba openb ------------------------------------------------------------------
def openb_nodes(node_list_path: str | Path) -> list[tuple[str, int]]:
    """(catalogue type, GPUs) of each GPU node of an openb node list, in the
    list's order; nodes without GPUs are left out. The file is read and
    checked by :func:`ddl_gym.traces.openb_types.read_node_inventory`
    (errors name file, row and field)."""
    from ddl_gym.traces._io import read_csv_raw
    from ddl_gym.traces.openb_types import read_node_inventory

    read_node_inventory(node_list_path)  # the checked reader: bad rows fail here
    df, rows = read_csv_raw(node_list_path)
    out = []
    for row, gpu_text, model in zip(rows, df["gpu"], df["model"], strict=True):
        n = int(gpu_text.strip())
        if n:
            try:
                out.append((get_gpu_type(model.strip()).name, n))
            except KeyError as e:  # (read_node_inventory checked it: defensive)
                raise TraceError(f"{where(str(node_list_path), int(row), 'model')}: {e}") from None
    return out


def openb_cluster(
    node_list_path: str | Path,
    rack_nodes: int = OPENB_RACK_NODES,
    fabric: str | Fabric = "pcie_25gbe",
    assumed_speed: Mapping[str, float] | None = None,
    efficiency: float = DEFAULT_EFFICIENCY,
) -> Cluster:
    """Alibaba openb's GPU nodes as a typed cluster.

    One server per GPU node with its GPU count (``server_gpus``) and model.
    openb gives no racks: the nodes of each type, in node-list order, fill
    racks of ``rack_nodes`` (an assumption); a type's last rack is padded with
    GPU-less servers, so no rack mixes types. Types are listed in catalogue
    order. ``assumed_speed`` (default :data:`OPENB_ASSUMED_SPEED`) gives the
    undisclosed G2 and G3 a speed relative to a V100 (an assumption). The
    fabric (default ``pcie_25gbe``: most openb nodes hold PCIe cards, and
    Alibaba does not describe its network) is an assumption too."""
    if not isinstance(rack_nodes, int) or rack_nodes < 1:
        raise ValueError(f"rack_nodes must be a positive integer, got {rack_nodes!r}")
    speeds = dict(OPENB_ASSUMED_SPEED if assumed_speed is None else assumed_speed)
    nodes = openb_nodes(node_list_path)
    if not nodes:
        raise TraceError(f"{node_list_path}: no GPU node")
    by_type: dict[str, list[int]] = {}
    for name, g in nodes:
        by_type.setdefault(name, []).append(g)
    names = sorted(by_type, key=lambda n: _CATALOGUE_ORDER[n])
    kinds = []
    for name in names:
        speed = None
        if get_gpu_type(name).speed is None:
            if name not in speeds:
                raise ValueError(
                    f"GPU type {name} has no speed (undisclosed): give one in assumed_speed"
                )
            speed = speeds[name]
        kinds.append(_kind(name, efficiency, speed))
    server_kind: list[int] = []
    server_gpus: list[int] = []
    racks = 0
    for k, name in enumerate(names):
        gpus = by_type[name]
        n_racks = math.ceil(len(gpus) / rack_nodes)
        racks += n_racks
        padded = gpus + [0] * (n_racks * rack_nodes - len(gpus))
        server_kind += [k] * len(padded)
        server_gpus += padded
    fab = get_fabric(fabric)
    assumed = ", ".join(f"{n} {kinds[names.index(n)].speed:g}" for n in names if n in speeds)
    description = (
        f"Alibaba openb GPU nodes ({Path(node_list_path).name}, alibaba/clusterdata "
        f"cluster-trace-gpu-v2023): {len(nodes)} nodes, one server each with its GPU count "
        f"and model; assumed: racks of {rack_nodes} nodes of one type in node-list order "
        f"(openb gives no racks; a type's last rack padded with GPU-less servers), fabric "
        f"{fab.name} (Alibaba does not describe its network), speed vs V100 of the "
        f"undisclosed types: {assumed or 'none present'}; other speeds: ddl_gym.type_speed "
        f"(Gavel measured, datasheet estimates); {_link_note(names, efficiency)}"
    )
    return Cluster(
        racks=racks,
        servers_per_rack=rack_nodes,
        gpus_per_server=max(server_gpus),
        fabric=fab,
        gpu_kinds=tuple(kinds),
        server_kind=tuple(server_kind),
        server_gpus=tuple(server_gpus),
        description=description,
    )


@lru_cache(maxsize=4)
def _openb_at(path: Path, mtime_ns: int) -> Cluster:
    return openb_cluster(path)


def _openb_from_data_dir() -> Cluster:
    from ddl_gym.traces.loader import find_data_dir

    data = find_data_dir()
    if data is None:
        raise ValueError(
            f"cluster 'openb' reads {NODE_LIST} from the data dir (../shared/data or "
            "$DDL_GYM_DATA), which was not found; `ddl-gym data fetch` downloads it"
        )
    path = data / NODE_LIST
    if not path.is_file():
        raise ValueError(
            f"cluster 'openb' reads {path}, which does not exist; `ddl-gym data fetch` downloads it"
        )
    return _openb_at(path.resolve(), path.stat().st_mtime_ns)


# name -> builder: the fixed presets are built on first use and kept; openb is
# read from the data dir (again only when the file changed)
_TYPED = {
    "gavel-kpv": lru_cache(maxsize=1)(lambda: gavel_cluster()),
    "v100-a100-h100": lru_cache(maxsize=1)(lambda: generations_cluster()),
    "openb": _openb_from_data_dir,
}
TYPED_CLUSTER_NAMES: tuple[str, ...] = tuple(_TYPED)


def get_typed_cluster(name: str) -> Cluster:
    """A typed preset by name (:data:`TYPED_CLUSTER_NAMES`); KeyError if none."""
    return _TYPED[name]()
