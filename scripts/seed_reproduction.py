"""Our seed-faithful mode beside the authors' simulator, and the ablation from
it to our default model (``ddl_gym.seed.reproduction``); writes docs/seed_reproduction.md.

python scripts/seed_reproduction.py [--no-ablation] [--other-shape 4x4x8]
"""

from ddl_gym.seed.reproduction import main

if __name__ == "__main__":
    raise SystemExit(main())
