"""The trial table's controls: each column's filter and sort link under the page's query."""

from __future__ import annotations

from django import template

register = template.Library()


@register.filter
def trial_range(key: str, query) -> tuple[str, str]:
    """The (from, to) a numeric column is filtered to, as the URL writes them; empty where open."""
    return query.range_text_of(key)


@register.filter
def trial_kept(key: str, query):
    """The categories a categorical column keeps; None: all of them."""
    return query.kept_of(key)


@register.filter
def trial_sort_link(key: str, query) -> dict:
    return query.sort_link(key)
