"""Named scenarios: ready experiments (workload + cluster + fabric + congestion
+ engine settings) by name or from a TOML file.

A scenario is plain data; ``build_trace`` / ``build_cluster`` /
``engine_kwargs`` turn it into what ``simulate`` and the env take. A TOML
file has the same fields as :class:`Scenario` at top level (``name`` is
optional; the file's stem is used); a ``[synthetic]`` table holds
``synthetic_trace`` arguments when ``trace = "synthetic"``, a
``[stragglers]`` table (``sigma``, ``seed``) turns on per-GPU speed spread
(:class:`ddl_gym.topology.Stragglers`), and a ``[models]`` table adds models
to the catalogue (``ddl_gym.profiles.register_model``; one sub-table per
model: ``iter_time_s`` and ``params`` or ``grad_bytes``, optional
``n_tensors``, ``backward_share``, ``reference``), so the scenario's trace may
use them. Other tables
(e.g. ``[run]``, written by the CLI next to its results so a run can be
repeated) are returned untouched by :func:`load_scenario_file`.

Unknown keys and bad values raise :class:`ScenarioError` with the file and
the key, never a bare traceback from deep inside the engine.
"""

from __future__ import annotations

import dataclasses
import math
import tomllib
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ddl_gym import ENV_VARIANTS
from ddl_gym.topology import (
    ALIBABA_PAI_STRAGGLER_SIGMA,
    CONGESTION,
    Cluster,
    Stragglers,
    get_cluster,
    get_congestion,
    get_fabric,
)
from ddl_gym.traces import (
    Trace,
    default_trace,
    find_data_dir,
    head,
    load_trace,
    synthetic_trace,
)
from ddl_gym.workloads import DATA_WORKLOADS

if TYPE_CHECKING:
    from ddl_gym.engine.perf_source import SlowdownSource
    from ddl_gym.seed import SeedSwitches
    from ddl_gym.simulators import Simulator

# Workloads known by name (relative to the data dir); "default" and
# "synthetic" need no data.
# every named workload of the data dir (the names compare --workloads takes)
DATA_TRACES: dict[str, str] = {
    **{w.name: w.path for w in DATA_WORKLOADS if w.path is not None},
    # Alibaba's openb pods (the data dir's cut; the typed scenarios run it on
    # openb's own node list)
    "alibaba-openb": "traces/alibaba_openb/openb_pod_list_default_dev.csv",
}
# ``llm-synthetic``: ddl_gym.llm.workload.llm_cluster_trace on the scenario's
# cluster, its [synthetic] table holding n_jobs and load
LLM_SYNTHETIC = "llm-synthetic"
BUILTIN_TRACES = ("default", "synthetic", *DATA_TRACES, LLM_SYNTHETIC)


class ScenarioError(ValueError):
    """A scenario name, file or value is wrong; the message says which."""


PERF_SOURCES = ("closed_form", "seed_astra")


def engine_perf_source(name: str) -> str | SlowdownSource:
    """What the engine takes for a scenario's ``perf_source``: the name of
    its closed form, or the seed authors' table loaded (the engine does not
    import the seed wing)."""
    if name == "seed_astra":
        from ddl_gym.seed import SlowdownTable

        return SlowdownTable.load()
    return name


