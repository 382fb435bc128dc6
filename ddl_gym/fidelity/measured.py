"""Readers for measured placement tables: the ground truth of the network model.

Each reader turns one published table into a tidy DataFrame with one row per
measured (model, batch, placement) point and the columns of ``COLUMNS``:

* ``source``: ``"gavel"``, ``"pollux"`` or ``"chronus"``.
* ``cluster``: the hardware the point was measured on (``"gavel_v100"``,
  ``"pollux_t4"``, ...). Points of one cluster share one fabric, so fits are
  per cluster.
* ``model``: canonical catalogue name (``ddl_gym.profiles.MODEL_NAMES``);
  ``job``: the table's own label (e.g. ``"ResNet-50 (batch size 64)"``).
* ``local_bsz``: per-GPU batch size (NaN where the table does not say).
* ``gpus``, ``placement`` (GPUs per node, e.g. ``(2, 2)``, largest first) and
  the derived :class:`~ddl_gym.perf.Shape` ``n, g, s, r``. None of the tables
  knows about racks, so every node is in one rack (``r = 1``) and multi-node
  points exercise the NIC level. ``level`` is ``"machine"`` or ``"multi-node"``.
* ``t_compute``: single-GPU iteration time (s) of the same model and per-GPU
  batch, from the same table's 1-GPU measurement where it has one
  (``t_compute_from = "table"``), else the catalogue's (``"catalogue"``).
* ``t_iter``: measured seconds per iteration (NaN where only ratios exist).
* ``ratio`` and ``ref_placement``: the measurement as a ratio
  ``t_iter(placement) / t_iter(ref_placement)``. The reference is one GPU for
  Gavel and Pollux (so ``ratio = t_iter / t_compute``) and the same GPUs
  packed on one node for Chronus. Fitting and errors use ``ratio``, which
  makes the three sources comparable.
* ``is_reference``: the row *is* its reference (ratio 1 by definition); it
  carries no information about the network and is left out of error tables.

Every reader rejects a malformed table with :class:`MeasuredTableError`,
naming the file, row and field.
"""

from __future__ import annotations

import csv
import json
import math
import re
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd

from ddl_gym.profiles import MODEL_NAMES, get_profile

COLUMNS: tuple[str, ...] = (
    "source",
    "cluster",
    "model",
    "job",
    "local_bsz",
    "gpus",
    "placement",
    "n",
    "g",
    "s",
    "r",
    "level",
    "t_compute",
    "t_compute_from",
    "t_iter",
    "ratio",
    "ref_placement",
    "is_reference",
)

MACHINE = "machine"
MULTI_NODE = "multi-node"


class MeasuredTableError(ValueError):
    """A measured table that cannot be read: says which file, row and field."""

    def __init__(
        self, path: str | Path, message: str, row: int | str | None = None, field: str | None = None
    ) -> None:
        where = str(path)
        if row is not None:
            where += f": row {row}"
        if field is not None:
            where += f", field {field!r}"
        super().__init__(f"{where}: {message}")
        self.path = str(path)
        self.row = row
        self.field = field


# -- shared helpers ----------------------------------------------------------

GAVEL_MODELS: dict[str, str] = {
    "ResNet-18": "resnet18",
    "ResNet-50": "resnet50",
    "Transformer": "transformer",
    "LM": "lstm_lm",
    "Recommendation": "recommendation",
    "A3C": "a3c",
    "CycleGAN": "cyclegan",
}
POLLUX_MODELS: dict[str, str] = {
    "cifar10": "resnet18",
    "imagenet": "resnet50",
    "bert": "bert_base",
    "deepspeech2": "deepspeech2",
    "yolov3": "yolov3",
    "ncf": "ncf",
}
CHRONUS_MODELS: dict[str, str] = {
    m: m for m in ("alexnet", "vgg16", "resnet101", "mobilenet_v2", "inception_v3")
}
# Catch a catalogue rename early rather than on the first prediction.
assert set(GAVEL_MODELS.values()) | set(POLLUX_MODELS.values()) | set(
    CHRONUS_MODELS.values()
) <= set(MODEL_NAMES)

