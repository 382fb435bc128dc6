"""A transfer prior for hardware no table measured, chosen from its description.

A hardware description (``"8x A100 SXM4, NVSwitch, 8x HDR InfiniBand"``) is
read into an interconnect class and generation per level (:func:`describe`):
inside the server PCIe 3/4, NVLink 1-4 or NVSwitch; between servers 10-200
GbE or InfiniBand EDR/HDR/NDR (with a port count). Each class has a
datasheet bandwidth per direction (:data:`INTRA`, :data:`NETWORK`).

:func:`hardware_prior` turns that into a fabric: the datasheet bandwidth of
each stated class times an *efficiency*, the fraction of a datasheet link the
measured tables achieved (their fitted bandwidth over their own datasheet
bandwidth, median over the measured clusters of that level whose class is
known), and the measured tables' pooled overlap, sharing exponents and model
cards (``calibrate.transfer_prior``). A level whose class the description
does not state keeps the pooled measured link (the measured generations:
what "a server of the kind measured before" means). A description that
states nothing at all gets the simulator's default links
(``calibrate.UNKNOWN_HARDWARE_FABRIC``).

Why this holds across generations where pooling did not: the pooled network
of the 10-50 Gb/s clusters (1.4 GB/s) put a 2-server DGX A100 job at 2-3x;
here the A100's 8 HDR ports (8 x 25 GB/s by datasheet) times the measured
efficiency give tens of GB/s, the all-reduce of even a large model then
takes a few ms, which the backward pass hides: the prior predicts a spread
over servers that costs almost nothing, as measured. Its error there is the
table's own noise around 1, i.e. that of predicting 1.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable
from dataclasses import dataclass, replace

import numpy as np
import pandas as pd

from ddl_gym.topology import FABRICS, GB, US, Fabric, Link


@dataclass(frozen=True)
class LinkClass:
    """An interconnect class and generation with its datasheet numbers.

    ``bandwidth``: bytes/s per direction per GPU (intra) or per port
    (network); ``latency``: s per step, typical; ``family`` groups classes
    whose efficiency carries over (``pcie``, ``nvlink``, ``ethernet``, ``ib``);
    ``sharing``: the ``gpu_link_sharing`` exponent of the class (PCIe: the
    GPUs share the host's root; NVLink/NVSwitch: a link per GPU).
    """

    name: str
    family: str
    bandwidth: float
    latency: float
    sharing: float
    source: str


INTRA: dict[str, LinkClass] = {
    c.name: c
    for c in (
        # PCI-SIG PCI Express Base Specification 3.0 / 4.0: 8 / 16 GT/s per
        # lane, 128b/130b, x16: 15.75 / 31.5 GB/s per direction.
        LinkClass("pcie3", "pcie", 15.75 * GB, 5 * US, 1.0, "PCIe 3.0 x16 (PCI-SIG)"),
        LinkClass("pcie4", "pcie", 31.5 * GB, 5 * US, 1.0, "PCIe 4.0 x16 (PCI-SIG)"),
        LinkClass("pcie5", "pcie", 63.0 * GB, 5 * US, 1.0, "PCIe 5.0 x16 (PCI-SIG)"),
        # NVIDIA Tesla P100 / V100, A100, H100 datasheets: NVLink 160 / 300 /
        # 600 / 900 GB/s per GPU, both directions.
        LinkClass("nvlink1", "nvlink", 80 * GB, 2 * US, 0.0, "NVLink 1 (P100 datasheet)"),
        LinkClass("nvlink2", "nvlink", 150 * GB, 2 * US, 0.0, "NVLink 2 (V100 datasheet)"),
        LinkClass("nvlink3", "nvlink", 300 * GB, 2 * US, 0.0, "NVLink 3 (A100 datasheet)"),
        LinkClass("nvlink4", "nvlink", 450 * GB, 2 * US, 0.0, "NVLink 4 (H100 datasheet)"),
    )
}

NETWORK: dict[str, LinkClass] = {
    c.name: c
    for c in (
        # IEEE 802.3 line rates / 8; TCP latency of a few tens of us.
        LinkClass("10gbe", "ethernet", 10e9 / 8, 30 * US, 0.0, "10 GbE"),
        LinkClass("25gbe", "ethernet", 25e9 / 8, 25 * US, 0.0, "25 GbE"),
        LinkClass("40gbe", "ethernet", 40e9 / 8, 25 * US, 0.0, "40 GbE"),
        LinkClass("50gbe", "ethernet", 50e9 / 8, 25 * US, 0.0, "50 GbE"),
        LinkClass("100gbe", "ethernet", 100e9 / 8, 20 * US, 0.0, "100 GbE"),
        LinkClass("200gbe", "ethernet", 200e9 / 8, 20 * US, 0.0, "200 GbE"),
        LinkClass("400gbe", "ethernet", 400e9 / 8, 20 * US, 0.0, "400 GbE"),
        # InfiniBand Trade Association: EDR 100, HDR 200, NDR 400 Gb/s per port
        # (NVIDIA ConnectX-5/6/7 product briefs); RDMA: a few us.
        LinkClass("ib_edr", "ib", 100e9 / 8, 5 * US, 0.0, "InfiniBand EDR 100 Gb/s"),
        LinkClass("ib_hdr", "ib", 200e9 / 8, 5 * US, 0.0, "InfiniBand HDR 200 Gb/s"),
        LinkClass("ib_ndr", "ib", 400e9 / 8, 5 * US, 0.0, "InfiniBand NDR 400 Gb/s"),
    )
}

# The intra-server link a GPU model comes with when the description names
# only the GPU: its usual server form (SXM with NVLink where the vendor
# sells mainly that, else PCIe). Vendor datasheets.
GPU_DEFAULT_INTRA: dict[str, str] = {
    "k80": "pcie3",
    "p100": "pcie3",  # sold as PCIe and SXM2 cards; the PCIe card is the common one
    "v100": "nvlink2",  # DGX-1 / p3 / ND40rs: SXM2 with NVLink 2
    "t4": "pcie3",
    "2080": "pcie3",
    "rtx6000": "pcie3",
    "rtx8000": "pcie3",
    "a10": "pcie4",
    "a40": "pcie4",
    "3090": "pcie4",
    "4090": "pcie4",
    "l4": "pcie4",
    "l40": "pcie4",
    "a100": "nvlink3",
    "h100": "nvlink4",
    "h200": "nvlink4",
}
# GPUs that share one intra-server link (one PCIe x16 slot): a dual-GPU
# board puts its two GPUs behind an on-board PCIe switch (NVIDIA Tesla K80
# board specification: two GK210 GPUs, one PCIe 3.0 x16 interface), so each
# GPU gets half the slot's datasheet bandwidth. Other GPUs: one per slot.
GPUS_PER_SLOT: dict[str, int] = {"k80": 2}
# NVSwitch generation by GPU (NVSwitch 1 in DGX-2 V100, 2 in A100, 3 in H100).
_NVSWITCH_GEN = {"v100": "nvlink2", "a100": "nvlink3", "h100": "nvlink4", "h200": "nvlink4"}

_GPU_PATTERNS = (
    ("k80", r"\bk80\b"),
    ("p100", r"\bp100\b"),
    ("v100", r"\bv100\b"),
    ("t4", r"\bt4\b"),
    ("2080", r"2080"),
    ("rtx6000", r"rtx\s*6000|quadro\s*6000|quadro rtx\s*6000"),
    ("rtx8000", r"rtx\s*8000"),
    ("3090", r"3090"),
    ("4090", r"4090"),
    ("a100", r"\ba100\b|dgx[\s-]*a100"),
    ("h100", r"\bh100\b|dgx[\s-]*h100"),
    ("h200", r"\bh200\b"),
    ("a10", r"\ba10\b"),
    ("a40", r"\ba40\b"),
    ("l40", r"\bl40s?\b"),
    ("l4", r"\bl4\b"),
)


@dataclass(frozen=True)
class Hardware:
    """What a description states: GPU, intra-server class, network class and
    network ports per server (``None`` where it says nothing)."""

    text: str
    gpu: str | None
    intra: str | None
    network: str | None
    ports: int
    intra_stated: bool  # named in the text, not inferred from the GPU

    @property
    def known(self) -> bool:
        return self.intra is not None or self.network is not None

    @property
    def intra_bandwidth(self) -> float | None:
        """Datasheet bytes/s per direction per GPU of the intra-server link:
        the class's, split over the GPUs of a dual-GPU board on PCIe
        (:data:`GPUS_PER_SLOT`)."""
        if self.intra is None:
            return None
        ds = INTRA[self.intra]
        share = GPUS_PER_SLOT.get(self.gpu or "", 1) if ds.family == "pcie" else 1
        return ds.bandwidth / share


def describe(text: str) -> Hardware:
    """Read a free-text hardware description into interconnect classes."""
    t = text.lower()
    gpu = next((name for name, pat in _GPU_PATTERNS if re.search(pat, t)), None)
    intra = None
    if "nvswitch" in t or re.search(r"\bdgx[\s-]*(a100|h100|2)\b", t):
        intra = _NVSWITCH_GEN.get(gpu or "", "nvlink3")
    elif m := re.search(r"nvlink\s*([1-4])", t):
        intra = f"nvlink{m[1]}"
    elif "nvlink" in t or "sxm" in t:
        intra = GPU_DEFAULT_INTRA.get(gpu or "", "nvlink2")
        if not intra.startswith("nvlink"):
            intra = "nvlink2"
    elif m := re.search(r"pcie\s*(?:gen\s*)?([345])", t):
        intra = f"pcie{m[1]}"
    intra_stated = intra is not None
    if intra is None and gpu is not None:
        intra = GPU_DEFAULT_INTRA.get(gpu)
    network, ports = None, 1
    ib = re.search(r"(?:(\d+)\s*x\s*)?(?:[\w-]*\s)?(edr|hdr|ndr)\b", t)
    eth = re.search(r"(?:(\d+)\s*x\s*)?(10|25|40|50|100|200|400)\s*(?:gbe|gb/s|gbps|gbit)", t)
    if ib:
        network, ports = f"ib_{ib[2]}", int(ib[1] or 1)
    elif eth:
        network, ports = f"{eth[2]}gbe", int(eth[1] or 1)
    return Hardware(text, gpu, intra, network, ports, intra_stated)


# The datasheet presets of ``topology.FABRICS`` and the hardware each stands for.
DATASHEET_PRESETS = (
    "a100_nvlink_ib",
    "h100_nvlink_ib",
    "v100_nvlink_100gbe",
    "pcie_consumer_25gbe",
    "pcie_25gbe",
)


def nearest_preset(hw: Hardware) -> str:
    """The datasheet preset closest to ``hw``: by GPU generation where the
    intra-server link is NVLink, else by PCIe generation."""
    intra = hw.intra or ""
    if intra in ("nvlink4",):
        return "h100_nvlink_ib"
    if intra in ("nvlink3",):
        return "a100_nvlink_ib"
    if intra.startswith("nvlink"):
        return "v100_nvlink_100gbe"
    if intra in ("pcie4", "pcie5"):
        return "pcie_consumer_25gbe"
    return "pcie_25gbe"


def _log_median(values: list[float]) -> float | None:
    return math.exp(float(np.median(np.log(values)))) if values else None


@dataclass(frozen=True)
class Efficiencies:
    """Achieved over datasheet bandwidth, per level and family, from fits."""

    intra: dict[str, float]  # family -> efficiency
    network: dict[str, float]
    intra_all: float | None  # pooled over families
    network_all: float | None
    any_level: float | None  # pooled over every measured link

    def of(self, level: str, family: str) -> float:
        """The efficiency of ``family`` at ``level``: the family's own where a
        fit measured it, else the level's, else every measured link's
        (else 1: the datasheet)."""
        own = (self.intra if level == "intra" else self.network).get(family)
        pooled = self.intra_all if level == "intra" else self.network_all
        for e in (own, pooled, self.any_level):
            if e is not None:
                return e
        return 1.0


def efficiencies(fits: dict[str, Fabric], hardware: dict[str, Hardware]) -> Efficiencies:
    """Median (in log) of fitted / datasheet bandwidth over the fitted
    clusters whose class at that level is known, per family; pooled over the
    families' figures (each family once), per level and over every level."""
    by: dict[tuple[str, str], list[float]] = {}
    for cluster, fabric in fits.items():
        hw = hardware.get(cluster)
        if hw is None:
            continue
        if hw.intra is not None:
            ds = INTRA[hw.intra]
            eff = fabric.gpu_link.bandwidth / (hw.intra_bandwidth or ds.bandwidth)
            by.setdefault(("intra", ds.family), []).append(eff)
        if hw.network is not None:
            ds = NETWORK[hw.network]
            eff = fabric.nic.bandwidth / (ds.bandwidth * hw.ports)
            by.setdefault(("network", ds.family), []).append(eff)

    # Each family counts once in a pooled figure, however many tables
    # measured it: the pool is evidence on how far training falls short of a
    # datasheet *whatever the link*, not on the family most tables happen to use.
    family = {key: _log_median(v) for key, v in by.items()}

    def level(name: str) -> tuple[dict[str, float], float | None]:
        fam = {f: e for (lv, f), e in family.items() if lv == name and e is not None}
        return fam, _log_median(list(fam.values()))

    intra, intra_all = level("intra")
    network, network_all = level("network")
    every = [e for e in family.values() if e is not None]
    return Efficiencies(intra, network, intra_all, network_all, _log_median(every))


def _family_median(
    level: str,
    family: str,
    fits: dict[str, Fabric],
    hardware: dict[str, Hardware],
    value: Callable[[Fabric], float],
) -> float | None:
    """Median of ``value`` over the fits whose link at ``level`` (``intra``
    or ``network``) is of ``family``; None where no fit's is."""
    values = []
    for c, f in fits.items():
        h = hardware.get(c)
        name = None if h is None else (h.intra if level == "intra" else h.network)
        if name is not None and (INTRA if level == "intra" else NETWORK)[name].family == family:
            values.append(value(f))
    return float(np.median(values)) if values else None


def hardware_prior(
    hw: Hardware,
    pooled: Fabric,
    fits: dict[str, Fabric],
    hardware: dict[str, Hardware],
    unknown: Fabric | None = None,
) -> Fabric:
    """The prior fabric of hardware ``hw``.

    ``pooled`` is ``calibrate.transfer_prior`` of the measured fits (pooled
    links, overlap, sharing and model cards, in the ``shared`` form);
    ``fits`` those fits' fabrics by cluster and ``hardware`` their
    descriptions (for the efficiencies). A level ``hw`` states gets its
    class's datasheet bandwidth times the measured efficiency of its family
    (:meth:`Efficiencies.of`: where no fit measured the family, the
    fraction of a datasheet link the measured links achieved at that level,
    else at any level: data-parallel training reaches a similar fraction of
    a link's datasheet speed whatever the link), and the median latency of
    the fits of its family, or its datasheet latency where no fit measured
    the family (fitted latencies absorb framework costs of their own
    family only). A level
    it does not state keeps ``pooled``'s link. A PCIe server's sharing
    exponent is the median of the PCIe fits' (the GPUs share the host's
    root there; NVLink and unknown servers' fits say nothing about that),
    NVLink's none; a dual-GPU board's GPUs split their slot
    (:attr:`Hardware.intra_bandwidth`). A description that states
    nothing gets ``unknown``'s links (default: ``pooled``'s).
    """
    if not hw.known:
        if unknown is None:
            return pooled
        return replace(
            pooled,
            gpu_link=unknown.gpu_link,
            nic=unknown.nic,
            uplink=unknown.uplink,
            gpu_link_sharing=unknown.gpu_link_sharing,
            nic_sharing=unknown.nic_sharing,
            description=f"unknown hardware: {unknown.name}'s links, pooled model cards",
        )
    eff = efficiencies(fits, hardware)
    out = pooled
    notes = []
    if hw.intra is not None:
        ds = INTRA[hw.intra]
        e = eff.of("intra", ds.family)
        # Latency and sharing from the fits of the same family: a fitted
        # latency carries that family's framework and driver costs, and only
        # PCIe servers' GPUs share a root (NVLink: a link per GPU).
        latency = _family_median("intra", ds.family, fits, hardware, lambda f: f.gpu_link.latency)
        sharing = _family_median("intra", ds.family, fits, hardware, lambda f: f.gpu_link_sharing)
        if latency is None:
            latency = ds.latency
        if ds.family != "pcie":
            sharing = ds.sharing
        elif sharing is None:
            sharing = pooled.gpu_link_sharing
        bandwidth = hw.intra_bandwidth or ds.bandwidth
        out = replace(out, gpu_link=Link(bandwidth * e, latency), gpu_link_sharing=sharing)
        share = f" / {ds.bandwidth / bandwidth:.0f} GPUs" if bandwidth < ds.bandwidth else ""
        notes.append(f"{ds.name}{share} x {e:.2f}")
    if hw.network is not None:
        ds = NETWORK[hw.network]
        e = eff.of("network", ds.family)
        latency = _family_median("network", ds.family, fits, hardware, lambda f: f.nic.latency)
        if latency is None:
            latency = ds.latency
        nic = Link(ds.bandwidth * hw.ports * e, latency)
        out = replace(out, nic=nic, uplink=nic)
        notes.append(f"{hw.ports} x {ds.name} x {e:.2f}")
    return replace(out, description="datasheet x measured efficiency: " + ", ".join(notes))


def hardware_of(descriptions: dict[str, str]) -> dict[str, Hardware]:
    """:func:`describe` of every cluster's description."""
    return {c: describe(text) for c, text in descriptions.items()}


def preset_for(hw: Hardware) -> Fabric:
    """The nearest datasheet preset itself (``topology.FABRICS``)."""
    return FABRICS[nearest_preset(hw)]


def class_table() -> pd.DataFrame:
    """The datasheet classes, for the docs."""
    rows = [
        {
            "level": level,
            "class": c.name,
            "family": c.family,
            "GB/s per direction": c.bandwidth / GB,
            "latency us": c.latency / US,
            "source": c.source,
        }
        for level, table in (("intra-server", INTRA), ("network (per port)", NETWORK))
        for c in table.values()
    ]
    return pd.DataFrame(rows)
