"""A job's metric curves (jobs.metrics.curves): evaluation tags drawn with their metric, wall times
kept with their points, a study's trials coloured by objective and capped best first; the compare
page's aggregation and baseline (jobs.metrics.compare)."""

from __future__ import annotations

import json

from jobs.metrics import charts, compare, curves


def rows_of(tag, values, *, trial="", run="", source="hypertune", start=0):
    return [(tag, trial, run, source, start + n, value, 1_700_000_000.0 + 10 * n) for n, value in enumerate(values)]


def test_val_loss_is_drawn_in_the_loss_chart_dashed_and_its_csv_names_both_tags():
    rows = rows_of("loss", [1.0, 0.5]) + rows_of("val_loss", [1.2, 0.7]) + rows_of("accuracy", [0.1, 0.2])
    accuracy, loss = curves.metric_charts(rows)
    assert (accuracy.title, loss.title) == ("accuracy", "loss")
    assert [trace.name for trace in loss.figure.data] == ["loss", "val_loss"]
    assert [trace.line.dash for trace in loss.figure.data] == ["solid", "dash"]
    assert loss.tags == ("loss", "val_loss") and loss.csv_query == "tag=loss&tag=val_loss"
    assert accuracy.csv_query == "tag=accuracy"


def test_evaluation_twins_are_found_by_prefix_and_path():
    assert curves.chart_tag("validation_loss") == ("loss", True)
    assert curves.chart_tag("eval_loss") == ("loss", True)
    assert curves.chart_tag("test_loss") == ("loss", True)
    assert curves.chart_tag("train_acc") == ("acc", False)
    assert curves.chart_tag("training_acc") == ("acc", False)
    assert curves.chart_tag("epoch/val_acc") == ("epoch/acc", True)
    assert curves.chart_tag("accuracy") == ("accuracy", False)
    train_val = curves.metric_charts(rows_of("train_acc", [0.5]) + rows_of("val_acc", [0.4]))
    assert [c.title for c in train_val] == ["acc"]
    lone = curves.metric_charts(rows_of("val_accuracy", [0.4]))
    assert [c.title for c in lone] == ["val_accuracy"]


def test_wall_times_are_thinned_with_their_points():
    rows = [("loss", "", "train", "tfevents", step, 1 / (step + 1), 1e9 + 3 * step) for step in range(10_000)]
    (chart,) = curves.metric_charts(rows, points_per_series=500)
    trace = chart.figure.data[0]
    walls = trace.meta["wall"]
    assert len(trace.x) == len(walls) <= 501 and trace.customdata is None
    assert all(wall == 1e9 + 3 * step for step, wall in zip(trace.x, walls, strict=True))
    assert trace.x[-1] == 9999 and walls[-1] == 1e9 + 3 * 9999


def test_a_study_colours_trials_by_objective_hides_the_legend_and_draws_the_best_on_top():
    rows = []
    for trial in range(1, 25):
        rows += rows_of("loss", [1.0, 1.0 / trial], trial=str(trial))
    study = curves.Study({str(t): t / 100 for t in range(1, 25)}, maximize=True, metric="accuracy")
    (chart,) = curves.metric_charts(rows, study=study)
    figure = json.loads(chart.figure_json)
    lines = [t for t in figure["data"] if t["meta"].get("trial")]
    assert len(lines) == 24 and figure["layout"]["showlegend"] is False
    assert lines[-1]["meta"]["trial"] == "24" and lines[-1]["line"]["width"] > lines[0]["line"]["width"]
    assert len({t["line"]["color"] for t in lines}) == 24  # one colour per objective
    assert "Trial 3" in lines[2]["hovertemplate"]
    (scale,) = [t for t in figure["data"] if t["meta"].get("role") == "scale"]
    assert scale["marker"]["colorscale"] and scale["marker"]["colorbar"]["title"]["text"] == "accuracy"


def test_capping_keeps_the_best_trials_not_the_first():
    rows = []
    for trial in range(1, 61):
        rows += rows_of("loss", [1.0, 0.5], trial=str(trial))
    # Lower is better: trials 21..60 have the lowest objectives.
    study = curves.Study({str(t): 100.0 - t for t in range(1, 61)}, maximize=False, metric="loss")
    (chart,) = curves.metric_charts(rows, study=study)
    drawn = {t.meta["trial"] for t in chart.figure.data if t.meta.get("trial")}
    assert drawn == {str(t) for t in range(21, 61)}
    assert "40 best trials by loss" in chart.note
    # A plain job's many runs: the first ones.
    plain = curves.metric_charts([r for t in range(50) for r in rows_of("loss", [1.0], run=f"run{t:02d}")])
    assert len(plain[0].figure.data) == curves.METRIC_SERIES_MAX and "The first 40" in plain[0].note


def test_compare_groups_share_colours_and_the_baseline_is_a_thick_faint_line():
    rows = [
        (tag, group, run, s, st, v, w)
        for group in ("00", "01")
        for (tag, _, run, s, st, v, w) in rows_of("loss", [1, 2])
    ]
    (chart,) = curves.metric_charts(rows, groups={"00": "a", "01": "b"}, baseline="01")
    first, second = chart.figure.data
    assert first.name == "b · hypertune (baseline)" and first.line.width > second.line.width and first.opacity < 1


def test_the_toolbar_offers_only_what_works_offline():
    (chart,) = curves.metric_charts(rows_of("loss", [1.0]))
    config = json.loads(chart.figure_json)["config"]
    assert config["displaylogo"] is False and config["showSendToCloud"] is False
    assert {"lasso2d", "select2d", "autoScale2d", "sendChartToCloud"} <= set(config["modeBarButtonsToRemove"])
    assert config == charts.CONFIG


def test_aggregation_reads_min_max_last_or_the_value_at_a_step():
    points = [("loss", "", 1, 0.9), ("loss", "", 2, 0.3), ("loss", "", 3, 0.5), ("acc", "", 2, 0.7)]
    assert compare.aggregate_values(points, "last") == {"loss": (3, 0.5), "acc": (2, 0.7)}
    assert compare.aggregate_values(points, "min") == {"loss": (2, 0.3), "acc": (2, 0.7)}
    assert compare.aggregate_values(points, "max") == {"loss": (1, 0.9), "acc": (2, 0.7)}
    assert compare.aggregate_values(points, "step", 2) == {"loss": (2, 0.3), "acc": (2, 0.7)}
    assert compare.aggregate_values(points, "step", 1) == {"loss": (1, 0.9)}


def test_the_baseline_column_gives_differences():
    row = compare.MetricRow("loss", "loss", True, "", [(3, 0.5), (3, 0.25)], baseline=0)
    base, other = row.cells
    assert base["baseline"] and base["delta"] == ""
    assert other["delta"] == "-0.25"
