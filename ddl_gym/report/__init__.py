"""Run folders (tables, config, report.md), plots, and the network model's
calibration report.

``run_folder`` writes what a ``simulate`` / ``compare`` run produced;
``plots`` draws it (matplotlib, the ``plots`` extra, imported only when
drawing); ``calibration`` is the fidelity report behind ``ddl-gym calibrate``.
"""
