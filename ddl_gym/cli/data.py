"""``ddl-gym data``: fetch the data files from their origins, check what is here.

    ddl-gym data fetch --suite ddl-gym-v3     # the files one suite reads
    ddl-gym data fetch                        # every fetchable file (about 12 MB)
    ddl-gym data fetch --mirror DIR_OR_URL    # offline / from a mirror of the origins
    ddl-gym data status --suite ddl-gym-v1    # present and verified, wrong, missing

Files go to the user data dir's ``data/`` (or ``--data DIR``); each is
downloaded at its pinned commit, cut and kept only if its SHA-256 is the
manifest's. See docs/data.md.
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

from ddl_gym.cli.common import epilog

MIRROR_HELP = (
    "download base instead of https://raw.githubusercontent.com, same layout below it "
    "(REPO/COMMIT/PATH); a URL or a local folder (default: $DDL_GYM_DATA_MIRROR)"
)


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "data",
        help="fetch the trace and profile files from their origins; check them",
        description="The data files the benchmarks read, fetched from their public origins "
        "at pinned commits and checked against ddl_gym/data/manifest.json (docs/data.md).",
        epilog=epilog(
            "ddl-gym data fetch --suite ddl-gym-v3",
            "ddl-gym data fetch --data ~/ddl-data",
            "ddl-gym data fetch --mirror /srv/mirror/raw.githubusercontent.com",
            "ddl-gym data status --suite ddl-gym-v1",
        ),
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    actions = p.add_subparsers(dest="action", metavar="ACTION", required=True)
    f = actions.add_parser(
        "fetch",
        help="download, cut and verify the files (those of --suite, else every fetchable one)",
        description="Download each needed origin file once at its pinned commit (resuming a "
        "dropped download), cut it, check the SHA-256 and store the file under the data dir. "
        "Files already there and verified are not downloaded again. Exit 2 if any file "
        "fails (one line each).",
    )
    _common(f)
    f.add_argument("--mirror", metavar="URL|DIR", help=MIRROR_HELP)
    f.set_defaults(func=cmd_fetch)
    s = actions.add_parser(
        "status",
        help="each needed file: present and verified, wrong checksum, or missing",
        description="List the files a suite (or the whole manifest) needs and their state "
        "under the data dir. Exit 1 if any is missing or wrong.",
    )
    _common(s)
    s.set_defaults(func=cmd_status)


def _common(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--suite",
        metavar="NAME",
        help="only the files this benchmark suite reads (e.g. ddl-gym-v1, ddl-gym-v3)",
    )
    p.add_argument(
        "--data",
        type=Path,
        metavar="DIR",
        help="the data dir (fetch default: the user data dir's data/; status default: the "
        "dir the package reads, see docs/data.md)",
    )


def _package_data_dir() -> tuple[Path, str]:
    """The data dir the package reads (``find_data_dir``'s rules) and which
    rule gives it; the fetch destination when none exists yet."""
    from ddl_gym.data.fetch import default_data_dir
    from ddl_gym.traces.loader import DATA_ENV_VAR, find_data_dir

    env = os.environ.get(DATA_ENV_VAR)
    if env:
        return Path(env).expanduser(), f"${DATA_ENV_VAR}"
    found = find_data_dir()
    if found is not None and found != default_data_dir():
        return found, "../shared/data, the developers' mirror"
    return default_data_dir(), "the user data dir, where `ddl-gym data fetch` stores files"


def cmd_fetch(args: argparse.Namespace) -> int:
    from ddl_gym.data import needed_files
    from ddl_gym.data.fetch import base_url, default_data_dir, fetch

    paths = needed_files(args.suite)
    dest = (args.data.expanduser() if args.data else default_data_dir()).resolve()
    base = base_url(args.mirror)
    what = f"suite {args.suite}" if args.suite else "every fetchable file"
    print(f"{what}: {len(paths)} files -> {dest} (from {base})")
    report = fetch(paths, dest, base, log=print, strict_derived=args.suite is not None)
    print(
        f"fetched {len(report.fetched)}, already present and verified {len(report.present)}, "
        f"not fetchable (derived) {len(report.derived)}, failed {len(report.failed)}; "
        f"{report.downloads} download requests"
    )
    reads, rule = _package_data_dir()
    if args.data is None and reads.resolve() != dest:
        print(
            f"note: the package reads data from {reads} ({rule}), not {dest}: "
            "see docs/data.md for the lookup order"
        )
    for path, reason in report.failed:
        print(f"ddl-gym data fetch: error: {path}: {reason}", file=sys.stderr)
    return 0 if report.ok else 2


def cmd_status(args: argparse.Namespace) -> int:
    from ddl_gym.data import needed_files
    from ddl_gym.data.fetch import MISSING, OK, WRONG, status

    paths = needed_files(args.suite)
    if args.data is not None:
        data, rule = args.data.expanduser(), "--data"
    else:
        data, rule = _package_data_dir()
    exists = "" if data.is_dir() else ", does not exist"
    print(f"data dir: {data} ({rule}{exists})")
    rows = status(paths, data if data.is_dir() else None)
    width = max((len(r.path) for r in rows), default=0)
    for r in rows:
        state = r.state
        if not r.file.fetchable:  # made by running code: no origin to download
            state += ", not fetchable (derived)"
        extra = (
            f"  got {r.got[:12]}, expected {r.file.sha256[:12]}"
            if r.got and r.state == WRONG
            else ""
        )
        print(f"  {r.path:<{width}}  {state}{extra}")
    counts = {s: sum(r.state == s for r in rows) for s in (OK, WRONG, MISSING)}
    what = f"suite {args.suite}" if args.suite else "manifest"
    print(
        f"{what}: {len(rows)} files: {counts[OK]} ok, {counts[WRONG]} wrong checksum, "
        f"{counts[MISSING]} missing"
    )
    if counts[OK] < len(rows):
        from ddl_gym.data import fetch_command

        print(f"to fetch what is missing: {fetch_command(args.suite)}")
        return 1
    return 0
