"""Train PPO on the ddl-gym env with Ray RLlib, with action masking.

    pip install 'ddl-gym[rllib]'
    python examples/ray_rllib_ppo.py                       # local Ray, 5 iterations
    python examples/ray_rllib_ppo.py --iterations 50 --env-runners 2
    python examples/ray_rllib_ppo.py --address auto        # an existing Ray cluster

Masking follows RLlib's convention (new API stack): the observation is a
``Dict`` with ``"action_mask"`` (1 = valid) and ``"observations"`` (here the
flattened ``ClusterEnv`` observation), and the RLModule is RLlib's
``ActionMaskingTorchRLModule``, which drives the logits of invalid actions to
-inf before sampling, so the agent never picks an invalid action (the same
guarantee MaskablePPO gives in ``ddl_gym.agents``).

Needs Ray RLlib (pinned in the ``rllib`` extra) and torch. Workers import
ddl-gym, so on a real cluster install the project on every node (or pass a
``runtime_env``).
"""

from __future__ import annotations

import argparse
from typing import Any

import gymnasium as gym
import numpy as np
from gymnasium import spaces

# the env's small variant: 16 GPUs, 16-job synthetic traces, K=M=4
DEFAULT_ENV_CONFIG: dict[str, Any] = {"variant": "ddl_gym/Small-v0", "congestion": "heavy"}


class MaskedClusterEnv(gym.Env):
    """``ClusterEnv`` in RLlib's masking convention: observation
    ``{"action_mask": float32[n], "observations": float32[d]}``.

    ``env_config``: ``variant`` (a registered id, default Small-v0) and any
    ``ClusterEnv`` keyword arguments overriding the variant's.
    """

    def __init__(self, env_config: dict[str, Any] | None = None) -> None:
        import ddl_gym  # noqa: F401  (registers the variants)

        cfg = dict(DEFAULT_ENV_CONFIG if env_config is None else env_config)
        variant = cfg.pop("variant", "ddl_gym/Small-v0")
        # no PassiveEnvChecker: RLlib checks spaces itself
        self._env = gym.make(variant, disable_env_checker=True, **cfg).unwrapped
        inner = self._env.observation_space
        self._flat_space = spaces.flatten_space(inner)
        n = int(self._env.action_space.n)
        self.action_space = self._env.action_space
        self.observation_space = spaces.Dict(
            {
                "action_mask": spaces.Box(0.0, 1.0, (n,), np.float32),
                "observations": spaces.Box(
                    self._flat_space.low.astype(np.float32),
                    self._flat_space.high.astype(np.float32),
                    dtype=np.float32,
                ),
            }
        )

    def _obs(self, obs: dict) -> dict[str, np.ndarray]:
        flat = spaces.flatten(self._env.observation_space, obs).astype(np.float32)
        mask = self._env.action_masks().astype(np.float32)
        return {"action_mask": mask, "observations": flat}

    def reset(self, *, seed: int | None = None, options: dict | None = None):
        obs, info = self._env.reset(seed=seed, options=options)
        return self._obs(obs), _plain(info)

    def step(self, action):
        obs, reward, terminated, truncated, info = self._env.step(int(action))
        return self._obs(obs), float(reward), terminated, truncated, _plain(info)


def _plain(info: dict) -> dict:
    # the mask travels in the observation; keep infos small for RLlib's episodes
    return {k: v for k, v in info.items() if k != "action_mask"}


