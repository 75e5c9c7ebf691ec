"""The ``filter`` parameter of Vertex AI's ``customJobs.list``, ``hyperparameterTuningJobs.list`` and
``trainingPipelines.list`` (whose states are ``PIPELINE_STATE_…``; either family is read).

The list-filter grammar is the v1 API's (``aiconsole.filters``); the fields are Vertex's, in
snake_case or camelCase as the SDK allows: ``display_name``, ``state`` (``JOB_STATE_SUCCEEDED``, by
name or number), ``create_time``, ``start_time``, ``end_time``, ``update_time`` (RFC 3339) and
``labels.<key>``, e.g. ``state="JOB_STATE_SUCCEEDED" AND display_name:"census*"``.
"""

from __future__ import annotations

from django.db.models import Q

from aiconsole import filters as grammar
from aiconsole.filters import FilterError, label_match, parse, text_match, time_match
from aiconsole.protojson import snake
from jobs.vertex import schema
from jobs.vertex.resources import PIPELINE_STATES, STATES

__all__ = ["FilterError", "narrow", "parse_filter"]

# update_time is annotated by the list service: the latest of the other three.
_TIME_FIELDS = ("create_time", "start_time", "end_time", "update_time")
_ENGINE_STATES = {name: state for state, name in [*STATES.items(), *PIPELINE_STATES.items()]}


def _field(name: str) -> str:
    return snake(name) if not name.startswith("labels.") else name


def comparison(field: str, operator: str, value: str) -> Q:
    """One ``field op value`` term over a job created through the Vertex API."""
    name = _field(field)
    if name == "display_name":
        return text_match("vertex__display_name", operator, value)
    if name == "state":
        state = schema.enum_name("JobState", value)
        if state is None and value.strip('"').startswith("PIPELINE_STATE_"):
            state = schema.enum_name("PipelineState", value)
        if state is None:
            raise FilterError(f"Invalid filter: {value!r} is not a job state ({', '.join(schema.ENUMS['JobState'])}).")
        engine = _ENGINE_STATES.get(state)
        if engine is None:  # a Vertex state the engine never has (PAUSED, EXPIRED…): nothing matches it
            return ~Q(pk__in=[]) if operator == "!=" else Q(pk__in=[])
        return text_match("state", "!=" if operator == "!=" else "=", engine)
    if name in _TIME_FIELDS:
        return time_match(name, operator, value)
    labelled = label_match(name, operator, value)
    if labelled is not None:
        return labelled
    raise FilterError(
        f"Invalid filter: unknown field {field!r}. Filterable fields: display_name, state, create_time, "
        "start_time, end_time, update_time, labels.<key>."
    )


def narrow(queryset, text: str):
    """The Vertex jobs the filter expression matches, or INVALID_ARGUMENT naming ``filter``."""
    return grammar.narrow(queryset, text, comparison)


def parse_filter(text: str) -> Q:
    """The Q for a Vertex list filter; an empty one matches everything."""
    return parse(text, comparison)
