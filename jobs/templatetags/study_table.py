"""The trial table's controls: each column's filter and sort link under the page's query."""

from __future__ import annotations

from django import template

from jobs.tuning import study

register = template.Library()


@register.filter
def trial_range(key: str, query) -> tuple[str, str]:
    """The (from, to) a numeric column is filtered to, as the URL writes them; empty where open."""
    low, high = query.range_of(key)
    return ("" if low is None else study.number_text(low), "" if high is None else study.number_text(high))


@register.filter
def trial_kept(key: str, query):
    """The categories a categorical column keeps; None: all of them."""
    return query.kept_of(key)


@register.filter
def trial_sort_link(key: str, query) -> dict:
    return query.sort_link(key)
