"""``ddl-gym calibrate --table`` reads a table right or refuses it in one line,
and writes all or nothing; ``--hardware`` alone saves the prior (issue 51).

Every table here is a small hand-made CSV in ``tmp_path``; the user data dir
is ``tmp_path / "home"`` (``DDL_GYM_DATA_HOME``), never the real one.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from ddl_gym.cli.main import main as cli_main
from ddl_gym.fidelity import hardware
from ddl_gym.fidelity.own_table import gpus_per_server, read_own_table
from ddl_gym.topology import get_fabric

HEADER = "model,local_bsz,placement,t_iter,hardware\n"
V100 = '"8x V100, NVLink, 100GbE"'


def _good(spread: float = 1.0) -> str:
    """One job on 8-GPU servers, every level, times that grow with the spread
    (its multi-server cost times ``spread``)."""
    rows = [("1", 0.181), ("2", 0.185), ("4", 0.188), ("8", 0.190)]
    rows += [
        (p, 0.181 + (t - 0.181) * spread)
        for p, t in (("1+1", 0.193), ("2+2", 0.197), ("4+4", 0.200), ("8+8", 0.210))
    ]
    return HEADER + "".join(
        f"resnet50,64,{p},{t:.4f},{V100 if p == '1' else ''}\n" for p, t in rows
    )


GOOD = _good()


@pytest.fixture()
def home(tmp_path, monkeypatch) -> Path:
    path = tmp_path / "home"
    monkeypatch.setenv("DDL_GYM_DATA_HOME", str(path))
    return path


def _calibrate(capsys, *argv: str) -> tuple[int, str, str]:
    rc = cli_main(["calibrate", *argv])
    cap = capsys.readouterr()
    return rc, cap.out, cap.err


def _files(folder: Path) -> list[str]:
    return sorted(str(p.relative_to(folder)) for p in folder.rglob("*") if p.is_file())


def _one_line(err: str) -> str:
    """The error printed: exactly one line, no traceback."""
    assert "Traceback" not in err
    lines = err.strip().splitlines()
    assert len(lines) == 1, err
    assert lines[0].startswith("ddl-gym calibrate: error: ")
    return lines[0]


# -- malformed tables: one line naming file and row, exit 2, nothing written ------------

BAD_TABLES = {
    # name: (file bytes, what the line must say besides the file)
    "not UTF-8": (
        (HEADER + "resnet50,64,1,0.18,\n" + 'resnet50,64,8,0.19,"V100 caf').encode() + b'\xe9"\n',
        ("line 3", "not UTF-8", "0xe9"),
    ),
    "a spreadsheet's own file": (b"PK\x03\x04" + bytes(range(256)), ("zip file", "CSV UTF-8")),
    "UTF-16 text": (("\ufeff" + HEADER).encode("utf-16-le"), ("UTF-16 text", "CSV UTF-8")),
    "semicolons": (HEADER.replace(",", ";").encode(), ("separated by ';'",)),
    "huge placement": (
        (HEADER + "resnet50,64,1,0.18,\nresnet50,64," + "9" * 400 + ",0.19,\n").encode(),
        ("row 2 (line 3)", "'placement'", "1,024"),
    ),
    "integer overflow in local_bsz": (
        (HEADER + "resnet50," + "9" * 400 + ",1,0.18,\n").encode(),
        ("row 1 (line 2)", "'local_bsz'", "not a finite number"),
    ),
    "local_bsz above 2**20": (
        (HEADER + "resnet50,4194304,1,0.18,\n").encode(),
        ("row 1 (line 2)", "'local_bsz'", "outside"),
    ),
    "1e300 s": (
        (HEADER + "resnet50,64,1,0.18,\nresnet50,64,8,1e300,\n").encode(),
        ("row 2 (line 3)", "'t_iter'", "a day"),
    ),
    "t_iter 0": (
        (HEADER + "resnet50,64,1,0.18,\nresnet50,64,8,0,\n").encode(),
        ("row 2 (line 3)", "'t_iter'", "must be > 0"),
    ),
    "t_iter negative": (
        (HEADER + "resnet50,64,1,-0.18,\nresnet50,64,8,0.2,\n").encode(),
        ("row 1 (line 2)", "'t_iter'", "must be > 0"),
    ),
    "t_iter nan": (
        (HEADER + "resnet50,64,1,0.18,\nresnet50,64,8,nan,\n").encode(),
        ("row 2 (line 3)", "'t_iter'", "not a finite number"),
    ),
    "t_iter inf": (
        (HEADER + "resnet50,64,1,0.18,\nresnet50,64,8,inf,\n").encode(),
        ("row 2 (line 3)", "'t_iter'", "not a finite number"),
    ),
    "more than a day": (
        (HEADER + "resnet50,64,1,0.18,\nresnet50,64,8,86401,\n").encode(),
        ("row 2 (line 3)", "'t_iter'", "a day"),
    ),
    "a row in ms beside seconds": (
        (HEADER + "resnet50,64,1,0.181,\nresnet50,64,8,190,\n").encode(),
        ("row 2 (line 3)", "'t_iter'", "1.05e+03 times", "milliseconds"),
    ),
    "a single-GPU row in ms": (
        (HEADER + "resnet50,64,1,181,\nresnet50,64,8,0.19,\n").encode(),
        ("row 2 (line 3)", "'t_iter'", "0.00105 times"),
    ),
    "more than 1,024 GPUs per server": (
        (HEADER + "resnet50,64,1,0.18,\nresnet50,64,1025+1,0.2,\n").encode(),
        ("row 2 (line 3)", "'placement'", "1,024"),
    ),
    "digit string of a published artifact": (
        (
            HEADER + f"resnet50,64,1,0.18,{V100}\nresnet50,64,8,0.19,\nresnet50,64,18,0.2,\n"
        ).encode(),
        ("row 3 (line 4)", "'placement'", "8 per server", "write 1+8"),
    ),
    "placement beyond the hardware's servers": (
        (HEADER + f"resnet50,64,1,0.18,{V100}\nresnet50,64,16+16,0.2,\n").encode(),
        ("row 2 (line 3)", "'placement'", "16 GPUs in one server", "8 per server"),
    ),
    "a cell larger than the CSV field limit": (
        (HEADER + "resnet50,64,1,0.18,\nresnet50,64,8,0.19," + "x" * 200_000 + "\n").encode(),
        ("line 3", "not a CSV row"),
    ),
    "only single-GPU rows": (
        (HEADER + "resnet50,64,1,0.18,\nresnet50,64,1,0.19,\n").encode(),
        ("nothing to fit",),
    ),
}


@pytest.mark.parametrize("case", list(BAD_TABLES))
def test_a_malformed_table_is_one_line_exit_2_and_writes_nothing(tmp_path, home, capsys, case):
    """Even with --force, a refused table keeps the existing preset and
    writes no report."""
    body, needles = BAD_TABLES[case]
    table = tmp_path / "mine.csv"
    table.write_bytes(body)
    preset = home / "fabrics" / "mine.json"
    preset.parent.mkdir(parents=True)
    preset.write_text("the user's earlier preset\n")
    rc, out, err = _calibrate(capsys, "--table", str(table), "--force")
    assert rc == 2
    line = _one_line(err)
    assert f"{table}: " in line
    for needle in needles:
        assert needle in line, (needle, line)
    assert preset.read_text() == "the user's earlier preset\n"
    assert _files(home) == ["fabrics/mine.json"]
    assert out == ""


@pytest.mark.parametrize("kind", ["directory", "missing"])
def test_a_directory_or_a_missing_file_is_named_as_such(tmp_path, home, capsys, kind):
    table = tmp_path / "tables"
    if kind == "directory":
        table.mkdir()
    rc, _, err = _calibrate(capsys, "--table", str(table))
    assert rc == 2
    line = _one_line(err)
    expected = "is a directory, not a CSV file" if kind == "directory" else "file not found"
    assert line.endswith(f"{table}: {expected}")
    assert not home.exists()


def test_an_output_folder_that_is_a_file_is_refused_before_anything_is_written(
    tmp_path, home, capsys
):
    table = tmp_path / "mine.csv"
    table.write_text(GOOD)
    blocker = tmp_path / "afile"
    blocker.write_text("")
    rc, _, err = _calibrate(capsys, "--table", str(table), "--out", str(blocker / "reports"))
    assert rc == 2
    assert f"{blocker} is a file" in _one_line(err)
    assert not home.exists()


# -- reading right ---------------------------------------------------------------------


def test_a_utf8_bom_and_crlf_table_reads_as_the_plain_one(tmp_path):
    """Excel's "CSV UTF-8": a byte order mark and CRLF line ends."""
    plain = tmp_path / "plain.csv"
    plain.write_text(GOOD)
    excel = tmp_path / "excel.csv"
    excel.write_bytes(b"\xef\xbb\xbf" + GOOD.replace("\n", "\r\n").encode())
    a, b = read_own_table(plain, cluster="c"), read_own_table(excel, cluster="c")
    assert b.hardware == a.hardware == "8x V100, NVLink, 100GbE"
    assert b.gpus_per_server == 8
    assert b.rows.drop(columns="repeat").equals(a.rows.drop(columns="repeat"))
    assert list(b.rows["placement"]) == [(1,), (2,), (4,), (8,), (1, 1), (2, 2), (4, 4), (8, 8)]
    assert b.rows["ratio"].iloc[-1] == pytest.approx(0.21 / 0.181)


