"""The console's jobs list: search, filters and sort order, read from and written back to the URL.

A ``JobListQuery`` is the list's whole state as plain values (what the address bar holds, so a
list can be shared and the back button returns to it); ``apply`` turns it into a QuerySet.
Unknown or malformed values are ignored, as a hand-edited URL should not break the page.
"""

from __future__ import annotations

from dataclasses import dataclass, fields, replace
from datetime import date
from urllib.parse import urlencode

from django.db.models import DateTimeField, DurationField, ExpressionWrapper, F, Q, TextField, Value
from django.db.models.fields.json import KeyTextTransform
from django.db.models.functions import Cast, Coalesce
from django.db.models.lookups import Exact
from django.utils import timezone

from jobs.models import JobState

# Column → ordering, ascending; the second key keeps pages stable among equal values.
SORTS = {
    "id": ("job_id", "pk"),
    "created": ("create_time", "pk"),
    "state": ("state", "-create_time", "-pk"),
    "duration": ("duration", "pk"),
}
# The direction a column sorts in when first clicked: newest and longest first.
FIRST_DESCENDING = {"created", "duration"}
DEFAULT_SORT = "-created"


def _date(text: str) -> date | None:
    try:
        return date.fromisoformat(text)
    except ValueError:
        return None


@dataclass(frozen=True)
class JobListQuery:
    q: str = ""
    state: str = ""
    creator: str = ""
    label: str = ""
    created_from: str = ""  # YYYY-MM-DD, inclusive
    created_to: str = ""
    sort: str = DEFAULT_SORT
    page: int = 1

    @classmethod
    def from_params(cls, params) -> JobListQuery:
        text = {f.name: params.get(f.name, "").strip()[:200] for f in fields(cls) if f.name != "page"}
        page = params.get("page", "")
        return cls(
            q=text["q"],
            creator=text["creator"],
            label=text["label"],
            state=text["state"] if text["state"] in JobState.values else "",
            created_from=text["created_from"] if _date(text["created_from"]) else "",
            created_to=text["created_to"] if _date(text["created_to"]) else "",
            sort=text["sort"] if text["sort"].lstrip("-") in SORTS else DEFAULT_SORT,
            page=int(page) if page.isdigit() and int(page) > 0 else 1,
        )

    @property
    def filtered(self) -> bool:
        return any((self.q, self.state, self.creator, self.label, self.created_from, self.created_to))

    def as_params(self) -> dict[str, str]:
        """The values that differ from the defaults, in a stable order."""
        default = JobListQuery()
        return {
            f.name: str(getattr(self, f.name))
            for f in fields(self)
            if getattr(self, f.name) != getattr(default, f.name)
        }

    def url(self, **changes) -> str:
        """``?…`` for this list with ``changes``; a new filter or order starts at page 1."""
        changed = replace(self, **({"page": 1} | changes))
        return "?" + urlencode(changed.as_params())

    def sort_link(self, column: str) -> dict:
        """A column heading's link (the other direction once sorted by it) and its aria-sort."""
        current = self.sort.lstrip("-")
        descending = self.sort.startswith("-")
        if current == column:
            target = column if descending else f"-{column}"
            aria = "descending" if descending else "ascending"
        else:
            target = f"-{column}" if column in FIRST_DESCENDING else column
            aria = ""
        return {"url": self.url(sort=target), "aria_sort": aria}

    def apply(self, jobs):
        if self.q:
            labels_text = Cast("labels", output_field=TextField())
            jobs = jobs.alias(labels_text=labels_text).filter(
                Q(job_id__icontains=self.q) | Q(labels_text__icontains=self.q)
            )
        if self.state:
            jobs = jobs.filter(state=self.state)
        if self.creator:
            jobs = jobs.filter(created_by__username=self.creator)
        if self.label:
            jobs = jobs.filter(_label_match(self.label))
        if self.created_from:
            jobs = jobs.filter(create_time__date__gte=_date(self.created_from))
        if self.created_to:
            jobs = jobs.filter(create_time__date__lte=_date(self.created_to))
        column = self.sort.lstrip("-")
        if column == "duration":
            now = Value(timezone.now(), output_field=DateTimeField())
            jobs = jobs.alias(
                duration=ExpressionWrapper(
                    Coalesce(F("end_time"), now) - F("create_time"), output_field=DurationField()
                )
            )
        order = SORTS[column]
        if self.sort.startswith("-"):
            order = tuple(key[1:] if key.startswith("-") else f"-{key}" for key in order)
        return jobs.order_by(*order)


def _label_match(text: str) -> Q:
    """``key=value`` (or ``key:value``): that label with that value; ``key``: the label is set.
    The key is compared as data (KeyTextTransform), never spliced into a lookup path."""
    for separator in ("=", ":"):
        if separator in text:
            key, _, value = text.partition(separator)
            return Q(Exact(KeyTextTransform(key.strip(), "labels"), value.strip()))
    return Q(labels__has_key=text)


def creators(jobs) -> list[str]:
    """The usernames of whoever submitted ``jobs``, for the creator filter."""
    names = jobs.order_by().exclude(created_by=None).values_list("created_by__username", flat=True).distinct()
    return sorted(names)
