"""A transfer prior for hardware no table measured, chosen from its
description, that knows what it does not know.

A description (``"8x A100 SXM4, NVSwitch, 8x HDR InfiniBand"``) is read into
an interconnect class per level, or refused (:func:`describe`, in
:mod:`ddl_gym.fidelity.describe`). Each class has a datasheet bandwidth
(:data:`~ddl_gym.fidelity.links.INTRA`, :data:`~ddl_gym.fidelity.links.NETWORK`).

:func:`class_prior` turns that into a fabric whose link bandwidths are
estimates with an uncertainty (:class:`Estimate`: a median and the sd of its
log):

* a stated class whose *family* some fitted table measured: its datasheet
  bandwidth times the family's efficiency (fitted over datasheet bandwidth,
  median in log over the tables of that family), uncertain by the family's
  leave-one-cluster-out spread (how far each table's efficiency sits from
  the others'), or by the spread within the other families where one table
  measured it;
* a stated class no table measured (A100/H100 NVLink, NVSwitch, InfiniBand,
  RoCE and EFA on the bundled tables): its datasheet bandwidth times the
  *default efficiency*, the median over the measured families (each family
  once), uncertain by the spread between families; never one table of
  another family (a V100 table's NVLink no longer sets an A100's);
* a level the description does not state: the pooled fitted link, uncertain
  by the fits' leave-one-cluster-out spread.

Where the uncertainty is large the prediction shrinks toward no exposed
communication (:func:`shrunk`): a bandwidth known up to a log-normal factor
of sd ``sigma`` is used at ``median * exp(sigma**2)``, the value that
minimises the expected relative error of a communication-bound iteration
time (the error ``|predicted / measured - 1|`` weighs an over-predicted cost
more than an under-predicted one, and any prediction between 1 and the
measured ratio beats predicting 1). With no evidence the prior tends to
"predict 1"; with a precise estimate it is the estimate.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, replace

import numpy as np
import pandas as pd

from ddl_gym.fidelity.describe import Hardware, UnreadableHardware, read_hardware
from ddl_gym.fidelity.links import INTRA, NETWORK, LinkClass
from ddl_gym.topology import FABRICS, GB, US, Fabric, Link

__all__ = [
    "INTRA",
    "NETWORK",
    "Estimate",
    "Hardware",
    "LinkClass",
    "Prior",
    "UnreadableHardware",
    "class_prior",
    "describe",
    "efficiencies",
    "hardware_prior",
    "nearest_preset",
    "preset_for",
]

# Efficiency and its uncertainty where no fitted table measured any link
# (``preset_for`` without evidence, a test with no fits): a quarter of the
# datasheet, uncertain by a factor e either way. The bundled tables' links
# reached 0.07-0.52 of theirs (docs/calibration.md), median about 0.2.
DEFAULT_EFFICIENCY = 0.25
DEFAULT_SIGMA = 1.0


def describe(text: str) -> Hardware:
    """Read a free-text hardware description into interconnect classes;
    raises :class:`UnreadableHardware` (a ``ValueError``) on words or
    statements it cannot read. ``""`` states nothing (``Hardware.known`` False)."""
    return read_hardware(text)


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
    intra-server link is NVLink or NVSwitch, else by PCIe generation."""
    intra = hw.intra or ""
    if intra in ("nvlink4", "nvswitch4"):
        return "h100_nvlink_ib"
    if intra in ("nvlink3", "nvswitch3"):
        return "a100_nvlink_ib"
    if intra.startswith("nv"):
        return "v100_nvlink_100gbe"
    if intra in ("pcie4", "pcie5"):
        return "pcie_consumer_25gbe"
    return "pcie_25gbe"


@dataclass(frozen=True)
class Estimate:
    """A positive quantity known up to a log-normal factor: ``value`` the
    median, ``sigma`` the sd of its log, ``source`` where both come from."""

    value: float
    sigma: float
    source: str


def shrunk(value: float, sigma: float) -> float:
    """The one bandwidth a fabric uses for one known up to ``sigma`` (sd of
    its log): ``value * exp(sigma**2 / 2)``. The per-row optimum
    (:func:`bayes_ratio`) is ``exp(lambda * sigma**2)`` of the median with
    lambda from about 0.1 for a row that hardly communicates to 1 for one
    that only communicates; 1/2 is that of a job whose exposed
    communication is about its compute."""
    return value * math.exp(sigma * sigma / 2.0)


