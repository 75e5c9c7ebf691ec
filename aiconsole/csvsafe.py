"""Cells for the CSV files the console and the CLI write, safe to open in a spreadsheet.

A text cell that starts with ``=``, ``+``, ``-``, ``@``, a tab or a carriage return is read as a
formula by Excel, LibreOffice and Google Sheets: a metric tag or run name that a trainer chose
(``=HYPERLINK(…)``, ``+cmd|…``, ``@SUM(…)``) would run in the spreadsheet of whoever opens the
download. Such a cell gets a leading ``'``, which spreadsheets take as "this is text" and hide.

Numbers are left alone, whether they come as numbers or as the text of one (``-0.5``, ``-1e-3``,
the API's int64 strings): a leading minus is how a spreadsheet reads a negative number, it runs
nothing, and quoting it would turn a column of values into text nobody can sum. Plain Python, so
the CLI's client commands use it without Django.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

FORMULA_STARTS = ("=", "+", "-", "@", "\t", "\r")
_NUMBER = re.compile(r"[+-]?(?:\d+(?:\.\d*)?|\.\d+)(?:[eE][+-]?\d+)?")


def cell(value: object) -> object:
    """``value`` as a CSV cell: text that a spreadsheet would run as a formula is quoted."""
    if isinstance(value, str) and value.startswith(FORMULA_STARTS) and not _NUMBER.fullmatch(value):
        return "'" + value
    return value


def row(values: Iterable[object]) -> list[object]:
    """A row's cells, each through ``cell``: for ``csv.writer.writerow``."""
    return [cell(value) for value in values]
