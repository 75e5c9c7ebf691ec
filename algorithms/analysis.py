"""Column analysis of a table: types, statistics, treatments, and the warnings a person needs.

The trainer uses ``analyze`` to decide how each column is transformed (and saves the result as
``artifacts/metadata.json``); the console's data analysis page uses ``report`` for the same
statistics plus distributions, outliers, correlation with the target, label balance and drift.
Standard library only.
"""

from __future__ import annotations

import math
from collections import Counter
from dataclasses import asdict, dataclass, field

from algorithms.table import Table, as_number, decode, is_missing, read_text

ROW_MISSING_LIMIT = 0.10  # rows with more than 10% of their values missing are dropped
ROW_ID_MIN_ROWS = 20  # below this, all-distinct values say nothing about a column being an id
HISTOGRAM_BINS = 20
TOP_VALUES = 20
DRIFT_MEAN_SHIFT = 0.5  # standardized mean difference that counts as drift
DRIFT_DISTANCE = 0.2  # total variation distance of category shares that counts as drift


@dataclass
class ColumnStats:
    """What one column holds and what preprocessing does with it."""

    index: int
    name: str
    role: str  # target or feature
    kind: str  # numeric or categorical
    count: int
    missing: int
    distinct: int
    treatment: str  # target, numeric, vocabulary, hashing, constant, row_id
    mean: float | None = None
    std: float | None = None
    min: float | None = None
    q1: float | None = None
    median: float | None = None
    q3: float | None = None
    max: float | None = None
    typical_range: list[float] | None = None
    outliers: int = 0
    outlier_examples: list[float] = field(default_factory=list)
    top_values: list[list] = field(default_factory=list)  # [value, count], most frequent first
    vocabulary: list[str] = field(default_factory=list)
    text_in_numbers: list[str] = field(default_factory=list)

    @property
    def dropped(self) -> bool:
        return self.treatment in ("constant", "row_id")

    def as_dict(self) -> dict:
        return {
            key: value
            for key, value in asdict(self).items()
            if value not in (None, [], 0) or key in ("missing", "outliers", "count", "distinct", "index")
        }


def _quantile(ordered: list[float], q: float) -> float:
    if len(ordered) == 1:
        return ordered[0]
    position = (len(ordered) - 1) * q
    low = math.floor(position)
    high = min(low + 1, len(ordered) - 1)
    return ordered[low] + (ordered[high] - ordered[low]) * (position - low)


def _round(value: float) -> float:
    return float(f"{value:.6g}")


def numbers_of(cells: list[str]) -> list[float | None]:
    return [None if is_missing(cell) else as_number(cell) for cell in cells]


def analyze_column(table: Table, index: int, *, max_categories: int = 20) -> ColumnStats:
    cells = table.column(index)
    present = [cell.strip() for cell in cells if not is_missing(cell)]
    numbers = [as_number(cell) for cell in present]
    is_numeric = bool(present) and all(n is not None for n in numbers)
    counts = Counter(present)
    stats = ColumnStats(
        index=index,
        name=table.names[index],
        role="target" if index == 0 else "feature",
        kind="numeric" if is_numeric else "categorical",
        count=len(cells),
        missing=len(cells) - len(present),
        distinct=len(counts),
        treatment="",
    )
    stats.top_values = [[value, count] for value, count in counts.most_common(TOP_VALUES)]
    if is_numeric:
        _numeric_stats(stats, [n for n in numbers if n is not None])
    else:
        stray = [text for text, number in zip(present, numbers, strict=True) if number is None]
        if len(stray) < len(present) * 0.5:  # mostly numbers with some text: one feature, two spellings
            stats.text_in_numbers = sorted(set(stray))[:5]
    stats.treatment = _treatment(stats, [n for n in numbers if n is not None], max_categories)
    if stats.treatment == "vocabulary":
        stats.vocabulary = [value for value, _ in counts.most_common()]
    return stats


