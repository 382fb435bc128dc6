"""Read a free-text hardware description, or refuse it.

``read_hardware("2x DGX A100 (8x A100 SXM4 40GB, NVSwitch), 8x HDR InfiniBand")``
gives a :class:`Hardware`: the GPU, GPUs per server, the intra-server class
(:data:`~ddl_gym.fidelity.links.INTRA`) and the network class and port count
(:data:`~ddl_gym.fidelity.links.NETWORK`). It reads the phrasings people
write: counts and rates (``8x 200Gb/s HDR``, ``8 HDR ports``, ``HDR x8``),
InfiniBand FDR/EDR/HDR/NDR/XDR, RoCE, EFA and Ethernet speeds, the PCIe and
SXM forms of a GPU (``A100 PCIe 80GB`` is PCIe 4.0, not NVLink), NVLink
generations and NVSwitch, DGX/HGX systems and the common GPU instances of
AWS, Azure and Google Cloud (``links.INSTANCES``).

Every word must be read: a GPU, link, count, rate, form factor, memory size,
CPU, system or instance name, or a word of plain English that carries no
hardware (:data:`FILLER`). Anything else, and any contradiction (two GPU
models, NVLink and PCIe both stated, an instance and a different GPU), is
refused with :class:`UnreadableHardware`, whose message says what was
understood and what was not. An empty description is no error: it states
nothing (``Hardware.known`` is False).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from ddl_gym.fidelity.links import (
    ETHERNET_RATES,
    GPUS,
    IB_RATE,
    INSTANCE_ALIASES,
    INSTANCES,
    INTRA,
    NETWORK,
    SYSTEMS,
    System,
)


class UnreadableHardware(ValueError):
    """A hardware description with words or statements the reader cannot
    take; the message lists what it understood and what it could not read."""

    def __init__(self, text: str, unread: list[str], understood: list[str]) -> None:
        got = "; ".join(understood) if understood else "nothing"
        super().__init__(
            f"cannot read hardware description {text!r}: could not read "
            + ", ".join(unread)
            + f" (understood: {got})"
        )
        self.text = text
        self.unread = tuple(unread)
        self.understood = tuple(understood)


@dataclass(frozen=True)
class Hardware:
    """What a description states: GPU, intra-server class, network class and
    network ports per server (``None`` where it says nothing).

    ``intra_stated``: the intra-server link was named (a link, a form factor,
    a system or an instance), not inferred from the GPU's usual form;
    ``network_stated`` likewise for the network (a DGX's ports are its
    datasheet's, not stated). ``gpus_per_server`` and ``servers`` where the
    text gives them; ``understood`` lists what was read, for messages.
    """

    text: str
    gpu: str | None
    intra: str | None
    network: str | None
    ports: int
    intra_stated: bool
    network_stated: bool = False
    gpus_per_server: int | None = None
    servers: int | None = None
    understood: tuple[str, ...] = field(default=(), compare=False)

    @property
    def known(self) -> bool:
        return self.intra is not None or self.network is not None

    @property
    def intra_alternative(self) -> str | None:
        """The other server form's intra-server class where the link was
        inferred from a GPU sold in both (V100: NVLink 2 inferred, PCIe 3
        possible); None where the link is stated or the GPU has one form."""
        gpu = GPUS.get(self.gpu or "")
        if self.intra_stated or gpu is None or gpu.nvlink is None or self.intra is None:
            return None
        return gpu.pcie if self.intra != gpu.pcie else gpu.nvlink

    @property
    def intra_bandwidth(self) -> float | None:
        """Datasheet bytes/s per direction per GPU of the intra-server link:
        the class's, split over the GPUs of a dual-GPU board on PCIe
        (``links.Gpu.per_slot``)."""
        if self.intra is None:
            return None
        ds = INTRA[self.intra]
        gpu = GPUS.get(self.gpu or "")
        share = gpu.per_slot if gpu is not None and ds.family == "pcie" else 1
        return ds.bandwidth / share


# Words that carry no hardware: glue, nouns of where and what, vendors.
FILLER = frozenset(
    """
    a an the and or of on in at to with without per each every via by for from
    up as is are between inside within across plus total
    x gpu gpus server servers node nodes machine machines host hosts box boxes
    system systems instance instances vm vms cluster clusters rack racks
    network networking interconnect interconnects fabric link links connected
    intra inter internode intranode card cards port ports nic nics adapter adapters
    hca hcas interface interfaces switch switched nonblocking non-blocking
    fat-tree fat tree topology rail rail-optimised rail-optimized full
    nvidia tesla geforce quadro rtx datacenter data center cloud on-prem onprem
    on-premise on-premises prem premise premises bare metal bare-metal
    aws amazon ec2 azure microsoft gcp google compute engine standard
    memory ram vram hbm hbm2 hbm2e hbm3 hbm3e gddr6 gddr6x ddr4 ddr5
    cpu cpus core cores socket sockets dual single
    gbe gb/s gbps ethernet
    """.split()
)

_NUM = r"(\d+)"
_GPU_NAMES = (
    ("2080", r"(?:rtx\s*)?2080\s*(?:ti|super)?"),
    ("a6000", r"(?:rtx\s*)?a6000"),
    ("rtx6000", r"(?:quadro\s+)?rtx\s*6000"),
    ("rtx8000", r"(?:quadro\s+)?rtx\s*8000"),
    ("3090", r"(?:rtx\s*)?3090(?:\s*ti)?"),
    ("4090", r"(?:rtx\s*)?4090"),
    ("a100", r"a100"),
    ("h100", r"h100"),
    ("h200", r"h200"),
    ("a10", r"a10g?"),
    ("a30", r"a30"),
    ("a40", r"a40"),
    ("l40", r"l40s?"),
    ("l4", r"l4"),
    ("t4", r"t4"),
    ("k80", r"k80"),
    ("p100", r"p100"),
    ("v100", r"v100"),
)
_GPU_ALT = "|".join(f"(?P<g_{name}>{pat})" for name, pat in _GPU_NAMES)
_FORM = r"(?:sxm[2-6]?|pcie(?:\s*[345](?:\.0)?)?|pci-?e|nvl)\b"
_GPU_RE = re.compile(
    rf"(?:(?P<count>\d+)\s*(?:x\s*)?)?(?:nvidia\s+)?(?:tesla\s+|geforce\s+|quadro\s+)?"
    rf"\b(?:{_GPU_ALT})\b"
    rf"(?P<tail>(?:[\s-]*(?:{_FORM}|\d+\s*gb\b|(?:hbm2e?|hbm3e?)\b))*)"
)
_RATE_UNIT = r"(?:gb/s|gbps|gbit/s|gbits/s|gbit|gb\s*/\s*s|gbe|g\b)"
_IB_GEN = r"(?:fdr|edr|hdr|ndr|xdr)"
_FAMILY = (
    rf"(?:infiniband|ib)\s+{_IB_GEN}|{_IB_GEN}(?:\s+(?:infiniband|ib)\b)?|infiniband|ib"
    r"|roce(?:\s*v2)?|efa(?:v2)?|gpudirect[\s-]*tcpxo?|ethernet|nics?"
)
_NET_RE = re.compile(
    r"(?:(?P<n1>\d+)\s*(?:x\s*|-\s*port\s+|ports?\s+(?:of\s+)?|\s+(?=[a-z])))?"
    r"(?:(?P<rate>\d+(?:\.\d+)?)\s*(?P<unit>" + _RATE_UNIT + r")\s*"
    r"(?P<fam1>\b(?:" + _FAMILY + r")\b)?|(?P<fam2>\b(?:" + _FAMILY + r")\b))"
    r"(?:\s*x\s*(?P<n2>\d+)\b)?"
    r"(?:\s*(?P<pw>ports?|nics?|hcas?|adapters?|interfaces?|links?)\b)?"
)
_SYSTEM_RE = re.compile(
    r"(?:(?P<count>\d+)\s*(?:x\s*)?)?(?:nvidia\s+)?\b(?P<kind>dgx|hgx)[\s-]*"
    r"(?P<model>1|2|a100|h100)\b(?:\s*(?:\d+\s*gb|with\s+v100|v100|p100))*"
)
_INSTANCE_RE = re.compile(
    r"(?:(?P<count>\d+)\s*(?:x\s*)?)?(?:\bstandard_|\b)(?P<name>"
    + "|".join(
        re.escape(n).replace(r"\ ", "_").replace(r"\-", "_").replace("_", r"[\s_-]+")
        for n in sorted([*INSTANCES, *INSTANCE_ALIASES], key=len, reverse=True)
    )
    + r")(?![\w.])"
)


def _norm(name: str) -> str:
    return re.sub(r"[\s_-]+", " ", name)


_INSTANCE_KEYS = {
    **{_norm(n): n for n in INSTANCES},
    **{_norm(a): n for a, n in INSTANCE_ALIASES.items()},
}
_GPUS_PER_SERVER = (
    re.compile(
        r"(?:up\s+to\s+)?(\d+)\s*-?\s*gpus?\s*(?:per|/|each|a)?\s*(?:server|node|machine|host)?"
    ),
    re.compile(
        r"(?:up\s+to\s+)?(\d+)\s*(?:x\s*)?(?:gpus?\s+)?(?:per|/)\s*(?:server|node|machine|host)"
    ),
)
_SERVERS_RE = re.compile(r"(\d+)\s*(?:x\s*)?(?:servers?|nodes?|machines?|hosts?|boxes)\b")
_NVLINK_RE = re.compile(
    r"\bnvlink[\s-]*(?:gen(?:eration)?\s*|v)?(?P<gen>[1-4])?\b(?:\.0)?(?:\s*bridges?)?"
    r"|\b(?P<ord>first|second|third|fourth)[\s-]*gen(?:eration)?\s+nvlink\b"
)
_PCIE_RE = re.compile(
    r"\bpci[\s-]*e(?:xpress)?\s*(?:gen\s*)?(?P<gen>[345])?(?:\.0)?(?:\s*x16)?\b"
    r"|\bpci\s+express\b"
)
_CPU_RE = re.compile(
    r"(?:\d+\s*x\s*)?\b(?:intel|amd)\s+(?:xeon|epyc)\b(?:\s+(?:platinum|gold|silver))?"
    r"(?:\s+[a-z]?\d{3,5}[a-z]*)?"
    r"|\b\d+\s*(?:cpu\s+)?(?:cores?|vcpus?|threads?)\b"
)
_ADAPTER_RE = re.compile(r"\b(?:mellanox\s+|nvidia\s+)?connectx[\s-]*\d+(?:\s*(?:dx|lx|vpi))?\b")
_MEMORY_RE = re.compile(r"\b\d+(?:\.\d+)?\s*(?:gb|gib|tb|tib)\b(?!\s*/)(?:\s*(?:ram|memory))?")
_ORDINAL = {"first": "1", "second": "2", "third": "3", "fourth": "4"}


class _Reader:
    """One pass over a description: each rule takes the text it reads out
    (blanked), so what is left at the end is what nothing read."""

    def __init__(self, text: str) -> None:
        self.text = text
        t = text.lower().replace("×", "x").replace("–", "-")
        self.t = re.sub(r"(\d),(\d{3})", r"\1\2", t)  # 1,600 Gb/s
        self.facts: dict[str, list[tuple[object, str]]] = {}
        self.understood: list[str] = []
        self.conflicts: list[str] = []

    def take(self, m: re.Match[str]) -> None:
        a, b = m.span()
        self.t = self.t[:a] + " " * (b - a) + self.t[b:]

    def say(self, key: str, value: object, how: str) -> None:
        self.facts.setdefault(key, []).append((value, how))

    def one(self, key: str) -> tuple[object, str] | None:
        """The value of ``key``: a stated one over one implied by a system's
        name (a DGX's network ports may be replaced), a conflict where two
        stated ones differ or (GPU, GPUs, intra link) a stated one differs
        from the system's."""
        got = self.facts.get(key, [])
        stated = [(v, h) for v, h in got if not h.startswith("implied")]
        implied = [(v, h) for v, h in got if h.startswith("implied")]
        if len({v for v, _ in stated}) > 1:
            self.conflicts.append(
                f"{key} stated as " + " and ".join(sorted({f"{v} ({h})" for v, h in stated}))
            )
        if stated and implied and key != "network":
            if stated[0][0] not in {v for v, _ in implied}:
                self.conflicts.append(
                    f"{key} {stated[0][0]} where {implied[0][1]} has {implied[0][0]}"
                )
        pick = stated or implied
        return pick[0] if pick else None


def _system(r: _Reader, sysm: System, label: str, stated_network: bool) -> None:
    how = f"implied by {label}"
    r.say("gpu", sysm.gpu, how)
    r.say("gpus", sysm.gpus, how)
    r.say("intra", sysm.intra, how)
    if sysm.network is not None:
        kind = "stated by" if stated_network else "implied by"
        r.say("network", (sysm.network, sysm.ports), f"{kind} {label}")


def read_hardware(text: str) -> Hardware:
    """Read ``text`` into a :class:`Hardware`, or raise :class:`UnreadableHardware`."""
    r = _Reader(text)
    for m in _INSTANCE_RE.finditer(r.t):
        key = _INSTANCE_KEYS[_norm(m["name"])]
        sysm = INSTANCES[key]
        _system(r, sysm, f"instance {key} ({sysm.source})", stated_network=True)
        if m["count"]:
            r.say("servers", int(m["count"]), "stated")
        r.understood.append(f"instance {key}")
        r.take(m)
    for m in _SYSTEM_RE.finditer(r.t):
        key = f"{m['kind']}-{m['model']}" if m["model"] in "12" else f"{m['kind']} {m['model']}"
        if key not in SYSTEMS:
            continue
        sysm = SYSTEMS[key]
        if "p100" in m[0] and key == "dgx-1":
            sysm = System("p100", 8, "nvlink1", "ib_edr", 4, sysm.source)
        _system(r, sysm, key.upper(), stated_network=False)
        if m["count"]:
            r.say("servers", int(m["count"]), "stated")
        r.understood.append(key.upper())
        r.take(m)
    _read_gpus(r)
    for m in _ADAPTER_RE.finditer(r.t):
        r.understood.append(f"adapter {m[0].strip()!r}")
        r.take(m)  # "8x ConnectX-6 HDR": the count stays with the network
    _read_network(r)
    _read_intra(r)
    for rx in (_CPU_RE, _MEMORY_RE):
        for m in rx.finditer(r.t):
            r.understood.append(f"ignored {m[0].strip()!r}")
            r.take(m)
    for rx in _GPUS_PER_SERVER:
        for m in rx.finditer(r.t):
            r.say("gpus", int(m[1]), "stated")
            r.understood.append(f"{m[1]} GPUs per server")
            r.take(m)
    for m in _SERVERS_RE.finditer(r.t):
        r.say("servers", int(m[1]), "stated")
        r.understood.append(f"{m[1]} servers")
        r.take(m)
    return _finish(r)


def _read_gpus(r: _Reader) -> None:
    for m in _GPU_RE.finditer(r.t):
        gpu = next(name for name, _ in _GPU_NAMES if m[f"g_{name}"])
        r.say("gpu", gpu, "stated")
        if m["count"]:
            r.say("gpus", int(m["count"]), "stated")
        tail = m["tail"] or ""
        if re.search(r"sxm|nvl\b", tail):
            if GPUS[gpu].nvlink is None:
                r.conflicts.append(f"{gpu} has no SXM form")
            else:
                r.say("form", "sxm", "stated")
        if re.search(r"pci", tail):
            r.say("form", "pcie", "stated")
        count = f"{m['count']} x " if m["count"] else ""
        r.understood.append(f"{count}{gpu} {tail.strip()}".strip())
        r.take(m)


def _read_network(r: _Reader) -> None:
    for m in _NET_RE.finditer(r.t):
        fam, rate = m["fam1"] or m["fam2"], m["rate"]
        if fam and re.fullmatch(r"nics?", fam) and not rate:
            continue  # "NIC" alone: a filler word
        counts = {int(c) for c in (m["n1"], m["n2"]) if c}
        if len(counts) > 1:
            r.conflicts.append(f"two port counts in {m[0].strip()!r}")
        ports = counts.pop() if counts else 1
        gen = re.search(_IB_GEN, fam or "")
        speed = float(rate) if rate else None
        fam = fam or ""
        if gen:
            g = gen[0]
            if speed is not None and speed != IB_RATE[g]:
                r.conflicts.append(
                    f"{g.upper()} is {IB_RATE[g]} Gb/s, not {rate} ({m[0].strip()!r})"
                )
            cls = f"ib_{g}"
        elif re.match(r"infiniband|ib\b", fam):
            by_rate = {float(v): k for k, v in IB_RATE.items()}
            if speed is None or speed not in by_rate:
                r.conflicts.append(f"InfiniBand without a speed it has ({m[0].strip()!r})")
                r.take(m)
                continue
            cls = f"ib_{by_rate[speed]}"
        elif speed is None:
            r.conflicts.append(f"{fam} without a speed ({m[0].strip()!r})")
            r.take(m)
            continue
        elif fam.startswith("roce"):
            cls = f"roce{speed:g}"
        elif fam.startswith("efa"):
            if speed % 100:
                r.conflicts.append(f"EFA interfaces are 100 Gb/s ({m[0].strip()!r})")
                r.take(m)
                continue
            cls, ports = "efa100", ports * int(speed // 100)
        else:
            if speed not in ETHERNET_RATES:
                r.conflicts.append(f"no Ethernet class of {rate} Gb/s ({m[0].strip()!r})")
                r.take(m)
                continue
            cls = f"{speed:g}gbe"
        if cls not in NETWORK:
            r.conflicts.append(f"no network class {cls} ({m[0].strip()!r})")
        else:
            r.say("network", (cls, ports), "stated")
            r.understood.append(f"{ports} x {cls}")
        r.take(m)


def _read_intra(r: _Reader) -> None:
    gpu = r.one("gpu")
    g = GPUS.get(str(gpu[0])) if gpu else None
    for m in re.finditer(r"\bnvswitch(?:es)?\b", r.t):
        if g is None or g.nvswitch is None:
            r.conflicts.append("NVSwitch without a GPU that has it (V100, A100, H100, H200)")
        else:
            r.say("intra", g.nvswitch, "stated")
            r.understood.append(g.nvswitch)
        r.take(m)
    for m in _NVLINK_RE.finditer(r.t):
        gen = m["gen"] or _ORDINAL.get(m["ord"] or "")
        if "bridge" in m[0]:
            r.conflicts.append("NVLink bridges join pairs of GPUs only; state the server's link")
        elif gen:
            r.say("intra", f"nvlink{gen}", "stated")
            r.understood.append(f"nvlink{gen}")
        elif g is None or g.nvlink is None:
            r.conflicts.append("NVLink without a GPU whose generation it fixes")
        else:
            r.say("intra", g.nvlink, "stated")
            r.understood.append(g.nvlink)
        r.take(m)
    for m in _PCIE_RE.finditer(r.t):
        if m["gen"]:
            r.say("intra", f"pcie{m['gen']}", "stated")
            r.understood.append(f"pcie{m['gen']}")
        elif g is not None:
            r.say("intra", g.pcie, "stated")
            r.understood.append(g.pcie)
        else:
            r.conflicts.append("PCIe without a generation or a GPU that fixes it")
        r.take(m)


def _finish(r: _Reader) -> Hardware:
    gpu_f, gpus_f, servers_f = r.one("gpu"), r.one("gpus"), r.one("servers")
    intra_f, net_f, form_f = r.one("intra"), r.one("network"), r.one("form")
    gpu = str(gpu_f[0]) if gpu_f else None
    g = GPUS.get(gpu or "")
    intra, intra_stated = (str(intra_f[0]), True) if intra_f else (None, False)
    if form_f is not None and g is not None:
        form_intra = g.pcie if form_f[0] == "pcie" else g.nvlink
        if intra is None:
            intra, intra_stated = form_intra, True
        elif (INTRA[intra].family == "pcie") != (form_f[0] == "pcie"):
            r.conflicts.append(f"{gpu} {str(form_f[0]).upper()} with an {intra} link")
    if intra is None and g is not None:
        intra = g.nvlink if g.usual == "sxm" and g.nvlink else g.pcie
    gpus = int(gpus_f[0]) if gpus_f else None  # type: ignore[arg-type]
    if (
        g is not None
        and g.nvswitch
        and intra == g.nvlink
        and not (intra_f and intra_f[1] == "stated")
    ):
        # An SXM board of more than 4 A100/H100 is an NVSwitch board (HGX 8-GPU).
        if g.nvlink in ("nvlink3", "nvlink4") and (gpus is None or gpus > 4):
            intra = g.nvswitch
    network, ports, network_stated = None, 1, False
    if net_f is not None:
        value = net_f[0]
        assert isinstance(value, tuple)
        network, ports = str(value[0]), int(value[1])
        network_stated = not net_f[1].startswith("implied")
    leftover = [
        w for w in re.findall(r"[a-z0-9][a-z0-9._/+-]*", r.t) if w.strip(".-/") not in FILLER
    ]
    leftover = [w for w in leftover if w.strip(".-/")]
    unread = [repr(w) for w in leftover] + r.conflicts
    if unread:
        raise UnreadableHardware(r.text, unread, r.understood)
    return Hardware(
        text=r.text,
        gpu=gpu,
        intra=intra,
        network=network,
        ports=ports,
        intra_stated=intra_stated,
        network_stated=network_stated,
        gpus_per_server=gpus,
        servers=int(servers_f[0]) if servers_f else None,  # type: ignore[arg-type]
        understood=tuple(r.understood),
    )