def _log_median(values: list[float]) -> float:
    return math.exp(float(np.median(np.log(values))))


def loco_spread(values: list[float]) -> float | None:
    """How far one value sits from the others' median, in log: the root
    mean square over ``values`` of ``log v_i - median_{j != i} log v_j``
    (None below two values)."""
    if len(values) < 2:
        return None
    logs = np.log(np.asarray(values, dtype=float))
    dev = [logs[i] - float(np.median(np.delete(logs, i))) for i in range(len(logs))]
    return float(np.sqrt(np.mean(np.square(dev))))


@dataclass(frozen=True)
class Efficiencies:
    """Achieved over datasheet bandwidth of the fitted tables, per level
    (``intra`` or ``network``) and family: ``by[(level, family)]`` holds
    ``(cluster, efficiency)`` of each fitted table of that family."""

    by: dict[tuple[str, str], list[tuple[str, float]]]

    def families(self) -> dict[tuple[str, str], float]:
        """Each measured family's efficiency (median in log over its tables)."""
        return {k: _log_median([e for _, e in v]) for k, v in self.by.items() if v}

    def within(self) -> float | None:
        """The spread of one table's efficiency around its family's others,
        pooled (root mean square) over the families two or more tables measured."""
        spreads = [loco_spread([e for _, e in v]) for v in self.by.values()]
        ok = [s for s in spreads if s is not None]
        return float(np.sqrt(np.mean(np.square(ok)))) if ok else None

    def default(self) -> Estimate:
        """The efficiency of a family no table measured: the median over
        the measured families (each once, whatever the level: how far
        training falls short of a datasheet whatever the link), uncertain
        by the spread between families."""
        fam = self.families()
        if not fam:
            return Estimate(DEFAULT_EFFICIENCY, DEFAULT_SIGMA, "default (no measured link)")
        spread = loco_spread(list(fam.values()))
        sigma = DEFAULT_SIGMA if spread is None else spread
        names = ", ".join(f"{f} {e:.2f}" for (_, f), e in sorted(fam.items()))
        return Estimate(_log_median(list(fam.values())), sigma, f"default: median of {names}")

    def of(self, level: str, family: str) -> Estimate:
        """The efficiency of ``family`` at ``level``: measured where a table
        of that family was fitted, else :meth:`default`."""
        got = self.by.get((level, family), [])
        if not got:
            return self.default()
        values = [e for _, e in got]
        spread = loco_spread(values)
        if spread is None:
            spread = self.within()
        if spread is None:
            spread = self.default().sigma
        who = ", ".join(c for c, _ in got)
        return Estimate(_log_median(values), spread, f"{family} measured on {who}")


def efficiencies(fits: dict[str, Fabric], hardware: dict[str, Hardware]) -> Efficiencies:
    """Fitted over datasheet bandwidth per level and family, of every fitted
    cluster whose class at that level is known: stated, or the only server
    form of its GPU (K80, T4), not guessed between two (a P100 or V100 named
    alone: :attr:`Hardware.intra_alternative`), nor a system's usual network."""
    by: dict[tuple[str, str], list[tuple[str, float]]] = {}
    for cluster, fabric in sorted(fits.items()):
        hw = hardware.get(cluster)
        if hw is None:
            continue
        # A link guessed from a GPU sold in two forms measures neither family.
        if hw.intra is not None and hw.intra_alternative is None:
            ds = INTRA[hw.intra]
            eff = fabric.gpu_link.bandwidth / (hw.intra_bandwidth or ds.bandwidth)
            by.setdefault(("intra", ds.family), []).append((cluster, eff))
        if hw.network is not None and hw.network_stated:  # not a system's usual ports
            ds = NETWORK[hw.network]
            eff = fabric.nic.bandwidth / (ds.bandwidth * hw.ports)
            by.setdefault(("network", ds.family), []).append((cluster, eff))
    return Efficiencies(by)


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


# Quantile nodes of a standard normal: the quadrature over each uncertain
# log-bandwidth (equal weights; 15 x 15 joint nodes for GPU link x NIC).
_NODES = 15


def _quantile_nodes(k: int = _NODES) -> np.ndarray:
    from scipy.stats import norm

    return norm.ppf((np.arange(k) + 0.5) / k)


