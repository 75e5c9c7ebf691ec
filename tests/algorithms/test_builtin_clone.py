"""A built-in algorithm job's "Clone": its form again, with its algorithm, data and arguments."""

from __future__ import annotations

import re

from django.test import Client
from django.urls import reverse

from jobs.models import Job
from tests.helpers.algorithms import classification_rows


def client_for(user) -> Client:
    client = Client()
    client.force_login(user)
    return client


def test_clone_refills_the_builtin_form_and_submits_the_same_arguments(developer, project, csv_file):
    data = csv_file(classification_rows(60))
    client = client_for(developer)
    url = reverse("jobs:submit_builtin", args=[project.project_id])
    client.post(
        url,
        {
            "job_id": "bt_source",
            "algorithm": "boosted_trees",
            "training_data_path": str(data),
            "model_type": "classification",
            "preprocess": "on",
            "eta": "0.2",
            "region": "us-east1",
            "master_type": "n1-standard-8",
            "extra_args": "--subsample=0.9",
        },
    )
    source = Job.objects.get(job_id="bt_source")
    page = client.get(reverse("jobs:detail", args=[project.project_id, "bt_source"]))
    assert f"{url}?clone=bt_source" in page.content.decode()

    response = client.get(url, {"clone": "bt_source"})
    initial = response.context["form"].initial
    assert re.fullmatch(r"builtin_\d{8}_\d{6}", initial["job_id"])
    assert initial["training_data_path"] == str(data) and initial["eta"] == "0.2"
    assert initial["preprocess"] is True and initial["header"] is False
    assert initial["extra_args"] == "--subsample=0.9" and initial["job_dir"] == ""  # its own default again
    assert 'data-cloned-from="bt_source"' in response.content.decode()

    posted = {k: v for k, v in initial.items() if v is not False}
    answer = client.post(url, {**posted, "job_id": "bt_copy", "preprocess": "on"})
    assert answer.status_code == 302, answer.content.decode()[-2000:]
    copy = Job.objects.get(job_id="bt_copy").training_input
    assert copy["args"] == source.training_input["args"]
    assert {**copy, "jobDir": ""} == {**source.training_input, "jobDir": ""}
    assert copy["jobDir"].endswith("job-dirs/project-a/bt_copy")
