"""ddl-gym: network-aware GPU-cluster scheduling, as a simulator and a Gymnasium env."""

import sys
from collections.abc import Sequence
from importlib.machinery import ModuleSpec
from types import ModuleType

__version__ = "0.1.0"

# Gymnasium variants, registered when gymnasium is imported (entry points are
# strings, so the engine is imported only when an env is made). See ddl_gym.env.ClusterEnv.
ENV_VARIANTS: dict[str, dict] = {
    # the bundled synthetic default on the seed's 64-GPU cluster
    "ddl_gym/Cluster-v0": {},
    # the seed's Helios week (synthetic default if the data is absent)
    "ddl_gym/SeedWeek-v0": {"trace": "seed-week", "cluster": "seed64"},
    # the Philly week on 512 NVSwitch/InfiniBand GPUs, whole trace per episode
    "ddl_gym/PhillyWeek-v0": {"trace": "philly-week", "cluster": "nvswitch512"},
    # the same, one random day of it per episode (for training)
    "ddl_gym/PhillyDay-v0": {
        "trace": "philly-week",
        "cluster": "nvswitch512",
        "window_s": 86400.0,
    },
    # small and fast (tests, smoke runs): 16 GPUs on a commodity network, a
    # fresh 16-job synthetic trace per episode
    "ddl_gym/Small-v0": {
        "trace": {
            "n_jobs": 16,
            "arrival_rate_per_h": 40.0,
            "duration_median_s": 600.0,
            "max_duration_s": 7200.0,
            "max_gpus": 8,
            "model_mix": {"resnet18": 1, "mobilenet_v3": 1, "resnet50": 1, "vgg11": 1},
        },
        "cluster": "2x2x4",
        "fabric": "pcie_25gbe",
        "K": 4,
        "M": 4,
    },
    # a benchmark suite's split, one (case, seed) per episode, with the size-free
    # observation (ddl_gym.env.bench_env.BenchEnv): one agent for every case
    "ddl_gym/Bench-v3": {"split": "train"},
}

# ids whose entry point is not ClusterEnv
ENTRY_POINTS: dict[str, str] = {"ddl_gym/Bench-v3": "ddl_gym.env.bench_env:BenchEnv"}


def _register_envs() -> None:
    import gymnasium

    for env_id, kwargs in ENV_VARIANTS.items():
        if env_id not in gymnasium.registry:
            entry_point = ENTRY_POINTS.get(env_id, "ddl_gym.env:ClusterEnv")
            gymnasium.register(id=env_id, entry_point=entry_point, kwargs=kwargs)


class _RegisterWhenGymnasiumLoads:
    """A one-shot import hook: registers the env ids as soon as gymnasium is
    imported, so ``import ddl_gym`` stays light (the ``ddl-gym`` command line
    never pays for gymnasium and numpy) and ``gym.make("ddl_gym/...")`` works
    whichever of the two was imported first."""

    def find_spec(
        self, fullname: str, path: Sequence[str] | None, target: ModuleType | None = None, /
    ) -> ModuleSpec | None:
        if fullname != "gymnasium":
            return None
        import importlib.util

        sys.meta_path.remove(self)  # let the real finders find it
        spec = importlib.util.find_spec(fullname)
        loader = spec.loader if spec is not None else None
        if loader is not None:
            exec_module = loader.exec_module

            def exec_then_register(module: ModuleType) -> None:
                exec_module(module)
                _register_envs()

            loader.exec_module = exec_then_register  # type: ignore[method-assign]
        return spec


if "gymnasium" in sys.modules:
    _register_envs()
elif not any(isinstance(f, _RegisterWhenGymnasiumLoads) for f in sys.meta_path):
    sys.meta_path.insert(0, _RegisterWhenGymnasiumLoads())