def bayes_ratio(samples: np.ndarray, weights: np.ndarray) -> np.ndarray:
    """Per column of ``samples`` (draws x rows of a ratio, each draw with
    probability ``weights``), the prediction that minimises the expected
    error ``|predicted / measured - 1|``: the median of the draws weighted
    by probability / ratio. It never has a larger expected error than
    predicting 1 (which is one of the candidates it beats), and tends to 1
    as the draws spread."""
    w = weights[:, None] / samples
    order = np.argsort(samples, axis=0)
    ws = np.take_along_axis(w, order, axis=0)
    cdf = np.cumsum(ws, axis=0) / ws.sum(axis=0, keepdims=True)
    first = np.argmax(cdf >= 0.5, axis=0)
    return np.take_along_axis(samples, order, axis=0)[first, np.arange(samples.shape[1])]


@dataclass(frozen=True)
class Prior:
    """A fabric whose GPU link and NIC bandwidths are uncertain.

    ``central`` holds the median of each; ``gpu_sigma`` and ``nic_sigma``
    the sd of their logs (independent). :meth:`predict` gives each row the
    ratio that minimises its expected error under that uncertainty
    (:func:`bayes_ratio`): close to ``central``'s where the bandwidths are
    well known or the row hardly communicates, shrunk toward 1 (no exposed
    communication) where they are not. :meth:`fabric` is one fabric for the
    simulator: each bandwidth at ``median * exp(sigma^2 / 2)`` (:func:`shrunk`).
    """

    central: Fabric
    gpu_sigma: float
    nic_sigma: float

    def predict(self, rows: pd.DataFrame) -> np.ndarray:
        """Predicted ratio of every row of ``rows`` (``measured.COLUMNS``)."""
        from ddl_gym.fidelity.calibrate import RatioPredictor

        predict = RatioPredictor(rows)
        z = _quantile_nodes()
        zg = z if self.gpu_sigma > 0 else np.zeros(1)
        zn = z if self.nic_sigma > 0 else np.zeros(1)
        gpu, nic = self.central.gpu_link, self.central.nic
        samples = []
        for a in zg:
            g = Link(gpu.bandwidth * math.exp(self.gpu_sigma * a), gpu.latency)
            for b in zn:
                n = Link(nic.bandwidth * math.exp(self.nic_sigma * b), nic.latency)
                samples.append(predict(replace(self.central, gpu_link=g, nic=n, uplink=n)))
        draws = np.asarray(samples)
        return bayes_ratio(draws, np.full(len(draws), 1.0 / len(draws)))

    def fabric(self) -> Fabric:
        gpu, nic = self.central.gpu_link, self.central.nic
        gpu = Link(shrunk(gpu.bandwidth, self.gpu_sigma), gpu.latency)
        nic = Link(shrunk(nic.bandwidth, self.nic_sigma), nic.latency)
        note = (
            f"; bandwidths at median x exp(sigma^2 / 2): GPU link sigma {self.gpu_sigma:.2f}, "
            f"NIC {self.nic_sigma:.2f}"
        )
        return replace(
            self.central,
            gpu_link=gpu,
            nic=nic,
            uplink=nic,
            description=self.central.description + note,
        )


def pooled_spread(fits: dict[str, Fabric], link: str) -> float:
    """The leave-one-cluster-out spread of the fitted bandwidths of ``link``
    (``gpu_link`` or ``nic``), for a level the description does not state."""
    spread = loco_spread([getattr(f, link).bandwidth for f in fits.values()])
    return DEFAULT_SIGMA if spread is None else spread