def test_hardware_option_replaces_the_column_in_the_placement_check(tmp_path):
    table = tmp_path / "mine.csv"
    table.write_text(GOOD)
    with pytest.raises(ValueError, match=r"row 4 \(line 5\).*4 per server"):
        read_own_table(table, hardware="4x T4, PCIe 3, 50GbE")


@pytest.mark.parametrize(
    ("text", "gpus"),
    [
        ("8x A100 SXM4, NVSwitch, 8x HDR InfiniBand", 8),  # the 8x before HDR is ports
        ("2x DGX A100: NVSwitch, 8x HDR InfiniBand", 8),  # two servers of 8
        ("NVIDIA V100 servers of up to 8 GPUs (Gavel)", 8),
        ("AWS g4dn.12xlarge: 4 NVIDIA T4 per node, 50 Gb/s NIC (Pollux)", 4),
        ("4x RTX 2080Ti, PCIe 3, 10GbE", 4),
        ("synthetic", None),
        ("V100, NVLink, 8x HDR", None),
    ],
)
def test_gpus_per_server_of_a_description(text, gpus):
    assert gpus_per_server(text) == gpus


# -- writing safely ------------------------------------------------------------------------


def test_existing_preset_kept_unless_force_and_the_saved_path_printed(tmp_path, home, capsys):
    table = tmp_path / "mine.csv"
    table.write_text(GOOD)
    preset = home / "fabrics" / "mine.json"
    report = home / "calibration" / "mine.md"

    rc, out, _ = _calibrate(capsys, "--table", str(table))
    assert rc == 0
    assert f'preset saved: {preset} (use it as fabric="mine"' in out
    assert f"report: {report}" in out
    assert _files(home) == ["calibration/mine.md", "fabrics/mine.json"]
    first, first_report = preset.read_bytes(), report.read_bytes()

    # a second table under the same name: refused before any work, nothing touched
    table.write_text(_good(spread=3.0))
    rc, out, err = _calibrate(capsys, "--table", str(table))
    assert rc == 2
    line = _one_line(err)
    assert f"preset 'mine' exists ({preset})" in line and "--force" in line
    assert preset.read_bytes() == first and report.read_bytes() == first_report

    # --force replaces it, with the new fit
    rc, out, _ = _calibrate(capsys, "--table", str(table), "--force")
    assert rc == 0 and f"preset saved: {preset}" in out
    assert preset.read_bytes() != first and report.read_bytes() != first_report
    assert get_fabric("mine").name == "mine"
    assert _files(home) == ["calibration/mine.md", "fabrics/mine.json"]  # no temporary left


