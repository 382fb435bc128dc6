"""The Gymnasium env (``ClusterEnv``, registered as ``ddl_gym/Cluster-v0``
and the variants in ``ddl_gym.ENV_VARIANTS``), one module per job:

* ``cluster_env``: the env itself (reset, step, masks, render);
* ``observation``: the observation arrays and the action mask;
* ``actions``: discrete index <-> engine action;
* ``sources``: ``trace=`` arguments and each episode's engine;
* ``set_env`` / ``set_observation``: ``SetClusterEnv``, the same env with a
  size-free candidate-set observation (any cluster, any queue length);
* ``bench_env``: ``BenchEnv`` (``ddl_gym/Bench-v3``), a benchmark suite
  split's (case, seed) episodes in ``SetClusterEnv``, one agent for every case;
* ``wrappers``: ``FlattenClusterObs`` (one flat ``Box`` for MLP policies).
"""

from ddl_gym.env.bench_env import BenchEnv
from ddl_gym.env.cluster_env import REWARDS, ClusterEnv, heuristic_rollout
from ddl_gym.env.set_env import SetClusterEnv
from ddl_gym.env.sources import EpisodeSource, resolve_trace
from ddl_gym.env.wrappers import FlattenClusterObs

__all__ = [
    "REWARDS",
    "BenchEnv",
    "ClusterEnv",
    "EpisodeSource",
    "FlattenClusterObs",
    "SetClusterEnv",
    "heuristic_rollout",
    "resolve_trace",
]