@dataclass(frozen=True)
class Scenario:
    """One experiment setting.

    Attributes:
        name: registry key or file stem.
        description: one line for ``ddl-gym scenarios``.
        trace: ``default`` (bundled synthetic), ``synthetic`` (generated from
            ``synthetic``), ``seed-week`` / ``philly-week`` (need the data
            dir) or a path to any trace file ``load_trace`` reads.
        synthetic: ``synthetic_trace`` keyword arguments (``trace = "synthetic"``).
        jobs: keep only the first ``jobs`` jobs of the workload (None: all).
        cluster: a cluster preset (``seed64``, ``nvswitch512``, ...) or
            ``"RxSxG"`` (racks x servers x GPUs).
        fabric: fabric preset overriding the cluster's (None: the cluster's).
        congestion: background traffic on rack uplinks (preset or fraction).
        lease_s, tick_s, restore_s_per_gpu, clairvoyant: engine settings;
            None leaves them to the policy's ``engine_kwargs()`` / the engine.
        llm_split_tp: let LLM jobs' tensor-parallel groups span servers
            (the engine's ``llm_split_tp``; None: they stay whole, the default).
        policies: policies ``compare`` runs (empty: every registered one).
        congestions: congestion levels ``compare`` sweeps (empty: ``congestion``).
        seeds: seeds ``compare`` runs (workload and policy seeds).
        mode: ``default`` (our engine) or ``seed`` (the seed-faithful
            simulator, ``ddl_gym.seed``: the authors' batches, leases,
            offers, placement and policies; policies ``dally``,
            ``dally-1-2``, ``tiresias``). ``simulator`` is what runs it.
        perf_source: ``closed_form`` or ``seed_astra`` (the authors' slowdown
            table, ``ddl_gym.seed.SlowdownTable``, handed to the engine
            loaded); None: ``seed_astra`` in seed mode, ``closed_form`` else.
        stragglers: per-GPU speed spread, a table ``{sigma, seed}`` for
            :class:`ddl_gym.topology.Stragglers` (``sigma`` a number >= 0 or
            ``"alibaba_pai"``, Alibaba PAI's measured 0.087; ``seed``
            default 0). Empty: off. Not allowed in seed mode.
        models: models this scenario adds to the catalogue, name -> the
            ``register_model`` arguments (registered when the scenario is
            built, in every process that builds it). Not in seed mode, whose
            slowdown table knows only the seed's six models.
    """

    name: str
    description: str = ""
    trace: str = "default"
    synthetic: Mapping[str, Any] = field(default_factory=dict)
    jobs: int | None = None
    cluster: str = "seed64"
    fabric: str | None = None
    congestion: str | float = "none"
    lease_s: float | None = None
    tick_s: float | None = None
    restore_s_per_gpu: float | None = None
    clairvoyant: bool | None = None
    llm_split_tp: bool | None = None
    policies: tuple[str, ...] = ()
    congestions: tuple[str | float, ...] = ()
    seeds: tuple[int, ...] = (0,)
    mode: str = "default"
    perf_source: str | None = None
    stragglers: Mapping[str, Any] = field(default_factory=dict)
    models: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)

    # -- what the engine takes -----------------------------------------------
    def build_cluster(self) -> Cluster:
        cluster = get_cluster(self.cluster, self.fabric)
        if self.stragglers:
            sigma = self.stragglers.get("sigma", 0.0)
            if sigma == ALIBABA_PAI:
                sigma = ALIBABA_PAI_STRAGGLER_SIGMA
            stragglers = Stragglers(sigma=float(sigma), seed=int(self.stragglers.get("seed", 0)))
            cluster = dataclasses.replace(cluster, stragglers=stragglers)
        return cluster

    def build_trace(self, seed: int = 0) -> Trace:
        """The workload; ``seed`` drives synthetic generation and model
        assignment of traces without models."""
        if self.trace == "default":
            trace = default_trace(seed=seed)
        elif self.trace == LLM_SYNTHETIC:
            from ddl_gym.llm.workload import llm_cluster_trace

            spec = dict(self.synthetic)
            trace = llm_cluster_trace(
                self.build_cluster(),
                n_jobs=int(spec.get("n_jobs", 1000)),
                seed=seed,
                load=float(spec.get("load", 0.8)),
                name=self.name,
            )
        elif self.trace == "synthetic":
            spec = dict(self.synthetic)
            spec.setdefault("name", self.name)
            spec.setdefault("max_gpus", self.build_cluster().num_gpus)
            if "gpu_mix" in spec:  # TOML keys are strings; the generator wants ints
                spec["gpu_mix"] = {int(k): v for k, v in spec["gpu_mix"].items()}
            trace = synthetic_trace(seed=seed, **spec)
        elif self.trace in DATA_TRACES:
            data = find_data_dir()
            rel = DATA_TRACES[self.trace]
            if data is None or not (data / rel).is_file():
                raise ScenarioError(
                    f"scenario {self.name!r}: workload {self.trace!r} needs {rel} under the "
                    "data dir (../shared/data or $DDL_GYM_DATA), which was not found"
                )
            trace = _load_quietly(data / rel, seed)
        else:
            path = Path(self.trace).expanduser()
            if not path.is_file():
                raise ScenarioError(f"scenario {self.name!r}: trace file {path} not found")
            trace = _load_quietly(path, seed)
        if self.jobs is not None:
            trace = head(trace, self.jobs)
        return trace

    def engine_kwargs(self, base: Mapping[str, Any] | None = None) -> dict[str, Any]:
        """``base`` (e.g. a policy's ``engine_kwargs()``) overridden by the
        settings this scenario fixes, plus its congestion."""
        out = dict(base or {})
        for key in ("lease_s", "tick_s", "restore_s_per_gpu", "clairvoyant", "llm_split_tp"):
            value = getattr(self, key)
            if value is not None:
                out[key] = value
        out["congestion"] = self.congestion
        if self.perf_source is not None:
            out["perf_source"] = engine_perf_source(self.perf_source)
        return out

    def seed_switches(self) -> SeedSwitches:
        """The seed-faithful simulator's switches for this scenario (seed mode)."""
        from ddl_gym.seed import SeedSwitches

        changes: dict[str, Any] = {"congestion": self.congestion}
        if self.perf_source is not None:
            changes["perf"] = self.perf_source
        for key in ("lease_s", "tick_s"):
            if getattr(self, key) is not None:
                changes[key] = getattr(self, key)
        if self.restore_s_per_gpu is not None:
            changes["checkpoint_s_per_gpu"] = self.restore_s_per_gpu
        return SeedSwitches(**changes)

    # -- what runs it -----------------------------------------------------------
    @property
    def simulator(self) -> Simulator:
        """The simulator that runs this scenario: our engine with
        ``engine_kwargs()``, or in seed mode the seed wing with
        ``seed_switches()``."""
        from ddl_gym.simulators import EngineSimulator, SeedSimulator

        if self.mode == "seed":
            return SeedSimulator(self.seed_switches())
        return EngineSimulator(self.engine_kwargs())

    def make_policy(self, name: str) -> Any:
        """The policy ``name`` stands for in this scenario's simulator (the
        seed's own Dally and Tiresias in seed mode)."""
        return self.simulator.make_policy(name)

    @property
    def grid_congestions(self) -> tuple[str | float, ...]:
        return self.congestions or (self.congestion,)

    def to_dict(self) -> dict[str, Any]:
        """Every field, None ones left out (TOML has no null)."""
        out: dict[str, Any] = {}
        for f in dataclasses.fields(self):
            value = getattr(self, f.name)
            if value is None or (f.name in ("stragglers", "models") and not value):
                continue
            if isinstance(value, tuple):
                value = list(value)
            elif isinstance(value, Mapping):
                value = {k: dict(v) if isinstance(v, Mapping) else v for k, v in value.items()}
            out[f.name] = value
        return out

    def replace(self, **changes: Any) -> Scenario:
        return scenario_from_dict({**self.to_dict(), **changes}, source=f"scenario {self.name!r}")


