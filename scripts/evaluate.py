"""Compare a trained agent with the heuristics on held-out test windows
(``ddl_gym.agents.evaluate``; same as ``ddl-gym evaluate``).

    python scripts/evaluate.py             # shipped model, dally test windows, heavy
    python scripts/evaluate.py --model runs/default/best/best_model.zip --seeds 0 1 2 3 4
    python scripts/evaluate.py --traces default:0-9 --window-h 12
"""

from ddl_gym.agents.evaluate import main

if __name__ == "__main__":
    main()
