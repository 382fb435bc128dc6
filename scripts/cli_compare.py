"""``ddl-gym compare`` (placeholder until scripts/compare.py lands)."""

from __future__ import annotations

import argparse


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("compare", help="the policy x congestion x seed grid")
    p.set_defaults(func=lambda args: 0)