def class_prior(
    hw: Hardware,
    pooled: Fabric,
    fits: dict[str, Fabric],
    hardware: dict[str, Hardware],
    unknown: Fabric | None = None,
) -> Prior:
    """The prior of hardware ``hw`` with its uncertainty.

    ``pooled`` is ``calibrate.transfer_prior`` of the measured fits (pooled
    links, overlap, sharing and model cards, in the ``shared`` form);
    ``fits`` those fits' fabrics by cluster and ``hardware`` their
    descriptions. A stated level gets its class's datasheet bandwidth times
    :meth:`Efficiencies.of` (its family's measured efficiency, else the
    default) and the median latency of the fits of its family (datasheet
    where none: a fitted latency carries its family's framework costs); a
    PCIe server's sharing exponent is the median of the PCIe fits' (NVLink
    and NVSwitch: a link per GPU, none); a dual-GPU board's GPUs split their
    slot (:attr:`Hardware.intra_bandwidth`). A level it does not state keeps
    ``pooled``'s link, uncertain by the fits' spread. A description that
    states nothing gets ``unknown``'s links (default ``pooled``'s), with the
    fits' spread.
    """
    gpu_sigma = pooled_spread(fits, "gpu_link") if fits else DEFAULT_SIGMA
    nic_sigma = pooled_spread(fits, "nic") if fits else DEFAULT_SIGMA
    if not hw.known:
        base = unknown or pooled
        central = replace(
            pooled,
            gpu_link=base.gpu_link,
            nic=base.nic,
            uplink=base.uplink,
            gpu_link_sharing=base.gpu_link_sharing,
            nic_sharing=base.nic_sharing,
            description=f"unknown hardware: {base.name}'s links, pooled model cards",
        )
        return Prior(central, gpu_sigma, nic_sigma)
    eff = efficiencies(fits, hardware)
    out = pooled
    notes = []
    if hw.intra is not None:
        ds = INTRA[hw.intra]
        e = eff.of("intra", ds.family)
        latency = _family_median("intra", ds.family, fits, hardware, lambda f: f.gpu_link.latency)
        sharing = _family_median("intra", ds.family, fits, hardware, lambda f: f.gpu_link_sharing)
        if latency is None:
            latency = ds.latency
        if ds.family != "pcie":
            sharing = ds.sharing
        elif sharing is None:
            sharing = pooled.gpu_link_sharing
        bandwidth = hw.intra_bandwidth or ds.bandwidth
        out = replace(out, gpu_link=Link(bandwidth * e.value, latency), gpu_link_sharing=sharing)
        gpu_sigma = e.sigma
        alt = hw.intra_alternative
        if alt is not None:
            # The GPU's other server form is as likely as not: half the log
            # distance between the two forms' datasheets, added in quadrature.
            form = abs(math.log(INTRA[alt].bandwidth / ds.bandwidth)) / 2.0
            gpu_sigma = math.hypot(gpu_sigma, form)
        share = f" / {ds.bandwidth / bandwidth:.0f} GPUs" if bandwidth < ds.bandwidth else ""
        notes.append(f"{ds.name}{share} x {e.value:.2f} (sigma {e.sigma:.2f}; {e.source})")
    if hw.network is not None:
        ds = NETWORK[hw.network]
        e = eff.of("network", ds.family)
        latency = _family_median("network", ds.family, fits, hardware, lambda f: f.nic.latency)
        if latency is None:
            latency = ds.latency
        nic = Link(ds.bandwidth * hw.ports * e.value, latency)
        out = replace(out, nic=nic, uplink=nic)
        nic_sigma = e.sigma
        notes.append(f"{hw.ports} x {ds.name} x {e.value:.2f} (sigma {e.sigma:.2f}; {e.source})")
    description = "datasheet x measured efficiency: " + ", ".join(notes)
    return Prior(replace(out, description=description), gpu_sigma, nic_sigma)


def hardware_prior(
    hw: Hardware,
    pooled: Fabric,
    fits: dict[str, Fabric],
    hardware: dict[str, Hardware],
    unknown: Fabric | None = None,
) -> Fabric:
    """The fabric predictions of hardware ``hw`` use: :func:`class_prior`'s,
    each bandwidth shrunk by its uncertainty (:meth:`Prior.fabric`)."""
    return class_prior(hw, pooled, fits, hardware, unknown).fabric()


def hardware_of(descriptions: dict[str, str]) -> dict[str, Hardware]:
    """:func:`describe` of every cluster's description."""
    return {c: describe(text) for c, text in descriptions.items()}


def preset_for(hw: Hardware) -> Fabric:
    """The prior's fabric for ``hw`` from the bundled tables' fits
    (:mod:`ddl_gym.fidelity.evidence`): what ``ddl-gym calibrate --hardware``
    saves. Named after the hardware's nearest datasheet preset."""
    from ddl_gym.fidelity.calibrate import UNKNOWN_HARDWARE_FABRIC, transfer_prior
    from ddl_gym.fidelity.evidence import evidence_fits  # light, no data needed
    from ddl_gym.fidelity.measured import STATED_HARDWARE

    fits = evidence_fits()
    pooled = transfer_prior(fits)
    hardware = hardware_of({c: STATED_HARDWARE.get(c, "") for c in fits})
    fabrics = {c: f.fabric for c, f in fits.items()}
    fabric = hardware_prior(hw, pooled, fabrics, hardware, FABRICS[UNKNOWN_HARDWARE_FABRIC])
    return replace(fabric, name=f"prior_{nearest_preset(hw)}")


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