POLLUX_GPUS_PER_NODE = 4  # AWS g4dn.12xlarge: 4 T4 per node

# Trainable parameters of the model *configurations* a table measured, where
# they differ from the catalogue's entry for the model (which describes a
# typical configuration). Facts read from the code that produced the table,
# not fits: petuum/adaptdl osdi21-artifact, ``benchmark/models/<model>``.
# * ncf: NeuMF-end on MovieLens-1M (6,040 users, 3,706 items), 32 factors,
#   3 MLP layers (``main.py`` defaults, ``config.py``): embeddings
#   (6,040 + 3,706) x (32 + 128), MLP 256-128-64-32, predictor 64-1:
#   1,602,657 parameters (the catalogue: 5,000,000).
# * deepspeech2: 2 convolutions (32 x 41 x 11, 32 x 32 x 21 x 11), 5
#   bidirectional GRU layers of 800 (``train.py`` defaults) on 161 spectrogram
#   bins (1,312 inputs after the convolutions), batch norms, 29 labels:
#   41,187,968 parameters (the catalogue: 26,000,000).
CONFIGURATION_PARAMS: dict[tuple[str, str], int] = {
    ("pollux_t4", "ncf"): 1_602_657,
    ("pollux_t4", "deepspeech2"): 41_187_968,
}


# The hardware each table says it was measured on (what a user predicting it
# would know). A cluster missing here states none, and the leave-one-cluster-
# out transfer then has nothing to tie it to the measured generations
# (``calibrate.UNKNOWN_HARDWARE_FABRIC``). Chronus: its artifact
# (S-Lab-System-Group/ChronusArtifact, ``code/options.py`` and
# ``code/server/profiler.py``) simulates and profiles nodes of 8 GPUs, 64 CPU
# cores and 256 GB, and names no GPU type, interconnect or network.
STATED_HARDWARE: dict[str, str] = {
    "gavel_k80": "NVIDIA K80 servers of up to 8 GPUs",  # Gavel
    "gavel_p100": "NVIDIA P100 servers of up to 8 GPUs",  # Gavel
    "gavel_v100": "NVIDIA V100 servers of up to 8 GPUs",  # Gavel
    "pollux_t4": "AWS g4dn.12xlarge: 4 NVIDIA T4 per node, 50 Gb/s NIC",  # Pollux
}


def configuration_factor(cluster: str, model: str) -> float:
    """Gradient bytes of the configuration of ``model`` that ``cluster``'s
    table measured, over the catalogue's (1.0 where they agree).

    A fitted gradient-byte multiplier of that cluster is this factor times
    what the framework and hardware make of the bytes; only the second part
    says anything about another cluster's configuration of the model.
    """
    params = CONFIGURATION_PARAMS.get((cluster, model))
    return 1.0 if params is None else params / get_profile(model).params


def _number(
    path: Path,
    row: int | str,
    field: str,
    text: str,
    *,
    positive: bool = True,
    allow_zero: bool = False,
) -> float:
    try:
        value = float(text)
    except (TypeError, ValueError):
        raise MeasuredTableError(path, f"not a number: {text!r}", row, field) from None
    if not math.isfinite(value):
        raise MeasuredTableError(path, f"not a finite number: {text!r}", row, field)
    if positive and not (value > 0 or (allow_zero and value == 0)):
        bound = ">= 0" if allow_zero else "> 0"
        raise MeasuredTableError(path, f"must be {bound}, got {text!r}", row, field)
    return value


def _integer(path: Path, row: int | str, field: str, text: str) -> int:
    value = _number(path, row, field, text)
    if value != int(value):
        raise MeasuredTableError(path, f"not a whole number: {text!r}", row, field)
    return int(value)


