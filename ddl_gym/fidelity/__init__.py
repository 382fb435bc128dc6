"""Fidelity of the network model against measured placement tables.

* ``measured``: readers of the measured tables (Gavel, Pollux, Chronus, the
  Alibaba worker spread) into one frame of ratios to a reference placement;
* ``calibrate``: predicting those ratios with ``ddl_gym.perf``, fitting fabric
  presets to them and the hold-out protocols (placements, models, clusters);
* ``report``: ``ddl-gym calibrate``, which runs the protocols and writes
  ``docs/calibration.md`` and ``docs/calibration.png`` (matplotlib, the
  ``plots`` extra, imported only here).
"""