def build_config(
    env_config: dict[str, Any] | None = None,
    *,
    train_batch_size: int = 512,
    minibatch_size: int = 128,
    num_epochs: int = 2,
    env_runners: int = 0,
    envs_per_runner: int = 1,
    rollout_fragment_length: int | str = "auto",
    seed: int = 0,
):
    """A ``PPOConfig`` (new API stack) with the action-masking RLModule.

    ``envs_per_runner``: RLlib's multi-env path (``num_envs_per_env_runner``:
    each env runner steps a gymnasium vector env of that many copies)."""
    from ray.rllib.algorithms.ppo import PPOConfig
    from ray.rllib.core.rl_module.rl_module import RLModuleSpec
    from ray.rllib.examples.rl_modules.classes.action_masking_rlm import (
        ActionMaskingTorchRLModule,
    )

    return (
        PPOConfig()
        .environment(MaskedClusterEnv, env_config=env_config or dict(DEFAULT_ENV_CONFIG))
        .framework("torch")
        .env_runners(
            num_env_runners=env_runners,
            num_envs_per_env_runner=envs_per_runner,
            rollout_fragment_length=rollout_fragment_length,
        )
        .training(
            train_batch_size_per_learner=train_batch_size,
            minibatch_size=minibatch_size,
            num_epochs=num_epochs,
            lr=3e-4,
            gamma=0.995,
        )
        .rl_module(
            rl_module_spec=RLModuleSpec(
                module_class=ActionMaskingTorchRLModule,
                model_config={"fcnet_hiddens": [64, 64]},
            )
        )
        .debugging(seed=seed)
    )


def train(config, iterations: int) -> list[dict]:
    """Build the algorithm, train ``iterations`` times, return the results."""
    algo = config.build_algo()
    try:
        return [algo.train() for _ in range(iterations)]
    finally:
        algo.stop()


def module_policy(module, env_config: dict[str, Any] | None = None):
    """A trained RLModule as a ``simulate()`` policy (masked argmax of its
    logits), on the env it was trained on: judge it beside the heuristics
    on any trace (``ddl_gym.agents.external.EnvModelPolicy``)."""
    import torch
    from ddl_gym.agents.external import EnvModelPolicy
    from ray.rllib.core.columns import Columns

    cfg = dict(DEFAULT_ENV_CONFIG if env_config is None else env_config)
    variant = cfg.pop("variant", "ddl_gym/Small-v0")
    policy = EnvModelPolicy(lambda obs, mask: 0, cfg, env_id=variant, name="rllib-ppo")
    space = policy.observation_space

    def predict(obs: dict, mask: np.ndarray) -> int:
        flat = spaces.flatten(space, obs).astype(np.float32)
        batch = {
            Columns.OBS: {
                "action_mask": torch.as_tensor(mask.astype(np.float32))[None],
                "observations": torch.as_tensor(flat)[None],
            }
        }
        with torch.no_grad():
            logits = module.forward_inference(batch)[Columns.ACTION_DIST_INPUTS][0].numpy()
        return int(np.argmax(np.where(mask, logits, -np.inf)))

    policy.predict = predict
    return policy


def episode_return(result: dict) -> float:
    return float(result.get("env_runners", {}).get("episode_return_mean", float("nan")))


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--iterations", type=int, default=5)
    ap.add_argument("--env-runners", type=int, default=0, help="0: sample in the driver")
    ap.add_argument("--envs-per-runner", type=int, default=2, help="vectorised env copies")
    ap.add_argument("--batch", type=int, default=1024, help="train batch size")
    ap.add_argument("--variant", default="ddl_gym/Small-v0")
    ap.add_argument("--congestion", default="heavy")
    ap.add_argument("--address", help="Ray cluster address (default: start a local Ray)")
    ap.add_argument("--num-cpus", type=int, help="CPUs of the local Ray")
    args = ap.parse_args(argv)

    import ray

    if args.address:
        ray.init(address=args.address)
    else:
        ray.init(num_cpus=args.num_cpus, include_dashboard=False)
    try:
        config = build_config(
            {"variant": args.variant, "congestion": args.congestion},
            train_batch_size=args.batch,
            minibatch_size=min(256, args.batch),
            env_runners=args.env_runners,
            envs_per_runner=args.envs_per_runner,
        )
        for i, result in enumerate(train(config, args.iterations), 1):
            print(f"iteration {i}: episode return mean {episode_return(result):.3f}")
    finally:
        ray.shutdown()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
