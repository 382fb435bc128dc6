"""Env speed: steps per second of a random valid-action policy (``ddl_gym.bench``).

python scripts/bench_env.py                       # Philly week on nvswitch512
python scripts/bench_env.py --env ddl_gym/Small-v0 --steps 50000
python scripts/bench_env.py --make                # through gymnasium.make's wrappers
"""

from ddl_gym.bench import env_main

if __name__ == "__main__":
    env_main()
