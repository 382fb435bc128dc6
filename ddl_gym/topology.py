"""Cluster shape (racks x servers x GPUs), fabric presets and congestion.

A cluster is ``racks`` racks of ``servers_per_rack`` servers with
``gpus_per_server`` GPUs each. Three kinds of link matter to a data-parallel
job, one per level a placement can span:

* ``gpu_link``: GPU to GPU inside a server (NVLink/NVSwitch, PCIe);
* ``nic``: a server's network interface to its top-of-rack switch; it carries
  every transfer between servers and caps a single flow's bandwidth;
* ``uplink``: a rack's uplink to the spine. Its capacity is
  ``servers_per_rack * nic.bandwidth / oversubscription``, shared by every job
  whose GPUs span that rack and others, and by background traffic (the
  congestion level). Its latency is the cost of one cross-rack step.

Fabric presets are data; ``fabric_from_dict`` reads a saved (e.g. fitted) one.
"""

from __future__ import annotations

import json
import math
import re
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Literal

GB = 1e9
US = 1e-6

Algorithm = Literal["ring", "hierarchical", "shared"]


@dataclass(frozen=True)
class Link:
    """A link class: bandwidth in bytes/s, latency (alpha) in s per step."""

    bandwidth: float
    latency: float

    def __post_init__(self) -> None:
        if not (self.bandwidth > 0 and math.isfinite(self.bandwidth)):
            raise ValueError(f"link bandwidth must be positive, got {self.bandwidth}")
        if not (self.latency >= 0 and math.isfinite(self.latency)):
            raise ValueError(f"link latency must be >= 0, got {self.latency}")


@dataclass(frozen=True)
class Fabric:
    """Network parameters of a cluster and how jobs all-reduce on it.

    Attributes:
        name: preset name.
        gpu_link, nic, uplink: see the module docstring.
        oversubscription: rack uplink oversubscription (1 = non-blocking).
        algorithm: ``"ring"`` (one flat ring over all GPUs, every step paced by
            the slowest level spanned), ``"hierarchical"`` (ring all-reduce
            level by level: inside servers, across servers of a rack, across
            racks) or ``"shared"`` (level by level, but a server's GPUs share
            its GPU link and NIC, so each level costs what its busiest server
            pays; see ``gpu_link_sharing`` and ``nic_sharing`` and
            ``ddl_gym.perf``).
        gpu_link_sharing: ``"shared"`` only. How much a server's GPUs share
            its GPU link, as an exponent ``h`` in [0, 1]: the intra-server
            ring on the busiest server of ``g`` GPUs moves ``g**h`` times the
            bytes of a switched one. 0 = a switch (NVSwitch: every GPU its own
            full-bandwidth port); 1 = one shared host link (PCIe tree).
        nic_sharing: ``"shared"`` only. The same for the NIC: the busiest
            server's NIC moves ``g**x`` times a fully reduced gradient. 0 =
            the GPUs reduce inside the server before the NIC (hierarchical
            NCCL); 1 = every GPU's traffic crosses the NIC (flat ring or
            parameter server over one NIC).
        bucket_bytes: gradient bucket size; ``None`` all-reduces every layer
            on its own (the seed's model, which makes many-layer models
            latency-bound).
        overlap: fraction of the backward pass that all-reduce can hide.
        comm_scale: per-model multiplier on the catalogue's gradient bytes,
            ``{model: factor}`` (stored as sorted pairs so a fabric stays
            hashable). It is what a cluster's measurements say a model really
            moves per iteration: mixed precision, gradient compression and
            the framework's buckets differ from the fp32 parameter count.
            Fitted per cluster by ``ddl_gym.fidelity.calibrate``; models not listed
            move their catalogue bytes (factor 1).
        description: where the numbers come from.
    """

    name: str
    gpu_link: Link
    nic: Link
    uplink: Link
    oversubscription: float = 1.0
    algorithm: Algorithm = "hierarchical"
    bucket_bytes: float | None = 25e6
    overlap: float = 0.9
    comm_scale: tuple[tuple[str, float], ...] = ()
    description: str = ""
    gpu_link_sharing: float = 0.0
    nic_sharing: float = 0.0

    def __post_init__(self) -> None:
        scale = self.comm_scale
        pairs = scale.items() if isinstance(scale, dict) else scale
        try:
            pairs = tuple(sorted((str(m), float(f)) for m, f in pairs))
        except (TypeError, ValueError):
            raise ValueError(f"comm_scale must map model names to numbers, got {scale!r}") from None
        for model, factor in pairs:
            if not (factor > 0 and math.isfinite(factor)):
                raise ValueError(f"comm_scale[{model!r}] must be positive, got {factor}")
        if len({m for m, _ in pairs}) != len(pairs):
            raise ValueError(f"comm_scale names a model twice: {scale!r}")
        object.__setattr__(self, "comm_scale", pairs)
        if self.oversubscription < 1:
            raise ValueError(f"oversubscription must be >= 1, got {self.oversubscription}")
        if self.algorithm not in ("ring", "hierarchical", "shared"):
            raise ValueError(f"unknown all-reduce algorithm {self.algorithm!r}")
        if not 0 <= self.overlap <= 1:
            raise ValueError(f"overlap must be in [0, 1], got {self.overlap}")
        for attr in ("gpu_link_sharing", "nic_sharing"):
            if not 0 <= getattr(self, attr) <= 1:
                raise ValueError(f"{attr} must be in [0, 1], got {getattr(self, attr)}")
        if self.bucket_bytes is not None and self.bucket_bytes <= 0:
            raise ValueError(f"bucket_bytes must be positive, got {self.bucket_bytes}")

    def comm_scale_of(self, model: str) -> float:
        """Multiplier on ``model``'s gradient bytes on this fabric (default 1)."""
        for name, factor in self.comm_scale:
            if name == model:
                return factor
        return 1.0

    def to_dict(self) -> dict:
        data = asdict(self)
        data["comm_scale"] = dict(self.comm_scale)
        return data


