"""Held-out comparison: trained agents (several seeds) against every heuristic.

    python scripts/heldout.py --config agents/models/set.toml \\
        --agent set=runs/set-s0/best/best_model.zip,runs/set-s1/best/best_model.zip \\
        --cache runs/heldout.csv
    python scripts/heldout.py --config agents/models/set.toml --quick   # one case, 3 heuristics

Cases: the config's whole ``test_traces`` and 24 h windows of the Philly
test part (see ``agents.heldout``), on the config's cluster under its
congestion. Prints markdown tables (mean ± std over training seeds) and the
action histogram.
"""

from ddl_gym.agents.heldout import main

if __name__ == "__main__":
    main()
