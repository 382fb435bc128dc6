"""A size-free actor-critic for the set observation (``ddl_gym.env.set_observation``).

Decima-style: one encoder shared by every pending job and one by every
running job; the context is the masked mean and max of those embeddings plus
an encoding of the cluster-wide fractions; each candidate is scored by a
head shared across candidates (3 logits per pending job, one per placement
level, and one per running job for preemption), WAIT by a head on the
context. The value is read from the context. No weight depends on the
number of rows, so the same parameters act on any cluster and any queue; the
number of rows (the padding) only fixes SB3's observation shape.

Because pooling is symmetric and the heads are applied row by row,
permuting the pending rows permutes their logits and changes nothing else
(``tests/test_agents_set.py`` checks it).

SB3 integration: ``SetExtractor`` computes the logits and the value latent
in one pass and hands them to ``MaskableActorCriticPolicy`` through a
pass-through ``mlp_extractor``; ``SetPolicy`` replaces the final
``action_net`` by the identity (the logits are already per action).
"""

from __future__ import annotations

from typing import Any, cast

import torch as th
from gymnasium import spaces
from sb3_contrib.common.maskable.policies import MaskableActorCriticPolicy
from stable_baselines3.common.torch_layers import BaseFeaturesExtractor
from torch import nn

from ddl_gym.env.set_observation import (
    SET_GLOBAL_FIELDS,
    SET_PENDING_FIELDS,
    SET_RUNNING_FIELDS,
    split_set_obs,
)

NEG = -1e4  # pooled max over an empty set


def _mlp(n_in: int, hidden: int, n_out: int) -> nn.Sequential:
    return nn.Sequential(nn.Linear(n_in, hidden), nn.ReLU(), nn.Linear(hidden, n_out))


class SetExtractor(BaseFeaturesExtractor):
    """Flat set observation -> ``[logits (n_actions) | value latent (hidden)]``."""

    def __init__(self, observation_space: spaces.Box, K: int, M: int, hidden: int = 64) -> None:
        self.K, self.M, self.hidden = K, M, hidden
        self.n_actions = 1 + 3 * K + M
        super().__init__(observation_space, features_dim=self.n_actions + hidden)
        fp, fr, fg = len(SET_PENDING_FIELDS), len(SET_RUNNING_FIELDS), len(SET_GLOBAL_FIELDS)
        expected = K * fp + M * fr + fg
        if observation_space.shape != (expected,):
            raise ValueError(
                f"set observation of K={K}, M={M} has {expected} values, "
                f"the space has shape {observation_space.shape}"
            )
        h = hidden
        self.enc_p = nn.Sequential(_mlp(fp, h, h), nn.ReLU())
        self.enc_r = nn.Sequential(_mlp(fr, h, h), nn.ReLU())
        self.enc_g = nn.Sequential(nn.Linear(fg, h), nn.ReLU())
        self.ctx = nn.Sequential(nn.Linear(5 * h, h), nn.ReLU(), nn.Linear(h, h), nn.ReLU())
        self.head_p = _mlp(2 * h, h, 3)
        self.head_r = _mlp(2 * h, h, 1)
        self.head_w = _mlp(h, h, 1)
        self.value = nn.Sequential(nn.Linear(h, h), nn.ReLU())

    @staticmethod
    def _pool(x: th.Tensor, present: th.Tensor) -> tuple[th.Tensor, th.Tensor]:
        w = present.unsqueeze(-1)
        n = w.sum(dim=-2).clamp(min=1.0)
        mean = (x * w).sum(dim=-2) / n
        mx = x.masked_fill(w == 0, NEG).max(dim=-2).values
        mx = th.where(mx <= NEG / 2, th.zeros_like(mx), mx)
        return mean, mx

    def forward(self, obs: th.Tensor) -> th.Tensor:
        p, r, g = split_set_obs(obs, self.K, self.M)
        pp, pr = p[..., 0], r[..., 0]  # "present" columns
        ep = self.enc_p(p)
        er = self.enc_r(r)
        mean_p, max_p = self._pool(ep, pp)
        mean_r, max_r = self._pool(er, pr)
        ctx = self.ctx(th.cat([mean_p, max_p, mean_r, max_r, self.enc_g(g)], dim=-1))
        c_p = ctx.unsqueeze(-2).expand(*ep.shape[:-1], ctx.shape[-1])
        c_r = ctx.unsqueeze(-2).expand(*er.shape[:-1], ctx.shape[-1])
        lp = self.head_p(th.cat([ep, c_p], dim=-1)).flatten(start_dim=-2)  # (.., 3K)
        lr = self.head_r(th.cat([er, c_r], dim=-1)).squeeze(-1)  # (.., M)
        lw = self.head_w(ctx)  # (.., 1)
        return th.cat([lw, lp, lr, self.value(ctx)], dim=-1)


class _Split(nn.Module):
    """The ``mlp_extractor`` SB3 expects: logits to the actor, latent to the critic."""

    def __init__(self, n_actions: int, hidden: int) -> None:
        super().__init__()
        self.latent_dim_pi = n_actions
        self.latent_dim_vf = hidden
        self.n_actions = n_actions

    def forward(self, features: th.Tensor) -> tuple[th.Tensor, th.Tensor]:
        return self.forward_actor(features), self.forward_critic(features)

    def forward_actor(self, features: th.Tensor) -> th.Tensor:
        return features[..., : self.n_actions]

    def forward_critic(self, features: th.Tensor) -> th.Tensor:
        return features[..., self.n_actions :]


class SetPolicy(MaskableActorCriticPolicy):
    """MaskablePPO policy over ``SetExtractor``; ``policy_kwargs``:
    ``{"features_extractor_kwargs": {"K": .., "M": .., "hidden": ..}}``."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        kwargs.setdefault("features_extractor_class", SetExtractor)
        kwargs["ortho_init"] = False  # SB3's gains are tuned for its own MLP heads
        kwargs["net_arch"] = []
        super().__init__(*args, **kwargs)

    def _build_mlp_extractor(self) -> None:
        fx = cast(SetExtractor, self.features_extractor)
        self.mlp_extractor = _Split(fx.n_actions, fx.hidden)

    def _build(self, lr_schedule) -> None:
        super()._build(lr_schedule)
        self.action_net = nn.Identity()  # the extractor's logits are per action already
        self.optimizer = self.optimizer_class(
            self.parameters(),
            lr=lr_schedule(1),  # pyright: ignore[reportCallIssue] (SB3 types the class as Optimizer)
            **self.optimizer_kwargs,
        )
