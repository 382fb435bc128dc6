"""Multi-teacher DAgger on the benchmark's train split (``ddl_gym.agents.dagger``).

    python scripts/dagger.py --config agents/models/dagger.toml --out runs/dagger-s0 --seed 0

Each iteration's model is ``<out>/iterN.zip``; the best on the validation
split is ``<out>/best.zip`` (configs beside them, loadable by
``ddl_gym.agents.load_policy``); ``<out>/curve.json`` holds the learning curve.
"""

from ddl_gym.agents.dagger import main

if __name__ == "__main__":
    main()
