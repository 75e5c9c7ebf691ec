"""The job form's "Hyperparameter tuning" field refuses YAML bombs, deep nesting
and oversized text under the field, and the REST API reads no YAML at all."""

from __future__ import annotations

import re
from html import unescape

import pytest
from django.test import Client

from jobs.models import Job
from jobs.web.forms import JobSubmitForm
from tests.helpers.jobs import PACKAGE
from tests.helpers.yaml_bombs import (
    ANCHORED_HPTUNING,
    BILLION_LAUGHS,
    DEEP_BLOCK,
    DEEP_FLOW,
    HUNDRED_THOUSAND_LAUGHS,
    OVERSIZED,
)

SUBMIT = "/projects/project-a/jobs/new/"
PREVIEW = "/projects/project-a/jobs/new/preview/"
REFUSED = {
    "billion laughs": (BILLION_LAUGHS, "expands to more than 20,000 values"),
    "deep flow lists": (DEEP_FLOW, "nests more than 100 levels deep"),
    "deep block lists": (DEEP_BLOCK, "nests more than 100 levels deep"),
    "oversized": (OVERSIZED, "is longer than 131,072 bytes"),
}


def form_data(**overrides) -> dict:
    data = {
        "job_id": "tuned_1",
        "python_module": "trainer.task",
        "region": "us-central1",
        "runtime_version": "2.11",
        "python_version": "3.7",
        "scale_tier": "BASIC",
        "package_uris": PACKAGE,
    }
    return {**data, **overrides}


def signed_in(user) -> Client:
    client = Client()
    client.force_login(user)
    return client


def field_errors(response, name: str = "hyperparameters") -> str:
    found = re.search(rf'id="id_{name}_errors">(.*?)</div>', response.content.decode(), re.S)
    return unescape(re.sub(r"<[^>]+>", " ", found.group(1))) if found else ""


@pytest.mark.parametrize(("text", "rule"), REFUSED.values(), ids=REFUSED.keys())
def test_the_tuning_field_refuses_the_document_naming_the_field_and_the_rule(text, rule):
    form = JobSubmitForm(data=form_data(hyperparameters=text))
    assert not form.is_valid()
    [message] = form.errors["hyperparameters"]
    assert message.startswith("Hyperparameter tuning is refused: the YAML ") and rule in message


@pytest.mark.parametrize("path", [SUBMIT, PREVIEW], ids=["submit", "live preview"])
def test_the_submit_page_shows_the_refusal_under_the_field_and_submits_nothing(project, developer, path):
    answer = signed_in(developer).post(path, form_data(hyperparameters=HUNDRED_THOUSAND_LAUGHS))
    assert answer.status_code == 200
    page = unescape(answer.content.decode())
    assert "Hyperparameter tuning is refused: the YAML expands to more than 20,000 values" in page
    if path == SUBMIT:
        assert "expands to more than 20,000 values" in field_errors(answer)
    assert Job.objects.count() == 0


def test_a_whole_hptuning_config_with_anchors_still_submits(project, developer):
    answer = signed_in(developer).post(SUBMIT, form_data(hyperparameters=ANCHORED_HPTUNING))
    assert answer.status_code == 302, field_errors(answer) or answer.content.decode()[:2000]
    spec = Job.objects.get(job_id="tuned_1").training_input["hyperparameters"]
    assert [p["parameterName"] for p in spec["params"]] == ["learning_rate", "decay", "layers", "units"]
    assert spec["params"][1]["scaleType"] == "UNIT_LOG_SCALE"


def test_the_rest_api_reads_no_yaml_body(client, project, admin):
    """Job bodies are JSON only: a YAML body is refused unread (415), bomb or not."""
    client.force_login(admin)
    answer = client.post("/v1/projects/project-a/jobs", BILLION_LAUGHS, content_type="application/x-yaml")
    assert answer.status_code == 415
    assert answer.json()["error"]["code"] == 415
