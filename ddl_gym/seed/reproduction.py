"""Reproduce the seed authors' simulator and walk from it to our default model.

``reproduce()`` runs the seed-faithful mode (:mod:`ddl_gym.seed.simulator`) on the
seed week and 4 racks x 2 machines x 8 GPUs and puts our numbers beside the
authors' (``reference/artist_sim_week_4x2.csv`` in the data dir).
``ablation()`` starts from that mode and flips one switch at a time toward
our default model. ``markdown()`` writes both as ``docs/seed_reproduction.md``
(``scripts/seed_reproduction.py``).
"""

from __future__ import annotations

import csv
import time
from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path

from ddl_gym.engine import simulate
from ddl_gym.seed.astra import SlowdownTable
from ddl_gym.seed.policies import make_seed_policy
from ddl_gym.seed.simulator import run
from ddl_gym.seed.switches import SeedSwitches
from ddl_gym.traces import Trace, find_data_dir

REFERENCE_REL = "reference/artist_sim_week_4x2.csv"
# the same simulator on the 500-job mix (270 one-GPU jobs) at three arrival rates
MIX_REFERENCE_REL = "reference/artist_sim_500jobs_4x2.csv"
MIX_TRACES = (
    "sense_500jobs_poisson-100jobsPday",
    "sense_500jobs_poisson-50jobsPday",
    "sense_500jobs_poisson-25jobsPday",
)
MIX_POLICIES = {"Dally auto-tuned": "dally", "Tiresias": "tiresias"}
HOUR = 3600.0
TOLERANCE = 0.10

# reference row name -> our seed-mode policy
REFERENCE_POLICIES = {
    "Dally auto-tuned": "dally",
    "Dally fixed timers": "dally-1-2",
    "Tiresias": "tiresias",
}
METRICS = (("makespan", "makespan_h"), ("mean JCT", "mean_jct_h"), ("total comm", "total_comm_h"))


@dataclass(frozen=True)
class Figures:
    """Headline figures of one run, hours."""

    makespan_h: float
    mean_jct_h: float
    total_comm_h: float
    cpu_s: float = 0.0

    @classmethod
    def of(cls, summary: dict, cpu_s: float = 0.0) -> Figures:
        comm = summary.get("comm_h", summary["comm_s"] / HOUR)
        return cls(summary["makespan_s"] / HOUR, summary["mean_jct_s"] / HOUR, comm, cpu_s)


def _data_file(rel: str) -> Path:
    data = find_data_dir()
    if data is None or not (data / rel).is_file():
        raise FileNotFoundError(
            f"the seed reproduction needs {rel} under the data dir "
            "(../shared/data or $DDL_GYM_DATA), which was not found"
        )
    return data / rel


def _reference_rows(path: Path) -> dict[tuple[str, str], Figures]:
    """The authors' figures per (trace, scheduler), hours."""
    out = {}
    with open(path, newline="", encoding="utf-8") as fh:
        for i, row in enumerate(csv.DictReader(fh), start=2):
            try:
                out[(row["trace"], row["scheduler"])] = Figures(
                    float(row["makespan_h"]), float(row["mean_jct_h"]), float(row["total_comm_h"])
                )
            except (KeyError, ValueError) as exc:
                raise ValueError(f"{path}: row {i}: {exc}") from exc
    return out


def load_reference(path: str | Path | None = None) -> dict[str, Figures]:
    """The authors' figures on the seed week per scheduler (hours)."""
    rows = _reference_rows(Path(path) if path is not None else _data_file(REFERENCE_REL))
    return {scheduler: figs for (_, scheduler), figs in rows.items()}


def load_mix_reference(path: str | Path | None = None) -> dict[tuple[str, str], Figures]:
    """The authors' figures on the 500-job mix per (trace, scheduler), hours."""
    return _reference_rows(Path(path) if path is not None else _data_file(MIX_REFERENCE_REL))


def mix_trace(name: str) -> Trace:
    """One of the 500-job traces (:data:`MIX_TRACES`), loaded as the seed reads it."""
    import warnings

    from ddl_gym.traces import TraceWarning, load_dally

    with warnings.catch_warnings():  # their arrivals are not sorted: we sort them, as the seed
        warnings.simplefilter("ignore", TraceWarning)
        return load_dally(_data_file(f"traces/dally/{name}.json"))


def seed_week() -> Trace:
    from ddl_gym.scenarios import SCENARIOS

    return SCENARIOS["seed-artist"].build_trace()


