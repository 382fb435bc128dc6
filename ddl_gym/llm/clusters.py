"""Today's LLM-training cluster presets: DGX servers on a leaf-spine fabric.

A DGX A100 / H100 server is 8 GPUs on NVSwitch with 8 InfiniBand NICs, one
per GPU (NVIDIA DGX A100 / H100 datasheets: 8 x 200 Gb/s HDR / 8 x 400 Gb/s
NDR); the fabric presets ``a100_nvlink_ib`` / ``h100_nvlink_ib`` hold the
links. A "rack" here is a leaf group: 16 servers (128 GPUs) under their leaf
switches (rail-optimised: each GPU's NIC on its rail's leaf, NVIDIA DGX
SuperPOD reference architecture), the spine above. Oversubscription of the
leaf-spine uplinks is stated per preset: 1 (non-blocking, as the SuperPOD)
or 2 (a cheaper spine).
"""

from __future__ import annotations

from dataclasses import replace

from ddl_gym.topology import FABRICS, Cluster, Fabric

SERVERS_PER_LEAF = 16


def leaf_spine_fabric(base: str, oversubscription: float) -> Fabric:
    """``base`` (a fabric preset) with the spine oversubscribed ``x:1``."""
    fabric = FABRICS[base]
    if oversubscription == fabric.oversubscription:
        return fabric
    return replace(
        fabric,
        name=f"{base}_{oversubscription:g}to1",
        oversubscription=oversubscription,
        description=f"{fabric.description}; leaf-spine {oversubscription:g}:1 (stated)",
    )


def dgx_cluster(gpu: str = "a100", gpus: int = 1024, oversubscription: float = 1.0) -> Cluster:
    """``gpus`` GPUs of DGX ``gpu`` ("a100" or "h100") servers, 16 per leaf."""
    base = {"a100": "a100_nvlink_ib", "h100": "h100_nvlink_ib"}.get(gpu)
    if base is None:
        raise ValueError(f"gpu must be 'a100' or 'h100', got {gpu!r}")
    per_leaf = SERVERS_PER_LEAF * 8
    if gpus < per_leaf or gpus % per_leaf:
        raise ValueError(f"gpus must be a multiple of {per_leaf} (a leaf of 16 DGX), got {gpus}")
    return Cluster(
        gpus // per_leaf,
        SERVERS_PER_LEAF,
        8,
        leaf_spine_fabric(base, oversubscription),
        description=f"DGX {gpu.upper()} x {gpus // 8}, leaf-spine {oversubscription:g}:1",
    )


#: Named presets (not in ``topology.CLUSTERS``: pass the Cluster object).
LLM_CLUSTERS: dict[str, Cluster] = {
    "dgx_a100_1024": dgx_cluster("a100", 1024),
    "dgx_a100_1024_2to1": dgx_cluster("a100", 1024, 2.0),
    "dgx_h100_1024": dgx_cluster("h100", 1024),
}
