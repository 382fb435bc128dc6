"""Training configuration: one dataclass, optionally read from a small TOML file.

A TOML file mirrors the dataclasses' nesting::

    seed = 0
    total_timesteps = 300_000
    [env]
    congestion = "heavy"
    [split]
    traces = ["default:0-9"]
    [ppo]
    net_arch = [64, 64]

Unknown keys are an error (a typo should not silently train something else).
The config is saved next to every model as JSON, so a model always carries
the env settings it must be run with (``agents.load_policy`` reads it back).
"""

from __future__ import annotations

import dataclasses
import json
import tomllib
import typing
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from ddl_gym.model_env import describe_type, json_fits


@dataclass
class EnvConfig:
    """``ClusterEnv`` arguments the agent is trained (and must be run) with."""

    cluster: str = "seed64"
    fabric: str | None = None
    congestion: str | float = "heavy"
    K: int = 8
    M: int = 8
    lease_s: float | None = None
    tick_s: float | None = None
    restore_s_per_gpu: float = 1.0
    reward: str = "jct"
    time_scale_s: float = 3600.0
    queue_order: str = "arrival"
    # Whether the agent may preempt. Off by default: a random initial policy
    # preempts constantly (place/preempt loops at one instant), which wastes
    # most of a small training budget; placement and delay are the levers
    # that matter under congestion.
    preempt: bool = False
    window_s: float | None = 12 * 3600.0  # one episode = a window of a pool trace
    max_steps: int | None = 20_000  # truncation guard for runaway episodes
    # "flat": ClusterEnv's per-server observation (shape tied to the cluster);
    # "set": SetClusterEnv's padded candidate set (any cluster, K/M rows).
    obs: str = "flat"
    preempt_budget: int = 1  # "set" only: preemptions per decision instant
    # Mixed episode lengths: each training episode draws its window length
    # (hours; 0 = the whole train part) from this list. Empty: window_s.
    windows_h: list[float] = field(default_factory=list)
    # Training reward only: subtracted per preemption the agent chooses (in
    # reward units: job-hours with the "jct" reward). Validation returns stay
    # minus the total JCT, so model selection is unchanged.
    preempt_cost: float = 0.0
    # "set" only: forbid placing a job at a level whose predicted slowdown
    # (observation field slowdown_<level>, under the current background) is
    # above this factor, unless that leaves no action. None: no guard.
    max_slowdown: float | None = None
    # Inference only (AgentPolicy; the env does not apply it): when a job
    # completes and no job waits, move a running job spread wider than its
    # size needs to a strictly tighter placement (``agents.shield``).
    repack_idle: bool = False
    # Inference only: the agent may not preempt a job that has run less than
    # this long since it last started (a scheduling quantum). None: no limit.
    min_run_s: float | None = None
    # Inference only: a job that fits in one rack is not placed across racks
    # where its predicted slowdown there is above this factor (unless nothing
    # else is possible; ``agents.shield.cross_rack_mask``). None: no limit.
    cross_rack_guard: float | None = None

    def __post_init__(self) -> None:
        if self.cross_rack_guard is not None and not self.cross_rack_guard >= 1.0:
            raise ValueError(
                f"env.cross_rack_guard is a slowdown factor (>= 1), got {self.cross_rack_guard}"
            )


@dataclass
class SplitConfig:
    """Which traces the agent trains on and which it is judged on.

    Every trace of ``traces`` is cut by arrival time into three disjoint
    parts (fractions of its arrival span): training windows are sampled only
    from ``train``, the best model is chosen on ``val`` windows and the final
    comparison uses ``test`` windows. Trace specs: ``"default:A-B"`` (the
    bundled synthetic workload, seeds A..B), ``"default:S"``, ``"long:A-B"``
    (synthetic traces with the seed's job sizes and ~20 h durations), or a trace file
    path (relative paths are also looked up under the data directory).
    """

    traces: list[str] = field(default_factory=lambda: ["default:0-9"])
    # Whole traces held out from training: ``val_traces`` are only used for
    # model selection, ``test_traces`` only for the final comparison.
    val_traces: list[str] = field(default_factory=list)
    test_traces: list[str] = field(default_factory=list)
    # Model selection across runs and configurations (``heldout.py --select``)
    # only: more whole traces (``select_traces``; a spec ending in ``*K`` has
    # its arrival rate multiplied by K) and the validation parts of the pool
    # traces whose name contains one of ``select_parts``. Never trained on.
    select_traces: list[str] = field(default_factory=list)
    select_parts: list[str] = field(default_factory=list)
    train: tuple[float, float] = (0.0, 0.70)
    val: tuple[float, float] = (0.70, 0.85)
    test: tuple[float, float] = (0.85, 1.0)
    n_val_windows: int = 6  # fixed validation windows (the same at every evaluation)


