"""Reading CSVs and analysing their columns: what the trainer and the data analysis page share. Pure."""

from __future__ import annotations

import pytest

from algorithms import analysis
from algorithms.table import DataError, check_target, read_text


def test_ragged_rows_empty_files_and_single_columns_are_refused():
    with pytest.raises(DataError, match="line 2 has 3 columns, but the first row has 2"):
        read_text("1,2\n3,4,5\n", source="d.csv")
    with pytest.raises(DataError, match="d.csv is empty"):
        read_text("  \n", source="d.csv")
    with pytest.raises(DataError, match="has 1 column: a target and at least one feature"):
        read_text("1\n2\n", source="d.csv")
    with pytest.raises(DataError, match="has no data rows after its header"):
        read_text("y,x\n", source="d.csv", header=True)


def test_header_mode_names_the_columns():
    table = read_text("price,rooms\n10,2\n12,3\n", header=True)
    assert table.names == ["price", "rooms"] and table.rows == [["10", "2"], ["12", "3"]]
    assert read_text("10,2\n").names == ["column_0", "column_1"]


def test_regression_needs_a_numeric_target():
    check_target(read_text("1.5,2\n,3\n"), "regression")  # a missing target is dropped later, not refused
    with pytest.raises(DataError, match="line 2 has the target 'tall'"):
        check_target(read_text("1.5,2\ntall,3\n", source="d.csv"), "regression")


def test_columns_are_typed_and_given_a_treatment():
    rows = [f"{i % 2},{i * 0.5},{'abc'[i % 3]},{i},k,id{i}" for i in range(30)]
    columns = analysis.analyze(read_text("\n".join(rows)), max_categories=2)
    assert [(c.kind, c.treatment) for c in columns] == [
        ("numeric", "target"),
        ("numeric", "numeric"),
        ("categorical", "hashing"),
        ("numeric", "row_id"),
        ("categorical", "constant"),
        ("categorical", "row_id"),
    ]
    assert columns[1].mean == 7.25 and columns[1].min == 0 and columns[1].max == 14.5


def test_outliers_missing_values_and_spellings_become_warnings():
    rows = [f"{'yes' if i % 3 else 'Yes '},{i % 7},{'' if i == 3 else 'a'}" for i in range(40)] + ["no,500,a"]
    report = analysis.report(read_text("\n".join(rows)), model_type="classification")
    messages = " | ".join(w["message"] for w in report["warnings"])
    assert "column_1 has 1 values outside its typical range" in messages and "e.g. 500" in messages
    assert "column_2 is missing in 1 of 41 rows" in messages
    assert "column_0 spells the same value in different ways: 'Yes ' / 'yes'" in messages
    assert "Classes with very few examples (possible labelling errors): 'no'" in messages
    assert report["label_balance"][0] == ["yes", 26]


def test_drift_between_halves_is_found():
    rows = [f"{i % 2},{(i % 10) + 0.5 + (100 if i >= 50 else 0)}" for i in range(100)]
    report = analysis.report(read_text("\n".join(rows)), model_type="classification")
    assert any(w["kind"] == "drift" and w["column"] == "column_1" for w in report["warnings"])


def test_histogram_bins_cover_the_range():
    bins = analysis.histogram([0, 1, 2, 3, 10], bins=5)
    assert [b["count"] for b in bins] == [2, 2, 0, 0, 1]
    assert bins[0]["low"] == 0 and bins[-1]["high"] == 10
