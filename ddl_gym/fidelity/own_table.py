"""Calibrate to your own cluster: ``ddl-gym calibrate --table FILE``.

Reads a measured table in the documented format
(:func:`ddl_gym.fidelity.measured.read_table`), fits a fabric to it
(:func:`~ddl_gym.fidelity.calibrate.fit_fabric`, the three forms, the better
kept), cross-validates over placements (4 folds: every placement predicted
by a fit that never saw it), reports the error per level beside predicting
no communication cost and the base preset, states what the form cannot
express (ratios below 1, single-server points that fall as GPUs are added)
with the rows, and the table's repeatability floor (its repeats), then saves
the fitted preset in the user data dir (:mod:`ddl_gym.userdata`), where
``fabric="<name>"`` finds it. Nothing is written into the package.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd

from ddl_gym import userdata
from ddl_gym.fidelity.calibrate import (
    FitResult,
    abs_rel_error,
    error_table,
    fit_fabric,
    placement_folds,
    predict_placement_cv,
    predict_ratio,
    repeat_spread,
    save_fitted,
)
from ddl_gym.fidelity.hardware import describe, nearest_preset
from ddl_gym.fidelity.measured import read_table
from ddl_gym.topology import FABRICS, SAVED_FABRICS_DIR, Algorithm, Fabric

DEFAULT_LOSS = "soft_l1"
# A point this far below its reference (or below a smaller placement of the
# same job on one server) is beyond what the form can express, noise aside.
BELOW_TOL = 0.02


_FORMAT_COLUMNS = (
    ("model", "a catalogue model (`ddl_gym.profiles.MODEL_NAMES`: resnet50, bert_base, ...)"),
    ("local_bsz", "per-GPU batch size"),
    (
        "placement",
        "GPUs per server, `+`-joined, any server size: `8+8` two servers of 8, `4` four "
        "GPUs on one server, `2+1`; `8,8` inside quotes also works",
    ),
    ("t_iter", "seconds per training iteration (steady state)"),
    (
        "repeat",
        "optional repeat id: rows that differ only in it are repeats (they give the "
        "repeatability floor)",
    ),
    (
        "hardware",
        "optional, one per table: GPU, intra-server link and network, e.g. `8x A100 SXM4, "
        "NVSwitch, 8x HDR InfiniBand`; it picks the base preset and the transfer prior",
    ),
)

FORMAT_DOC = (
    """## Calibrate to your own cluster: `ddl-gym calibrate --table`

Measure your cluster's iteration times and write them as a CSV with a header
(`measured.read_table`; other columns are ignored):

| column | meaning |
|---|---|
"""
    + "\n".join(f"| `{c}` | {m} |" for c, m in _FORMAT_COLUMNS)
    + """

Every (model, `local_bsz`) needs a single-GPU row (placement `1`), the
reference of that job's other rows. Example:

```
model,local_bsz,placement,t_iter,repeat,hardware
resnet50,64,1,0.181,1,"2x DGX A100: NVSwitch, 8x HDR InfiniBand"
resnet50,64,8,0.190,1,
resnet50,64,8+8,0.193,1,
resnet50,64,8+8,0.195,2,
```