def fabric_from_dict(data: dict) -> Fabric:
    """Inverse of ``Fabric.to_dict`` (e.g. a fitted preset read from JSON)."""
    data = dict(data)
    for key in ("gpu_link", "nic", "uplink"):
        data[key] = Link(**data[key])
    return Fabric(**data)


FABRICS: dict[str, Fabric] = {
    # The seed authors' simulator: 4 GPUs fully connected x 2 slots per server
    # (network_nvswitch_4g_2s.json: 4 links of 600 GB/s per GPU, 0 ns inside
    # the fully connected group and 500 ns between slots: 2400 GB/s and, over
    # the 14 steps of an 8-GPU ring, about 0.1 us a step), servers on a ring of
    # 200 GB/s 5 us links (two per server, 400 GB/s), racks on a switch of
    # 400 GB/s 50 us links; a cross-rack step goes up and down (100 us).
    # No bucketing; no contention in their model (non-blocking here).
    "seed": Fabric(
        name="seed",
        gpu_link=Link(2400 * GB, 0.1 * US),
        nic=Link(400 * GB, 5 * US),
        uplink=Link(400 * GB, 100 * US),
        oversubscription=1.0,
        algorithm="hierarchical",
        bucket_bytes=None,
        overlap=0.5,
        description="seed paper authors' parameters (arXiv 2401.16492 simulator)",
    ),
    # A modern training cluster: NVSwitch (NVLink 3, 300 GB/s per direction),
    # 4 x HDR InfiniBand per server (100 GB/s), 2:1 oversubscribed spine.
    "nvswitch_ib": Fabric(
        name="nvswitch_ib",
        gpu_link=Link(300 * GB, 2 * US),
        nic=Link(100 * GB, 5 * US),
        uplink=Link(100 * GB, 10 * US),
        oversubscription=2.0,
        algorithm="hierarchical",
        bucket_bytes=25e6,
        overlap=0.9,
        description="NVSwitch servers, 4x HDR InfiniBand, 2:1 spine",
    ),
    # A commodity cluster: PCIe 3.0 x16 between GPUs, one 25 GbE NIC per
    # server (TCP), 3:1 oversubscribed uplinks, flat NCCL ring.
    "pcie_25gbe": Fabric(
        name="pcie_25gbe",
        gpu_link=Link(12 * GB, 5 * US),
        nic=Link(25e9 / 8, 25 * US),
        uplink=Link(25e9 / 8, 50 * US),
        oversubscription=3.0,
        algorithm="ring",
        bucket_bytes=25e6,
        overlap=0.9,
        description="PCIe 3.0 servers, 25 GbE, 3:1 uplinks",
    ),
    # -- Current hardware, in the "shared" form (per-server shared links). Link
    # bandwidths are one direction, from vendor datasheets (cited per preset);
    # latencies, overlap, sharing exponents and spine oversubscription are
    # assumptions, stated as such. Expected 2-server slowdowns (4+4 GPUs over
    # one server of 8, catalogue models): ~1.0-1.3x for NVLink + InfiniBand,
    # as measured on such clusters; tests/test_perf.py checks each preset.
    #
    # HGX/DGX A100: NVIDIA A100 Tensor Core GPU datasheet (NVLink 3: 600 GB/s
    # per GPU, both directions -> 300 GB/s each way, through NVSwitch);
    # NVIDIA DGX A100 datasheet (8 x ConnectX-6 200 Gb/s HDR InfiniBand for
    # compute: 8 x 25 GB/s = 200 GB/s per server). Non-blocking fat tree.
    "a100_nvlink_ib": Fabric(
        name="a100_nvlink_ib",
        gpu_link=Link(300 * GB, 2 * US),
        nic=Link(200 * GB, 5 * US),
        uplink=Link(200 * GB, 10 * US),
        oversubscription=1.0,
        algorithm="shared",
        bucket_bytes=25e6,
        overlap=0.5,
        gpu_link_sharing=0.0,  # NVSwitch: every GPU its own full port
        nic_sharing=0.0,  # one HDR port per GPU (rail-optimised)
        description=(
            "A100 SXM4 + NVSwitch, 8x HDR InfiniBand (NVIDIA A100 datasheet: NVLink 600 GB/s; "
            "NVIDIA DGX A100 datasheet: 8x ConnectX-6 200 Gb/s)"
        ),
    ),
    # HGX/DGX H100: NVIDIA H100 Tensor Core GPU datasheet (NVLink 4: 900 GB/s
    # per GPU -> 450 GB/s each way); NVIDIA DGX H100 datasheet (8 x ConnectX-7
    # 400 Gb/s NDR InfiniBand: 8 x 50 GB/s = 400 GB/s per server).
    "h100_nvlink_ib": Fabric(
        name="h100_nvlink_ib",
        gpu_link=Link(450 * GB, 2 * US),
        nic=Link(400 * GB, 5 * US),
        uplink=Link(400 * GB, 10 * US),
        oversubscription=1.0,
        algorithm="shared",
        bucket_bytes=25e6,
        overlap=0.5,
        gpu_link_sharing=0.0,
        nic_sharing=0.0,
        description=(
            "H100 SXM5 + NVSwitch, 8x NDR InfiniBand (NVIDIA H100 datasheet: NVLink 900 GB/s; "
            "NVIDIA DGX H100 datasheet: 8x ConnectX-7 400 Gb/s)"
        ),
    ),
    # V100 SXM2 servers: NVIDIA Tesla V100 datasheet (NVLink 2: 300 GB/s per
    # GPU -> 150 GB/s each way, hybrid cube-mesh as in DGX-1), one 100 GbE NIC
    # per server (12.5 GB/s; e.g. NVIDIA ConnectX-5 100GbE product brief),
    # 2:1 spine assumed.
    "v100_nvlink_100gbe": Fabric(
        name="v100_nvlink_100gbe",
        gpu_link=Link(150 * GB, 2 * US),
        nic=Link(100e9 / 8, 10 * US),
        uplink=Link(100e9 / 8, 20 * US),
        oversubscription=2.0,
        algorithm="shared",
        bucket_bytes=25e6,
        overlap=0.5,
        gpu_link_sharing=0.0,
        nic_sharing=0.0,  # NCCL reduces inside the server before the NIC
        description=(
            "V100 SXM2 NVLink, one 100 GbE NIC (NVIDIA V100 datasheet: NVLink 300 GB/s; "
            "ConnectX-5 100GbE)"
        ),
    ),
    # Consumer cards (GeForce RTX 3090/4090 class) on PCIe 4.0 x16: 16 GT/s per
    # lane, ~32 GB/s each way (PCI-SIG PCI Express Base Specification 4.0);
    # GeForce RTX 4090 has no NVLink (NVIDIA Ada Lovelace architecture
    # whitepaper), so GPU-to-GPU traffic shares the host's PCIe root
    # (gpu_link_sharing 1); one 25 GbE NIC per server (3.125 GB/s), 3:1 spine.
    "pcie_consumer_25gbe": Fabric(
        name="pcie_consumer_25gbe",
        gpu_link=Link(32 * GB, 5 * US),
        nic=Link(25e9 / 8, 25 * US),
        uplink=Link(25e9 / 8, 50 * US),
        oversubscription=3.0,
        algorithm="shared",
        bucket_bytes=25e6,
        overlap=0.5,
        gpu_link_sharing=1.0,
        nic_sharing=0.0,
        description=(
            "GeForce-class PCIe 4.0 x16 cards without NVLink, one 25 GbE NIC "
            "(PCI-SIG PCIe 4.0 base spec; NVIDIA Ada architecture whitepaper)"
        ),
    ),
}


