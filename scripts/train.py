"""Train a learned scheduler (MaskablePPO by default; plain PPO as an ablation).

    python scripts/train.py --config agents/models/default.toml --out runs/default
    python scripts/train.py --config agents/models/default.toml --out runs/default --resume
    python scripts/train.py --out runs/ppo --algo ppo --timesteps 100000   # ablation
    tensorboard --logdir runs/

Prints the train/val/test split at start; the best model on the validation
windows lands in ``<out>/best/best_model.zip`` (with ``<out>/config.json``),
loadable by ``agents.load_policy``. ``--ship`` copies it (and its config) to
``agents/models/<name>.zip/.json``.
"""

from __future__ import annotations

import argparse
import shutil
import sys
from pathlib import Path

# Run from a checkout without relying on how the package is installed.
ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from agents.config import TrainConfig  # noqa: E402
from agents.train import train  # noqa: E402


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--config", type=Path, help="TOML or JSON TrainConfig (defaults otherwise)")
    ap.add_argument("--out", type=Path, required=True, help="run directory")
    ap.add_argument("--resume", action="store_true", help="continue from the last checkpoint")
    ap.add_argument("--timesteps", type=int, help="override total_timesteps")
    ap.add_argument("--seed", type=int, help="override seed")
    ap.add_argument("--algo", choices=["maskable_ppo", "ppo"], help="override ppo.algo")
    ap.add_argument("--vec-env", choices=["subproc", "dummy"], help="override vec_env")
    ap.add_argument("--ship", metavar="NAME", help="copy the best model to agents/models/NAME.zip")
    ap.add_argument("--no-progress", action="store_true")
    args = ap.parse_args(argv)

    cfg = TrainConfig.load(args.config) if args.config else TrainConfig()
    if args.timesteps is not None:
        cfg.total_timesteps = args.timesteps
    if args.seed is not None:
        cfg.seed = args.seed
    if args.algo:
        cfg.ppo.algo = args.algo
    if args.vec_env:
        cfg.vec_env = args.vec_env
    best = train(cfg, args.out, resume=args.resume, progress=not args.no_progress)
    print(f"best model: {best}")
    if args.ship:
        dest = ROOT / "agents" / "models" / f"{args.ship}.zip"
        shutil.copyfile(best, dest)
        cfg.save_json(dest.with_suffix(".json"))
        print(f"shipped: {dest} (+ {dest.with_suffix('.json').name})")


if __name__ == "__main__":
    main()
