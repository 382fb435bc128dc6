"""Fidelity report of the network model against measured placement tables
(``ddl_gym.fidelity.report``; same as ``ddl-gym calibrate`` without --table).

    python scripts/calibrate.py [--data DIR] [--out DIR | --docs] [--no-save] [--clusters a,b]

``--docs`` regenerates docs/calibration.md and .png; other output goes to the
user data dir (``ddl_gym.userdata``) or ``--out``. Your own table:
``ddl-gym calibrate --table FILE``.
"""

from ddl_gym.fidelity.report import main

if __name__ == "__main__":
    raise SystemExit(main())