# Saved presets (e.g. fitted by ``ddl_gym.fidelity.calibrate``) ship as JSON here.
SAVED_FABRICS_DIR = Path(__file__).parent / "fabrics"


def saved_fabric_names() -> list[str]:
    return sorted(p.stem for p in SAVED_FABRICS_DIR.glob("*.json"))


def load_fabric(path: str | Path) -> Fabric:
    """Read a fabric saved with ``save_fabric`` (or written by hand)."""
    path = Path(path)
    try:
        data = json.loads(path.read_text())
        return fabric_from_dict(data)
    except (OSError, json.JSONDecodeError, TypeError, KeyError, ValueError) as err:
        raise ValueError(f"{path}: not a valid fabric file: {err}") from err


def save_fabric(fabric: Fabric, path: str | Path) -> Path:
    path = Path(path)
    path.write_text(json.dumps(fabric.to_dict(), indent=2) + "\n")
    return path


def get_fabric(fabric: str | Path | Fabric) -> Fabric:
    """A fabric by preset name, saved-preset name (``ddl_gym/fabrics/*.json``),
    user-preset name (``ddl-gym calibrate --table``, in the user data dir:
    ``ddl_gym.userdata``) or path to a JSON file."""
    from ddl_gym import userdata  # light; keeps platformdirs off the import path

    if isinstance(fabric, Fabric):
        return fabric
    name = str(fabric)
    if name in FABRICS:
        return FABRICS[name]
    saved = SAVED_FABRICS_DIR / f"{name}.json"
    if saved.is_file():
        return load_fabric(saved)
    if name.endswith(".json") and Path(name).is_file():
        return load_fabric(name)
    user = userdata.fabrics_dir() / f"{name}.json"
    if "/" not in name and user.is_file():
        return load_fabric(user)
    known = ", ".join(list(FABRICS) + saved_fabric_names() + userdata.user_fabric_names())
    raise ValueError(f"unknown fabric {name!r}; known fabrics: {known} (or a .json path)")


