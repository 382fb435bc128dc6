"""Guided PPO: an imitation term beside PPO's update (``agents.suite_ppo``).

PPO fine-tuning alone never learnt Tiresias' least-attained-service order
where Tiresias wins, and drifted away from its start elsewhere (every run's
best validation iteration was its start); fitting DAgger labels in a
separate pass moved the whole network (docs/agents_log.md, issue 31). Here the
imitation happens inside the training run, on the states PPO visits:

* ``TeacherLabels`` (inside ``SuiteCaseEnv``): on the train cases listed in
  ``SuitePPOConfig.guide_teachers`` a heuristic follows the episode and
  labels each new state with its decision (``teachers.label``), put in the
  step's ``info`` with the state's action mask.
* ``GuideCallback``: after each rollout, before PPO's update on it, a few
  gradient steps on ``guide_coef`` x (cross-entropy to the teacher's label
  on the labelled states + with ``guide_self``, KL from the frozen starting
  policy on every other state): the teacher pulls where it is best, the
  anchor holds the starting behaviour elsewhere.

Only the policy logits (the set features extractor) move; the value head is
PPO's alone.
"""

from __future__ import annotations

from typing import Any

import numpy as np

LABEL_KEY = "teacher_action"
MASK_KEY = "teacher_mask"


class TeacherLabels:
    """The teacher of one episode: ``start`` at reset, ``info`` after each
    step (label -1 on the cases without a teacher: the anchor's states)."""

    def __init__(self, teachers: dict[str, str]) -> None:
        self.teachers = dict(teachers)
        self._teacher: Any = None

    def start(self, case_name: str, env: Any, seed: int | None) -> None:
        """A fresh teacher for ``case_name``'s episode in ``env`` (a
        ``ClusterEnv`` just reset), or none when the case has no teacher."""
        from ddl_gym.baselines import make_policy

        name = self.teachers.get(case_name)
        self._teacher = None if name is None else make_policy(name)
        if self._teacher is not None:
            self._teacher.reset(env.view, seed=seed)

    def info(self, env: Any, done: bool) -> dict[str, Any]:
        """The teacher's label of ``env``'s current state (-1: none), with
        its mask; the teacher is called on every state, so its own state
        follows the trajectory taken."""
        from ddl_gym.agents.teachers import label

        if done:
            return {}
        a = None if self._teacher is None else label(self._teacher, env)
        return {LABEL_KEY: -1 if a is None else a, MASK_KEY: env.action_masks()}


def guide_loss(logits: Any, masks: Any, labels: Any, anchor_logits: Any | None, coef: float) -> Any:
    """``coef`` x (masked cross-entropy to ``labels`` where ``labels >= 0``
    + KL(anchor || policy) on the other rows when ``anchor_logits`` is
    given), averaged over the rows."""
    import torch as th
    import torch.nn.functional as F

    logp = F.log_softmax(logits.masked_fill(~masks, -1e9), dim=-1)
    taught = labels >= 0
    per_row = th.zeros(len(labels))
    if taught.any():
        per_row[taught] = -logp[taught].gather(1, labels[taught].unsqueeze(1)).squeeze(1)
    if anchor_logits is not None and (~taught).any():
        rest = ~taught
        q = F.log_softmax(anchor_logits[rest].masked_fill(~masks[rest], -1e9), dim=-1)
        kl = (q.exp() * (q - logp[rest])).masked_fill(~masks[rest], 0.0).sum(-1)
        per_row[rest] = kl
    return coef * per_row.mean()


class GuideCallback:
    """Collects the labelled states of a rollout and takes the imitation
    steps before PPO's update; an SB3 callback built by ``make``."""

    @staticmethod
    def make(
        anchor: Any | None,
        coef: float,
        epochs: int,
        batch_size: int,
        learning_rate: float,
        seed: int,
    ) -> Any:
        import torch as th
        from stable_baselines3.common.callbacks import BaseCallback

        class _Guide(BaseCallback):
            def __init__(self) -> None:
                super().__init__()
                self.obs: list[np.ndarray] = []
                self.masks: list[np.ndarray] = []
                self.labels: list[int] = []
                self.history: list[dict[str, float]] = []
                self.gen = th.Generator().manual_seed(seed)
                self.opt: Any = None

            def _on_step(self) -> bool:
                new_obs = self.locals["new_obs"]
                for i, info in enumerate(self.locals["infos"]):
                    # after an episode's end new_obs is the next episode's
                    # first state, which the info does not describe: skipped
                    if MASK_KEY not in info or self.locals["dones"][i]:
                        continue
                    lab = int(info[LABEL_KEY])
                    if lab < 0 and anchor is None:
                        continue
                    self.obs.append(np.asarray(new_obs[i], dtype=np.float32))
                    self.masks.append(np.asarray(info[MASK_KEY], dtype=bool))
                    self.labels.append(lab)
                return True

            def _on_rollout_end(self) -> None:
                if not self.labels:
                    return
                fx = self.model.policy.features_extractor
                if self.opt is None:
                    self.opt = th.optim.Adam(fx.parameters(), lr=learning_rate)
                obs = th.as_tensor(np.stack(self.obs))
                masks = th.as_tensor(np.stack(self.masks))
                labels = th.as_tensor(np.array(self.labels, dtype=np.int64))
                n_actions = masks.shape[1]
                with th.no_grad():
                    ref = None if anchor is None else anchor(obs)[:, :n_actions]
                n, total = len(labels), 0.0
                for _ in range(epochs):
                    order = th.randperm(n, generator=self.gen)
                    total = 0.0
                    for s in range(0, n, batch_size):
                        idx = order[s : s + batch_size]
                        logits = fx(obs[idx])[:, :n_actions]
                        loss = guide_loss(
                            logits, masks[idx], labels[idx], None if ref is None else ref[idx], coef
                        )
                        self.opt.zero_grad()
                        loss.backward()
                        th.nn.utils.clip_grad_norm_(fx.parameters(), 0.5)
                        self.opt.step()
                        total += float(loss.detach()) * len(idx)
                taught = int((labels >= 0).sum())
                self.history.append(
                    {
                        "timesteps": float(self.num_timesteps),
                        "states": n,
                        "taught": taught,
                        "loss": total / n,
                    }
                )
                self.obs.clear()
                self.masks.clear()
                self.labels.clear()

        return _Guide()


def frozen_logits(model_path: str) -> Any:
    """The starting policy's logits function (no gradient), for the anchor."""
    import torch as th
    from ddl_gym.agents.dagger import load_init

    fx = load_init(model_path).policy.features_extractor
    fx.eval()
    for p in fx.parameters():
        p.requires_grad_(False)

    def logits(obs: Any) -> Any:
        with th.no_grad():
            return fx(obs)

    return logits
