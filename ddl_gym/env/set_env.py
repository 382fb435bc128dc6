"""``SetClusterEnv``: ``ClusterEnv`` with the size-free set observation.

The observation and the action layout come from ``set_observation``; the
engine, rewards, skipping of trivial instants, truncation and the action
translation are ``ClusterEnv``'s. A policy trained here runs on any cluster
(the shape depends only on ``K`` and ``M``) and sees up to ``K`` waiting jobs.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from gymnasium import spaces

from ddl_gym.engine import Engine
from ddl_gym.env.actions import ActionCodec
from ddl_gym.env.cluster_env import ClusterEnv
from ddl_gym.env.set_observation import SetObsBuilder, SetObsConfig, set_obs_size
from ddl_gym.env.typed_obs import MAX_TYPES
from ddl_gym.topology import Cluster


class SetClusterEnv(ClusterEnv):
    """``ClusterEnv`` whose observation is a padded set of candidates.

    ## Observation Space

    ``Box(0, 1, (K * 23 + M * 21 + 13,))``: ``K`` pending rows
    (``set_observation.SET_PENDING_FIELDS``), ``M`` running rows
    (``SET_RUNNING_FIELDS``), then the cluster-wide fractions
    (``SET_GLOBAL_FIELDS``); ``set_observation.split_set_obs`` cuts it. Empty rows
    are zeros (``present`` = 0). The shape does not depend on the cluster.

    In the typed layout (``typed``; typed clusters by default) a typed block
    follows: ``K x MAX_TYPES x 4`` (per pending row and type slot: ``speed``
    normalised by the job's best accepted type, 0 unaccepted;
    ``feasible_machine|rack|network`` on that type), ``M x (2 + MAX_TYPES)`` (per running
    row: ``speed`` on its type, ``mixed``, ``on_type_0..7``) and
    ``MAX_TYPES x 4`` (per type: ``present``, fraction ``free``, ``share`` of
    the cluster's GPUs, ``max_server_free``): ``Box(0, 1, (K * 23 + M * 21 +
    13 + K * 32 + M * 10 + 32,))`` with ``MAX_TYPES = 8``
    (``set_observation.split_typed_set_obs`` cuts the block). The untyped
    prefix keeps its meaning, so a type-blind network reads it unchanged.

    ## Action Space

    ``Discrete(1 + 3K + M)``, laid out as ``ClusterEnv``'s: ``0`` WAIT (until
    the next arrival, completion, lease expiry or tick), ``1 + 3k + l`` place
    pending row ``k`` at level ``l``, ``1 + 3K + j`` preempt running row ``j``.
    Preempting a job and placing it again at once is a migration.
    The typed layout adds ``3 * MAX_TYPES`` actions per pending row after
    them: ``1 + 3K + M + 3 (k MAX_TYPES + t) + l`` places row ``k`` at level
    ``l`` on GPU type slot ``t``; ``1 + 3k + l`` is then the engine's choice
    of type. Masks refuse types the job does not accept, empty type slots and
    types with no free placement (``ClusterEnv``'s Action Space).

    ## Arguments (besides ``ClusterEnv``'s)

    * ``K`` (64), ``M`` (64): pending and running rows. When more jobs wait,
      the rows hold the ``K // 2`` longest-waiting jobs and the ``K - K // 2``
      asking the fewest GPUs; when more run, the ``M`` widest.
    * ``preempt_budget`` (1): preemptions allowed per decision instant (0
      hides preemption); with the engine's rule that a job started at this
      instant cannot be preempted at it, no place/preempt loop is possible.
    * ``tick_s`` (1800): a decision point every ``tick_s`` seconds while jobs
      wait, so WAIT can express a delay ("not now, ask me again in half an
      hour"), as Dally's delay timers do; ``None`` turns the ticks off.
    * ``typed`` (None: whether the cluster has GPU types): the typed layout.
    """

    def __init__(
        self,
        trace: Any = "default",
        cluster: Cluster | str = "seed64",
        *,
        K: int = 64,
        M: int = 64,
        preempt_budget: int = 1,
        tick_s: float | None = 1800.0,
        clairvoyant: bool = False,
        **kwargs: Any,
    ) -> None:
        if preempt_budget < 0:
            raise ValueError(f"preempt_budget must be >= 0, got {preempt_budget}")
        super().__init__(trace, cluster, K=K, M=M, tick_s=tick_s, clairvoyant=clairvoyant, **kwargs)
        self.preempt_budget = int(preempt_budget)
        self._set_cfg = SetObsConfig(
            K=self.K,
            M=self.M,
            clairvoyant=clairvoyant,
            preempt_budget=self.preempt_budget,
            typed=self.typed,
        )
        self.observation_space = spaces.Box(
            0.0, 1.0, shape=(set_obs_size(self._set_cfg),), dtype=np.float32
        )
        self._codec = SetActionCodec(
            self.K, self.M, self.preempt_budget, MAX_TYPES if self.typed else 0
        )

    def _make_obs_builder(self, engine: Engine) -> SetObsBuilder:  # type: ignore[override]
        return SetObsBuilder(engine, self._set_cfg)


class SetActionCodec(ActionCodec):
    """``ActionCodec`` with the set env's reasons for a masked action."""

    def __init__(self, K: int, M: int, preempt_budget: int, T: int = 0) -> None:
        super().__init__(K, M, T)
        self.preempt_budget = preempt_budget

    def why_invalid(self, a: int, obs, engine: Engine) -> str:  # type: ignore[override]
        if engine.done or not 0 <= a < obs.n_actions:
            return super().why_invalid(a, obs, engine)
        if a == 0:
            return (
                f"WAIT refused at t={engine.now:.6g}s: nothing runs and {len(engine.pending)} "
                "job(s) wait; place a job"
            )
        j = a - 1 - 3 * self.K
        if 0 <= j < len(obs.win_running) and obs.win_running[j].started_at < engine.now:
            return f"preemption budget ({self.preempt_budget} per instant) used up"
        return super().why_invalid(a, obs, engine)