@dataclass(frozen=True)
class Congestion:
    """Background traffic on rack uplinks, as a fraction of their capacity.

    ``schedule`` makes it time-varying: ``((t0, f0), (t1, f1), ...)`` with
    ``t0 == 0``; fraction ``f_i`` holds from ``t_i`` until ``t_{i+1}``, and the
    schedule repeats with ``period`` seconds if given. Background traffic
    takes its share of uplink bandwidth and, as queueing at the switches,
    inflates the latency of cross-rack steps by ``1 / (1 - fraction)``.
    """

    name: str
    background: float = 0.0
    schedule: tuple[tuple[float, float], ...] | None = None
    period: float | None = None

    MAX_BACKGROUND = 0.95

    def __post_init__(self) -> None:
        fractions = [self.background] + [f for _, f in self.schedule or ()]
        for f in fractions:
            if not 0 <= f <= self.MAX_BACKGROUND:
                raise ValueError(
                    f"congestion {self.name!r}: background fraction {f} not in "
                    f"[0, {self.MAX_BACKGROUND}]"
                )
        if self.schedule is not None:
            times = [t for t, _ in self.schedule]
            if not all(math.isfinite(t) for t in times) or (
                self.period is not None and not math.isfinite(self.period)
            ):
                raise ValueError(f"congestion {self.name!r}: schedule times must be finite")
            if not times or times[0] != 0 or times != sorted(set(times)):
                raise ValueError(
                    f"congestion {self.name!r}: schedule times must start at 0 and increase"
                )
            if self.period is not None and self.period <= times[-1]:
                raise ValueError(f"congestion {self.name!r}: period must exceed the last time")

    @property
    def time_varying(self) -> bool:
        # A schedule whose fractions are all equal is constant: no change
        # events (each would be an instant that changes nothing).
        return self.schedule is not None and len({f for _, f in self.schedule}) > 1

    def _cycle(self, t: float) -> int:
        """Index of the period holding ``t``: the largest ``k`` with ``k * period <= t``.

        ``t // period`` alone can be off by one when the period is not exact
        in binary floating point (100.1 s), so the guess is corrected with the
        very products ``k * period`` that :meth:`at` and :meth:`next_change`
        compare against (never ``base + period``, which rounds differently).
        """
        if self.period is None:
            return 0
        k = math.floor(t / self.period)
        while k * self.period > t:
            k -= 1
        while (k + 1) * self.period <= t:
            k += 1
        return k

    def at(self, t: float) -> float:
        """Background fraction at time ``t``."""
        if self.schedule is None:
            return self.background
        base = self._cycle(t) * (self.period or 0.0)
        value = self.schedule[0][1]
        for start, fraction in self.schedule:
            if base + start > t:
                break
            value = fraction
        return value

    def next_change(self, t: float) -> float | None:
        """First time strictly after ``t`` at which the fraction may change.

        Always ``> t`` (or None), so an event loop that re-queues the change it
        handles always moves forward.
        """
        if not self.time_varying:
            return None
        k = self._cycle(t)
        base = k * (self.period or 0.0)
        for start, _ in self.schedule or ():
            if base + start > t:
                return base + start
        if self.period is None:
            return None
        return (k + 1) * self.period  # > t by construction of _cycle