def _numeric_stats(stats: ColumnStats, values: list[float]) -> None:
    ordered = sorted(values)
    count = len(ordered)
    mean = math.fsum(ordered) / count
    variance = math.fsum((v - mean) ** 2 for v in ordered) / count
    q1, median, q3 = (_quantile(ordered, q) for q in (0.25, 0.5, 0.75))
    spread = q3 - q1
    low, high = q1 - 1.5 * spread, q3 + 1.5 * spread
    outside = [v for v in ordered if v < low or v > high]
    stats.mean, stats.std = _round(mean), _round(math.sqrt(variance))
    stats.min, stats.q1, stats.median, stats.q3, stats.max = (
        _round(v) for v in (ordered[0], q1, median, q3, ordered[-1])
    )
    stats.typical_range = [_round(low), _round(high)]
    stats.outliers = len(outside)
    extremes = sorted(outside, key=lambda v: -abs(v - median))
    stats.outlier_examples = [_round(v) for v in extremes[:5]]


def _treatment(stats: ColumnStats, numbers: list[float], max_categories: int) -> str:
    if stats.role == "target":
        return "target"
    if stats.distinct <= 1:
        return "constant"
    present = stats.count - stats.missing
    if stats.distinct == present and present >= ROW_ID_MIN_ROWS:
        if stats.kind == "categorical":
            return "row_id"
        ascending = all(a < b for a, b in zip(numbers, numbers[1:], strict=False))
        if all(float(n).is_integer() for n in numbers) and (ascending or max(numbers) - min(numbers) + 1 == present):
            return "row_id"  # 1, 2, 3, ... or increasing integers: a counter, not a measurement
    if stats.kind == "numeric":
        return "numeric"
    return "vocabulary" if stats.distinct <= max_categories else "hashing"


def analyze(table: Table, *, max_categories: int = 20) -> list[ColumnStats]:
    return [analyze_column(table, index, max_categories=max_categories) for index in range(table.width)]


def guess_model_type(target: ColumnStats) -> str:
    """Numbers with many distinct values, or with fractions, are a regression target; else classes."""
    if target.kind != "numeric":
        return "classification"
    if target.distinct > 20:
        return "regression"
    if any(not float(as_number(value) or 0).is_integer() for value, _ in target.top_values):
        return "regression"
    return "classification"


def rows_missing_too_much(table: Table) -> list[int]:
    """Row positions with more than 10% of their values missing."""
    limit = ROW_MISSING_LIMIT * table.width
    return [i for i, row in enumerate(table.rows) if sum(1 for cell in row if is_missing(cell)) > limit]


# --- the data analysis page ----------------------------------------------------------------------


def histogram(values: list[float], bins: int = HISTOGRAM_BINS) -> list[dict]:
    """Equal-width bins: ``{"low", "high", "count"}``."""
    if not values:
        return []
    low, high = min(values), max(values)
    if low == high:
        return [{"low": _round(low), "high": _round(high), "count": len(values)}]
    width = (high - low) / bins
    counts = [0] * bins
    for value in values:
        counts[min(int((value - low) / width), bins - 1)] += 1
    return [
        {"low": _round(low + i * width), "high": _round(low + (i + 1) * width), "count": c}
        for i, c in enumerate(counts)
    ]


def _pearson(xs: list[float], ys: list[float]) -> float | None:
    n = len(xs)
    if n < 3:
        return None
    mx, my = math.fsum(xs) / n, math.fsum(ys) / n
    sxy = math.fsum((x - mx) * (y - my) for x, y in zip(xs, ys, strict=True))
    sxx = math.fsum((x - mx) ** 2 for x in xs)
    syy = math.fsum((y - my) ** 2 for y in ys)
    if sxx == 0 or syy == 0:
        return None
    return sxy / math.sqrt(sxx * syy)


