"""Run folders (tables, config, report.md) and plots.

``run_folder`` writes what a ``simulate`` / ``compare`` run produced;
``plots`` draws it (matplotlib, the ``plots`` extra, imported only when
drawing); ``readme_figures`` regenerates the README's figures. The network
model's fidelity report is ``ddl_gym.fidelity.report``.
"""