def _diurnal() -> Congestion:
    # Light at night, heavy in working hours: hourly steps over a day.
    hours = [0.2] * 8 + [0.5, 0.7, 0.8, 0.8, 0.7, 0.8, 0.8, 0.8, 0.7, 0.6, 0.5] + [0.3] * 5
    return Congestion(
        name="diurnal",
        schedule=tuple((3600.0 * h, f) for h, f in enumerate(hours)),
        period=86400.0,
    )


CONGESTION: dict[str, Congestion] = {
    "none": Congestion("none", 0.0),
    "moderate": Congestion("moderate", 0.5),
    "heavy": Congestion("heavy", 0.8),
    "diurnal": _diurnal(),
}


def get_congestion(congestion: str | float | Congestion) -> Congestion:
    if isinstance(congestion, Congestion):
        return congestion
    if isinstance(congestion, (int, float)):
        return Congestion(f"background={congestion:g}", float(congestion))
    try:
        return CONGESTION[congestion]
    except KeyError:
        raise ValueError(
            f"unknown congestion level {congestion!r}; known: {', '.join(CONGESTION)}"
        ) from None


# Median, over the 100 jobs of Alibaba PAI's ``coefficient_variation.csv``
# (cluster-trace-gpu-v2020, mini-batch-time; 10 workers per job), of each
# job's median coefficient of variation of mini-batch time across workers.
ALIBABA_PAI_STRAGGLER_SIGMA = 0.087