def _correlation_ratio(groups: list[str], values: list[float]) -> float | None:
    """η: how much of a number's variance the groups explain (0 none, 1 all)."""
    if len(values) < 3:
        return None
    mean = math.fsum(values) / len(values)
    total = math.fsum((v - mean) ** 2 for v in values)
    if total == 0:
        return None
    by_group: dict[str, list[float]] = {}
    for group, value in zip(groups, values, strict=True):
        by_group.setdefault(group, []).append(value)
    between = math.fsum(len(vs) * (math.fsum(vs) / len(vs) - mean) ** 2 for vs in by_group.values())
    return math.sqrt(between / total)


def _cramers_v(xs: list[str], ys: list[str]) -> float | None:
    n = len(xs)
    rows, cols = Counter(xs), Counter(ys)
    if n < 3 or len(rows) < 2 or len(cols) < 2:
        return None
    joint = Counter(zip(xs, ys, strict=True))
    chi2 = 0.0
    for r, rc in rows.items():
        for c, cc in cols.items():
            expected = rc * cc / n
            chi2 += (joint.get((r, c), 0) - expected) ** 2 / expected
    return math.sqrt(chi2 / (n * (min(len(rows), len(cols)) - 1)))


def correlation(table: Table, column: ColumnStats, target: ColumnStats, model_type: str) -> dict | None:
    """How strongly a feature goes with the target, with the measure that fits their types."""
    pairs = [
        (row[column.index].strip(), row[0].strip())
        for row in table.rows
        if not is_missing(row[column.index]) and not is_missing(row[0])
    ]
    if not pairs:
        return None
    features, targets = [p[0] for p in pairs], [p[1] for p in pairs]
    numeric_target = model_type == "regression" and target.kind == "numeric"
    if column.kind == "numeric" and numeric_target:
        value, measure = _pearson([float(f) for f in features], [float(t) for t in targets]), "Pearson r"
    elif column.kind == "numeric":
        value, measure = _correlation_ratio(targets, [float(f) for f in features]), "correlation ratio η"
    elif numeric_target:
        value, measure = _correlation_ratio(features, [float(t) for t in targets]), "correlation ratio η"
    else:
        value, measure = _cramers_v(features, targets), "Cramér's V"
    if value is None:
        return None
    return {"column": column.name, "measure": measure, "value": _round(value)}


def _variants(values: list[str]) -> list[list[str]]:
    """Values that differ only in case or surrounding spaces ('Yes', 'yes ')."""
    groups: dict[str, set[str]] = {}
    for value in values:
        groups.setdefault(value.strip().lower(), set()).add(value)
    return [sorted(group) for group in groups.values() if len(group) > 1]


def _warning(kind: str, column: str | None, message: str) -> dict:
    return {"kind": kind, "column": column, "message": message}


def warnings_for(table: Table, columns: list[ColumnStats], model_type: str) -> list[dict]:
    found: list[dict] = []
    rows = len(table.rows)
    for column in columns:
        name = column.name
        if column.missing and column.role == "feature":
            found.append(
                _warning(
                    "missing_features",
                    name,
                    f"{name} is missing in {column.missing} of {rows} rows "
                    f"({100 * column.missing / rows:.1f}%); --preprocess fills numbers with the "
                    "column mean.",
                )
            )
        if column.text_in_numbers:
            found.append(
                _warning(
                    "representation",
                    name,
                    f"{name} holds numbers and text "
                    f"({', '.join(repr(t) for t in column.text_in_numbers)}): one feature written more "
                    "than one way, so it is read as categorical.",
                )
            )
        raw_cells = [row[column.index] for row in table.rows if not is_missing(row[column.index])]
        variants = _variants(list(set(raw_cells))) if column.kind == "categorical" else []
        if variants:
            shown = "; ".join(" / ".join(repr(v) for v in group) for group in variants[:3])
            found.append(
                _warning(
                    "representation" if column.role == "feature" else "suspicious_labels",
                    name,
                    f"{name} spells the same value in different ways: {shown}.",
                )
            )
        if column.outliers and column.kind == "numeric":
            low, high = column.typical_range or [None, None]
            found.append(
                _warning(
                    "out_of_range",
                    name,
                    f"{name} has {column.outliers} values outside its typical "
                    f"range [{low}, {high}] (1.5 interquartile ranges beyond the quartiles), e.g. "
                    f"{', '.join(str(v) for v in column.outlier_examples[:3])}.",
                )
            )
        if column.dropped:
            why = "has a single value" if column.treatment == "constant" else "has a different value in every row"
            found.append(_warning("dropped", name, f"{name} {why}, so preprocessing drops it ({column.treatment})."))
    found += _label_warnings(columns[0], rows, model_type)
    heavy = rows_missing_too_much(table)
    if heavy:
        found.append(
            _warning(
                "missing_features",
                None,
                f"{len(heavy)} rows have more than 10% of their values "
                f"missing (first at line {table.line_numbers[heavy[0]] if table.line_numbers else '?'});"
                " --preprocess drops them.",
            )
        )
    return found


