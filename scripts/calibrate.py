"""Fidelity report of the network model against measured placement tables
(``ddl_gym.fidelity.report``; same as ``ddl-gym calibrate``).

    python scripts/calibrate.py [--data DIR] [--out DIR] [--no-save] [--clusters a,b]
"""

from ddl_gym.fidelity.report import main

if __name__ == "__main__":
    raise SystemExit(main())
