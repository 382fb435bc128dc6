"""Translation between the env's discrete actions and the engine's actions.

Index ``0`` is WAIT, ``1 + 3k + l`` places the k-th job of the pending window
at level ``l``, ``1 + 3K + j`` preempts the j-th job of the running window;
the windows are the observation builder's (``ObsBuilder.win_pending`` /
``win_running``), so an index means what the agent saw.
"""

from __future__ import annotations

from ddl_gym.engine import WAIT, Action, Engine, Place, Preempt, Wait
from ddl_gym.env.observation import LEVELS, ObsBuilder
from ddl_gym.perf import Level


class ActionCodec:
    """Decodes and encodes actions against the current windows of ``obs``."""

    def __init__(self, K: int, M: int) -> None:
        self.K, self.M = K, M
        self.n = 1 + 3 * K + M

    def decode(self, a: int, obs: ObsBuilder) -> Action:
        """The engine action of a (valid-shaped) index; slots must be filled."""
        K = self.K
        if a == 0:
            return WAIT
        if a <= 3 * K:
            k, level = divmod(a - 1, 3)
            return Place(obs.win_pending[k].index, LEVELS[level])
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
        j = a - 1 - 3 * K
        if j < len(obs.win_running):
            job = obs.win_running[j]
            return f"job {job.job_id} started at this instant; it cannot be preempted now"
        return f"running slot {j} is empty ({len(obs.win_running)} job(s) in the window)"

    def index(self, action: Action, obs: ObsBuilder) -> int:
        """The discrete action that performs engine ``action`` now; ``ValueError``
        if its job is outside the windows."""
        if isinstance(action, Wait):
            return 0
        if isinstance(action, Place):
            for k, job in enumerate(obs.win_pending):
                if job.index == action.job:
                    return 1 + 3 * k + int(Level(action.level))
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
        if a > 3 * K and a - 1 - 3 * K >= len(obs.win_running):
            raise ValueError(f"action {a}: running slot {a - 1 - 3 * K} is empty")
        return self.decode(a, obs)
