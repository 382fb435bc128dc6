"""The design runs of ddl-gym-v3: arrival-rate factors, the heuristics' design
table (``ddl_gym/benchmarks/v3_design.json``), the measured comm/compute range.
The code and its options: ``ddl_gym.benchmarks.design_v3``.

    nice -n 5 python scripts/design_v3.py --scales
    nice -n 5 python scripts/design_v3.py --run
"""

from ddl_gym.benchmarks.design_v3 import main

if __name__ == "__main__":
    main()
