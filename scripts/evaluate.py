"""Compare a trained agent with the heuristics on held-out test windows.

    python scripts/evaluate.py             # shipped model, dally test windows, heavy
    python scripts/evaluate.py --model runs/default/best/best_model.zip --seeds 0 1 2 3 4
    python scripts/evaluate.py --traces default:0-9 --window-h 12

Windows are drawn only from the test part of each trace (the agent's split),
one per trace per seed; the table shows mean ± std over seeds of mean JCT,
makespan and communication overhead, all run through ``simulate()``.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from agents.evaluate import (  # noqa: E402
    DALLY_EVAL_TRACES,
    HEURISTICS,
    available_heuristics,
    heldout_windows,
    run,
    table,
)
from agents.policy import DEFAULT_MODEL, load_policy  # noqa: E402


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument(
        "--model",
        type=Path,
        action="append",
        help="model .zip (repeatable; default: the shipped one)",
    )
    ap.add_argument(
        "--traces",
        nargs="+",
        default=list(DALLY_EVAL_TRACES),
        help="trace specs (files, or default:A-B); the test part of each is used",
    )
    ap.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    ap.add_argument(
        "--window-h",
        type=float,
        default=None,
        help="window length in hours (default: the agent's training window; "
        "0 = the whole test part)",
    )
    ap.add_argument("--congestion", default="heavy")
    ap.add_argument("--baselines", nargs="*", default=list(HEURISTICS))
    ap.add_argument("--csv", type=Path, help="write the per-window results here")
    args = ap.parse_args(argv)

    agents = [load_policy(p) for p in (args.model or [DEFAULT_MODEL])]
    cfg = agents[0].config
    if args.window_h is None:
        window_s = cfg.env.window_s
    else:
        window_s = args.window_h * 3600 if args.window_h > 0 else None
    windows = heldout_windows(args.traces, cfg.split.test, args.seeds, window_s)
    wh = "whole test part" if window_s is None else f"{window_s / 3600:g} h windows"
    print(
        f"test part {cfg.split.test} of {len(args.traces)} traces, {wh}, seeds {args.seeds}, "
        f"cluster {cfg.env.cluster}, congestion {args.congestion}"
    )
    policies = {a.name: (lambda a=a: a) for a in agents}
    policies |= available_heuristics(args.baselines)
    df = run(policies, windows, cfg.env.cluster, args.congestion)
    print(table(df))
    if args.csv:
        df.to_csv(args.csv, index=False)


if __name__ == "__main__":
    main()
