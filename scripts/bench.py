"""Benchmarks: simulator speed and memory, env steps per second (``ddl_gym.bench``);
with ``--suite``, the CPU cost of a benchmark suite split per policy
(``ddl_gym.benchmarks.cost``); with ``--typed``, what GPU types cost the
simulator (``ddl_gym.bench_typed``).

python scripts/bench.py [--repeat 5] [--env-steps 100000]
python scripts/bench.py --suite ddl-gym-v1 [--split test] [--policies fifo,dally]
python scripts/bench.py --typed [--jobs 10000] [--policies fifo,dally]
"""

import sys

if __name__ == "__main__":
    if "--suite" in sys.argv[1:]:
        from ddl_gym.benchmarks.cost import main
    elif "--typed" in sys.argv[1:]:
        from ddl_gym.bench_typed import main
    else:
        from ddl_gym.bench import main
    main()
