"""From tables of text to numeric train/validation/test arrays (numpy; runs in the trainer).

With ``--preprocess`` (the statistics, as the original, come from the data read, after rows are
dropped and before the split; given validation and test files are transformed with them):

- rows without a target, and rows with more than 10% of their cells missing, are dropped;
- the rows are split at random (with the seed) unless validation/test files are given;
- numeric columns: missing values become the column mean, then (value - mean) / std;
- categorical columns: one-hot over their vocabulary, or a hash bucket when they have more
  than ``max_categories`` values; constant and row-id columns are dropped.

Without it every cell must already be a number (blank cells are missing values).
"""

from __future__ import annotations

import zlib
from dataclasses import dataclass, field

import numpy as np

from algorithms import analysis
from algorithms.definitions import CLASSIFICATION
from algorithms.table import DataError, Table, as_number, is_missing


@dataclass
class Split:
    name: str
    x: np.ndarray
    y: np.ndarray  # class indices (classification) or numbers (regression)


@dataclass
class Prepared:
    features: list[str]
    splits: dict[str, Split]
    classes: list  # class labels in index order; empty for regression
    metadata: dict = field(default_factory=dict)


def _subset(table: Table, positions) -> Table:
    lines = table.line_numbers or list(range(1, len(table.rows) + 1))
    return Table(
        table.names, [table.rows[i] for i in positions], table.source, line_numbers=[lines[i] for i in positions]
    )


def _drop_rows(table: Table, preprocess: bool) -> tuple[Table, dict]:
    """Rows without a target always go; with preprocessing, rows missing more than 10% too."""
    no_target = {i for i, row in enumerate(table.rows) if is_missing(row[0])}
    heavy = set(analysis.rows_missing_too_much(table)) - no_target if preprocess else set()
    keep = [i for i in range(len(table.rows)) if i not in no_target and i not in heavy]
    return _subset(table, keep), {"missing_target": len(no_target), "missing_values": len(heavy)}


def split_positions(count: int, validation: float, test: float, seed: int) -> tuple[list, list, list]:
    """A random split of ``count`` rows into train, validation and test positions."""
    order = np.random.RandomState(seed).permutation(count)
    n_test = int(round(count * test))
    n_validation = int(round(count * validation))
    test_rows = sorted(order[:n_test].tolist())
    validation_rows = sorted(order[n_test : n_test + n_validation].tolist())
    train_rows = sorted(order[n_test + n_validation :].tolist())
    return train_rows, validation_rows, test_rows


def _classes(cells: list[str]) -> list:
    values = sorted({c.strip() for c in cells})
    numbers = [as_number(v) for v in values]
    if all(n is not None for n in numbers):
        return sorted({float(n) for n in numbers})
    return values


def _label(cell: str, classes: list):
    text = cell.strip()
    if classes and isinstance(classes[0], float):
        return float(text) if as_number(text) is not None else text
    return text


class Encoder:
    """The fitted transformation of one table shape: what metadata.json records."""

    def __init__(self, columns: list[analysis.ColumnStats], preprocess: bool, max_categories: int):
        self.columns = [c for c in columns if c.role == "feature" and (not preprocess or not c.dropped)]
        self.preprocess = preprocess
        self.buckets = max_categories
        self.features: list[str] = []
        for column in self.columns:
            if preprocess and column.treatment == "vocabulary":
                self.features += [f"{column.name}={value}" for value in column.vocabulary]
            else:
                self.features.append(column.name)

    def transform(self, table: Table) -> np.ndarray:
        blocks = [self._column(table, column) for column in self.columns]
        if not blocks:
            raise DataError("No feature columns are left: every feature column was constant or a row id.")
        return np.hstack(blocks).astype(np.float32)

    def _column(self, table: Table, column: analysis.ColumnStats) -> np.ndarray:
        cells = table.column(column.index)
        if not self.preprocess:
            values = np.full((len(cells), 1), np.nan)
            for i, cell in enumerate(cells):
                if is_missing(cell):
                    continue
                number = as_number(cell)
                if number is None:
                    line = table.line_numbers[i] if table.line_numbers else i + 1
                    raise DataError(
                        f"{table.source}: line {line}, column {column.index + 1} ({column.name}) is "
                        f"{cell.strip()!r}, not a number. Without --preprocess every column must be "
                        "numeric; add --preprocess to encode categorical columns."
                    )
                values[i, 0] = number
            return values
        if column.treatment == "numeric":
            mean, std = column.mean or 0.0, column.std or 1.0
            numbers = [as_number(cell) if not is_missing(cell) else None for cell in cells]
            values = np.array([mean if n is None else n for n in numbers], dtype=np.float64)
            return ((values - mean) / (std or 1.0)).reshape(-1, 1)
        if column.treatment == "vocabulary":
            index = {value: i for i, value in enumerate(column.vocabulary)}
            block = np.zeros((len(cells), len(column.vocabulary)))
            for i, cell in enumerate(cells):
                position = index.get(cell.strip())
                if position is not None:
                    block[i, position] = 1.0
            return block
        # hashing: a stable bucket number for any value, seen or not
        return np.array(
            [[zlib.crc32(cell.strip().encode()) % self.buckets if not is_missing(cell) else -1] for cell in cells],
            dtype=np.float64,
        )