@dataclass
class PPOConfig:
    algo: str = "maskable_ppo"  # or "ppo": plain PPO, invalid actions mapped to WAIT
    # "mlp": SB3's MlpPolicy on the flat observation; "set": agents.set_policy
    # (shared per-candidate scorer; needs env.obs = "set")
    policy: str = "mlp"
    net_arch: list[int] = field(default_factory=lambda: [64, 64])
    hidden: int = 64  # "set" policy: width of the encoders and heads
    learning_rate: float = 3e-4
    n_steps: int = 1024  # per env
    batch_size: int = 256
    n_epochs: int = 5
    gamma: float = 0.995
    gae_lambda: float = 0.95
    ent_coef: float = 0.01
    clip_range: float = 0.2


@dataclass
class BCConfig:
    """Behaviour-cloning warm start (``agents.bc``): imitate ``teacher`` on
    the training windows before PPO. Empty ``teacher``: off (PPO from
    scratch). With ``total_timesteps = 0`` the run is "BC only"."""

    # a baseline name, e.g. "gandiva"; several, comma-separated
    # ("gandiva,tiresias"): each episode imitates the one best on its window
    teacher: str = ""
    # Minari dataset ids (comma-separated; ``ddl-gym datasets build``) to
    # imitate instead of running ``teacher``; their env must be the agent's
    # (ClusterEnv with the same cluster, K and M; the dict observation)
    datasets: str = ""
    samples: int = 30_000  # labelled teacher decisions
    max_episode_steps: int = 4_000  # per collected episode (whole traces are long)
    epochs: int = 8
    batch_size: int = 256
    learning_rate: float = 1e-3
    value_coef: float = 0.5


@dataclass
class TrainConfig:
    env: EnvConfig = field(default_factory=EnvConfig)
    split: SplitConfig = field(default_factory=SplitConfig)
    ppo: PPOConfig = field(default_factory=PPOConfig)
    bc: BCConfig = field(default_factory=BCConfig)
    total_timesteps: int = 300_000
    seed: int = 0
    n_envs: int = 2  # one per core
    vec_env: str = "subproc"  # or "dummy" (in-process; for tests)
    eval_freq: int = 20_000  # total env steps between validation runs
    checkpoint_freq: int = 50_000  # total env steps between checkpoints

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    def save_json(self, path: str | Path) -> None:
        Path(path).write_text(json.dumps(self.to_dict(), indent=2) + "\n")

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> TrainConfig:
        return _build(cls, data, "config")

    @classmethod
    def load(cls, path: str | Path) -> TrainConfig:
        """From a ``.toml`` or ``.json`` file."""
        path = Path(path)
        try:
            if path.suffix == ".toml":
                with path.open("rb") as f:
                    data = tomllib.load(f)
            else:
                data = json.loads(path.read_text())
        except (tomllib.TOMLDecodeError, json.JSONDecodeError) as err:
            kind = "TOML" if path.suffix == ".toml" else "JSON"
            raise ValueError(f"{path}: not valid {kind}: {err}") from None
        try:
            return _build(cls, data, "config")
        except ValueError as err:
            raise ValueError(f"{path}: {err}") from None


def _build(cls: type, data: dict[str, Any], where: str) -> Any:
    if not isinstance(data, dict):
        raise ValueError(f"{where}: want a table of settings, got {type(data).__name__}")
    fields = {f.name: f for f in dataclasses.fields(cls)}
    unknown = set(data) - set(fields)
    if unknown:
        raise ValueError(f"{where}: unknown keys {sorted(unknown)}; known: {sorted(fields)}")
    hints = typing.get_type_hints(cls)
    kwargs: dict[str, Any] = {}
    for name, value in data.items():
        default = getattr(cls(), name)
        if not dataclasses.is_dataclass(default) and not json_fits(value, hints[name]):
            raise ValueError(
                f"{where}.{name} must be {describe_type(hints[name])}, "
                f"got {type(value).__name__} {value!r}"
            )
        if dataclasses.is_dataclass(default):
            kwargs[name] = _build(type(default), value, f"{where}.{name}")
        elif isinstance(default, tuple):
            kwargs[name] = tuple(value)  # TOML and JSON only know lists
        else:
            kwargs[name] = value
    return cls(**kwargs)