@dataclass(frozen=True)
class Stragglers:
    """Per-GPU speed variability: a synchronous gang runs at its slowest member.

    Every GPU's compute time is the trace's (a typical GPU's) times a
    lognormal factor ``exp(sigma * z)``, median 1. A job's gang draws one
    factor per GPU when it starts and computes at the largest, so wide jobs
    lose more (``sigma`` 0.087, Alibaba PAI's: the slowest of 8 is ~13 %
    slower than the median GPU, of 32 ~18 %). Draws are seeded by ``seed``,
    the job and how often it has started, so a run is reproducible and one
    job's draw does not depend on the others'. ``sigma = 0`` (the default
    everywhere, and the seed-faithful mode) turns it off.
    """

    sigma: float = 0.0
    seed: int = 0

    def __post_init__(self) -> None:
        if not (self.sigma >= 0 and math.isfinite(self.sigma)):
            raise ValueError(f"straggler sigma must be >= 0, got {self.sigma}")

    @property
    def enabled(self) -> bool:
        return self.sigma > 0

    def gang_factor(self, gpus: int, job: int, start: int) -> float:
        """Compute-time multiplier of a gang of ``gpus`` GPUs (1 if off)."""
        if not self.enabled:
            return 1.0
        import numpy as np  # the engine's hot path never gets here when off

        z = np.random.default_rng([self.seed, job, start]).standard_normal(gpus)
        return float(math.exp(self.sigma * z.max()))


@dataclass(frozen=True)
class GpuKind:
    """One GPU type of a typed cluster (see :class:`Cluster`).

    Attributes:
        name: a type of the catalogue (:mod:`ddl_gym.gpu_types`; openb and
            Gavel spellings are accepted and stored as the catalogue's).
        gpu_link: its servers' intra-server link (None: the fabric's
            ``gpu_link``).
        speed: training throughput relative to a V100, assumed for a type the
            catalogue has no numbers for (openb's undisclosed G2 and G3); a
            labelled assumption, used only where nothing is measured or in a
            datasheet. None: the catalogue's and the measured tables' speeds.
    """

    name: str
    gpu_link: Link | None = None
    speed: float | None = None

    def __post_init__(self) -> None:
        from ddl_gym.gpu_types import get_gpu_type  # (data only: no import cycle)

        try:
            object.__setattr__(self, "name", get_gpu_type(self.name).name)
        except KeyError as e:
            raise ValueError(str(e.args[0])) from None
        if self.speed is not None and not (self.speed > 0 and math.isfinite(self.speed)):
            raise ValueError(f"GPU type {self.name}: speed must be positive, got {self.speed}")