def test_no_save_writes_only_the_report_and_says_so(tmp_path, home, capsys):
    table = tmp_path / "mine.csv"
    table.write_bytes(b"\xef\xbb\xbf" + GOOD.encode())  # and a BOM table fits
    rc, out, _ = _calibrate(capsys, "--table", str(table), "--no-save")
    assert rc == 0
    assert "preset not saved (--no-save)" in out
    assert "8 GPUs per server" in out
    assert _files(home) == ["calibration/mine.md"]


# -- a hardware description alone ------------------------------------------------------


def test_hardware_alone_saves_the_priors_preset(home, capsys):
    text = "8x A100 SXM4, NVSwitch, 8x HDR InfiniBand"
    rc, out, _ = _calibrate(capsys, "--hardware", text, "--name", "dgx")
    assert rc == 0
    saved = home / "fabrics" / "dgx.json"
    assert f"preset saved: {saved}" in out
    assert _files(home) == ["fabrics/dgx.json"]
    fabric = get_fabric("dgx")
    prior = hardware.preset_for(hardware.describe(text))
    assert fabric.name == "dgx" and text in fabric.description
    assert fabric.gpu_link == prior.gpu_link and fabric.nic == prior.nic
    assert fabric.algorithm == prior.algorithm and fabric.overlap == prior.overlap
    # kept unless --force; --no-save prints the prior and writes nothing
    before = saved.read_bytes()
    rc, out, _ = _calibrate(capsys, "--hardware", text, "--name", "other", "--no-save")
    assert rc == 0 and "preset not saved (--no-save)" in out and "hardware read as:" in out
    assert _files(home) == ["fabrics/dgx.json"] and saved.read_bytes() == before
    rc, _, err = _calibrate(capsys, "--hardware", text, "--name", "dgx")
    assert rc == 2 and "--force" in _one_line(err)
    assert _calibrate(capsys, "--hardware", text, "--name", "dgx", "--force")[0] == 0


