"""Reading a built-in algorithm's CSV: UTF-8, no header (unless asked), the target first.

Everything here uses the standard library only, so the console and the trainer share it. Errors
are ``DataError`` with a sentence that names the file, the row and the rule.
"""

from __future__ import annotations

import csv
from collections.abc import Iterator
from dataclasses import dataclass, field

MISSING = ("", "na", "nan", "null", "none", "?")


class DataError(ValueError):
    """The data cannot be used; the message says where and why."""


@dataclass
class Table:
    """Rows of text cells; ``names`` are the header's, or column_0 (the target), column_1, ..."""

    names: list[str]
    rows: list[list[str]]
    source: str = ""
    truncated: bool = False
    line_numbers: list[int] = field(default_factory=list)

    @property
    def width(self) -> int:
        return len(self.names)

    def column(self, index: int) -> list[str]:
        return [row[index] for row in self.rows]


def is_missing(cell: str) -> bool:
    return cell.strip().lower() in MISSING


def as_number(cell: str) -> float | None:
    """The cell as a finite number, or None when it is not one."""
    text = cell.strip()
    if not text:
        return None
    try:
        value = float(text)
    except ValueError:
        return None
    if value != value or value in (float("inf"), float("-inf")):
        return None
    return value


def default_names(width: int) -> list[str]:
    return [f"column_{index}" for index in range(width)]


def _lines(text: str) -> Iterator[str]:
    """The text's lines, ends kept, as ``io.StringIO`` gives them but without its copy of the
    whole text (four bytes a character: 250 MB for a 64 MB file)."""
    start = 0
    while start < len(text):
        end = text.find("\n", start) + 1 or len(text)
        yield text[start:end]
        start = end


def read_text(
    text: str,
    *,
    source: str = "data",
    header: bool = False,
    max_rows: int | None = None,
    width: int | None = None,
    keep_columns: int | None = None,
) -> Table:
    """Parse CSV text; every row must have as many cells as the first (or ``width``). With
    ``keep_columns``, rows keep only their first cells (the names all of them): a 10,000-column
    file costs what its analysed columns do."""
    if not text.strip():
        raise DataError(f"{source} is empty: a CSV with at least one row is required.")
    reader = csv.reader(_lines(text.lstrip("\ufeff")))
    names: list[str] | None = None
    rows: list[list[str]] = []
    lines: list[int] = []
    truncated = False
    for row in reader:
        if not row or (len(row) == 1 and not row[0].strip()):
            continue  # blank lines carry nothing
        if header and names is None:
            names = [name.strip() or f"column_{i}" for i, name in enumerate(row)]
            width = width or len(names)
            if len(names) != width:
                raise DataError(f"{source}: the header has {len(names)} columns but the other files have {width}.")
            continue
        if width is None:
            width = len(row)
        if len(row) != width:
            raise DataError(
                f"{source}: line {reader.line_num} has {len(row)} columns, but the "
                f"{'header' if names else 'first row'} has {width}; every row must have the same number "
                "of columns (a ragged CSV)."
            )
        if max_rows is not None and len(rows) >= max_rows:
            truncated = True
            break
        rows.append(row[:keep_columns] if keep_columns else row)
        lines.append(reader.line_num)
    if not rows:
        raise DataError(f"{source} has no data rows" + (" after its header." if header else "."))
    if width is not None and width < 2:
        raise DataError(
            f"{source} has 1 column: a target and at least one feature are required (the target is the first column)."
        )
    return Table(
        names=names or default_names(width or 0), rows=rows, source=source, truncated=truncated, line_numbers=lines
    )


def decode(data: bytes, source: str) -> str:
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as error:
        raise DataError(
            f"{source} is not UTF-8 text (byte {error.start} cannot be decoded): save the CSV as UTF-8."
        ) from None


def read_path(path: str, *, header: bool = False, max_rows: int | None = None, width: int | None = None) -> Table:
    """Read a local CSV file."""
    try:
        with open(path, "rb") as handle:
            data = handle.read()
    except FileNotFoundError:
        raise DataError(f"{path} does not exist.") from None
    except IsADirectoryError:
        raise DataError(f"{path} is a folder, not a CSV file.") from None
    return read_text(decode(data, path), source=path, header=header, max_rows=max_rows, width=width)


def check_target(table: Table, model_type: str | None) -> None:
    """Regression needs a number in every target cell that is not missing."""
    if model_type != "regression":
        return
    for row, line in zip(table.rows, table.line_numbers or range(1, len(table.rows) + 1), strict=False):
        cell = row[0]
        if not is_missing(cell) and as_number(cell) is None:
            raise DataError(
                f"{table.source}: line {line} has the target {cell!r}, which is not a number; "
                "--model_type regression needs a numeric target in the first column."
            )