@dataclass(frozen=True)
class Cluster:
    """Racks x servers x GPUs on a fabric, of one GPU type or several.

    An untyped cluster (``gpu_kinds`` empty, the default) has one unnamed GPU
    type: jobs run at their trace's iteration time (V100-referenced in the
    catalogue) and every server holds ``gpus_per_server`` GPUs.

    A typed cluster names its GPU types in ``gpu_kinds`` and the type of each
    server (rack-major: server ``s`` is in rack ``s // servers_per_rack``) in
    ``server_kind`` (indices into ``gpu_kinds``); racks may be uniform or
    mixed. ``server_gpus`` (optional, typed or not) gives each server's GPU
    count when they differ (each at most ``gpus_per_server``, the largest). A
    job runs on one type unless ``mix_types`` is set; a mixed placement then
    runs at its slowest member's speed over the slowest member's GPU link.
    """

    racks: int
    servers_per_rack: int
    gpus_per_server: int
    fabric: Fabric = field(default_factory=lambda: FABRICS["seed"])
    stragglers: Stragglers = Stragglers()
    gpu_kinds: tuple[GpuKind, ...] = ()
    server_kind: tuple[int, ...] = ()
    server_gpus: tuple[int, ...] = ()
    mix_types: bool = False
    description: str = ""

    def __post_init__(self) -> None:
        for name in ("racks", "servers_per_rack", "gpus_per_server"):
            value = getattr(self, name)
            if not isinstance(value, int) or value < 1:
                raise ValueError(f"cluster {name} must be a positive integer, got {value!r}")
        object.__setattr__(self, "fabric", get_fabric(self.fabric))
        n = self.racks * self.servers_per_rack
        kinds = tuple(k if isinstance(k, GpuKind) else GpuKind(k) for k in self.gpu_kinds)
        object.__setattr__(self, "gpu_kinds", kinds)
        object.__setattr__(self, "server_kind", tuple(self.server_kind))
        object.__setattr__(self, "server_gpus", tuple(self.server_gpus))
        if len({k.name for k in kinds}) != len(kinds):
            raise ValueError(f"cluster gpu_kinds names a type twice: {[k.name for k in kinds]}")
        if kinds:
            if len(self.server_kind) != n:
                raise ValueError(
                    f"cluster server_kind must give each of the {n} servers a type, "
                    f"got {len(self.server_kind)} entries"
                )
            for s, k in enumerate(self.server_kind):
                if not (isinstance(k, int) and 0 <= k < len(kinds)):
                    raise ValueError(
                        f"cluster server_kind[{s}] must index gpu_kinds (0..{len(kinds) - 1}), "
                        f"got {k!r}"
                    )
        elif self.server_kind:
            raise ValueError("cluster server_kind given without gpu_kinds")
        elif self.mix_types:
            raise ValueError("cluster mix_types set on an untyped cluster (no gpu_kinds)")
        if self.server_gpus:
            if len(self.server_gpus) != n:
                raise ValueError(
                    f"cluster server_gpus must give each of the {n} servers a GPU count, "
                    f"got {len(self.server_gpus)} entries"
                )
            for s, g in enumerate(self.server_gpus):
                if not (isinstance(g, int) and 0 <= g <= self.gpus_per_server):
                    raise ValueError(
                        f"cluster server_gpus[{s}] must be an integer in "
                        f"0..{self.gpus_per_server}, got {g!r}"
                    )
            if not any(self.server_gpus):
                raise ValueError("cluster server_gpus holds no GPU")

    @property
    def typed(self) -> bool:
        """Whether the cluster names GPU types (``gpu_kinds``)."""
        return bool(self.gpu_kinds)

    @property
    def type_names(self) -> tuple[str, ...]:
        """The GPU types' catalogue names, in ``gpu_kinds`` order."""
        return tuple(k.name for k in self.gpu_kinds)

    @property
    def num_servers(self) -> int:
        return self.racks * self.servers_per_rack

    def capacities(self) -> list[int]:
        """GPUs of each server."""
        if self.server_gpus:
            return list(self.server_gpus)
        return [self.gpus_per_server] * self.num_servers

    def rack_capacities(self) -> list[int]:
        """GPUs of each rack."""
        if not self.server_gpus:
            return [self.gpus_per_rack] * self.racks
        S = self.servers_per_rack
        return [sum(self.server_gpus[r * S : (r + 1) * S]) for r in range(self.racks)]

    def type_capacities(self) -> list[int]:
        """GPUs of each type, in ``gpu_kinds`` order ([num_gpus] untyped)."""
        if not self.gpu_kinds:
            return [self.num_gpus]
        out = [0] * len(self.gpu_kinds)
        for k, g in zip(self.server_kind, self.capacities(), strict=True):
            out[k] += g
        return out

    @property
    def num_gpus(self) -> int:
        if self.server_gpus:
            return sum(self.server_gpus)
        return self.num_servers * self.gpus_per_server

    @property
    def gpus_per_rack(self) -> int:
        """GPUs a full rack holds (the largest rack's when servers differ)."""
        if self.server_gpus:
            return max(self.rack_capacities())
        return self.servers_per_rack * self.gpus_per_server

    @property
    def uplink_capacity(self) -> float:
        """Bytes/s a rack uplink carries (before background traffic)."""
        f = self.fabric
        return self.servers_per_rack * f.nic.bandwidth / f.oversubscription

    def rack_of(self, server: int) -> int:
        return server // self.servers_per_rack

    def with_fabric(self, fabric: str | Fabric) -> Cluster:
        return replace(self, fabric=get_fabric(fabric))

    def describe(self) -> str:
        per_server = (
            f"up to {self.gpus_per_server}" if self.server_gpus else str(self.gpus_per_server)
        )
        text = (
            f"{self.racks} racks x {self.servers_per_rack} servers x "
            f"{per_server} GPUs = {self.num_gpus} GPUs, fabric {self.fabric.name}"
        )
        if self.gpu_kinds:
            counts = ", ".join(
                f"{g} {name}"
                for name, g in zip(self.type_names, self.type_capacities(), strict=True)
            )
            text += f"; GPU types: {counts}" + (
                "; mixed placements allowed" if self.mix_types else ""
            )
        return text