def test_hardware_the_reader_refuses_is_one_line(home, capsys, monkeypatch):
    """describe() raising ValueError (hardware.UnreadableHardware) is the
    reader's message in one line, exit 2, nothing written."""
    from ddl_gym.fidelity import own_table

    def refuse(text: str):
        raise ValueError(f"cannot read hardware description {text!r}: could not read 'qq'")

    monkeypatch.setattr(own_table, "describe", refuse)
    rc, _, err = _calibrate(capsys, "--hardware", "8x qq", "--name", "x")
    assert rc == 2
    assert _one_line(err).endswith("cannot read hardware description '8x qq': could not read 'qq'")
    assert not home.exists()


def test_hardware_nobody_can_read_is_refused_saying_what_was_read(home, capsys):
    """hardware.describe()'s UnreadableHardware, through the CLI."""
    rc, _, err = _calibrate(capsys, "--hardware", "8x V100 blah", "--name", "x")
    assert rc == 2
    line = _one_line(err)
    assert "could not read 'blah'" in line and "v100" in line
    assert not home.exists()


def test_a_column_the_reader_refuses_still_bounds_the_placements(tmp_path):
    """A table's hardware column need not be readable (the fit needs no
    prior), but the GPUs per server it states still bound the placements."""
    table = tmp_path / "mine.csv"
    table.write_text(GOOD.replace("8x V100, NVLink, 100GbE", "8x V100, cluster zebra-3"))
    with pytest.raises(ValueError):
        hardware.describe("8x V100, cluster zebra-3")
    assert read_own_table(table).gpus_per_server == 8
    table.write_text(table.read_text().replace("8+8", "18"))
    with pytest.raises(ValueError, match=r"row 8 \(line 9\).*write 1\+8"):
        read_own_table(table)


def test_hardware_that_states_nothing_is_refused(home, capsys):
    rc, _, err = _calibrate(capsys, "--hardware", "synthetic")
    assert rc == 2
    assert "synthetic" in _one_line(err)
    assert not home.exists()


def test_the_documented_example_reads_with_its_servers_of_8(tmp_path):
    """The example of docs/calibration.md (``own_table.FORMAT_DOC``): its
    hardware column states DGX A100 servers (8 GPUs each)."""
    from ddl_gym.fidelity.own_table import FORMAT_DOC

    path = tmp_path / "dgx.csv"
    path.write_text(FORMAT_DOC.split("```")[1].strip() + "\n")
    table = read_own_table(path)
    assert table.gpus_per_server == 8
    assert list(table.rows["placement"]) == [(1,), (8,), (8, 8), (8, 8)]
    assert list(table.rows["repeat"]) == ["1", "1", "1", "2"]
