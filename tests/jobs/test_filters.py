"""The jobs.list filter language, against real rows."""

from __future__ import annotations

import re
from datetime import timedelta

import pytest
from django.utils import timezone

from jobs.filters import FilterError, parse_filter
from jobs.models import Job, JobState


@pytest.fixture
def jobs(project):
    now = timezone.now()
    rows = [
        ("census_1", JobState.SUCCEEDED, {"team": "ml", "env": "prod"}, "BASIC", 3),
        ("census_2", JobState.FAILED, {"team": "ml"}, "CUSTOM", 2),
        ("rnn_a", JobState.FAILED, {"team": "research"}, "BASIC", 1),
        ("rnn_b", JobState.RUNNING, {"a__gt": "x"}, "STANDARD_1", 0),
    ]
    for job_id, state, labels, tier, days in rows:
        Job.objects.create(
            project=project,
            job_id=job_id,
            state=state,
            labels=labels,
            training_input={"scaleTier": tier, "region": "us-central1"},
            create_time=now - timedelta(days=days),
        )
    return rows


def ids(expression: str) -> list[str]:
    return sorted(Job.objects.filter(parse_filter(expression)).values_list("job_id", flat=True))


@pytest.mark.parametrize(
    "expression, expected",
    [
        ("", ["census_1", "census_2", "rnn_a", "rnn_b"]),
        ("jobId:census*", ["census_1", "census_2"]),
        ("jobId=rnn_a", ["rnn_a"]),
        ("jobId:rnn* AND state:FAILED", ["rnn_a"]),
        ("jobId:rnn* state:FAILED", ["rnn_a"]),  # juxtaposition is AND
        ("state:FAILED OR state:RUNNING", ["census_2", "rnn_a", "rnn_b"]),
        ("jobId:census* AND state:FAILED OR state:SUCCEEDED", ["census_1", "census_2"]),  # OR binds tighter
        ("NOT state:FAILED", ["census_1", "rnn_b"]),
        ("-state:FAILED", ["census_1", "rnn_b"]),
        ("state!=FAILED", ["census_1", "rnn_b"]),
        ("(jobId:rnn* OR labels.env:prod) AND NOT state:RUNNING", ["census_1", "rnn_a"]),
        ("labels.team:ml", ["census_1", "census_2"]),
        ('labels.team="research"', ["rnn_a"]),
        ("labels.env:*", ["census_1"]),
        ("labels.a__gt:x", ["rnn_b"]),  # odd keys are plain keys, not lookups
        ("trainingInput.scaleTier:BASIC", ["census_1", "rnn_a"]),
    ],
)
def test_filter_selects_the_jobs_a_user_expects(jobs, expression, expected):
    assert ids(expression) == expected


def test_time_comparisons(jobs):
    cutoff = (timezone.now() - timedelta(days=1, hours=12)).strftime("%Y-%m-%dT%H:%M:%SZ")
    assert ids(f'createTime>"{cutoff}"') == ["rnn_a", "rnn_b"]
    assert ids(f"createTime<={cutoff}") == ["census_1", "census_2"]


@pytest.mark.parametrize(
    "expression, message",
    [
        ("owner:me", "unknown field 'owner'"),
        ("state:DONE", "'DONE' is not a job state"),
        ("jobId:", "ends too early"),
        ("(state:FAILED", "ends too early"),
        ("state:FAILED)", "unexpected ')'"),
        ("jobId>abc", "does not apply to text fields"),
        ('createTime>"yesterday"', "is not an RFC 3339 timestamp"),
        ("state:FAILED AND", "ends too early"),
        ("x" * 2001, "longer than 2000"),
    ],
)
def test_malformed_filters_say_what_is_wrong(expression, message):
    with pytest.raises(FilterError, match=re.escape(message)):
        parse_filter(expression)
