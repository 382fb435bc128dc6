"""``ddl-gym benchmark``: score schedulers on a versioned suite.

    ddl-gym benchmark show                                   # cases, splits, hash
    ddl-gym benchmark evaluate --policy tiresias --out runs/bench/tiresias
    ddl-gym benchmark evaluate --policy agent:my_model.zip --resume --out runs/bench/mine
    ddl-gym benchmark evaluate --policy mypkg.sched:act --quick
    ddl-gym benchmark leaderboard --agent --resume           # docs/benchmark.md
    ddl-gym benchmark datasets --split train --root runs/minari  # Minari datasets
    ddl-gym benchmark reference --suite ddl-gym-v1 --check   # the shipped heuristic records

``register(sub)`` adds the command to the ``ddl-gym`` parser.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from ddl_gym.cli.names import HEURISTICS, ORACLES  # the registry's names, without loading it

DEFAULT_SUITE = "ddl-gym-v3"  # the current suite; v1 and v2 by --suite


def register(sub: argparse._SubParsersAction) -> argparse.ArgumentParser:
    p = sub.add_parser(
        "benchmark",
        help="score a scheduler on a versioned benchmark suite",
        description="Score any scheduler on the fixed cases of a benchmark suite "
        "(train / validation / test), write one JSON per finished run, and score it "
        "against the shipped heuristic reference (IQM, bootstrap CIs); see docs/benchmark.md.",
        epilog=(__doc__ or "").split("\n\n")[1],
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    actions = p.add_subparsers(dest="action", metavar="ACTION", required=True)

    e = actions.add_parser(
        "evaluate",
        help="run one policy on a split",
        description="Run one policy on every case of a split; one JSON per finished "
        "(case, seed) in --out; Ctrl-C keeps them, --resume skips them.",
    )
    _suite_args(e)
    e.add_argument(
        "--policy",
        required=True,
        help="a heuristic (" + ", ".join((*HEURISTICS, *ORACLES)) + "), 'agent' (the shipped "
        "model), 'agent:PATH' (an SB3/sb3-contrib zip with its config), 'portfolio' (the "
        "shipped model, Tiresias and Gandiva chosen online by replay), or 'module:function' "
        "(imported from the current directory or the import path: a function f(view) -> "
        "Action, a Policy class or object; see docs/write_a_scheduler.md)",
    )
    e.add_argument("--name", help="name in the records (default: the policy spec)")
    e.add_argument(
        "--env-id",
        help="agent:PATH of an SB3 zip without a saved config: the env id it was trained on "
        "(e.g. ddl_gym/Small-v0); it runs on the cases of that cluster shape",
    )
    e.add_argument("--env-kwargs", help="with --env-id: its env arguments as JSON")
    e.add_argument("--out", type=Path, help="folder for the per-run JSON files")
    e.add_argument("--resume", action="store_true", help="skip runs already in --out")
    e.add_argument("--seeds", help="seeds: 0,1,2 or 0-9 or a mix (default: each case's)")
    e.add_argument("--case", action="append", help="only this case (repeatable)")
    e.add_argument("--backend", choices=("local", "ray"), default="local")
    e.add_argument("--no-progress", action="store_true", help="no progress bar")
    e.set_defaults(func=cmd_evaluate)

    lb = actions.add_parser(
        "leaderboard",
        help="every heuristic (+ the agent) on a split -> docs/benchmark.md",
        description="Run every heuristic and oracle (and the shipped agent with --agent) "
        "on a split and write the leaderboard page and its performance-profile PNG.",
    )
    _suite_args(lb)
    lb.add_argument(
        "--agent", action="store_true", help="also the shipped agent and its replay portfolio"
    )
    lb.add_argument("--policy", action="append", default=[], help="also this policy spec")
    lb.add_argument("--out", type=Path, default=Path("runs/benchmark"))
    lb.add_argument("--doc", type=Path, default=Path("docs/benchmark.md"))
    lb.add_argument("--img", type=Path, default=Path("docs/img/benchmark_profile.png"))
    lb.add_argument("--resume", action="store_true", help="reuse finished runs in --out")
    lb.add_argument("--reps", type=int, default=2000, help="bootstrap resamples")
    lb.add_argument("--no-progress", action="store_true")
    lb.set_defaults(func=cmd_leaderboard)

    ds = actions.add_parser(
        "datasets",
        help="record every heuristic's episodes on a split as Minari datasets",
        description="One Minari dataset per (case, heuristic), one episode per seed, in the "
        "bench env (ddl_gym/Bench-v3) of the case with K pending and M running rows; "
        "recover_environment() rebuilds it (needs the datasets extra: minari, pyarrow).",
    )
    _dataset_args(ds)

    rf = actions.add_parser(
        "reference",
        help="rerun the suite's heuristics: write or check the shipped reference records",
        description="Rerun every heuristic of the suite on the test and validation splits "
        "and the quick sub-suite (or --split) and write the reference records the "
        "normalised card is scored against (ddl_gym/benchmarks/reference/SUITE.json), or "
        "with --check compare: exit 1 naming each (policy, case, seed) whose record differs "
        "(cpu_s and the code commit aside).",
    )
    rf.add_argument("--suite", default=DEFAULT_SUITE)
    rf.add_argument("--split", choices=("test", "validation", "quick"), help="only this one")
    rf.add_argument("--check", action="store_true", help="compare instead of writing")
    rf.add_argument("--file", type=Path, help="reference file (default: the package's)")
    rf.add_argument("--no-progress", action="store_true")
    rf.set_defaults(func=cmd_reference)

    sh = actions.add_parser("show", help="list a suite's cases and its hash")
    sh.add_argument("--suite", default=DEFAULT_SUITE)
    sh.add_argument("--split", default="all", help="train, validation, test or all")
    sh.add_argument("--quick", action="store_true", help="the quick sub-suite")
    sh.set_defaults(func=cmd_show)
    return p


def register_datasets(sub: argparse._SubParsersAction) -> argparse.ArgumentParser:
    """``ddl-gym datasets build``: the same as ``ddl-gym benchmark datasets``."""
    p = sub.add_parser(
        "datasets",
        help="offline-RL datasets of a suite split (Minari)",
        description="Record every heuristic's episodes on a benchmark split as Minari "
        "datasets (the same as `ddl-gym benchmark datasets`).",
    )
    actions = p.add_subparsers(dest="action", metavar="ACTION", required=True)
    build = actions.add_parser("build", help="record the datasets")
    _dataset_args(build)
    return p


def _dataset_args(ds: argparse.ArgumentParser) -> None:
    ds.add_argument("--suite", default=DEFAULT_SUITE)
    ds.add_argument("--split", default="train", choices=("train", "validation", "test"))
    ds.add_argument("--quick", action="store_true", help="the quick sub-suite")
    ds.add_argument("--root", type=Path, default=Path("runs/minari"), help="datasets folder")
    ds.add_argument("--policies", default=",".join(HEURISTICS), help="comma-separated")
    ds.add_argument("--case", action="append", help="only this case (repeatable)")
    ds.add_argument("-K", type=int, default=64, help="pending-job rows of the bench env")
    ds.add_argument("-M", type=int, default=64, help="running-job rows of the bench env")
    ds.set_defaults(func=cmd_datasets)


def _suite_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--suite", default=DEFAULT_SUITE)
    p.add_argument("--split", default="test", choices=("train", "validation", "test"))
    p.add_argument("--quick", action="store_true", help="the quick sub-suite (tiny cases)")


def cmd_evaluate(args: argparse.Namespace) -> int:
    from ddl_gym.benchmarks.evaluate import evaluate
    from ddl_gym.benchmarks.policies import PolicyFailure
    from ddl_gym.cli.common import CliError, parse_seeds
    from ddl_gym.cli.own_model import check_agent_spec, checked_env_kwargs

    seeds = parse_seeds(args.seeds) if args.seeds else None
    env_kwargs = checked_env_kwargs(args.env_id, args.env_kwargs)
    check_agent_spec(args.policy, args.env_id, env_kwargs)  # before any run is written
    try:
        scores = evaluate(
            args.policy,
            suite=args.suite,
            split=args.split,
            seeds=seeds,
            out_dir=args.out,
            resume=args.resume,
            progress=not args.no_progress,
            quick=args.quick,
            name=args.name,
            cases=args.case,
            backend=args.backend,
            env_id=args.env_id,
            env_kwargs=env_kwargs,
        )
    except PolicyFailure as err:  # the policy's fault: one line (--debug: the traceback)
        raise CliError(str(err)) from err
    print(f"{scores.policy} on {scores.suite} {scores.split}: {len(scores.records)} runs")
    if scores.records.empty:
        print("no case of this split runs this policy")
        return 1
    print_card(scores)
    for _, row in scores.unsupported.drop_duplicates("case").iterrows():
        print(f"skipped {row['case']}: {row['reason']}")
    if args.out is not None:
        print(f"runs in {args.out}")
    return 0


def print_card(scores) -> None:
    """The normalised card against the shipped reference (with its
    provenance and a citation line); where there is no reference for these
    runs, says why and prints the raw metrics instead."""
    from ddl_gym.benchmarks.reference import ReferenceError

    try:
        print(scores.card())
        return
    except (ReferenceError, ValueError) as e:
        print(f"no normalised card: {e}")
    print("raw metrics (means over seeds):")
    m = scores.metrics()
    shown = m.assign(  # hours read better than seconds
        mean_jct_h=m["mean_jct_s"] / 3600,
        p95_jct_h=m["p95_jct_s"] / 3600,
        makespan_h=m["makespan_s"] / 3600,
    )[["case", "mean_jct_h", "p95_jct_h", "makespan_h", "comm_overhead", "preemptions"]]
    print(shown.to_string(index=False, float_format=lambda v: f"{v:.3f}"))


def cmd_reference(args: argparse.Namespace) -> int:
    from ddl_gym.benchmarks.reference import (
        REFERENCE_SPLITS,
        Reference,
        differences,
        generate,
        merged,
        reference_path,
    )

    path = args.file or reference_path(args.suite)
    splits = [args.split] if args.split else list(REFERENCE_SPLITS)
    fresh = generate(args.suite, splits, progress=not args.no_progress)
    stored = Reference.from_json(json.loads(path.read_text()), path) if path.is_file() else None
    if args.check:
        if stored is None:
            print(f"no reference records at {path}")
            return 1
        diff = differences(stored, fresh)
        for line in diff:
            print(line)
        n = sum(len(p.records) for p in fresh.splits.values())
        if diff:
            print(f"{len(diff)} differences from {path} ({', '.join(splits)})")
            return 1
        print(
            f"{path}: {n} records of {', '.join(splits)} rerun equal (cpu_s aside; numbers "
            "to a relative 1e-9)"
        )
        return 0
    out = merged(stored, fresh).write(path)
    n = sum(len(p.records) for p in fresh.splits.values())
    print(f"wrote {n} records of {', '.join(splits)} to {out}")
    return 0


def cmd_leaderboard(args: argparse.Namespace) -> int:
    from ddl_gym.benchmarks.leaderboard import write_leaderboard

    path = write_leaderboard(
        suite_name=args.suite,
        split=args.split,
        out_dir=args.out,
        doc=args.doc,
        img=args.img,
        agent=args.agent,
        extra=args.policy,
        resume=args.resume,
        progress=not args.no_progress,
        quick=args.quick,
        reps=args.reps,
    )
    print(f"wrote {path} and {args.img}")
    return 0


def cmd_datasets(args: argparse.Namespace) -> int:
    from ddl_gym.benchmarks.datasets import build_datasets

    made = build_datasets(
        suite=args.suite,
        split=args.split,
        policies=args.policies.split(","),
        root=args.root,
        quick=args.quick,
        cases=args.case,
        K=args.K,
        M=args.M,
    )
    episodes = sum(d.episodes for d in made)
    dropped = sum(d.dropped for d in made)
    cut = sum(d.cut for d in made)
    print(
        f"{len(made)} datasets, {episodes} episodes ({cut} cut short, {dropped} dropped) "
        f"in {args.root}"
    )
    return 0


def cmd_show(args: argparse.Namespace) -> int:
    from ddl_gym.benchmarks.suite import get_suite, suite_hash

    suite = get_suite(args.suite)
    print(f"{suite.name}  sha256 {suite_hash(suite)}")
    for case in suite.select(args.split, quick=args.quick):
        w = case.workload
        print(
            f"{case.split:10s} {case.name:34s} {case.family:9s} {case.shape:7s} "
            f"{case.fabric:11s} {case.congestion:8s} seeds {','.join(map(str, case.seeds))}  "
            f"x{w.arrival_scale:g}  {w.source}"
        )
        print(f"{'':10s} disjoint: {case.disjoint}")
    return 0


def main(argv: list[str] | None = None) -> int:
    """``python -m ddl_gym.cli.benchmark ACTION ...``: the command on its own."""
    p = argparse.ArgumentParser(prog="ddl-gym")
    register(p.add_subparsers(dest="command", required=True))
    args = p.parse_args(["benchmark", *(sys.argv[1:] if argv is None else argv)])
    return int(args.func(args) or 0)


if __name__ == "__main__":
    raise SystemExit(main())