def run_seed_policy(
    trace: Trace, cluster: str, policy: str, switches: SeedSwitches | None = None
) -> Figures:
    t0 = time.process_time()
    result = run(trace, cluster, make_seed_policy(policy), switches or SeedSwitches())
    return Figures.of(result.summary, time.process_time() - t0)


def reproduce(trace: Trace | None = None, cluster: str = "4x2x8") -> dict[str, Figures]:
    """Our seed-mode figures per reference scheduler name."""
    trace = trace or seed_week()
    return {ref: run_seed_policy(trace, cluster, pol) for ref, pol in REFERENCE_POLICIES.items()}


def reproduce_mix(
    traces: tuple[str, ...] = MIX_TRACES, switches: SeedSwitches | None = None
) -> dict[tuple[str, str], Figures]:
    """Our seed-mode figures on the 500-job mix per (trace, reference scheduler)."""
    out = {}
    for name in traces:
        trace = mix_trace(name)
        for ref, pol in MIX_POLICIES.items():
            out[(name, ref)] = run_seed_policy(trace, "4x2x8", pol, switches)
    return out


# -- the ablation ------------------------------------------------------------------
@dataclass(frozen=True)
class Step:
    """One row of the ablation: a name, what changed, and how to run a policy
    (``dally``, ``tiresias``, ``gandiva``; None where it cannot run)."""

    name: str
    change: str
    run: Callable[[Trace, str], Figures | None]


def _seed_step(switches: SeedSwitches) -> Callable[[Trace, str], Figures | None]:
    def run_seed_step(trace: Trace, policy: str) -> Figures | None:
        if policy == "gandiva":
            return None  # the seed mode has no Gandiva
        return run_seed_policy(trace, "4x2x8", policy, switches)

    return run_seed_step


def _engine_step(
    seed_table: bool = False, **engine: object
) -> Callable[[Trace, str], Figures | None]:
    """A step run by our engine; ``seed_table``: with the authors' slowdown
    table as its performance source."""

    def run_engine(trace: Trace, policy: str) -> Figures | None:
        from ddl_gym.baselines import make_policy

        pol = make_policy(policy)
        kwargs = {"record_series": False, **engine}
        if seed_table:
            kwargs["perf_source"] = SlowdownTable.load()
        t0 = time.process_time()
        result = simulate(trace, "seed64", pol, **kwargs)
        return Figures.of(result.summary, time.process_time() - t0)

    return run_engine


def _no_run(trace: Trace, policy: str) -> Figures | None:
    raise RuntimeError("a cached ablation step cannot run")


def ablation_steps() -> list[Step]:
    seed = SeedSwitches()
    closed = replace(seed, perf="closed_form")
    contention = replace(closed, contention=True)
    best = replace(contention, placement="best_fit")
    return [
        Step("seed-faithful", "the authors' simulator (seed-artist)", _seed_step(seed)),
        Step(
            "+ closed-form perf",
            "our PerfModel (seed fabric) instead of the ASTRA-sim table",
            _seed_step(closed),
        ),
        Step("+ contention", "cross-rack jobs share rack uplinks", _seed_step(contention)),
        Step("+ best fit", "our best-fit packer instead of first fit", _seed_step(best)),
        Step(
            "+ our lease/re-offer rules",
            "our engine and policies: continuous progress, leases as decision points, "
            "margin/restore guards, restore paid by the job, our Tiresias classes",
            _engine_step(congestion="none"),
        ),
        Step(
            "+ heavy congestion",
            "background traffic on rack uplinks (our default model, seed-week-heavy)",
            _engine_step(congestion="heavy"),
        ),
    ]


SIDE_STEP = Step(
    "(side) our engine, seed_astra perf",
    "our engine and policies with the authors' slowdown table (no contention)",
    _engine_step(seed_table=True, congestion="none"),
)


def ablation(
    trace: Trace | None = None, steps: list[Step] | None = None, log=print
) -> list[tuple[Step, dict[str, Figures | None]]]:
    trace = trace or seed_week()
    out = []
    for step in steps or ablation_steps():
        row = {}
        for policy in ("dally", "tiresias", "gandiva"):
            row[policy] = step.run(trace, policy)
            if log and row[policy] is not None:
                f = row[policy]
                log(f"{step.name:<36} {policy:<9} {f.makespan_h:9.1f} h  cpu {f.cpu_s:.0f}s")
        out.append((step, row))
    return out


# -- the document --------------------------------------------------------------------
def _pct(ours: float, ref: float) -> str:
    return f"{100 * (ours / ref - 1):+.1f}%"


