"""Fidelity of the network model against measured placement tables.

* ``measured``: readers of the measured tables (Gavel, Pollux, Chronus, the
  Alibaba worker spread, and a user's own table in the documented CSV format,
  ``read_table``) into one frame of ratios to a reference placement;
* ``calibrate``: predicting those ratios with ``ddl_gym.perf``, fitting fabric
  presets to them and the hold-out protocols (placements, models, clusters);
* ``hardware``: interconnect classes from a hardware description and the
  prior they give hardware no table measured (datasheet x measured
  efficiency); ``unseen``: that prior refined by k rows, scored by leaving
  each measured cluster out;
* ``own_table``: ``ddl-gym calibrate --table``: fit, cross-validate, report
  and save a user's table (in the user data dir, ``ddl_gym.userdata``);
* ``report``: ``ddl-gym calibrate``, which runs the protocols on the bundled
  tables and writes ``calibration.md`` and ``calibration.png`` (matplotlib,
  the ``plots`` extra, imported only here) to ``--out``, the user data dir or
  (``--docs``) the repository's ``docs/``.
"""