`ddl-gym calibrate --table FILE [--name NAME] [--base PRESET] [--hardware TEXT]`
fits the three all-reduce forms (the better kept), cross-validates over
placements (4 folds), prints the error per level beside predicting no
communication cost and the base preset, lists the rows the form cannot
express (below 1; on one server, faster than fewer GPUs of the same job) and
the repeatability floor, and saves the preset as `<user data dir>/fabrics/NAME.json`
(`ddl_gym.userdata`: `platformdirs`' user data dir, or `$DDL_GYM_DATA_HOME`),
after which `fabric="NAME"` works in the env, `simulate()` and scenarios. The
report goes to `<user data dir>/calibration/NAME.md` (or `--out`). Nothing is
written into the package. The bundled Gavel and Pollux tables are read by the
same reader (`measured.points_frame`) and can be written in this format
(`measured.write_table`).
"""
)


@dataclass(frozen=True)
class TableReport:
    """What ``calibrate --table`` found, and where it went."""

    name: str
    rows: pd.DataFrame
    hardware: str
    base: str
    fit: FitResult
    errors: pd.DataFrame  # per evaluation and level
    below_one: pd.DataFrame  # rows measured faster than their reference
    non_monotone: pd.DataFrame  # single-server rows faster than fewer GPUs of the job
    repeats: pd.DataFrame  # the repeatability floor
    saved: Path | None
    markdown: str


def check_name(name: str) -> None:
    """A user preset may not shadow a built-in or shipped one (those are
    looked up first, so it could never be used by name)."""
    userdata.user_fabric_path(name)  # rejects paths
    if name in FABRICS or (SAVED_FABRICS_DIR / f"{name}.json").is_file():
        raise ValueError(f"preset name {name!r} is taken by a built-in preset; choose another")


def choose_base(hardware: str, base: str | None) -> str:
    """``base`` if given, else the datasheet preset nearest the hardware."""
    if base is not None:
        if base not in FABRICS:
            raise ValueError(f"unknown base preset {base!r}; known: {', '.join(FABRICS)}")
        return base
    return nearest_preset(describe(hardware))


def below_one(df: pd.DataFrame, tol: float = BELOW_TOL) -> pd.DataFrame:
    """Rows measured faster than their reference: every form predicts >= 1."""
    d = df[~df["is_reference"].to_numpy() & (df["ratio"].to_numpy() < 1 - tol)]
    return d[["job", "placement", "t_iter", "t_compute", "ratio"]].reset_index(drop=True)


def non_monotone(df: pd.DataFrame, tol: float = BELOW_TOL) -> pd.DataFrame:
    """Single-server rows whose ratio is below that of fewer GPUs of the same
    job by more than ``tol``: on one server every form's slowdown does not
    fall as GPUs are added."""
    d = df[(df["s"].to_numpy() == 1) & ~df["is_reference"].to_numpy()]
    out = []
    for _, job in d.groupby("job", sort=True):
        job = job.sort_values("n")
        best = job.groupby("n")["ratio"].median()
        for _, row in job.iterrows():
            fewer = best[best.index < row["n"]]
            if len(fewer) and row["ratio"] < fewer.max() * (1 - tol):
                out.append(
                    {
                        "job": row["job"],
                        "placement": row["placement"],
                        "ratio": row["ratio"],
                        "fewer GPUs' ratio": float(fewer.max()),
                    }
                )
    return pd.DataFrame(out, columns=["job", "placement", "ratio", "fewer GPUs' ratio"])


def _level_errors(df: pd.DataFrame, err: np.ndarray, label: str) -> pd.DataFrame:
    ok = ~np.isnan(err)
    t = error_table(df[ok], err[ok], by=("level",))
    t.insert(0, "evaluation", label)
    return t


def _md(df: pd.DataFrame, pct: tuple[str, ...] = ()) -> str:
    if df.empty:
        return "_none_"
    lines = ["| " + " | ".join(map(str, df.columns)) + " |", "|" + "---|" * len(df.columns)]
    for _, row in df.iterrows():
        cells = []
        for c in df.columns:
            v = row[c]
            if isinstance(v, tuple):
                cells.append("+".join(map(str, v)))
            elif isinstance(v, float):
                cells.append(f"{v:.1%}" if c in pct else f"{v:.4g}")
            else:
                cells.append(str(v))
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def _fabric_line(f: Fabric) -> str:
    return (
        f"form `{f.algorithm}`; GPU link {f.gpu_link.bandwidth / 1e9:.3g} GB/s, "
        f"{f.gpu_link.latency * 1e6:.3g} us; NIC {f.nic.bandwidth / 1e9:.3g} GB/s, "
        f"{f.nic.latency * 1e6:.3g} us; overlap {f.overlap:.2f}; sharing h {f.gpu_link_sharing:.2f}"
        f", x {f.nic_sharing:.2f}; multipliers "
        + (", ".join(f"{m} {v:.3g}" for m, v in f.comm_scale) or "none")
    )


def calibrate_table(
    path: str | Path,
    name: str | None = None,
    base: str | None = None,
    save: bool = True,
    hardware: str | None = None,
    loss: str = DEFAULT_LOSS,
    seed: int = 0,
) -> TableReport:
    """Fit, cross-validate, report and (``save``) save one measured table."""
    path = Path(path)
    name = name or path.stem
    if save:
        check_name(name)
    table = read_table(path, cluster=name)
    df = table.rows
    hw = hardware if hardware is not None else table.hardware
    base_name = choose_base(hw, base)
    fit = fit_fabric(df, base_name, name=name, loss=loss)
    folds = placement_folds(df, k=4, seed=seed)
    form: dict[str, Algorithm] = {name: fit.fabric.algorithm}
    pred_cv = predict_placement_cv(df, folds, base_name, loss=loss, algorithms=form)
    errors = pd.concat(
        [
            _level_errors(df, abs_rel_error(df, pred_cv), "fitted, held-out placements (4-fold)"),
            _level_errors(
                df, abs_rel_error(df, predict_ratio(df, fit.fabric)), "fitted, in-sample"
            ),
            _level_errors(df, abs_rel_error(df, np.ones(len(df))), "predict 1 (no comm cost)"),
            _level_errors(
                df, abs_rel_error(df, predict_ratio(df, FABRICS[base_name])), f"preset {base_name}"
            ),
        ],
        ignore_index=True,
    )
    saved = None
    if save:
        desc = f"fitted by ddl-gym calibrate --table to {path.name} ({fit.points} points)"
        if hw:
            desc += f"; hardware: {hw}"
        saved = save_fitted(fit, name, userdata.fabrics_dir(), description=desc)
    below, nonmono = below_one(df), non_monotone(df)
    repeats = repeat_spread(df)
    text = _markdown(path, name, hw, base_name, fit, errors, below, nonmono, repeats, saved, df)
    return TableReport(name, df, hw, base_name, fit, errors, below, nonmono, repeats, saved, text)


def _markdown(
    path: Path,
    name: str,
    hw: str,
    base: str,
    fit: FitResult,
    errors: pd.DataFrame,
    below: pd.DataFrame,
    nonmono: pd.DataFrame,
    repeats: pd.DataFrame,
    saved: Path | None,
    df: pd.DataFrame,
) -> str:
    informative = df[~df["is_reference"]]
    levels = informative.groupby("level").size().to_dict()
    floor = (
        f"median {repeats['median'].iloc[0]:.1%}, p90 {repeats['p90'].iloc[0]:.1%} over "
        f"{int(repeats['pairs'].iloc[0])} ordered pairs of rows that repeat a job and placement"
        if not repeats.empty
        else "unknown: the table repeats no (job, placement); add rows with a `repeat` id"
    )
    lines = [
        f"# Calibration of `{name}` to `{path.name}`",
        "",
        f"Hardware: {hw or '(not stated)'}. Base preset: `{base}`. Points: "
        + ", ".join(f"{n} {lv}" for lv, n in sorted(levels.items()))
        + f" (and {int(df['is_reference'].sum())} single-GPU references).",
        "",
        "Error = |predicted / measured - 1| of the iteration time over the 1-GPU time "
        "of the same job (model and per-GPU batch); `machine` = one server, "
        "`multi-node` = several servers.",
        "",
        _md(errors, pct=("median", "p90", "max")),
        "",
        f"Fitted: {_fabric_line(fit.fabric)}; rms log error {fit.rms_log_error:.3f}.",
        "",
        f"Repeatability floor: {floor}. A median error below it is not to be expected.",
        "",
        f"## What the form cannot express ({len(below)} + {len(nonmono)} rows)",
        "",
        f"Rows measured more than {BELOW_TOL:.0%} faster than one GPU of the same job "
        "(every form predicts at least 1):",
        "",
        _md(below, pct=()),
        "",
        f"Rows on one server more than {BELOW_TOL:.0%} faster than fewer GPUs of the same job "
        "(every form's slowdown on one server does not fall as GPUs are added):",
        "",
        _md(nonmono, pct=()),
        "",
    ]
    if saved is not None:
        lines += [f'Saved as `{saved}`: use it as `fabric="{name}"`.', ""]
    return "\n".join(lines)
