"""Learned schedulers: MaskablePPO training, evaluation and loading.

``load_policy(path)`` turns a saved model into a ``Policy`` (``reset(view,
seed)``, ``act(view)``) that runs in ``ddl_gym.engine.simulate()`` beside the
heuristics; with no path it loads the shipped model, ``agents/models/default.zip``
(installed as ``ddl_gym/agents/models/``). ``save_model(model, path, env_id,
env_kwargs)`` saves your own SB3 model with the env it was trained in, so
``load_policy(path)`` and ``ddl-gym compare --policies agent:PATH`` need no more.
``ddl_gym.agents.portfolio.make()`` runs the shipped model beside Tiresias
and Gandiva, one at a time, chosen online by replaying the cluster's own
recent jobs (``--policy portfolio`` in the CLI).
Training: ``ddl_gym.agents.train.train(TrainConfig(...), out_dir)`` or
``scripts/train.py``. Needs the ``agents`` extra (torch, SB3, sb3-contrib).
"""

from ddl_gym.agents.config import EnvConfig, PPOConfig, SplitConfig, TrainConfig
from ddl_gym.agents.policy import DEFAULT_MODEL, AgentPolicy, load_policy

from ddl_gym.model_env import save_model

__all__ = [
    "DEFAULT_MODEL",
    "AgentPolicy",
    "EnvConfig",
    "PPOConfig",
    "SplitConfig",
    "TrainConfig",
    "load_policy",
    "save_model",
]

if __name__ != "ddl_gym.agents":  # imported as the old top-level `agents` from a checkout
    import warnings

    warnings.warn(
        "importing `agents` is deprecated: use `ddl_gym.agents` (the installed name)",
        DeprecationWarning,
        stacklevel=2,
    )
