"""Translation between the env's discrete actions and the engine's actions.

Index ``0`` is WAIT, ``1 + 3k + l`` places the k-th job of the pending window
at level ``l``, ``1 + 3K + j`` preempts the j-th job of the running window;
the windows are the observation builder's (``ObsBuilder.win_pending`` /
``win_running``), so an index means what the agent saw.

In the typed layout (``typed=True``; typed clusters by default) ``3 T K``
more indices follow: ``1 + 3K + M + 3 (k T + t) + l`` places the k-th
pending job at level ``l`` on GPU type slot ``t`` (``T = MAX_TYPES`` slots,
``Place(job, level, gpu_type=t)``); ``1 + 3k + l`` stays the engine's choice
of type (``gpu_type=None``: the tightest level over the job's accepted
types), so a type-blind policy acts on a typed cluster unchanged.
"""

from __future__ import annotations

from ddl_gym.engine import WAIT, Action, Engine, Place, Preempt, Wait
from ddl_gym.env.observation import LEVELS, ObsBuilder
from ddl_gym.perf import Level


class ActionCodec:
    """Decodes and encodes actions against the current windows of ``obs``.

    ``T``: type slots of the typed place actions (0: none, the untyped layout).
    """

    def __init__(self, K: int, M: int, T: int = 0) -> None:
        self.K, self.M, self.T = K, M, T
        self.n = 1 + 3 * K + M + 3 * T * K
        self._typed_at = 1 + 3 * K + M  # first typed place action

    def _typed(self, a: int) -> tuple[int, int, int]:
        """(pending slot, type slot, level index) of typed place action ``a``."""
        k, rest = divmod(a - self._typed_at, 3 * self.T)
        t, level = divmod(rest, 3)
        return k, t, level

    def decode(self, a: int, obs: ObsBuilder) -> Action:
        """The engine action of a (valid-shaped) index; slots must be filled."""
        K = self.K
        if a == 0:
            return WAIT
        if a <= 3 * K:
            k, level = divmod(a - 1, 3)
            return Place(obs.win_pending[k].index, LEVELS[level])
        if a >= self._typed_at:
            k, t, level = self._typed(a)
            # an untyped engine seen in the typed layout has one type: its own
            gpu_type = t if obs.engine.types is not None else None
            return Place(obs.win_pending[k].index, LEVELS[level], gpu_type)
        return Preempt(obs.win_running[a - 1 - 3 * K].index)

    def why_invalid(self, a: int, obs: ObsBuilder, engine: Engine) -> str:
        """Why index ``a`` is masked now, in words."""
        e = engine
        if e.done:
            return "the episode is over: every job is done"
        if not 0 <= a < obs.n_actions:
            return f"action {a} is outside Discrete({obs.n_actions})"
        K = self.K
        if a == 0:
            return (
                f"WAIT refused at t={e.now:.6g}s: nothing runs, {len(e.pending)} job(s) "
                "wait and no tick is due (the cluster must not idle with a queue); place a job"
            )
        if a <= 3 * K:
            k, level = divmod(a - 1, 3)
            if k >= len(obs.win_pending):
                return f"pending slot {k} is empty ({len(obs.win_pending)} job(s) in the window)"
            return e.check(Place(obs.win_pending[k].index, LEVELS[level])) or "invalid"
        if a >= self._typed_at:
            k, t, level = self._typed(a)
            if k >= len(obs.win_pending):
                return f"pending slot {k} is empty ({len(obs.win_pending)} job(s) in the window)"
            names = e.cluster.type_names or ("(the untyped cluster's GPUs)",)
            if t >= len(names):
                return f"type slot {t} is empty (the cluster has {len(names)} GPU type(s))"
            action = self.decode(a, obs)
            return e.check(action) or "invalid"
        j = a - 1 - 3 * K
        if j < len(obs.win_running):
            job = obs.win_running[j]
            return f"job {job.job_id} started at this instant; it cannot be preempted now"
        return f"running slot {j} is empty ({len(obs.win_running)} job(s) in the window)"

    def index(self, action: Action, obs: ObsBuilder) -> int:
        """The discrete action that performs engine ``action`` now; ``ValueError``
        if its job is outside the windows (or it names a GPU type and the
        layout has no typed actions)."""
        if isinstance(action, Wait):
            return 0
        if isinstance(action, Place):
            gpu_type = action.gpu_type
            if gpu_type is not None and not 0 <= gpu_type < self.T:
                raise ValueError(
                    f"{action}: GPU type {gpu_type!r} has no typed place action "
                    f"({self.T} type slots; make the env with typed=True)"
                )
            for k, job in enumerate(obs.win_pending):
                if job.index == action.job:
                    level = int(Level(action.level))
                    if gpu_type is None:
                        return 1 + 3 * k + level
                    return self._typed_at + 3 * (k * self.T + gpu_type) + level
            raise ValueError(f"{action}: job {action.job} is not in the pending window")
        if isinstance(action, Preempt):
            for j, job in enumerate(obs.win_running):
                if job.index == action.job:
                    return 1 + 3 * self.K + j
            raise ValueError(f"{action}: job {action.job} is not in the running window")
        raise ValueError(f"not an action: {action!r}")

    def engine_action(self, index: int, obs: ObsBuilder) -> Action:
        """The engine action index ``index`` stands for now; ``ValueError`` if
        it is out of range or names an empty slot."""
        a = int(index)
        K = self.K
        if not 0 <= a < obs.n_actions:
            raise ValueError(f"action {a} is outside Discrete({obs.n_actions})")
        if 1 <= a <= 3 * K and (a - 1) // 3 >= len(obs.win_pending):
            raise ValueError(f"action {a}: pending slot {(a - 1) // 3} is empty")
        if a >= self._typed_at:
            k, t, _ = self._typed(a)
            if k >= len(obs.win_pending):
                raise ValueError(f"action {a}: pending slot {k} is empty")
            n_types = max(1, len(obs.engine.cluster.gpu_kinds))
            if t >= n_types:
                raise ValueError(f"action {a}: type slot {t} is empty ({n_types} type(s))")
            return self.decode(a, obs)
        if a > 3 * K and a - 1 - 3 * K >= len(obs.win_running):
            raise ValueError(f"action {a}: running slot {a - 1 - 3 * K} is empty")
        return self.decode(a, obs)