def _load_quietly(path: Path, seed: int) -> Trace:
    import warnings

    from ddl_gym.traces import TraceWarning

    with warnings.catch_warnings():
        # the seed's JSON is unsorted; the loader sorts it and says so
        warnings.simplefilter("ignore", TraceWarning)
        return load_trace(path, seed=seed)


# type-blind policies beside their type-aware variants, and Gavel's
TYPED_COMPARISON = (
    "fifo",
    "gandiva",
    "gandiva-typed",
    "tiresias",
    "tiresias-typed",
    "dally",
    "dally-typed",
    "gavel",
)

SCENARIOS: dict[str, Scenario] = {
    s.name: s
    for s in (
        Scenario(
            name="default",
            description="bundled synthetic default (300 jobs) on the seed's 64 GPUs, "
            "heavy congestion",
            trace="default",
            cluster="seed64",
            congestion="heavy",
            congestions=("none", "moderate", "heavy"),
        ),
        Scenario(
            name="small",
            description="16 synthetic jobs on 16 NVSwitch/InfiniBand GPUs (2x2x4): seconds, "
            "for smoke tests and placement timelines (no job crosses a rack, so congestion "
            "changes nothing; rank schedulers with `ddl-gym benchmark`)",
            trace="synthetic",
            # the same workload as the ddl_gym/Small-v0 env
            synthetic=dict(ENV_VARIANTS["ddl_gym/Small-v0"]["trace"]),
            cluster="2x2x4",
            fabric="nvswitch_ib",
            congestion="moderate",
            congestions=("none", "heavy"),
        ),
        Scenario(
            name="seed-week-heavy",
            description="the seed's 411-job Helios week on its 64-GPU cluster, heavy "
            "uplink congestion (needs the data dir)",
            trace="seed-week",
            cluster="seed64",
            congestion="heavy",
            congestions=("none", "moderate", "heavy"),
        ),
        Scenario(
            name="seed-week-big-racks",
            description="the seed's week on 64 GPUs in 2 racks of 4 servers (32-GPU racks "
            "instead of 16: all but 4 jobs fit one), seed fabric (needs the data dir)",
            trace="seed-week",
            cluster="2x4x8",
            fabric="seed",
            congestion="heavy",
            congestions=("none", "moderate", "heavy"),
        ),
        Scenario(
            name="seed-artist",
            description="seed-faithful mode: the authors' simulator (slowdown table, "
            "1,000-iteration batches, 20 s leases, first fit) on the seed week, 4x2x8, "
            "no congestion (needs the data dir)",
            trace="seed-week",
            cluster="4x2x8",
            congestion="none",
            mode="seed",
            policies=("dally", "dally-1-2", "tiresias"),
        ),
        Scenario(
            name="philly-week-512",
            description="the Philly week (5,869 jobs) on 512 NVSwitch/InfiniBand GPUs, "
            "moderate congestion (needs the data dir): at its own arrival rate nothing "
            "queues and every policy ties; for simulator speed, not for ranking schedulers "
            "(the ddl-gym-v1 suite's philly cases scale the arrivals)",
            trace="philly-week",
            cluster="nvswitch512",
            congestion="moderate",
            congestions=("none", "moderate", "heavy"),
        ),
        Scenario(
            name="openb-typed",
            description="Alibaba openb's 1,803 whole-GPU pods on openb's own node list "
            "(6,212 GPUs of 7 types; G2/G3 undisclosed, assumed V100 speed), moderate "
            "congestion: type-aware against type-blind policies (needs the data dir)",
            trace="alibaba-openb",
            cluster="openb",
            congestion="moderate",
            policies=TYPED_COMPARISON,
            seeds=(0, 1, 2),
        ),
        Scenario(
            name="generations",
            description="4,000 Philly-shaped synthetic jobs at 1,500 per hour on 384 GPUs of three "
            "generations (128 each of V100-32GB, A100-80GB, H100 in 8-GPU servers, one "
            "generation per rack), moderate congestion: type-aware against type-blind "
            "policies",
            trace="synthetic",
            synthetic={"n_jobs": 4000, "arrival_rate_per_h": 1500.0},
            cluster="v100-a100-h100",
            congestion="moderate",
            policies=TYPED_COMPARISON,
            seeds=(0, 1, 2),
        ),
        Scenario(
            name="llm-cluster",
            description="4,000 synthetic LLM-development jobs (Acme trace's published "
            "sizes and run times; Llama-2 7B/13B/70B with TP x PP x DP layouts) on 1,024 "
            "DGX A100 GPUs, leaf-spine 2:1, moderate congestion: every heuristic",
            trace=LLM_SYNTHETIC,
            synthetic={"n_jobs": 4000, "load": 3.0},
            cluster="dgx_a100_1024_2to1",
            congestion="moderate",
            policies=(
                "fifo",
                "consolidation",
                "tiresias",
                "gandiva",
                "dally-delay",
                "dally-1-2",
                "dally-6-12",
                "dally",
            ),
            seeds=(0, 1, 2),
        ),
        Scenario(
            name="pcie-diurnal",
            description="the bundled default on 512 commodity GPUs (PCIe, 25GbE, 3:1) "
            "with day/night background traffic",
            trace="default",
            cluster="pcie512",
            congestion="diurnal",
        ),
    )
}


