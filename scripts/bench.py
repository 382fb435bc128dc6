"""Benchmarks: simulator speed and memory, env steps per second (``ddl_gym.bench``).

python scripts/bench.py [--repeat 5] [--env-steps 100000]
"""

from ddl_gym.bench import main

if __name__ == "__main__":
    main()
