"""Datasheet facts the hardware reader and the prior share: interconnect
classes, GPUs and their server forms, systems and cloud instances.

Every number here is a vendor's or a standard's, never a fit: bandwidth per
direction per GPU (inside a server) or per port (between servers). How far
training falls short of these is what the measured tables add
(:mod:`ddl_gym.fidelity.hardware`).
"""

from __future__ import annotations

from dataclasses import dataclass

from ddl_gym.topology import GB, US


@dataclass(frozen=True)
class LinkClass:
    """An interconnect class and generation with its datasheet numbers.

    ``bandwidth``: bytes/s per direction per GPU (intra) or per port
    (network); ``latency``: s per step, typical; ``family`` groups classes
    whose measured efficiency carries over (``pcie``; ``nvlink``: NVLink 1-2
    point to point; ``nvlink3``, ``nvlink4``: the A100 / H100 generations;
    ``nvswitch``; ``ethernet`` (TCP); ``roce``; ``efa``; ``ib``);
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
        # PCI-SIG PCI Express Base Specification 3.0 / 4.0 / 5.0: 8 / 16 / 32
        # GT/s per lane, 128b/130b, x16: 15.75 / 31.5 / 63 GB/s per direction.
        LinkClass("pcie3", "pcie", 15.75 * GB, 5 * US, 1.0, "PCIe 3.0 x16 (PCI-SIG)"),
        LinkClass("pcie4", "pcie", 31.5 * GB, 5 * US, 1.0, "PCIe 4.0 x16 (PCI-SIG)"),
        LinkClass("pcie5", "pcie", 63.0 * GB, 5 * US, 1.0, "PCIe 5.0 x16 (PCI-SIG)"),
        # NVIDIA Tesla P100 / V100, A100, H100 datasheets: NVLink 160 / 300 /
        # 600 / 900 GB/s per GPU, both directions.
        LinkClass("nvlink1", "nvlink", 80 * GB, 2 * US, 0.0, "NVLink 1 (P100 datasheet)"),
        LinkClass("nvlink2", "nvlink", 150 * GB, 2 * US, 0.0, "NVLink 2 (V100 datasheet)"),
        LinkClass("nvlink3", "nvlink3", 300 * GB, 2 * US, 0.0, "NVLink 3 (A100 datasheet)"),
        LinkClass("nvlink4", "nvlink4", 450 * GB, 2 * US, 0.0, "NVLink 4 (H100 datasheet)"),
        # NVSwitch carrying each generation's NVLink (DGX-2 datasheet: V100
        # NVLink 2 through NVSwitch; DGX A100 / H100 datasheets).
        LinkClass("nvswitch2", "nvswitch", 150 * GB, 3 * US, 0.0, "NVSwitch, V100 (DGX-2)"),
        LinkClass("nvswitch3", "nvswitch", 300 * GB, 3 * US, 0.0, "NVSwitch, A100 (DGX A100)"),
        LinkClass("nvswitch4", "nvswitch", 450 * GB, 3 * US, 0.0, "NVSwitch, H100 (DGX H100)"),
    )
}

NETWORK: dict[str, LinkClass] = {
    c.name: c
    for c in (
        # IEEE 802.3 line rates / 8; TCP latency of a few tens of us.
        *(
            LinkClass(
                f"{g}gbe", "ethernet", g * 1e9 / 8, 30 * US if g < 25 else 25 * US, 0.0, f"{g} GbE"
            )
            for g in (1, 10, 25, 40, 50, 100, 200, 400, 800)
        ),
        # RDMA over Converged Ethernet (RoCE v2): Ethernet line rate, RDMA latency.
        *(
            LinkClass(f"roce{g}", "roce", g * 1e9 / 8, 5 * US, 0.0, f"RoCE {g} Gb/s")
            for g in (25, 50, 100, 200, 400)
        ),
        # AWS Elastic Fabric Adapter: 100 Gb/s per interface (AWS EC2 docs:
        # p4d 4 x 100 Gb/s, p5 32 x 100 Gb/s), SRD transport.
        LinkClass("efa100", "efa", 100e9 / 8, 15 * US, 0.0, "AWS EFA 100 Gb/s"),
        # InfiniBand Trade Association: FDR 56, EDR 100, HDR 200, NDR 400, XDR
        # 800 Gb/s per 4x port (NVIDIA ConnectX-3..8 product briefs); a few us.
        LinkClass("ib_fdr", "ib", 56e9 / 8, 5 * US, 0.0, "InfiniBand FDR 56 Gb/s"),
        LinkClass("ib_edr", "ib", 100e9 / 8, 5 * US, 0.0, "InfiniBand EDR 100 Gb/s"),
        LinkClass("ib_hdr", "ib", 200e9 / 8, 5 * US, 0.0, "InfiniBand HDR 200 Gb/s"),
        LinkClass("ib_ndr", "ib", 400e9 / 8, 5 * US, 0.0, "InfiniBand NDR 400 Gb/s"),
        LinkClass("ib_xdr", "ib", 800e9 / 8, 5 * US, 0.0, "InfiniBand XDR 800 Gb/s"),
    )
}
IB_RATE = {"fdr": 56, "edr": 100, "hdr": 200, "ndr": 400, "xdr": 800}
ETHERNET_RATES = (1, 10, 25, 40, 50, 100, 200, 400, 800)


@dataclass(frozen=True)
class Gpu:
    """A GPU model's server forms: the PCIe generation of its PCIe card, the
    NVLink class of its SXM form (None: no SXM form), the NVSwitch class of
    its NVSwitch baseboards, and the form a description naming only the GPU
    gets (the one its vendor mainly sells into servers)."""

    name: str
    pcie: str
    nvlink: str | None = None
    nvswitch: str | None = None
    usual: str = "pcie"  # "pcie" or "sxm"
    per_slot: int = 1  # GPUs behind one PCIe x16 slot (dual-GPU boards)


GPUS: dict[str, Gpu] = {
    g.name: g
    for g in (
        # NVIDIA Tesla K80 board specification: two GK210 behind one PCIe 3.0 x16.
        Gpu("k80", "pcie3", per_slot=2),
        Gpu("p100", "pcie3", "nvlink1"),  # PCIe card the common one; SXM2 in DGX-1
        Gpu("v100", "pcie3", "nvlink2", "nvswitch2", usual="sxm"),  # DGX-1 / p3 / ND40rs
        Gpu("t4", "pcie3"),
        Gpu("2080", "pcie3"),
        Gpu("rtx6000", "pcie3"),
        Gpu("rtx8000", "pcie3"),
        Gpu("a10", "pcie4"),
        Gpu("a30", "pcie4"),
        Gpu("a40", "pcie4"),
        Gpu("a6000", "pcie4"),
        Gpu("3090", "pcie4"),
        Gpu("4090", "pcie4"),
        Gpu("l4", "pcie4"),
        Gpu("l40", "pcie4"),
        Gpu("a100", "pcie4", "nvlink3", "nvswitch3", usual="sxm"),
        Gpu("h100", "pcie5", "nvlink4", "nvswitch4", usual="sxm"),
        Gpu("h200", "pcie5", "nvlink4", "nvswitch4", usual="sxm"),
    )
}


@dataclass(frozen=True)
class System:
    """A server or cloud instance whose name fixes its hardware: GPU, GPUs,
    intra-server class and network (class and ports; None: not fixed)."""

    gpu: str
    gpus: int
    intra: str
    network: str | None
    ports: int
    source: str


# NVIDIA DGX / HGX datasheets.
SYSTEMS: dict[str, System] = {
    "dgx-1": System("v100", 8, "nvlink2", "ib_edr", 4, "NVIDIA DGX-1 datasheet"),
    "dgx-2": System("v100", 16, "nvswitch2", "ib_edr", 8, "NVIDIA DGX-2 datasheet"),
    "dgx a100": System("a100", 8, "nvswitch3", "ib_hdr", 8, "NVIDIA DGX A100 datasheet"),
    "dgx h100": System("h100", 8, "nvswitch4", "ib_ndr", 8, "NVIDIA DGX H100 datasheet"),
    "hgx a100": System("a100", 8, "nvswitch3", None, 1, "NVIDIA HGX A100 datasheet"),
    "hgx h100": System("h100", 8, "nvswitch4", None, 1, "NVIDIA HGX H100 datasheet"),
}

# Cloud instances of the three big clouds, from their providers' instance
# documentation (AWS EC2 accelerated computing instance types; Azure ND-series
# sizes; Google Cloud GPU machine types).
INSTANCES: dict[str, System] = {
    # AWS
    "p3.2xlarge": System("v100", 1, "nvlink2", "10gbe", 1, "AWS EC2 P3"),
    "p3.8xlarge": System("v100", 4, "nvlink2", "10gbe", 1, "AWS EC2 P3"),
    "p3.16xlarge": System("v100", 8, "nvlink2", "25gbe", 1, "AWS EC2 P3"),
    "p3dn.24xlarge": System("v100", 8, "nvlink2", "efa100", 1, "AWS EC2 P3dn"),
    "p4d.24xlarge": System("a100", 8, "nvswitch3", "efa100", 4, "AWS EC2 P4d"),
    "p4de.24xlarge": System("a100", 8, "nvswitch3", "efa100", 4, "AWS EC2 P4de"),
    "p5.48xlarge": System("h100", 8, "nvswitch4", "efa100", 32, "AWS EC2 P5"),
    "g4dn.12xlarge": System("t4", 4, "pcie3", "50gbe", 1, "AWS EC2 G4dn"),
    "g4dn.metal": System("t4", 8, "pcie3", "100gbe", 1, "AWS EC2 G4dn"),
    "g5.12xlarge": System("a10", 4, "pcie4", "40gbe", 1, "AWS EC2 G5"),
    "g5.48xlarge": System("a10", 8, "pcie4", "100gbe", 1, "AWS EC2 G5"),
    # Azure
    "nd40rs_v2": System("v100", 8, "nvlink2", "ib_edr", 1, "Azure NDv2"),
    "nd96asr_v4": System("a100", 8, "nvswitch3", "ib_hdr", 8, "Azure ND A100 v4"),
    "nd96amsr_a100_v4": System("a100", 8, "nvswitch3", "ib_hdr", 8, "Azure NDm A100 v4"),
    "nd96isr_h100_v5": System("h100", 8, "nvswitch4", "ib_ndr", 8, "Azure ND H100 v5"),
    # Google Cloud
    "a2-highgpu-4g": System("a100", 4, "nvswitch3", "50gbe", 1, "GCP A2"),
    "a2-highgpu-8g": System("a100", 8, "nvswitch3", "100gbe", 1, "GCP A2"),
    "a2-megagpu-16g": System("a100", 16, "nvswitch3", "100gbe", 1, "GCP A2"),
    "a2-ultragpu-8g": System("a100", 8, "nvswitch3", "100gbe", 1, "GCP A2 Ultra"),
    "a3-highgpu-8g": System("h100", 8, "nvswitch4", "200gbe", 4, "GCP A3 (GPUDirect-TCPX)"),
    "a3-megagpu-8g": System("h100", 8, "nvswitch4", "200gbe", 8, "GCP A3 Mega (GPUDirect-TCPXO)"),
}
# Other names of the same instances (Azure's series names, single-size families).
INSTANCE_ALIASES: dict[str, str] = {
    "nd a100 v4": "nd96asr_v4",
    "nd96asr_a100_v4": "nd96asr_v4",
    "ndm a100 v4": "nd96amsr_a100_v4",
    "nd h100 v5": "nd96isr_h100_v5",
    "ndv2": "nd40rs_v2",
    "p3dn": "p3dn.24xlarge",
    "p4d": "p4d.24xlarge",
    "p4de": "p4de.24xlarge",
    "p5": "p5.48xlarge",
}