CLUSTERS: dict[str, Cluster] = {
    # The seed's traces ask for up to 56 GPUs: 64 GPUs in 4 racks of two
    # 8-GPU servers (4 GPUs x 2 slots, as the authors' servers).
    "seed64": Cluster(4, 2, 8, FABRICS["seed"]),
    "nvswitch512": Cluster(8, 8, 8, FABRICS["nvswitch_ib"]),
    "pcie512": Cluster(8, 8, 8, FABRICS["pcie_25gbe"]),
    "seed512": Cluster(8, 8, 8, FABRICS["seed"]),
}


_CLUSTER_SHAPE = re.compile(r"^(\d+)x(\d+)x(\d+)$")


def get_cluster(cluster: str | Cluster, fabric: str | Fabric | None = None) -> Cluster:
    """A ``Cluster``, a preset name, a typed preset's name
    (:data:`ddl_gym.typed_clusters.TYPED_CLUSTER_NAMES`: ``gavel-kpv``,
    ``v100-a100-h100``, ``openb`` read from the data dir), an LLM cluster's
    (``ddl_gym.llm.clusters.LLM_CLUSTERS``, e.g. ``dgx_a100_1024``), or ``"RxSxG"``
    (racks x servers per rack x GPUs per server, fabric ``seed`` unless
    ``fabric`` says otherwise); ``fabric`` overrides the cluster's fabric."""
    if isinstance(cluster, str):
        shape = _CLUSTER_SHAPE.match(cluster)
        if shape:
            return Cluster(*(int(x) for x in shape.groups()), fabric=get_fabric(fabric or "seed"))
        if cluster in CLUSTERS:
            cluster = CLUSTERS[cluster]
        else:
            # typed presets live apart (they read the GPU catalogue and, for
            # openb, the data dir): imported on use, no import cycle
            from ddl_gym.llm.clusters import LLM_CLUSTERS
            from ddl_gym.typed_clusters import TYPED_CLUSTER_NAMES, get_typed_cluster

            if cluster in LLM_CLUSTERS:  # today's DGX leaf-spine clusters (docs/llm.md)
                cluster = LLM_CLUSTERS[cluster]
            elif cluster in TYPED_CLUSTER_NAMES:
                cluster = get_typed_cluster(cluster)
            else:
                known = ", ".join((*CLUSTERS, *TYPED_CLUSTER_NAMES, *LLM_CLUSTERS))
                raise ValueError(f"unknown cluster {cluster!r}; known clusters: {known}")
    if fabric is not None:
        cluster = cluster.with_fabric(fabric)
    return cluster