def _ratio(a: Figures | None, b: Figures | None, attr: str) -> str:
    if a is None or b is None:
        return "n/a"
    return f"{getattr(a, attr) / getattr(b, attr):.2f}"


def validation_table(ours: dict[str, Figures], ref: dict[str, Figures]) -> str:
    lines = [
        "| scheduler | metric | authors (h) | ours (h) | difference | within 10% |",
        "|---|---|---:|---:|---:|:---:|",
    ]
    for name in REFERENCE_POLICIES:
        o, r = ours[name], ref[name]
        for label, attr in METRICS:
            ov, rv = getattr(o, attr), getattr(r, attr)
            ok = "yes" if abs(ov / rv - 1) <= TOLERANCE else "**no**"
            lines.append(f"| {name} | {label} | {rv:,.1f} | {ov:,.1f} | {_pct(ov, rv)} | {ok} |")
    return "\n".join(lines)


def mix_table(ours: dict[tuple[str, str], Figures], ref: dict[tuple[str, str], Figures]) -> str:
    """The 500-job rows, ours beside the authors' (trace named by its jobs per day)."""
    lines = [
        "| trace | scheduler | metric | authors (h) | ours (h) | difference | within 10% |",
        "|---|---|---|---:|---:|---:|:---:|",
    ]
    for (trace, name), o in ours.items():
        r = ref[(trace, name)]
        short = trace.removeprefix("sense_500jobs_poisson-")
        for label, attr in METRICS:
            ov, rv = getattr(o, attr), getattr(r, attr)
            ok = "yes" if abs(ov / rv - 1) <= TOLERANCE else "**no**"
            lines.append(
                f"| {short} | {name} | {label} | {rv:,.1f} | {ov:,.1f} | {_pct(ov, rv)} | {ok} |"
            )
    return "\n".join(lines)


