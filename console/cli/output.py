"""Output: resources as readable text, JSON, YAML or ``value(...)``; tables; status lines.

As in gcloud, resources go to stdout and everything about progress goes to stderr, so
``aiconsole jobs describe J --format=json | jq`` sees only JSON.
"""

from __future__ import annotations

import argparse
import json
import sys
from dataclasses import dataclass
from datetime import datetime

import yaml

FORMATS = ("json", "yaml", "value(FIELD,...)")


@dataclass(frozen=True)
class Format:
    kind: str  # json, yaml, value
    fields: tuple[str, ...] = ()


def parse_format(text: str) -> Format:
    """``--format`` values: json, yaml, or value(field.path,...) for scripts."""
    cleaned = text.strip()
    if cleaned in ("json", "yaml"):
        return Format(cleaned)
    if cleaned.startswith("value(") and cleaned.endswith(")"):
        fields = tuple(f.strip() for f in cleaned[len("value(") : -1].split(",") if f.strip())
        if fields:
            return Format("value", fields)
    raise argparse.ArgumentTypeError(f"unknown format {text!r}; use one of: {', '.join(FORMATS)}")


# --- status and errors (stderr) ----------------------------------------------------------------


def status(message: str = "", *, end: str = "\n") -> None:
    print(message, end=end, file=sys.stderr, flush=True)


def error(command: str, message: str) -> None:
    status(f"ERROR: (aiconsole.{command}) {message}")


def human_size(size: int) -> str:
    value = float(size)
    for unit in ("bytes", "KiB", "MiB", "GiB"):
        if value < 1024 or unit == "GiB":
            return f"{size} bytes" if unit == "bytes" else f"{value:.1f} {unit}"
        value /= 1024
    return f"{size} bytes"


class ByteProgress:
    """Progress of a transfer on stderr: a live percentage on a terminal, one line otherwise."""

    def __init__(self, label: str, total: int):
        self.label, self.total, self.done = label, total, 0
        self.live = sys.stderr.isatty()
        self._shown = -1
        if not self.live:
            status(f"{label} ({human_size(total)})...")

    def advance(self, count: int) -> None:
        self.done += count
        if not self.live:
            return
        percent = 100 if not self.total else min(100, self.done * 100 // self.total)
        if percent != self._shown:
            self._shown = percent
            status(f"\r{self.label}: {percent:3d}% of {human_size(self.total)}", end="")

    def finish(self, note: str = "done") -> None:
        if self.live:
            status(f"\r{self.label}: {note} ({human_size(self.total)})    ")
        else:
            status(f"{self.label}: {note}.")


# --- resources (stdout) ------------------------------------------------------------------------


def lookup(resource: object, path: str) -> object:
    value = resource
    for part in path.split("."):
        if not isinstance(value, dict):
            return None
        value = value.get(part)
    return value


def _value_text(value: object) -> str:
    if value is None:
        return ""
    if isinstance(value, bool):
        return str(value)
    if isinstance(value, list):
        return ";".join(_value_text(v) for v in value)
    if isinstance(value, dict):
        return ";".join(f"{k}={_value_text(v)}" for k, v in sorted(value.items()))
    return str(value)


def to_yaml(data: object) -> str:
    return yaml.safe_dump(data, default_flow_style=False, sort_keys=True, allow_unicode=True, width=100)


def emit(resource: object, fmt: Format | None, text: str | None = None) -> None:
    """Print one resource: ``text`` by default, else in the chosen format."""
    if fmt is None:
        if text:
            print(text, end="" if text.endswith("\n") else "\n")
        return
    if fmt.kind == "json":
        print(json.dumps(resource, indent=2, sort_keys=True, ensure_ascii=False))
    elif fmt.kind == "yaml":
        print(to_yaml(resource), end="")
    else:
        print("\t".join(_value_text(lookup(resource, f)) for f in fmt.fields))


def emit_list(resources: list, fmt: Format | None, text: str | None = None) -> None:
    if fmt is None:
        if text:
            print(text, end="" if text.endswith("\n") else "\n")
    elif fmt.kind == "json":
        print(json.dumps(resources, indent=2, sort_keys=True, ensure_ascii=False))
    elif fmt.kind == "yaml":
        print("---\n".join(to_yaml(r) for r in resources), end="")
    else:
        for resource in resources:
            emit(resource, fmt)


# --- times and tables --------------------------------------------------------------------------


def parse_time(value: str | None) -> datetime | None:
    if not value:
        return None
    try:
        return datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError:
        return None


def local_time(value: str | None, pattern: str = "%Y-%m-%dT%H:%M:%S") -> str:
    """An RFC 3339 UTC time in the local time zone, as gcloud's ``.date(tz=LOCAL)`` shows it."""
    parsed = parse_time(value)
    return parsed.astimezone().strftime(pattern) if parsed else (value or "")


def table(headers: list[str], rows: list[list[object]]) -> str:
    """gcloud's plain table: upper-case headings, columns padded, no borders."""
    cells = [headers] + [[_value_text(c) for c in row] for row in rows]
    widths = [max(len(row[i]) for row in cells) for i in range(len(headers))]
    lines = ["  ".join(c.ljust(w) for c, w in zip(row, widths, strict=True)).rstrip() for row in cells]
    return "\n".join(lines) + "\n"


def box(title: str, headers: list[str], rows: list[list[object]]) -> str:
    """A boxed table with a title row, like gcloud's ``table[box,title=...]``."""
    cells = [headers] + [[_value_text(c) for c in row] for row in rows]
    # Multi-line cells (one hyperparameter per line) make a row several lines tall.
    split = [[c.split("\n") for c in row] for row in cells]
    widths = [max(len(line) for row in split for line in row[i]) for i in range(len(headers))]
    inner = sum(widths) + 3 * (len(widths) - 1)
    if len(title) > inner:
        widths[-1] += len(title) - inner
        inner = len(title)

    def rule(left: str, middle: str, right: str) -> str:
        return left + middle.join("─" * (w + 2) for w in widths) + right

    lines = ["┌" + "─" * (inner + 2) + "┐", "│ " + title.center(inner) + " │", rule("├", "┬", "┤")]
    for number, row in enumerate(split):
        height = max(len(c) for c in row)
        for index in range(height):
            parts = [(c[index] if index < len(c) else "").ljust(w) for c, w in zip(row, widths, strict=True)]
            lines.append("│ " + " │ ".join(parts) + " │")
        if number == 0:
            lines.append(rule("├", "┼", "┤"))
    lines.append(rule("└", "┴", "┘"))
    return "\n".join(lines) + "\n"
