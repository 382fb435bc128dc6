"""GPU types page: catalogue, speed-model cross-validation on Gavel, openb's
typed inventory (``ddl_gym.gpu_types_report``).

    python scripts/gpu_types.py [--data DIR] [--docs | --out FILE]

``--docs`` regenerates docs/gpu_types.md; without it the page is printed.
"""

from ddl_gym.gpu_types_report import main

if __name__ == "__main__":
    raise SystemExit(main())
