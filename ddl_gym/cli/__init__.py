"""The ``ddl-gym`` command line (``ddl_gym.cli.main``); one module per command
(``common``: the pieces they share). ``python -m ddl_gym.cli`` runs it too."""

from ddl_gym.cli.main import main

__all__ = ["main"]