# -- parsing and validation ----------------------------------------------------
_FIELDS = {f.name: f for f in dataclasses.fields(Scenario)}


def _check(cond: bool, source: str, key: str, what: str, value: Any) -> None:
    if not cond:
        raise ScenarioError(f"{source}: {key!r} must be {what}, got {value!r}")


def _number(v: Any) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v)


def _congestion_ok(value: Any, source: str, key: str) -> str | float:
    _check(
        isinstance(value, str) or _number(value),
        source,
        key,
        f"a congestion level ({', '.join(CONGESTION)}) or a fraction",
        value,
    )
    try:
        get_congestion(value)
    except ValueError as err:
        raise ScenarioError(f"{source}: {key!r}: {err}") from None
    return value


def _int(v: Any) -> bool:
    return isinstance(v, int) and not isinstance(v, bool)


# [synthetic] keys -> (check, what it must be). Checked here so that a typo or
# a string where a number belongs names the file and key instead of failing
# as a TypeError inside the generator.
_SYNTHETIC_KEYS: dict[str, tuple[Any, str]] = {
    "n_jobs": (lambda v: _int(v) and 0 < v <= 10**7, "an integer in 1..10,000,000"),
    "arrival_rate_per_h": (lambda v: _number(v) and v > 0, "a positive number"),
    "duration_median_s": (lambda v: _number(v) and 0 < v <= 1e9, "a positive number (<= 1e9)"),
    "duration_sigma": (lambda v: _number(v) and 0 <= v <= 10, "a number in [0, 10]"),
    "max_duration_s": (lambda v: _number(v) and v > 0, "a positive number"),
    "max_gpus": (lambda v: _int(v) and v > 0, "a positive integer"),
    "name": (lambda v: isinstance(v, str) and v, "a non-empty string"),
    "gpu_mix": (lambda v: isinstance(v, Mapping) and v, "a table of GPU count = weight"),
    "model_mix": (lambda v: isinstance(v, Mapping) and v, "a table of model name = weight"),
}


