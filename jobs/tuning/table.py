"""A study's trial table for its page: the rows as HTML, and the address that shows the same view.

The rows are built here rather than in a template loop: a 2,000-trial study's rows times a dozen
columns cost a template most of a second, and this a few milliseconds.
"""

from __future__ import annotations

from html import escape
from urllib.parse import urlencode

from django.utils.safestring import SafeString, mark_safe

from jobs.templatetags.job_format import duration
from jobs.tuning.study import Column, TrialQuery, TrialRow

# The table's own keys in a query string; everything else on the page's address is kept.
TABLE_KEYS = ("trial_sort", "trial_state", "cols", "col", "trial_rows")
TABLE_PREFIXES = ("min.", "max.", "in.")


def page_url(path: str, params, query: TrialQuery) -> str:
    """The page's address showing ``query``: the other keys of ``params`` (log filters, the contour
    pair) kept, so a link copied after sorting or filtering shows the same page."""
    kept = [
        (key, value)
        for key, values in params.lists()
        if key not in TABLE_KEYS and not key.startswith(TABLE_PREFIXES)
        for value in values
    ]
    pairs = kept + query.as_params()
    return path + ("?" + urlencode(pairs) if pairs else "")


def _number(value) -> tuple[str, str]:
    """A number to four significant digits, and the whole value when that rounded it (for the cell's
    title: a span of its own in each such cell was a fifth of the rows' elements, each one styled,
    laid out and painted on every re-sort)."""
    if value is None:
        return "—", ""
    if isinstance(value, int) or (value == int(value) and abs(value) < 1e15):
        return str(int(value)), ""
    shown = f"{value:.0f}" if abs(value) >= 1e4 else f"{value:.4g}"  # as job_format.significant writes it
    return escape(shown), "" if float(shown) == value else repr(value)


def _cell(column: Column, row: TrialRow) -> str:
    value = row.values.get(column.key)
    if column.key == "state":
        label = "Stopped early" if value == "STOPPED_EARLY" else escape(str(value))
        return f'<td><span class="state state-{escape(str(value).lower())}">{label}</span></td>'
    if column.key == "duration":
        return f'<td class="number">{escape(duration(value))}</td>'
    if column.key == "objective" and value is None and row.trial.reported_no_metric:
        return "<td><em>no metric reported</em></td>"
    if column.numeric:
        shown, whole = _number(value)
        return f'<td class="number" title="{whole}">{shown}</td>' if whole else f'<td class="number">{shown}</td>'
    return f"<td>{escape(str(value)) if value not in (None, '') else '—'}</td>"


def body(
    rows: list[TrialRow],
    shown: list[Column],
    *,
    job_id: str,
    best: str,
    goal: str,
    failures: bool,
    files: bool = True,
    within: frozenset[str] = frozenset(),
) -> SafeString:
    """The table's ``<tbody>`` rows: a compare box, the trial (marked when it is the best, or
    ``within`` the noise of the best: not told apart from it), the shown columns, the failure and
    links to the trial's logs and, with ``files`` (the job names a job dir), to its files
    (``<jobDir>/<trialId>``): without one there are none to browse."""
    width = len(shown) + 3 + failures
    if not rows:
        return mark_safe(f'<tr><td colspan="{width}">No trial matches these filters.</td></tr>')
    out = []
    for row in rows:
        trial_id = escape(row.trial.trial_id)
        is_best = row.trial.trial_id == best
        cells = [
            f'<td><input type="checkbox" name="jobs" value="{escape(job_id)}/{trial_id}" form="trial-compare" '
            f'aria-label="Select trial {trial_id} to compare"></td>',
            f'<th scope="row">{trial_id}'
            + (
                f' <span class="badge best" title="The best objective ({escape(goal.lower())})">★ Best</span>'
                if is_best
                else ""
            )
            + (
                ' <span class="badge within-noise" title="Its objective is within the noise of the best\'s: '
                'the two cannot be told apart">≈ within noise</span>'
                if row.trial.trial_id in within
                else ""
            )
            + "</th>",
            *(_cell(column, row) for column in shown),
        ]
        if failures:
            lines = "".join(f"{escape(line)}\n" for line in row.error_lines)
            cells.append(
                "<td>"
                + (f'<span class="failure-reason">{escape(row.failure_reason)}</span>' if row.failure_reason else "")
                + (f'<pre class="error-lines">{lines}</pre>' if lines else "")
                + "</td>"
            )
        files_link = (
            f' · <a href="outputs/?trial={trial_id}" aria-label="Files of trial {trial_id}">Files</a>' if files else ""
        )
        cells.append(
            '<td class="trial-links">'
            f'<a href="?trial={trial_id}#logs" aria-label="Logs of trial {trial_id}">Logs</a>{files_link}</td>'
        )
        # Only the best row has an id (the summary links to it): htmx matches every id of a swapped
        # fragment against the page, which cost a 200-row re-sort half a second.
        marks = f' id="trial-{trial_id}" class="best-trial" aria-current="true"' if is_best else ""
        out.append(f'<tr data-trial="{trial_id}"{marks}>' + "".join(cells) + "</tr>")
    return mark_safe("\n".join(out))
