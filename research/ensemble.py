"""Several checkpoints of one training run acting as one policy (soft vote).

A PPO run's validation score swings from one checkpoint to the next (the
suite runs' curves move by 0.1-0.3 IQM between neighbouring iterations,
docs/agents_log.md), so the single best checkpoint is partly luck. A
``CheckpointEnsemble`` averages the masked action distributions of a few of
them and takes the most likely action: the same observation, mask and
run-time rules as ``AgentPolicy``, only ``choose`` differs. All members must
come from one configuration (the observation and the actions must mean the
same to each); members of one run keep the training seeds independent.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
from ddl_gym.agents.config import TrainConfig
from ddl_gym.agents.policy import (
    AgentPolicy,
    action_probabilities,
    config_path,
    load_model,
    masked_logits,
)
from ddl_gym.agents.threads import one_thread


class CheckpointEnsemble(AgentPolicy):
    """``AgentPolicy`` whose action is the argmax (or a sample) of the mean
    of its members' masked action probabilities."""

    def __init__(
        self,
        models: Sequence[Any],
        config: TrainConfig,
        name: str = "ensemble",
        deterministic: bool = True,
    ) -> None:
        if not models:
            raise ValueError("a CheckpointEnsemble needs at least one model")
        super().__init__(models[0], config, name=name, deterministic=deterministic)
        self.models = tuple(models)

    def fresh(self) -> CheckpointEnsemble:
        return CheckpointEnsemble(self.models, self.config, self.name, self.deterministic)

    def choose(self, obs: np.ndarray, mask: np.ndarray) -> int:
        probs = np.zeros(len(mask))
        for model in self.models:
            probs += action_probabilities(masked_logits(model, obs, mask))
        if self.deterministic:
            return int(np.argmax(probs))
        return int(self._rng.choice(len(probs), p=probs / probs.sum()))


# the engine-side rules around the network (docs/agents_log.md, "Run-time rules"):
# members saved during training lack them, the run's selected config has them
RUN_TIME_RULES = ("repack_idle", "min_run_s", "max_slowdown", "cross_rack_guard")


def load_ensemble(
    paths: Sequence[str | Path],
    config: str | Path | None = None,
    name: str | None = None,
    deterministic: bool = True,
) -> CheckpointEnsemble:
    """The checkpoints at ``paths`` as one ``CheckpointEnsemble``, under
    ``config`` (a training config file; default: the first checkpoint's,
    as ``load_policy`` finds it). Each member's own config must match it in
    everything but the run-time rules (``RUN_TIME_RULES``)."""
    one_thread()  # as load_policy: torch's one thread per core slows a 2-core box 10x
    if not paths:
        raise ValueError("load_ensemble: no checkpoint paths given")
    config_file = Path(config) if config is not None else config_path(paths[0])
    shared = TrainConfig.load(config_file)
    rules = {k: getattr(shared.env, k) for k in RUN_TIME_RULES}
    models = []
    for path in paths:
        own = TrainConfig.load(config_path(path))
        if dataclasses.replace(own.env, **rules) != shared.env or own.ppo != shared.ppo:
            raise ValueError(
                f"load_ensemble: {path} was trained with other env or PPO settings than "
                f"{config_file}; an ensemble's members must share them"
            )
        models.append(load_model(path, own.ppo.algo, own.ppo.policy))
    label = name or "ensemble:" + "+".join(Path(p).stem for p in paths)
    return CheckpointEnsemble(models, shared, name=label, deterministic=deterministic)