_LLM_SYNTHETIC_KEYS: dict[str, tuple[Any, str]] = {
    "n_jobs": _SYNTHETIC_KEYS["n_jobs"],
    "load": (lambda v: _number(v) and 0 < v <= 100, "a positive number (<= 100)"),
}


def _llm_synthetic_ok(spec: Mapping[str, Any], source: str) -> None:
    """Check the ``[synthetic]`` table of ``trace = "llm-synthetic"``."""
    unknown = sorted(set(spec) - set(_LLM_SYNTHETIC_KEYS))
    if unknown:
        raise ScenarioError(
            f"{source}: [synthetic] of trace {LLM_SYNTHETIC!r}: unknown key(s) "
            f"{', '.join(map(repr, unknown))}; allowed: {', '.join(_LLM_SYNTHETIC_KEYS)}"
        )
    for key, value in spec.items():
        ok, what = _LLM_SYNTHETIC_KEYS[key]
        _check(bool(ok(value)), source, f"synthetic.{key}", what, value)


def _synthetic_ok(spec: Mapping[str, Any], source: str) -> None:
    """Check a ``[synthetic]`` table key by key (names, types, ranges)."""
    from ddl_gym.profiles import model_names

    known = model_names()

    unknown = sorted(set(spec) - set(_SYNTHETIC_KEYS))
    if unknown:
        raise ScenarioError(
            f"{source}: [synthetic]: unknown key(s) {', '.join(map(repr, unknown))}; "
            f"allowed: {', '.join(_SYNTHETIC_KEYS)}"
        )
    for key, value in spec.items():
        ok, what = _SYNTHETIC_KEYS[key]
        _check(bool(ok(value)), source, f"synthetic.{key}", what, value)
    for k, w in dict(spec.get("gpu_mix", {})).items():
        _check(
            str(k).isdigit() and 0 < int(k) <= 1_000_000,
            source,
            "synthetic.gpu_mix",
            "keyed by GPU counts (positive integers)",
            k,
        )
        _check(_number(w) and w >= 0, source, f"synthetic.gpu_mix.{k}", "a weight >= 0", w)
    for k, w in dict(spec.get("model_mix", {})).items():
        if k not in known:
            raise ScenarioError(
                f"{source}: 'synthetic.model_mix': unknown model name {k!r}; known: "
                f"{', '.join(known)} (add one in a [models] table)"
            )
        _check(_number(w) and w >= 0, source, f"synthetic.model_mix.{k}", "a weight >= 0", w)
    for key in ("gpu_mix", "model_mix"):
        weights = list(dict(spec.get(key, {})).values())
        if weights and not sum(weights) > 0:
            raise ScenarioError(f"{source}: 'synthetic.{key}': weights must not all be zero")


