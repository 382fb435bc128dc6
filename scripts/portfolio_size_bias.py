"""How far the replay portfolio's drawn sizes are from the true ones, per
case of a split (the shipped network inside the portfolio, switching off;
the true sizes are read for this diagnostic only):

    python scripts/portfolio_size_bias.py --split train --sizes km

Prints a markdown table (docs/agents.md, "Replay fidelity").
"""

from ddl_gym.agents.size_bias import main

if __name__ == "__main__":
    main()