def prepare(train: Table, validation: Table | None, test: Table | None, values: dict, model_type: str) -> Prepared:
    preprocess = bool(values["preprocess"])
    seed = int(values["seed"])
    read = len(train.rows)
    train, dropped = _drop_rows(train, preprocess)
    validation_dropped = test_dropped = {"missing_target": 0, "missing_values": 0}
    if validation is not None:
        validation, validation_dropped = _drop_rows(validation, preprocess)
    if test is not None:
        test, test_dropped = _drop_rows(test, preprocess)
    if not train.rows:
        raise DataError(
            f"{train.source}: no rows are left after dropping rows without a target"
            + (" or with more than 10% of their values missing." if preprocess else ".")
        )
    split_validation = 0.0 if validation is not None else float(values["validation_split"])
    split_test = 0.0 if test is not None else float(values["test_split"])
    train_rows, validation_rows, test_rows = split_positions(len(train.rows), split_validation, split_test, seed)
    whole = train
    train = _subset(whole, train_rows)
    validation = validation if validation is not None else _subset(whole, validation_rows)
    test = test if test is not None else _subset(whole, test_rows)
    if len(train.rows) < 2:
        raise DataError(
            f"{whole.source}: {len(train.rows)} training row(s) remain after the split; at least 2 are "
            "needed. Use more data or smaller --validation_split and --test_split."
        )
    columns = analysis.analyze(whole, max_categories=int(values["max_categories"]))
    encoder = Encoder(columns, preprocess, int(values["max_categories"]))
    classes = _classes(train.column(0)) if model_type == CLASSIFICATION else []
    if model_type == CLASSIFICATION and len(classes) < 2:
        raise DataError(
            f"{whole.source}: the target has a single class ({classes[0]!r}) in the training split; "
            "classification needs at least two."
        )
    splits, unseen = {}, {}
    for name, table in (("training", train), ("validation", validation), ("test", test)):
        table, unseen[name] = _known_classes(table, classes)
        x = encoder.transform(table) if table.rows else np.zeros((0, len(encoder.features)), dtype=np.float32)
        splits[name] = Split(name, x, _targets(table, classes, model_type))
    metadata = {
        "preprocess": preprocess,
        "model_type": model_type,
        "header": bool(values["header"]),
        "target": {"name": whole.names[0], "classes": classes} if classes else {"name": whole.names[0]},
        "features": encoder.features,
        "columns": [column.as_dict() for column in columns],
        "rows": {
            "read": read,
            "dropped_missing_target": dropped["missing_target"]
            + validation_dropped["missing_target"]
            + test_dropped["missing_target"],
            "dropped_missing_values": dropped["missing_values"]
            + validation_dropped["missing_values"]
            + test_dropped["missing_values"],
            "dropped_unseen_class": sum(unseen.values()),
            **{name: int(len(split.y)) for name, split in splits.items()},
        },
        "split": {
            "seed": seed,
            "validation_split": split_validation,
            "test_split": split_test,
            "validation_data_path": values.get("validation_data_path"),
            "test_data_path": values.get("test_data_path"),
        },
    }
    if preprocess:
        metadata["transform"] = {
            "numeric": "missing values become the training mean, then (value - mean) / std",
            "vocabulary": "one-hot over the column's vocabulary (feature name=value); other values are all zeros",
            "hashing": f"crc32(value) % {encoder.buckets}; missing is -1",
            "dropped": [c.name for c in columns if c.dropped],
        }
    return Prepared(features=encoder.features, splits=splits, classes=classes, metadata=metadata)


def _known_classes(table: Table, classes: list) -> tuple[Table, int]:
    """Validation and test rows whose class the training split never saw cannot be scored."""
    if not classes:
        return table, 0
    known = set(classes)
    keep = [i for i, row in enumerate(table.rows) if _label(row[0], classes) in known]
    return _subset(table, keep), len(table.rows) - len(keep)


def _targets(table: Table, classes: list, model_type: str) -> np.ndarray:
    if model_type == CLASSIFICATION:
        index = {label: i for i, label in enumerate(classes)}
        return np.array([index[_label(row[0], classes)] for row in table.rows], dtype=np.int64)
    return np.array([float(row[0]) for row in table.rows], dtype=np.float64)


def write_csv(path, split: Split) -> None:
    """A processed split as the original wrote it: target first, no header."""
    data = np.hstack([split.y.reshape(-1, 1).astype(np.float64), split.x.astype(np.float64)])
    np.savetxt(path, data, delimiter=",", fmt="%.10g")
