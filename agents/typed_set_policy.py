"""The set actor-critic on typed clusters (issue 53): ``SetExtractor`` plus a
type branch, for ``SetClusterEnv``'s typed layout (``typed=True``).

How typed features enter. The shipped checkpoint (``agents/models/default``,
a ``SetExtractor``) reads the untyped set observation of fixed size
``K * 23 + M * 21 + 13``. The typed layout keeps that observation as its
prefix and appends a typed block (``set_observation.split_typed_set_obs``),
and keeps the untyped actions (``1 + 3K + M``, place = the engine's choice of
type) as the prefix of its actions. So:

* the shipped model acts on a typed cluster as it is, type-blind: make the
  env with ``typed=False`` (its masks still follow the jobs' accepted types);
* ``TypedSetExtractor`` has every module of ``SetExtractor`` under the same
  names, reading the same prefix, plus a type branch: each type slot's
  cluster-wide fields (``TYPE_GLOBAL_FIELDS``) are encoded by one shared
  encoder and pooled (mean and max over present slots) into the context; each
  running job's typed fields enter its embedding as a residual; each (pending
  job, type slot) pair is scored by one head shared over jobs and types, from
  the job's embedding, the context, the type's embedding and the pair's fields
  (``TYPE_PENDING_FIELDS``: speed on the type, feasibility per level), giving
  the ``3 * MAX_TYPES`` typed place logits of the row. No weight depends on
  the number of rows or of types, so one network acts on any cluster of up to
  ``MAX_TYPES`` types (and on untyped clusters, seen as one type).
* ``load_untyped`` copies a trained ``SetExtractor``'s weights in. The two
  residuals are zero at initialisation, so the loaded network's untyped
  logits and value equal the untyped model's on the observation's prefix
  (tested); the typed head starts untrained (retraining is the agents'
  business).
"""

from __future__ import annotations

from typing import Any

import torch as th
from ddl_gym.agents.set_policy import SetExtractor, SetPolicy, _mlp
from gymnasium import spaces
from torch import nn

from ddl_gym.env.set_observation import (
    split_set_obs,
    split_typed_set_obs,
    typed_block_size,
    untyped_set_obs_size,
)
from ddl_gym.env.typed_obs import (
    MAX_TYPES,
    TYPE_GLOBAL_FIELDS,
    TYPE_PENDING_FIELDS,
    TYPE_RUNNING_FIELDS,
)


class TypedSetExtractor(SetExtractor):
    """Typed set observation -> ``[logits (1 + 3K + M + 3 MAX_TYPES K) | value latent]``."""

    def __init__(self, observation_space: spaces.Box, K: int, M: int, hidden: int = 64) -> None:
        expected = untyped_set_obs_size(K, M) + typed_block_size(K, M)
        if observation_space.shape != (expected,):
            raise ValueError(
                f"typed set observation of K={K}, M={M} has {expected} values "
                f"(MAX_TYPES={MAX_TYPES}), the space has shape {observation_space.shape}; "
                "make the env with typed=True"
            )
        # the untyped modules, built on the prefix's shape
        prefix = spaces.Box(0.0, 1.0, shape=(untyped_set_obs_size(K, M),))
        super().__init__(prefix, K, M, hidden)
        self.n_untyped = self.n_actions
        self.n_actions = self.n_untyped + 3 * MAX_TYPES * K
        self._features_dim = self.n_actions + hidden
        self._observation_space = observation_space
        h = hidden
        self.enc_tg = nn.Sequential(nn.Linear(len(TYPE_GLOBAL_FIELDS), h), nn.ReLU())
        self.enc_tp = nn.Sequential(nn.Linear(len(TYPE_PENDING_FIELDS), h), nn.ReLU())
        self.enc_rt = nn.Linear(len(TYPE_RUNNING_FIELDS), h)
        self.ctx_t = nn.Linear(2 * h, h)
        for residual in (self.enc_rt, self.ctx_t):  # zero: the untyped network at first
            nn.init.zeros_(residual.weight)
            nn.init.zeros_(residual.bias)
        self.head_t = _mlp(4 * h, h, 3)

    def load_untyped(self, state_dict: dict[str, Any]) -> None:
        """Copy a ``SetExtractor``'s weights (same ``K``, ``M``, ``hidden``)."""
        missing, unexpected = self.load_state_dict(state_dict, strict=False)
        typed = ("enc_tg.", "enc_tp.", "enc_rt.", "ctx_t.", "head_t.")
        left = [k for k in missing if not k.startswith(typed)]
        if left or unexpected:
            raise ValueError(
                f"not a SetExtractor's weights: missing {left}, unexpected {list(unexpected)}"
            )

    def forward(self, obs: th.Tensor) -> th.Tensor:
        K, M = self.K, self.M
        p, r, g = split_set_obs(obs, K, M)
        tp, tr, tg = split_typed_set_obs(obs, K, M)
        pp, pr, pt = p[..., 0], r[..., 0], tg[..., 0]  # "present" columns
        ep = self.enc_p(p)
        er = self.enc_r(r) + self.enc_rt(tr)
        et = self.enc_tg(tg)  # (.., T, h)
        mean_p, max_p = self._pool(ep, pp)
        mean_r, max_r = self._pool(er, pr)
        mean_t, max_t = self._pool(et, pt)
        ctx = self.ctx(th.cat([mean_p, max_p, mean_r, max_r, self.enc_g(g)], dim=-1))
        ctx = ctx + self.ctx_t(th.cat([mean_t, max_t], dim=-1))
        h = ctx.shape[-1]
        c_p = ctx.unsqueeze(-2).expand(*ep.shape[:-1], h)
        c_r = ctx.unsqueeze(-2).expand(*er.shape[:-1], h)
        lp = self.head_p(th.cat([ep, c_p], dim=-1)).flatten(start_dim=-2)  # (.., 3K)
        lr = self.head_r(th.cat([er, c_r], dim=-1)).squeeze(-1)  # (.., M)
        lw = self.head_w(ctx)  # (.., 1)
        # (job, type) pairs: (.., K, T, 4h) -> 3 logits each, in action order k, t, level
        pair_shape = (*ep.shape[:-1], MAX_TYPES, h)
        pairs = th.cat(
            [
                ep.unsqueeze(-2).expand(pair_shape),
                c_p.unsqueeze(-2).expand(pair_shape),
                et.unsqueeze(-3).expand(pair_shape),
                self.enc_tp(tp),
            ],
            dim=-1,
        )
        lt = self.head_t(pairs).flatten(start_dim=-3)  # (.., 3 T K)
        return th.cat([lw, lp, lr, lt, self.value(ctx)], dim=-1)


class TypedSetPolicy(SetPolicy):
    """MaskablePPO policy over ``TypedSetExtractor``; ``policy_kwargs``:
    ``{"features_extractor_kwargs": {"K": .., "M": .., "hidden": ..}}``."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        kwargs.setdefault("features_extractor_class", TypedSetExtractor)
        super().__init__(*args, **kwargs)