def _label_warnings(target: ColumnStats, rows: int, model_type: str) -> list[dict]:
    found = []
    name = target.name
    if target.missing:
        found.append(
            _warning(
                "suspicious_labels",
                name,
                f"The target is missing in {target.missing} rows; they cannot be used for training.",
            )
        )
    if model_type == "regression":
        if target.kind != "numeric":
            found.append(
                _warning(
                    "suspicious_labels", name, "The target is not numeric in every row, but regression needs numbers."
                )
            )
        return found
    counts = [count for _, count in target.top_values]
    if target.distinct > 50:
        found.append(
            _warning(
                "suspicious_labels",
                name,
                f"The target has {target.distinct} different values: is this really a classification target?",
            )
        )
    rare = [value for value, count in target.top_values if count < max(2, 0.01 * rows)]
    if rare and target.distinct > 1:
        found.append(
            _warning(
                "suspicious_labels",
                name,
                f"Classes with very few examples (possible labelling errors): {', '.join(repr(v) for v in rare[:5])}.",
            )
        )
    if counts and target.distinct > 1 and counts[0] / max(1, rows - target.missing) > 0.9:
        found.append(
            _warning(
                "label_balance",
                name,
                f"The labels are imbalanced: {target.top_values[0][0]!r} is "
                f"{100 * counts[0] / (rows - target.missing):.0f}% of the rows; accuracy alone will "
                "flatter a model.",
            )
        )
    if target.distinct == 1:
        found.append(_warning("suspicious_labels", name, "The target has a single class: there is nothing to learn."))
    return found


def drift(first: Table, second: Table, columns: list[ColumnStats], what: str) -> list[dict]:
    """Columns whose distribution differs between two tables (splits, or halves of one file)."""
    found = []
    for column in columns:
        if column.dropped:
            continue
        a, b = first.column(column.index), second.column(column.index)
        if column.kind == "numeric":
            xs = [n for n in numbers_of(a) if n is not None]
            ys = [n for n in numbers_of(b) if n is not None]
            if len(xs) < 2 or len(ys) < 2:
                continue
            mx, my = math.fsum(xs) / len(xs), math.fsum(ys) / len(ys)
            sx = math.sqrt(math.fsum((x - mx) ** 2 for x in xs) / len(xs))
            sy = math.sqrt(math.fsum((y - my) ** 2 for y in ys) / len(ys))
            pooled = math.sqrt((sx**2 + sy**2) / 2)
            if pooled > 0 and abs(mx - my) / pooled > DRIFT_MEAN_SHIFT:
                found.append(
                    _warning(
                        "drift",
                        column.name,
                        f"{column.name} shifts between {what}: mean "
                        f"{_round(mx)} against {_round(my)} ({abs(mx - my) / pooled:.2f} standard "
                        "deviations).",
                    )
                )
        else:
            ca = Counter(c.strip() for c in a if not is_missing(c))
            cb = Counter(c.strip() for c in b if not is_missing(c))
            na, nb = sum(ca.values()), sum(cb.values())
            if not na or not nb:
                continue
            distance = 0.5 * sum(abs(ca[k] / na - cb[k] / nb) for k in set(ca) | set(cb))
            if distance > DRIFT_DISTANCE:
                found.append(
                    _warning(
                        "drift",
                        column.name,
                        f"{column.name} shifts between {what}: the shares of its "
                        f"values differ by {distance:.2f} (total variation distance).",
                    )
                )
            unseen = sorted(set(cb) - set(ca))
            if unseen and column.role == "target" and len(unseen) <= 10:
                found.append(
                    _warning(
                        "drift",
                        column.name,
                        f"Target values in the second part that the first lacks: "
                        f"{', '.join(repr(u) for u in unseen[:5])}.",
                    )
                )
    return found


