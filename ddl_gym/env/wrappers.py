"""Wrappers for ``ClusterEnv``."""

from __future__ import annotations

import gymnasium as gym
import numpy as np
from gymnasium.wrappers import FlattenObservation


class FlattenClusterObs(FlattenObservation):
    """Flatten ``ClusterEnv``'s ``Dict`` observation into one float32 ``Box``
    (keys in sorted order, as ``gymnasium.spaces.flatten`` does) for MLP
    policies, keeping ``action_masks()`` callable on the wrapper itself.

    ``get_wrapper_attr("action_masks")`` works through any wrapper stack as
    well (that is what sb3-contrib and the vector envs use); the method here
    is for code that calls ``env.action_masks()`` directly.
    """

    def __init__(self, env: gym.Env) -> None:
        super().__init__(env)

    def action_masks(self) -> np.ndarray:
        return self.env.get_wrapper_attr("action_masks")()