def _read_csv(path: Path, required: tuple[str, ...]) -> list[tuple[int, dict[str, str]]]:
    """Rows of a CSV as ``(row number, {column: text})``; row 1 is the first
    data row, as a spreadsheet without its header shows it."""
    if not path.is_file():
        raise MeasuredTableError(path, "file not found")
    with path.open(newline="", encoding="utf-8") as fh:
        reader = csv.DictReader(fh)
        header = [c.strip() for c in reader.fieldnames or []]
        missing = [c for c in required if c not in header]
        if missing:
            raise MeasuredTableError(
                path, f"missing column(s) {', '.join(missing)}; header is {header}"
            )
        rows = []
        for i, raw in enumerate(reader, start=1):
            cells = {str(k).strip(): (v or "").strip() for k, v in raw.items() if k is not None}
            if not any(cells.values()):
                continue  # blank line
            for col in required:
                if cells.get(col, "") == "":
                    raise MeasuredTableError(path, "empty value", i, col)
            rows.append((i, cells))
    if not rows:
        raise MeasuredTableError(path, "no data rows")
    return rows


def _read_json(path: Path) -> object:
    if not path.is_file():
        raise MeasuredTableError(path, "file not found")
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except json.JSONDecodeError as err:
        raise MeasuredTableError(path, f"not valid JSON: {err}") from err


def _level(placement: tuple[int, ...]) -> str:
    return MACHINE if len(placement) == 1 else MULTI_NODE


def _row(
    source: str,
    cluster: str,
    model: str,
    job: str,
    local_bsz: float,
    placement: tuple[int, ...],
    t_compute: float,
    t_compute_from: str,
    t_iter: float,
    ratio: float,
    ref_placement: tuple[int, ...],
) -> dict:
    placement = tuple(sorted(placement, reverse=True))
    return {
        "source": source,
        "cluster": cluster,
        "model": model,
        "job": job,
        "local_bsz": local_bsz,
        "gpus": sum(placement),
        "placement": placement,
        "n": sum(placement),
        "g": max(placement),
        "s": len(placement),
        "r": 1,  # no table knows racks: all nodes in one rack
        "level": _level(placement),
        "t_compute": t_compute,
        "t_compute_from": t_compute_from,
        "t_iter": t_iter,
        "ratio": ratio,
        "ref_placement": ref_placement,
        "is_reference": placement == tuple(sorted(ref_placement, reverse=True)),
    }


def _frame(rows: list[dict]) -> pd.DataFrame:
    df = pd.DataFrame(rows, columns=list(COLUMNS))
    for col in ("gpus", "n", "g", "s", "r"):
        df[col] = df[col].astype(int)
    df["is_reference"] = df["is_reference"].astype(bool)
    return df


# -- the one reader of iteration-time tables ----------------------------------


@dataclass(frozen=True)
class Point:
    """One measured iteration time: what every iteration-time table holds.

    ``job`` names the (model, per-GPU batch) the point belongs to; its
    single-GPU point (placement ``(1,)``) is the reference of the others.
    ``where`` says where the point is in its file (for error messages).
    """

    model: str
    job: str
    local_bsz: float
    placement: tuple[int, ...]
    t_iter: float
    where: int | str = ""
    repeat: str = ""
    cluster: str = ""  # where one file holds several clusters (Gavel); else the frame's


def points_frame(
    path: Path,
    source: str,
    cluster: str,
    points: list[Point],
    missing_reference: str = "error",
) -> pd.DataFrame:
    """The tidy rows (``COLUMNS``) of one cluster's measured iteration times.

    Each point's reference is the single-GPU time of its job (the median over
    repeats where the table repeats it), so ``ratio = t_iter / t_compute``.
    A job with no single-GPU point is an error (``missing_reference =
    "error"``) or left out (``"skip"``: Gavel, whose 0 means "not profiled").
    Every reader of iteration times (the bundled Gavel and Pollux tables and
    :func:`read_table`, a user's own) goes through here.
    """
    singles: dict[tuple[str, str], list[float]] = {}
    for pt in points:
        if pt.placement == (1,):
            singles.setdefault((pt.cluster, pt.job), []).append(pt.t_iter)
    rows = []
    for pt in points:
        if (pt.cluster, pt.job) not in singles:
            if missing_reference == "skip":
                continue
            raise MeasuredTableError(
                path, f"no single-GPU (placement 1) row for {pt.job}", pt.where, "placement"
            )
        t_c = float(np.median(singles[(pt.cluster, pt.job)]))
        rows.append(
            _row(
                source,
                pt.cluster or cluster,
                pt.model,
                pt.job,
                pt.local_bsz,
                pt.placement,
                t_c,
                "table",
                pt.t_iter,
                pt.t_iter / t_c,
                (1,),
            )
        )
    return _frame(rows)


