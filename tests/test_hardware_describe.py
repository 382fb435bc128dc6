"""The hardware description reader: the phrasings people write read to the
stated classes, link counts and speeds, or are refused with a message that
says what was and was not understood (issue 51)."""

from __future__ import annotations

import pytest

from ddl_gym.fidelity.describe import UnreadableHardware
from ddl_gym.fidelity.hardware import describe
from ddl_gym.fidelity.links import INTRA, NETWORK
from ddl_gym.fidelity.measured import STATED_HARDWARE
from ddl_gym.topology import GB

# text -> (gpu, intra class, network class, ports, GPUs per server)
READS = {
    # counts x rates of InfiniBand, every way round
    "8x A100 SXM4, 8 HDR ports": ("a100", "nvswitch3", "ib_hdr", 8, 8),
    "8x A100, HDR x8": ("a100", "nvswitch3", "ib_hdr", 8, 8),
    "8x A100 SXM4, 8x 200Gb/s HDR": ("a100", "nvswitch3", "ib_hdr", 8, 8),
    "8x H100 SXM5, 8x 400Gb/s NDR": ("h100", "nvswitch4", "ib_ndr", 8, 8),
    "8x H100, NDR x8": ("h100", "nvswitch4", "ib_ndr", 8, 8),
    "2x DGX A100 (8x A100 SXM4 40GB, NVSwitch), 8x HDR InfiniBand": (
        "a100",
        "nvswitch3",
        "ib_hdr",
        8,
        8,
    ),
    "4x V100 PCIe, 100 Gb/s EDR InfiniBand": ("v100", "pcie3", "ib_edr", 1, 4),
    "8x H200, 4x XDR": ("h200", "nvswitch4", "ib_xdr", 4, 8),
    "4x P100, 56 Gb/s FDR": ("p100", "pcie3", "ib_fdr", 1, 4),
    "8x A100 80GB, 8x ConnectX-6 HDR": ("a100", "nvswitch3", "ib_hdr", 8, 8),
    # RoCE and Ethernet speeds
    "8x A100 PCIe 80GB, 2x 100GbE RoCE": ("a100", "pcie4", "roce100", 2, 8),
    "4x A40, 200 Gb/s RoCE v2": ("a40", "pcie4", "roce200", 1, 4),
    "8x RTX 2080Ti, PCIe 3, 10 GbE": ("2080", "pcie3", "10gbe", 1, 8),
    "4x RTX 3090, 25 GbE": ("3090", "pcie4", "25gbe", 1, 4),
    "8x L40S, 2x 100G Ethernet": ("l40", "pcie4", "100gbe", 2, 8),
    "4x T4 per node, up to 50 Gbps": ("t4", "pcie3", "50gbe", 1, 4),
    # PCIe vs SXM forms; NVLink generations
    "8x A100 PCIe 80GB": ("a100", "pcie4", None, 1, 8),
    "8x H100 PCIe": ("h100", "pcie5", None, 1, 8),
    "8x V100 SXM2": ("v100", "nvlink2", None, 1, 8),
    "4x A100 SXM4": ("a100", "nvlink3", None, 1, 4),
    "H100 NVLink 4": ("h100", "nvlink4", None, 1, None),
    "DGX-1 with V100": ("v100", "nvlink2", "ib_edr", 4, 8),
    "P100 NVLink": ("p100", "nvlink1", None, 1, None),
    "8x V100, third-generation NVLink": ("v100", "nvlink3", None, 1, 8),
    "16 nodes of 8x A100 SXM4, PCIe 4.0 host": None,  # SXM and PCIe: refused below
    # the three big clouds
    "AWS p3.16xlarge": ("v100", "nvlink2", "25gbe", 1, 8),
    "p3dn.24xlarge": ("v100", "nvlink2", "efa100", 1, 8),
    "AWS p4d.24xlarge": ("a100", "nvswitch3", "efa100", 4, 8),
    "AWS p4d": ("a100", "nvswitch3", "efa100", 4, 8),
    "p5.48xlarge": ("h100", "nvswitch4", "efa100", 32, 8),
    "AWS g4dn.12xlarge": ("t4", "pcie3", "50gbe", 1, 4),
    "Azure ND40rs_v2": ("v100", "nvlink2", "ib_edr", 1, 8),
    "Azure ND40rs_v2: 8x V100 SXM2 NVLink, 100 Gb/s EDR InfiniBand": (
        "v100",
        "nvlink2",
        "ib_edr",
        1,
        8,
    ),
    "Standard_ND96asr_v4": ("a100", "nvswitch3", "ib_hdr", 8, 8),
    "Azure ND A100 v4": ("a100", "nvswitch3", "ib_hdr", 8, 8),
    "ND H100 v5": ("h100", "nvswitch4", "ib_ndr", 8, 8),
    "GCP a2-highgpu-8g": ("a100", "nvswitch3", "100gbe", 1, 8),
    "a2-megagpu-16g": ("a100", "nvswitch3", "100gbe", 1, 16),
    "Google Cloud a3-highgpu-8g": ("h100", "nvswitch4", "200gbe", 4, 8),
}


