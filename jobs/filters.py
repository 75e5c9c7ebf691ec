"""The ``filter`` parameter of ``projects.jobs.list``: the v1 list-filter grammar
(``aiconsole.filters``) over a job's fields.

``jobId``, ``errorMessage``, ``state`` (one of the job states), ``createTime``, ``startTime`` and
``endTime`` (RFC 3339), ``labels.<key>`` and ``trainingInput.<field>`` for the plain fields of a
job's input.
"""

from __future__ import annotations

from django.db.models import Q
from django.db.models.fields.json import KeyTextTransform

from aiconsole import filters as grammar
from aiconsole.filters import (
    MAX_FILTER_DEPTH,
    MAX_FILTER_LENGTH,
    FilterError,
    label_match,
    parse,
    text_match,
    time_match,
)
from jobs.models import JobState

__all__ = ["MAX_FILTER_DEPTH", "MAX_FILTER_LENGTH", "FilterError", "comparison", "narrow", "parse_filter"]

_TIME_FIELDS = {"createTime": "create_time", "startTime": "start_time", "endTime": "end_time"}
_STRING_FIELDS = {"jobId": "job_id", "errorMessage": "error_message"}
_TRAINING_INPUT_FIELDS = {
    "scaleTier",
    "region",
    "runtimeVersion",
    "pythonVersion",
    "pythonModule",
    "masterType",
    "workerType",
    "parameterServerType",
    "evaluatorType",
    "jobDir",
}


def comparison(field: str, operator: str, value: str) -> Q:
    """One ``field op value`` term over a job."""
    if field == "state":
        if value not in JobState.values:
            raise FilterError(f"Invalid filter: {value!r} is not a job state ({', '.join(JobState.values)}).")
        return text_match("state", operator, value)
    if field in _STRING_FIELDS:
        return text_match(_STRING_FIELDS[field], operator, value)
    if field in _TIME_FIELDS:
        return time_match(_TIME_FIELDS[field], operator, value)
    labelled = label_match(field, operator, value)
    if labelled is not None:
        return labelled
    if field.startswith("trainingInput.") and field[len("trainingInput.") :] in _TRAINING_INPUT_FIELDS:
        return text_match(KeyTextTransform(field[len("trainingInput.") :], "training_input"), operator, value)
    raise FilterError(
        f"Invalid filter: unknown field {field!r}. Filterable fields: jobId, state, errorMessage, createTime, "
        "startTime, endTime, labels.<key>, trainingInput.{" + ", ".join(sorted(_TRAINING_INPUT_FIELDS)) + "}."
    )


def narrow(queryset, text: str):
    """The jobs the filter expression matches, or INVALID_ARGUMENT naming ``filter``."""
    return grammar.narrow(queryset, text, comparison)


def parse_filter(text: str) -> Q:
    """The Q for a jobs filter expression; an empty one matches everything."""
    return parse(text, comparison)