# -- Gavel -------------------------------------------------------------------

_GAVEL_JOB = re.compile(r"^(?P<name>[A-Za-z0-9\-]+)(?: \(batch size (?P<bsz>\d+)\))?$")
_GAVEL_GPU_TYPES = ("k80", "p100", "v100")


def _gavel_job(path: Path, row: int | str, field: str, job: str) -> tuple[str, float]:
    m = _GAVEL_JOB.match(job)
    if not m or m["name"] not in GAVEL_MODELS:
        raise MeasuredTableError(
            path, f"unknown job type {job!r}; known: {', '.join(GAVEL_MODELS)}", row, field
        )
    return GAVEL_MODELS[m["name"]], float(m["bsz"]) if m["bsz"] else float("nan")


def _gavel_points(
    path: Path,
    points: list[tuple[int | str, str, str, bool, int, float]],
    spread_gpus_per_server: int,
) -> pd.DataFrame:
    """Turn ``(row, gpu_type, job, consolidated, gpus, steps/s)`` into tidy rows."""
    pts: list[Point] = []
    seen: set[tuple[str, str, bool, int]] = set()
    for row, gpu, job, consolidated, gpus, thr in points:
        model, bsz = _gavel_job(path, row, "job_type", job)
        if thr == 0:
            continue  # 0 = not profiled / does not fit
        if gpus == 1:
            consolidated = True  # packed and spread are the same single GPU
        key = (gpu, job, consolidated, gpus)
        if key in seen:
            continue
        seen.add(key)
        if consolidated:
            placement: tuple[int, ...] = (gpus,)
        else:
            per = min(spread_gpus_per_server, gpus)
            placement = (per,) * (gpus // per) + ((gpus % per,) if gpus % per else ())
        # Gavel's steps/s of a multi-GPU job grows about linearly with its GPUs:
        # it counts every worker's steps. One synchronous iteration of the job
        # therefore takes gpus / throughput seconds.
        pts.append(Point(model, job, bsz, placement, gpus / thr, row, cluster=f"gavel_{gpu}"))
    return points_frame(path, "gavel", "gavel", pts, missing_reference="skip")


def read_gavel_flat(path: str | Path, spread_gpus_per_server: int = 1) -> pd.DataFrame:
    """Gavel's isolated throughputs, flattened (``isolated_throughputs_flat.csv``).

    Units: ``steps_per_sec`` is training iterations per second of the whole
    job, counting every worker's steps (it grows about linearly with
    ``num_gpus``, e.g. K80 ResNet-50 bs64: 0.62 at 1 GPU, 4.57 at 8), with
    the named batch size per GPU. We take ``t_iter = num_gpus / steps_per_sec``
    and ``t_compute`` = the 1-GPU ``1 / steps_per_sec`` of the same GPU type
    and job type.

    What it can tell us: packed (one server) versus spread slowdowns for
    K80, P100 and V100 at 2, 4 and 8 GPUs, per model and batch size.

    What it cannot:
    * how many servers "unconsolidated" means; we assume
      ``spread_gpus_per_server`` GPUs per server (default 1: fully spread).
    * the network of the profiling cluster (each GPU type is its own cluster).
    * reliability everywhere: spread is not always slower than packed (V100
      ResNet-50 bs64 at 4 GPUs: 9.45 packed, 11.14 spread steps/s) and some
      packed points scale super-linearly (V100 ResNet-18 bs32 at 8 GPUs:
      340 steps/s vs 8 x 29.9), which no data-parallel model can produce.
    * 0 means "not profiled or does not fit": such rows are dropped, as are
      rows whose job type has no 1-GPU measurement on that GPU type.
    """
    path = Path(path)
    required = ("gpu_type", "consolidated", "job_type", "num_gpus", "steps_per_sec")
    points = []
    for i, cells in _read_csv(path, required):
        gpu = cells["gpu_type"].lower()
        if gpu not in _GAVEL_GPU_TYPES:
            raise MeasuredTableError(
                path,
                f"unknown GPU type {cells['gpu_type']!r}; known: k80, p100, v100",
                i,
                "gpu_type",
            )
        if cells["consolidated"] not in ("0", "1"):
            raise MeasuredTableError(
                path, f"must be 0 or 1, got {cells['consolidated']!r}", i, "consolidated"
            )
        _gavel_job(path, i, "job_type", cells["job_type"])
        gpus = _integer(path, i, "num_gpus", cells["num_gpus"])
        thr = _number(path, i, "steps_per_sec", cells["steps_per_sec"], allow_zero=True)
        points.append((i, gpu, cells["job_type"], cells["consolidated"] == "1", gpus, thr))
    return _gavel_points(path, points, spread_gpus_per_server)


_GAVEL_KEY = re.compile(r"^\('(?P<job>[^']+)', (?P<gpus>\d+)\)$")


def read_gavel_json(path: str | Path, spread_gpus_per_server: int = 1) -> pd.DataFrame:
    """Gavel's ``simulation_throughputs.json`` (or ``physical_cluster_...``):
    the ``"null"`` (running alone) entries. Same units and caveats as
    :func:`read_gavel_flat`; rows are named by their JSON key path."""
    path = Path(path)
    data = _read_json(path)
    if not isinstance(data, dict):
        raise MeasuredTableError(path, "top level must be an object {worker_type: {...}}")
    points = []
    for worker, jobs in data.items():
        gpu, _, spread = worker.partition("_")
        if gpu not in _GAVEL_GPU_TYPES or spread not in ("", "unconsolidated"):
            raise MeasuredTableError(path, f"unknown worker type {worker!r}", worker)
        if not isinstance(jobs, dict):
            raise MeasuredTableError(path, "must be an object of jobs", worker)
        for key, entry in jobs.items():
            where = f"{worker}/{key}"
            m = _GAVEL_KEY.match(key)
            if not m:
                raise MeasuredTableError(
                    path, "job key must look like \"('<job type>', <gpus>)\"", where, "key"
                )
            _gavel_job(path, where, "job type", m["job"])
            if not isinstance(entry, dict) or "null" not in entry:
                raise MeasuredTableError(path, "missing the isolated throughput", where, "null")
            thr = _number(path, where, "null", str(entry["null"]), allow_zero=True)
            points.append((where, gpu, m["job"], spread == "", int(m["gpus"]), thr))
    if not points:
        raise MeasuredTableError(path, "no jobs")
    return _gavel_points(path, points, spread_gpus_per_server)


# -- Pollux ------------------------------------------------------------------


def parse_placement(text: str, gpus_per_node: int = POLLUX_GPUS_PER_NODE) -> tuple[int, ...]:
    """Pollux's digit string (one digit per node, its GPUs) as a tuple.

    Raises ``ValueError`` on anything else: empty, non-digit, a zero digit or
    more GPUs than a node has.
    """
    if not text or not text.isdigit():
        raise ValueError(f"placement must be a string of digits, got {text!r}")
    placement = tuple(int(c) for c in text)
    if any(not 1 <= k <= gpus_per_node for k in placement):
        raise ValueError(
            f"placement {text!r}: each digit must be 1..{gpus_per_node} (GPUs on a node)"
        )
    return placement


def read_pollux_placements(path: str | Path, model: str | None = None) -> pd.DataFrame:
    """Pollux's ``<model>/placements.csv`` (AWS g4dn.12xlarge: 4 T4 per node).

    Units: ``step_time`` is seconds per iteration and ``sync_time`` the
    seconds of it spent waiting for the gradient all-reduce; ``local_bsz`` is
    the per-GPU batch. ``t_compute`` is the step time of placement ``"1"`` at
    the same ``local_bsz`` (the table has it for every batch it measures).

    What it can tell us: step time per exact placement (GPUs per node, up to
    4 nodes, 16 GPUs) and per-GPU batch, so intra-node versus inter-node cost
    and how much of the all-reduce a longer backward pass hides (sync time
    falls as ``local_bsz`` grows).

    What it cannot: anything beyond 4 nodes or about racks; the NIC speed is
    not stated (g4dn.12xlarge has a 50 Gb/s NIC). ``local_bsz`` varies per
    row, so ``t_compute`` is per (model, local_bsz), not the catalogue's
    reference time. Repeated placements are single measurements: noise of a
    few percent (and some 2x outliers, e.g. bert 1124 at bsz 4) is in the data.
    """
    path = Path(path)
    name = model or path.parent.name
    if name not in POLLUX_MODELS:
        raise MeasuredTableError(
            path, f"unknown Pollux model {name!r}; known: {', '.join(POLLUX_MODELS)}"
        )
    rows = _read_csv(path, ("placement", "local_bsz", "step_time", "sync_time"))
    points = []
    for i, cells in rows:
        try:
            placement = parse_placement(cells["placement"])
        except ValueError as err:
            raise MeasuredTableError(path, str(err), i, "placement") from None
        bsz = _integer(path, i, "local_bsz", cells["local_bsz"])
        step = _number(path, i, "step_time", cells["step_time"])
        _number(path, i, "sync_time", cells["sync_time"], allow_zero=True)
        points.append((i, placement, bsz, step))
    single = {bsz for _, placement, bsz, _ in points if placement == (1,)}
    for i, _, bsz, _ in points:
        if bsz not in single:
            raise MeasuredTableError(
                path, f"no single-GPU (placement '1') row with local_bsz {bsz}", i, "local_bsz"
            )
    pts = [
        Point(POLLUX_MODELS[name], f"{name} bsz={bsz}", float(bsz), placement, step, i)
        for i, placement, bsz, step in points
    ]
    return points_frame(path, "pollux", "pollux_t4", pts)


def read_pollux(root: str | Path) -> pd.DataFrame:
    """All ``<model>/placements.csv`` under Pollux's profile folder."""
    root = Path(root)
    frames = [read_pollux_placements(root / name / "placements.csv") for name in POLLUX_MODELS]
    return pd.concat(frames, ignore_index=True)


# -- a user's own table ---------------------------------------------------------

TABLE_COLUMNS = ("model", "local_bsz", "placement", "t_iter")
TABLE_OPTIONAL = ("repeat", "hardware")
_SERVER_SPLIT = re.compile(r"[+,;\s]+")


def parse_servers(text: str) -> tuple[int, ...]:
    """GPUs per server of a placement, any server size: ``"8+8"``, ``"8,8"``,
    ``"4 2"`` or ``"16"`` (one server of 16). Largest first.

    Raises ``ValueError`` on an empty placement, a part that is not a whole
    number or a server with no GPUs.
    """
    parts = [p for p in _SERVER_SPLIT.split(text.strip()) if p]
    if not parts:
        raise ValueError("empty placement")
    try:
        servers = tuple(int(p) for p in parts)
    except ValueError:
        raise ValueError(
            f"placement {text!r}: GPUs per server as whole numbers joined by '+' (e.g. 8+8)"
        ) from None
    if any(k < 1 for k in servers):
        raise ValueError(f"placement {text!r}: every server holds at least one GPU")
    return tuple(sorted(servers, reverse=True))


@dataclass(frozen=True)
class UserTable:
    """A measured table in the documented format (:func:`read_table`)."""

    rows: pd.DataFrame  # COLUMNS, plus "repeat"
    hardware: str  # the table's hardware description ("" if it gives none)


def read_table(path: str | Path, cluster: str | None = None) -> UserTable:
    """A measured placement table in ddl-gym's own CSV format (one cluster).

    Columns (header names; order free, other columns ignored):

    * ``model``: a catalogue model (``ddl_gym.profiles.MODEL_NAMES``);
    * ``local_bsz``: per-GPU batch size;
    * ``placement``: GPUs per server, ``+``-joined (``8+8`` = two servers of
      8; ``4`` = 4 GPUs on one server; ``,`` also works inside quotes);
    * ``t_iter``: seconds per training iteration;
    * ``repeat`` (optional): a repeat id; rows that differ only in it are
      repeats (their spread is the table's repeatability floor);
    * ``hardware`` (optional): a description of the hardware (GPU,
      intra-server link, network, e.g. ``8x A100 SXM4 NVSwitch, 8x HDR
      InfiniBand``); one per table. It chooses the transfer prior
      (``ddl_gym.fidelity.hardware``).

    Every (model, local_bsz) needs a single-GPU row (placement ``1``): it is
    the reference of that job's other rows (the median over its repeats).
    """
    path = Path(path)
    name = cluster or path.stem
    points = []
    hardware: set[str] = set()
    for i, cells in _read_csv(path, TABLE_COLUMNS):
        model = cells["model"]
        if model not in MODEL_NAMES:
            raise MeasuredTableError(
                path, f"unknown model {model!r}; known: {', '.join(MODEL_NAMES)}", i, "model"
            )
        bsz = _number(path, i, "local_bsz", cells["local_bsz"])
        try:
            placement = parse_servers(cells["placement"])
        except ValueError as err:
            raise MeasuredTableError(path, str(err), i, "placement") from None
        t_iter = _number(path, i, "t_iter", cells["t_iter"])
        if cells.get("hardware"):
            hardware.add(cells["hardware"])
        job = f"{model} bsz={bsz:g}"
        points.append(Point(model, job, bsz, placement, t_iter, i, cells.get("repeat", "")))
    if len(hardware) > 1:
        raise MeasuredTableError(
            path, f"one hardware description per table, got {sorted(hardware)}", None, "hardware"
        )
    df = points_frame(path, "table", name, points)
    df["repeat"] = [pt.repeat for pt in points]
    return UserTable(df, next(iter(hardware), ""))


def write_table(df: pd.DataFrame, path: str | Path, hardware: str = "") -> Path:
    """Write rows with ``t_iter`` (e.g. a bundled table's) in :func:`read_table`'s
    format: the bundled sources are instances of the same format."""
    path = Path(path)
    out = pd.DataFrame(
        {
            "model": df["model"],
            "local_bsz": df["local_bsz"],
            "placement": ["+".join(map(str, p)) for p in df["placement"]],
            "t_iter": df["t_iter"],
        }
    )
    if hardware:
        out["hardware"] = hardware
    out.to_csv(path, index=False)
    return path


# -- Chronus -----------------------------------------------------------------


def read_chronus(path: str | Path) -> pd.DataFrame:
    """Chronus's ``model_info.json``: ``{model: {gpus: {nodes: relative speed}}}``.

    Units: speed relative to the same job packed on one node (1.0), so the
    measured quantity is ``ratio = 1 / speed`` against ``ref_placement =
    (gpus,)``. We assume the GPUs are split evenly over the nodes (6 GPUs on
    2 nodes = (3, 3)); a split that is not even is rejected.

    What it can tell us: the slowdown of spreading 2 to 8 GPUs over 2 or 4
    nodes, for five CNNs.

    What it cannot: absolute times, batch sizes or hardware. ``t_compute`` is
    the catalogue's estimate (``t_compute_from = "catalogue"``), so predicted
    ratios inherit its error. Some ratios are below 1 (inception_v3 2 GPUs
    on 2 nodes: speed 1.0025), i.e. noise of about a percent.
    """
    path = Path(path)
    data = _read_json(path)
    if not isinstance(data, dict) or not data:
        raise MeasuredTableError(path, "top level must be a non-empty object {model: {...}}")
    rows: list[dict] = []
    for model, by_gpus in data.items():
        if model not in CHRONUS_MODELS:
            raise MeasuredTableError(
                path, f"unknown model; known: {', '.join(CHRONUS_MODELS)}", model, "model"
            )
        if not isinstance(by_gpus, dict):
            raise MeasuredTableError(path, "must be an object {gpus: {nodes: speed}}", model)
        t_c = get_profile(CHRONUS_MODELS[model]).iter_time_s
        for gpus_text, by_nodes in by_gpus.items():
            gpus = _integer(path, model, "gpus", gpus_text)
            if not isinstance(by_nodes, dict):
                raise MeasuredTableError(
                    path, "must be an object {nodes: speed}", f"{model}/{gpus_text}"
                )
            for nodes_text, speed_value in by_nodes.items():
                where = f"{model}/{gpus_text}/{nodes_text}"
                nodes = _integer(path, where, "nodes", nodes_text)
                speed = _number(path, where, "speed", str(speed_value))
                if gpus % nodes:
                    raise MeasuredTableError(
                        path,
                        f"{gpus} GPUs do not split evenly over {nodes} nodes",
                        where,
                        "nodes",
                    )
                placement = (gpus // nodes,) * nodes
                rows.append(
                    _row(
                        "chronus",
                        "chronus",
                        CHRONUS_MODELS[model],
                        f"{model} {gpus} GPUs",
                        float("nan"),
                        placement,
                        t_c,
                        "catalogue",
                        float("nan"),
                        1.0 / speed,
                        (gpus,),
                    )
                )
    return _frame(rows)


# -- everything --------------------------------------------------------------

# Gavel's second measuring campaign of the same throughputs (its physical
# cluster): re-measured rows give the tables' repeatability.
GAVEL_SECOND_CAMPAIGN = "profiles/gavel/physical_cluster_throughputs.json"

SOURCES: dict[str, tuple[str, Callable[[Path], pd.DataFrame]]] = {
    "gavel": ("profiles/gavel/isolated_throughputs_flat.csv", read_gavel_flat),
    "pollux": ("profiles/pollux", read_pollux),
    "chronus": ("profiles/chronus/model_info.json", read_chronus),
}


def load_measured(data_dir: str | Path, sources: tuple[str, ...] = tuple(SOURCES)) -> pd.DataFrame:
    """Every measured point of ``sources`` under the developers' data dir."""
    frames = []
    for name in sources:
        if name not in SOURCES:
            raise ValueError(f"unknown source {name!r}; known: {', '.join(SOURCES)}")
        rel, reader = SOURCES[name]
        frames.append(reader(Path(data_dir) / rel))
    df = pd.concat(frames, ignore_index=True)
    df["ratio"] = df["ratio"].astype(float)
    return df


# -- stragglers ----------------------------------------------------------------

ALIBABA_CV = "profiles/alibaba_minibatch_time/coefficient_variation.csv"


def read_worker_cv(path: str | Path) -> pd.Series:
    """Alibaba PAI's ``coefficient_variation.csv``: per job (row), the median
    over iterations (columns) of the coefficient of variation of mini-batch
    time across the job's workers.

    What it tells: how much one worker's speed differs from another's in the
    same synchronous job, the input of :class:`ddl_gym.topology.Stragglers`
    (for a lognormal, ``sigma`` is about the CV). What it cannot: which
    worker was slow, or whether the same GPU stays slow (we assume it does
    for the length of a run).
    """
    path = Path(path)
    if not path.is_file():
        raise MeasuredTableError(path, "file not found")
    try:
        table = pd.read_csv(path, index_col=0)
    except (ValueError, pd.errors.ParserError) as err:
        raise MeasuredTableError(path, f"not a CSV table: {err}") from err
    if table.empty:
        raise MeasuredTableError(path, "no data rows")
    values = table.apply(pd.to_numeric, errors="coerce")
    bad = values.isna() & table.notna()
    if bad.to_numpy().any():
        row, col = np.argwhere(bad.to_numpy())[0]
        raise MeasuredTableError(
            path, f"not a number: {table.iat[row, col]!r}", int(row) + 1, str(table.columns[col])
        )
    if (values < 0).to_numpy().any():
        row, col = np.argwhere((values < 0).to_numpy())[0]
        raise MeasuredTableError(path, "must be >= 0", int(row) + 1, str(table.columns[col]))
    return values.median(axis=1, skipna=True)