# [models.NAME] keys -> (check, what it must be); register_model checks the rest
_MODEL_KEYS: dict[str, tuple[Any, str]] = {
    "iter_time_s": (lambda v: _number(v) and v > 0, "a positive number of seconds"),
    "params": (lambda v: _int(v) and v > 0, "a positive integer"),
    "grad_bytes": (
        lambda v: isinstance(v, (list, tuple)) and v and all(_int(b) and b > 0 for b in v),
        "a list of positive byte counts (backward order)",
    ),
    "n_tensors": (lambda v: _int(v) and v > 0, "a positive integer"),
    "backward_share": (lambda v: _number(v) and 0 <= v <= 1, "a number in [0, 1]"),
    "reference": (lambda v: isinstance(v, str), "a string"),
}


def _models_ok(spec: Any, source: str, mode: str) -> None:
    """Check a ``[models]`` table and register its models (same numbers
    again are fine; a built-in name or other numbers are an error)."""
    from ddl_gym.profiles import register_model

    _check(isinstance(spec, Mapping), source, "models", "a table of model tables", spec)
    if spec and mode == "seed":
        raise ScenarioError(
            f"{source}: [models] is not allowed with mode = 'seed' (the authors' slowdown "
            "table knows only the seed's six models)"
        )
    for name, model in spec.items():
        key = f"models.{name}"
        _check(isinstance(model, Mapping), source, key, "a table (iter_time_s, params, ...)", model)
        unknown = sorted(set(model) - set(_MODEL_KEYS))
        if unknown:
            raise ScenarioError(
                f"{source}: [{key}]: unknown key(s) {', '.join(map(repr, unknown))}; "
                f"allowed: {', '.join(_MODEL_KEYS)}"
            )
        if "iter_time_s" not in model:
            raise ScenarioError(f"{source}: [{key}]: 'iter_time_s' is required")
        for k, v in model.items():
            ok, what = _MODEL_KEYS[k]
            _check(bool(ok(v)), source, f"{key}.{k}", what, v)
        args = dict(model)
        try:
            register_model(str(name), args.pop("iter_time_s"), source="scenario", **args)
        except ValueError as err:
            raise ScenarioError(f"{source}: [{key}]: {err}") from None


ALIBABA_PAI = "alibaba_pai"  # stragglers.sigma: ALIBABA_PAI_STRAGGLER_SIGMA
_STRAGGLER_SIGMA_MAX = 2.0  # exp(2 z): a GPU 7x slower at one sigma is no straggler model


def _stragglers_ok(spec: Any, source: str, mode: str) -> None:
    """Check a ``[stragglers]`` table: known keys, sigma and seed in range."""
    _check(isinstance(spec, Mapping), source, "stragglers", "a table {sigma, seed}", spec)
    unknown = sorted(set(spec) - {"sigma", "seed"})
    if unknown:
        raise ScenarioError(
            f"{source}: [stragglers]: unknown key(s) {', '.join(map(repr, unknown))}; "
            "allowed: sigma, seed"
        )
    if spec and "sigma" not in spec:
        raise ScenarioError(f"{source}: [stragglers]: 'sigma' is required")
    if "sigma" in spec:
        v = spec["sigma"]
        _check(
            v == ALIBABA_PAI or (_number(v) and 0 <= v <= _STRAGGLER_SIGMA_MAX),
            source,
            "stragglers.sigma",
            f"a number in [0, {_STRAGGLER_SIGMA_MAX}] or {ALIBABA_PAI!r}",
            v,
        )
    if "seed" in spec:
        v = spec["seed"]
        _check(_int(v) and 0 <= v < 2**63, source, "stragglers.seed", "an integer >= 0", v)
    if spec and mode == "seed":
        raise ScenarioError(
            f"{source}: [stragglers] is not allowed with mode = 'seed' (the seed-faithful "
            "simulator has no stragglers)"
        )