def ablation_table(rows: list[tuple[Step, dict[str, Figures | None]]]) -> str:
    lines = [
        "| step | Dally makespan (h) | Dally mean JCT (h) | Tiresias makespan (h) "
        "| Tiresias mean JCT (h) | Dally/Tiresias makespan | Dally/Tiresias JCT "
        "| Dally/Gandiva makespan | Dally/Gandiva JCT |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for step, r in rows:
        d, t, g = r["dally"], r["tiresias"], r["gandiva"]
        assert d is not None and t is not None
        lines.append(
            f"| {step.name} | {d.makespan_h:,.1f} | {d.mean_jct_h:,.1f} | {t.makespan_h:,.1f} "
            f"| {t.mean_jct_h:,.1f} | {_ratio(d, t, 'makespan_h')} | {_ratio(d, t, 'mean_jct_h')} "
            f"| {_ratio(d, g, 'makespan_h')} | {_ratio(d, g, 'mean_jct_h')} |"
        )
    lines.append("")
    lines.append("What each step changes:")
    lines.append("")
    for step, _ in rows:
        lines.append(f"* **{step.name}**: {step.change}.")
    return "\n".join(lines)


def markdown(
    ours: dict[str, Figures],
    ref: dict[str, Figures],
    other_shape: tuple[str, dict[str, Figures]] | None,
    rows: list[tuple[Step, dict[str, Figures | None]]] | None,
    notes: str = "",
    mix: tuple[dict[tuple[str, str], Figures], dict[tuple[str, str], Figures]] | None = None,
) -> str:
    out = [
        "# Reproducing the seed authors' simulator (seed-faithful mode)",
        "",
        "Generated by `python scripts/seed_reproduction.py` "
        "(logic in `ddl_gym/seed/reproduction.py`).",
        "Workload: `traces/dally/sense_500jobs_poisson_1proc-week.json` (411 jobs); cluster",
        "4 racks x 2 machines x 8 GPUs; no congestion. Authors' figures:",
        f"`{REFERENCE_REL}` (ArtISt-sim at 4cd660e with the running-job bid guard).",
        "Communication time is the authors' metric: per job, wall running time minus",
        "ideal compute time (single-GPU work / GPUs), summed, in hours.",
        "",
        "## Our seed-faithful mode beside the authors' simulator",
        "",
        validation_table(ours, ref),
        "",
        "CPU time of our runs (seed mode, one process): "
        + ", ".join(f"{k} {v.cpu_s:.0f} s" for k, v in ours.items())
        + ".",
        "",
    ]
    if mix is not None:
        mix_ours, mix_ref = mix
        out += [
            "## The 500-job mix: one-GPU jobs, three arrival rates",
            "",
            f"Same shape and settings; authors' figures: `{MIX_REFERENCE_REL}`. The traces",
            "`traces/dally/sense_500jobs_poisson-{100,50,25}jobsPday.json` hold the same 500",
            "jobs (270 of one GPU) arriving over about 260, 384 and 604 hours.",
            "",
            mix_table(mix_ours, mix_ref),
            "",
            "CPU time of our runs: "
            + ", ".join(
                f"{t.removeprefix('sense_500jobs_poisson-')} {n} {f.cpu_s:.0f} s"
                for (t, n), f in mix_ours.items()
            )
            + ".",
            "",
        ]
    if notes:
        out += [notes, ""]
    if other_shape is not None:
        shape, figs = other_shape
        out += [
            f"## The same scenario on {shape} (only the shape changed)",
            "",
            "| scheduler | makespan (h) | mean JCT (h) | total comm (h) |",
            "|---|---:|---:|---:|",
        ]
        for name, f in figs.items():
            out.append(
                f"| {name} | {f.makespan_h:,.1f} | {f.mean_jct_h:,.1f} | {f.total_comm_h:,.1f} |"
            )
        out.append("")
    if rows is not None:
        out += [
            "## From the seed's model to ours, one switch at a time",
            "",
            "Dally is auto-tuned Dally (`dally`), Tiresias `tiresias`, Gandiva `gandiva`; the",
            "seed-faithful simulator has no Gandiva, so its ratio starts at our engine.",
            "",
            ablation_table(rows),
            "",
        ]
    return "\n".join(out)


PARTS = ("validation", "mix", "shape", "ablation-seed", "ablation-engine")
# our engine with the authors' table and 20 s leases: jobs live thousands of
# hours, more than 4 CPU minutes per policy, so only on request (--part side)
EXTRA_PARTS = ("side",)


def _compute(part: str, trace: Trace, shape: str) -> object:
    """One part of the document's runs (parts run in separate processes)."""
    if part == "validation":
        return reproduce(trace)
    if part == "mix":
        return reproduce_mix()
    if part == "shape":
        return (shape, reproduce(trace, shape))
    steps = ablation_steps()
    if part == "side":
        chosen = [SIDE_STEP]
    else:
        chosen = steps[:4] if part == "ablation-seed" else steps[4:]
    rows = ablation(trace, chosen)
    # steps hold closures: keep their names and changes only
    return [(Step(st.name, st.change, _no_run), r) for st, r in rows]


def main(argv: list[str] | None = None) -> int:
    import argparse
    import pickle

    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("--out", default="docs/seed_reproduction.md")
    p.add_argument("--other-shape", default="4x4x8", help="second shape")
    p.add_argument(
        "--notes", default="docs/seed_reproduction_notes.md", help="markdown below the table"
    )
    p.add_argument(
        "--part",
        choices=PARTS + EXTRA_PARTS,
        action="append",
        help="compute only these parts into --cache (default: all, then write --out)",
    )
    p.add_argument("--cache", default="", help="folder of the parts' results (reused if present)")
    args = p.parse_args(argv)
    ref = load_reference()
    cache = Path(args.cache) if args.cache else None
    if cache is not None:
        cache.mkdir(parents=True, exist_ok=True)
    results: dict[str, object] = {}
    trace: Trace | None = None
    for part in args.part or PARTS:
        path = cache / f"{part}.pkl" if cache is not None else None
        if path is not None and path.is_file():
            results[part] = pickle.loads(path.read_bytes())
            continue
        trace = trace or seed_week()
        results[part] = _compute(part, trace, args.other_shape)
        if path is not None:
            path.write_bytes(pickle.dumps(results[part]))
    if args.part:
        return 0
    ours = results["validation"]
    for name, f in ours.items():  # type: ignore[union-attr]
        figs = f"{f.makespan_h:9.1f} {f.mean_jct_h:8.1f} {f.total_comm_h:9.1f}"
        print(f"{name:<20} {figs}  cpu {f.cpu_s:.0f}s")
    rows = [*results["ablation-seed"], *results["ablation-engine"]]  # type: ignore[misc]
    notes_path = Path(args.notes) if args.notes else None
    notes = notes_path.read_text(encoding="utf-8") if notes_path and notes_path.is_file() else ""
    mix = (results["mix"], load_mix_reference())
    text = markdown(ours, ref, results["shape"], rows, notes, mix)  # type: ignore[arg-type]
    Path(args.out).write_text(text, encoding="utf-8")
    print(f"wrote {args.out}")
    return 0
