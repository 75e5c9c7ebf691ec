"""The data analysis page's child process: a CSV's report, and its charts drawn.

Started by ``jobs.builtin.analysis`` (from a forkserver that preloads this module). It needs no
Django: the standalone analysis (``algorithms.analysis``) and the pure chart builders
(``jobs.builtin.charts``). Drawing a 10,000-column file's 200 histograms takes seconds of CPU; here it
takes them from this process, at a lower priority, once per file version, not from the web
process that answers everyone, on every view.
"""

from __future__ import annotations

import os

from algorithms import analysis
from algorithms.table import DataError
from jobs.builtin import charts


def send_report(connection, arguments: dict, files: int) -> None:
    """The child's whole life: the file's bytes (and the compared file's) from the connection,
    then ``(True, {"report", "charts"})`` or ``(False, message)`` back."""
    try:
        os.nice(10)  # the console's own requests come first
    except OSError:
        pass
    try:
        data = [connection.recv_bytes() for _ in range(files)]
        report = analysis.report_csv(data=data[0], compare=data[1] if files > 1 else None, **arguments)
        connection.send((True, {"report": report, "charts": charts.analysis_charts(report)}))
    except DataError as error:
        connection.send((False, str(error)))
    finally:
        connection.close()