def scenario_from_dict(data: Mapping[str, Any], source: str = "<dict>") -> Scenario:
    """Validate ``data`` (scenario fields) and build a :class:`Scenario`."""
    unknown = sorted(set(data) - set(_FIELDS))
    if unknown:
        raise ScenarioError(
            f"{source}: unknown key(s) {', '.join(map(repr, unknown))}; "
            f"allowed: {', '.join(_FIELDS)}"
        )
    d = dict(data)
    _check(
        isinstance(d.get("name"), str) and d["name"],
        source,
        "name",
        "a non-empty string",
        d.get("name"),
    )
    for key in ("description", "trace", "cluster"):
        if key in d:
            _check(isinstance(d[key], str), source, key, "a string", d[key])
    if "fabric" in d:
        _check(isinstance(d["fabric"], str), source, "fabric", "a fabric preset name", d["fabric"])
        try:
            get_fabric(d["fabric"])
        except ValueError as err:
            raise ScenarioError(f"{source}: 'fabric': {err}") from None
    if "models" in d:  # before [synthetic] and the trace, which may name them
        _models_ok(d["models"], source, d.get("mode", "default"))
    if "synthetic" in d:
        _check(isinstance(d["synthetic"], Mapping), source, "synthetic", "a table", d["synthetic"])
        if d.get("trace") == LLM_SYNTHETIC:
            _llm_synthetic_ok(d["synthetic"], source)
        else:
            _synthetic_ok(d["synthetic"], source)
    if d.get("trace", "default") == "synthetic" and not d.get("synthetic"):
        raise ScenarioError(f'{source}: trace = "synthetic" needs a [synthetic] table')
    if "jobs" in d:
        v = d["jobs"]
        _check(
            isinstance(v, int) and not isinstance(v, bool) and v > 0,
            source,
            "jobs",
            "a positive integer",
            v,
        )
    for key in ("lease_s", "tick_s"):
        if key in d:
            _check(
                _number(d[key]) and d[key] > 0, source, key, "a positive number of seconds", d[key]
            )
    if "restore_s_per_gpu" in d:
        v = d["restore_s_per_gpu"]
        _check(_number(v) and v >= 0, source, "restore_s_per_gpu", "a number >= 0", v)
    for key in ("clairvoyant", "llm_split_tp"):
        if key in d:
            _check(isinstance(d[key], bool), source, key, "true or false", d[key])
    if "congestion" in d:
        _congestion_ok(d["congestion"], source, "congestion")
    if "mode" in d:
        _check(d["mode"] in ("default", "seed"), source, "mode", "'default' or 'seed'", d["mode"])
    if "stragglers" in d:
        _stragglers_ok(d["stragglers"], source, d.get("mode", "default"))
    if "perf_source" in d:
        _check(
            d["perf_source"] in PERF_SOURCES,
            source,
            "perf_source",
            "'closed_form' or 'seed_astra'",
            d["perf_source"],
        )
    for key in ("policies", "congestions", "seeds"):
        if key in d:
            _check(isinstance(d[key], (list, tuple)), source, key, "a list", d[key])
            d[key] = tuple(d[key])
    for p in d.get("policies", ()):
        _check(isinstance(p, str), source, "policies", "a list of policy names", d["policies"])
    for c in d.get("congestions", ()):
        _congestion_ok(c, source, "congestions")
    for s in d.get("seeds", ()):
        _check(
            isinstance(s, int) and not isinstance(s, bool) and 0 <= s < 2**63,
            source,
            "seeds",
            "a list of integers >= 0",
            d["seeds"],
        )
    if "seeds" in d and not d["seeds"]:
        raise ScenarioError(f"{source}: 'seeds' must not be empty")
    scenario = Scenario(**d)
    try:
        cluster = scenario.build_cluster()
    except (ValueError, TypeError) as err:
        raise ScenarioError(f"{source}: 'cluster': {err}") from None
    gpu_mix = dict(scenario.synthetic.get("gpu_mix", {}))
    limit = scenario.synthetic.get("max_gpus", cluster.num_gpus)
    if gpu_mix and not any(int(k) <= limit and w > 0 for k, w in gpu_mix.items()):
        raise ScenarioError(
            f"{source}: 'synthetic.gpu_mix': no size with a positive weight fits "
            f"{limit} GPUs (the cluster's size or synthetic.max_gpus)"
        )
    trace_path = Path(scenario.trace).expanduser()
    if scenario.trace not in BUILTIN_TRACES and trace_path.is_dir():
        raise ScenarioError(f"{source}: 'trace': {trace_path}: is a directory, not a trace file")
    if scenario.trace not in BUILTIN_TRACES and not _is_file(trace_path):
        raise ScenarioError(
            f"{source}: 'trace' must be one of {', '.join(BUILTIN_TRACES)} or an existing "
            f"trace file, got {scenario.trace!r}"
        )
    return scenario


