"""Train a learned scheduler (``ddl_gym.agents.train``; same as ``ddl-gym train``).

    python scripts/train.py --config agents/models/default.toml --out runs/default
    python scripts/train.py --config agents/models/default.toml --out runs/default --resume
    python scripts/train.py --out runs/ppo --algo ppo --timesteps 100000   # ablation
    tensorboard --logdir runs/

The best model on the validation windows lands in ``<out>/best/best_model.zip``
(with ``<out>/config.json``), loadable by ``ddl_gym.agents.load_policy``;
``--ship NAME`` copies it to ``agents/models/NAME.zip``.
"""

from ddl_gym.agents.train import main

if __name__ == "__main__":
    main()