@pytest.mark.parametrize("text", [t for t, v in READS.items() if v is not None])
def test_phrasings_read_to_the_stated_classes(text):
    want = READS[text]
    assert want is not None
    hw = describe(text)
    assert (hw.gpu, hw.intra, hw.network, hw.ports, hw.gpus_per_server) == want


def test_link_speeds_are_the_datasheets_times_the_ports():
    """8 HDR ports are 8 x 200 Gb/s = 200 GB/s; 8 NDR 400 GB/s; 32 EFA
    interfaces 400 GB/s; an A100's NVSwitch 300 GB/s per GPU each way."""

    def net(text: str) -> float:
        hw = describe(text)
        assert hw.network is not None
        return NETWORK[hw.network].bandwidth * hw.ports

    for text in ("8x A100, 8 HDR ports", "8x A100, HDR x8", "8x A100, 8x 200Gb/s HDR"):
        assert net(text) == pytest.approx(200 * GB)
    assert net("8x H100, 8x 400Gb/s NDR") == pytest.approx(400 * GB)
    assert net("p5.48xlarge") == pytest.approx(400 * GB)
    assert net("p4d.24xlarge") == pytest.approx(50 * GB)
    assert net("8x RTX 2080Ti, 10 GbE") == pytest.approx(1.25 * GB)
    assert INTRA[describe("8x A100 SXM4").intra or ""].bandwidth == pytest.approx(300 * GB)
    assert describe("8x A100 PCIe 80GB").intra_bandwidth == pytest.approx(31.5 * GB)
    assert describe("NVIDIA K80 servers").intra_bandwidth == pytest.approx(15.75 * GB / 2)


def test_inferred_and_stated_links_are_told_apart():
    """A GPU named alone gets its usual server form, marked as inferred, with
    the other form as the alternative where it is sold in two; a system's
    network is its datasheet's, not stated."""
    v100 = describe("NVIDIA V100 servers of up to 8 GPUs")
    assert (v100.intra, v100.intra_stated, v100.intra_alternative) == ("nvlink2", False, "pcie3")
    k80 = describe("NVIDIA K80 servers")
    assert (k80.intra, k80.intra_stated, k80.intra_alternative) == ("pcie3", False, None)
    sxm = describe("8x V100 SXM2")
    assert sxm.intra_stated and sxm.intra_alternative is None
    dgx = describe("DGX A100")
    assert dgx.network == "ib_hdr" and not dgx.network_stated
    assert describe("DGX A100, 2x 100 GbE").network == "100gbe"  # the cluster's own wins
    assert describe("p4d.24xlarge").network_stated


def test_the_bundled_tables_descriptions_read():
    for text in STATED_HARDWARE.values():
        assert describe(text).known


def test_an_empty_description_states_nothing():
    hw = describe("")
    assert not hw.known and hw.gpu is None and hw.gpus_per_server is None


REFUSED = {
    "our lab servers": ["'our'", "'lab'"],
    "8x MI250X, Slingshot": ["'mi250x'", "'slingshot'"],
    "Omni-Path 100": ["'omni-path'"],
    "8x A100, InfiniBand": ["InfiniBand without a speed"],
    "8x A100 PCIe, NVSwitch": ["PCIE with an nvswitch3 link"],
    "16 nodes of 8x A100 SXM4, PCIe 4.0 host": ["SXM with an pcie4 link"],
    "8x A100, 8x V100": ["gpu stated as"],
    "AWS p3.16xlarge with 4x V100": ["gpus 4 where implied by instance p3.16xlarge"],
    "NVLink, 8x HDR": ["NVLink without a GPU"],
    "8x A100, 8x 100Gb/s HDR": ["HDR is 200 Gb/s, not 100"],
    "8x A100, 8x HDR, 4x NDR": ["network stated as"],
    "2x RTX 3090, NVLink bridge": ["NVLink bridges"],
    "8x A100, 30 GbE": ["no Ethernet class of 30 Gb/s"],
    "ND96xyz_v9": ["'nd96xyz_v9'"],
    "p3": ["'p3'"],  # a family of several sizes: which one is not said
}


@pytest.mark.parametrize("text", list(REFUSED))
def test_unreadable_descriptions_are_refused_naming_what_was_not_read(text):
    with pytest.raises(UnreadableHardware) as info:
        describe(text)
    message = str(info.value)
    assert isinstance(info.value, ValueError)
    assert "\n" not in message and message.startswith("cannot read hardware description")
    for part in REFUSED[text]:
        assert part in message, message
    assert "understood:" in message


def test_the_refusal_lists_what_was_understood():
    with pytest.raises(UnreadableHardware) as info:
        describe("8x A100 SXM4, NVSwitch, 8x HDR, Slingshot-11")
    err = info.value
    assert err.unread == ("'slingshot-11'",)
    assert "8 x a100 sxm4" in err.understood and "8 x ib_hdr" in err.understood