def _is_file(path: Path) -> bool:
    """``path.is_file()``, but a folder that cannot be searched is a ScenarioError."""
    try:
        return path.is_file()
    except OSError as err:
        raise ScenarioError(f"{path}: cannot read: {err.strerror or err}") from None


def load_scenario_file(path: str | Path) -> tuple[Scenario, dict[str, Any]]:
    """A scenario from a TOML file, plus the file's other tables (e.g. ``run``)."""
    path = Path(path)
    if not _is_file(path):
        raise ScenarioError(f"{path}: no such scenario file")
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8-sig"))
    except tomllib.TOMLDecodeError as err:
        raise ScenarioError(f"{path}: not valid TOML: {err}") from None
    except (OSError, UnicodeDecodeError) as err:
        raise ScenarioError(f"{path}: cannot read: {err}") from None
    extra = {k: data.pop(k) for k in list(data) if k not in _FIELDS and isinstance(data[k], dict)}
    data.setdefault("name", path.stem)
    # a relative trace path is relative to the file, so configs can travel
    trace = data.get("trace")
    if isinstance(trace, str) and trace not in BUILTIN_TRACES:
        candidate = (path.parent / trace).expanduser()
        if not Path(trace).is_absolute() and _is_file(candidate):
            data["trace"] = str(candidate)
    return scenario_from_dict(data, source=str(path)), extra


def get_scenario(name_or_path: str | Path) -> tuple[Scenario, dict[str, Any]]:
    """A registered scenario by name, or one read from a ``.toml`` file."""
    key = str(name_or_path)
    if key in SCENARIOS:
        return SCENARIOS[key], {}
    if key.endswith(".toml") or _is_file(Path(key)):
        return load_scenario_file(key)
    raise ScenarioError(
        f"unknown scenario {key!r}; known scenarios: {', '.join(SCENARIOS)} (or a .toml file)"
    )


# -- TOML writing (tomllib only reads) -------------------------------------------
def _toml_value(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        if math.isnan(value) or math.isinf(value):
            return "nan" if math.isnan(value) else ("inf" if value > 0 else "-inf")
        return repr(value)
    if isinstance(value, str):
        escaped = value.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")
        return f'"{escaped}"'
    if isinstance(value, (list, tuple)):
        return "[" + ", ".join(_toml_value(v) for v in value) + "]"
    if isinstance(value, Mapping):
        return "{ " + ", ".join(f"{_key(k)} = {_toml_value(v)}" for k, v in value.items()) + " }"
    raise TypeError(f"cannot write {type(value).__name__} as TOML")


def _key(key: Any) -> str:
    key = str(key)
    bare = key.replace("_", "").replace("-", "").isalnum()
    return key if bare else _toml_value(key)


def to_toml(data: Mapping[str, Any]) -> str:
    """Serialise nested dicts of scalars and lists; None values are dropped."""
    lines: list[str] = []
    tables: list[tuple[str, Mapping[str, Any]]] = []
    for key, value in data.items():
        if value is None:
            continue
        if isinstance(value, Mapping):
            tables.append((key, value))
        else:
            lines.append(f"{_key(key)} = {_toml_value(value)}")
    for key, table in tables:
        lines.append("")
        lines.append(f"[{_key(key)}]")
        for k, v in table.items():
            if v is not None:
                lines.append(f"{_key(k)} = {_toml_value(v)}")
    return "\n".join(lines) + "\n"
