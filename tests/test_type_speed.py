"""ddl_gym/type_speed.py's MEASURED table, recomputed from Gavel's measured
1-GPU throughputs (profiles/gavel/; skips without the data dir)."""

from __future__ import annotations

import pytest

from ddl_gym.gpu_speed import GAVEL_FLAT, SpeedModel, read_gavel_single_gpu
from ddl_gym.type_speed import (
    GAVEL_JOB_OF_MODEL,
    MEASURED,
    REFERENCE_TYPE,
    relative_speed,
    speed_source,
)


@pytest.fixture(scope="module")
def gavel(data_dir):
    path = data_dir / GAVEL_FLAT
    if not path.is_file():
        pytest.skip(f"no {path}")
    return read_gavel_single_gpu(path)


def test_measured_table_is_gavels_ratio_to_v100_rounded(gavel):
    model = SpeedModel(gavel)
    recomputed: dict[str, dict[str, float]] = {}
    for name, job in GAVEL_JOB_OF_MODEL.items():
        row = {}
        for t in ("K80", "P100"):
            ratio, source = model.ratio(job, REFERENCE_TYPE, t)
            assert source == "family", (name, t)  # the job's own measurement
            # the job itself was measured: the ratio is its own two throughputs
            assert ratio == pytest.approx(gavel[(job, t)] / gavel[(job, REFERENCE_TYPE)])
            row[t] = round(ratio, 4)
        recomputed[name] = row
    assert recomputed == MEASURED


def test_every_mapped_job_is_in_gavels_table(gavel):
    jobs = {j for j, _ in gavel}
    assert set(GAVEL_JOB_OF_MODEL.values()) <= jobs
    assert set(MEASURED) == set(GAVEL_JOB_OF_MODEL)


def test_relative_speed_reads_the_table_and_falls_back_in_order():
    assert relative_speed("resnet50", "K80") == MEASURED["resnet50"]["K80"]
    assert relative_speed("resnet50", "k80") == MEASURED["resnet50"]["K80"]  # Gavel spelling
    assert speed_source("resnet50", "V100M32") == (1.0, "measured")  # openb spelling
    assert speed_source("vgg11", "K80") == (0.247, "measured median")
    speed, source = speed_source("vgg11", "H100")
    assert source == "datasheet" and speed == pytest.approx(3.986, abs=1e-3)
    assert speed_source("resnet50", "G2", assumed=0.7) == (0.7, "assumed")
    with pytest.raises(ValueError, match="G3 has no speed"):
        relative_speed("resnet50", "G3")


def _pct(x: float) -> str:
    return f"{100 * x:.1f}%"


def test_docs_model_gpu_types_table_is_the_cross_validation(gavel):
    """docs/model.md's error table: cross_validate's medians, overall and
    per ordered type pair, holding out one job type and one family."""
    from pathlib import Path

    from ddl_gym.gpu_speed import cross_validate

    page = (Path(__file__).parents[1] / "docs" / "model.md").read_text(encoding="utf-8")
    pairs = [
        ("K80", "P100"),
        ("K80", "V100-16GB"),
        ("P100", "K80"),
        ("P100", "V100-16GB"),
        ("V100-16GB", "K80"),
        ("V100-16GB", "P100"),
    ]
    for cv, label in (
        (cross_validate(gavel, "job"), "one job type"),
        (cross_validate(gavel, "family"), "one model family"),
    ):
        by_pair = cv.median_by("pair")
        cells = [_pct(by_pair[f"{a} -> {b}"]) for a, b in pairs]
        row = f"| {label} | **{_pct(cv.median_error)}** | " + " | ".join(cells) + " |"
        assert row in page, row