def halves(table: Table) -> tuple[Table, Table]:
    middle = len(table.rows) // 2
    lines = table.line_numbers or []
    return (
        Table(table.names, table.rows[:middle], table.source, line_numbers=lines[:middle]),
        Table(table.names, table.rows[middle:], table.source, line_numbers=lines[middle:]),
    )


def report(
    table: Table, *, model_type: str | None = None, compare: Table | None = None, max_categories: int = 20
) -> dict:
    """Everything the data analysis page shows, as plain data."""
    columns = analyze(table, max_categories=max_categories)
    target = columns[0]
    model_type = model_type or guess_model_type(target)
    distributions = {}
    for column in columns:
        if column.kind == "numeric":
            values = [n for n in numbers_of(table.column(column.index)) if n is not None]
            distributions[column.name] = {"kind": "histogram", "bins": histogram(values)}
        else:
            distributions[column.name] = {"kind": "bars", "values": column.top_values}
    correlations = [
        c
        for c in (correlation(table, column, target, model_type) for column in columns[1:] if not column.dropped)
        if c is not None
    ]
    correlations.sort(key=lambda c: -abs(c["value"]))
    warnings = warnings_for(table, columns, model_type)
    if len(table.rows) >= 2 * ROW_ID_MIN_ROWS:
        first, second = (table, compare) if compare is not None else halves(table)
        what = (
            "the file and the comparison file"
            if compare is not None
            else "the first and the second half of the rows (a change over time, if rows are in time order)"
        )
        warnings += drift(first, second, columns, what)
    balance = target.top_values if model_type == "classification" else []
    return {
        "rows": len(table.rows),
        "columns": [c.as_dict() for c in columns],
        "column_stats": columns,
        "model_type": model_type,
        "distributions": distributions,
        "correlations": correlations,
        "label_balance": balance,
        "warnings": warnings,
        "truncated": table.truncated,
    }


# --- the page's analysis, run in a child process with caps (jobs/builtin/analysis.py) --------------


def _first_columns(table: Table, count: int) -> Table:
    if table.width <= count:
        return table
    return Table(
        table.names[:count], [row[:count] for row in table.rows], table.source, table.truncated, table.line_numbers
    )


def report_csv(
    data: bytes,
    *,
    source: str,
    header: bool,
    model_type: str | None,
    max_columns: int,
    max_rows: int,
    cut: bool = False,
    compare: bytes | None = None,
    compare_source: str = "",
    compare_cut: bool = False,
) -> dict:
    """``report`` of a CSV's first ``max_rows`` rows and ``max_columns`` columns (the target first).

    Every row is still checked to have the file's full width, so a ragged file reads as one."""
    table = read_text(decode(data, source), source=source, header=header, max_rows=max_rows, keep_columns=max_columns)
    table.truncated = table.truncated or cut
    width = table.width
    other = None
    if compare is not None:
        other = read_text(
            decode(compare, compare_source),
            source=compare_source,
            header=header,
            max_rows=max_rows,
            width=width,
            keep_columns=max_columns,
        )
        other.truncated = other.truncated or compare_cut
        if header:
            other.names = table.names
        other = _first_columns(other, max_columns)
    result = report(_first_columns(table, max_columns), model_type=model_type, compare=other)
    result.update(total_columns=width, max_columns=max_columns, max_rows=max_rows)
    return result
