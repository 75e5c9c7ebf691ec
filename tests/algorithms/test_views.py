"""The built-in algorithm form, the data analysis page, and a built-in job's page."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from django.test import Client
from django.urls import reverse

from jobs import services
from jobs.builtin import analysis as analysis_runner
from jobs.models import Job, JobState
from tests.helpers.algorithms import BOOSTED_TREES, builtin_body, classification_rows, job_dir_for


@pytest.fixture(autouse=True)
def analysis_answers_in_the_request(settings):
    """The analysis runs in a child process; these pages' small files are ready in the first answer
    (the polling page is tested in test_analysis_limits.py)."""
    settings.ANALYSIS_WAIT_SECONDS = 60
    analysis_runner.reset()


def client_for(user) -> Client:
    client = Client()
    client.force_login(user)
    return client


def test_the_form_submits_a_builtin_job_with_only_the_chosen_algorithms_arguments(developer, project, csv_file):
    data = csv_file(classification_rows(60))
    response = client_for(developer).post(
        reverse("jobs:submit_builtin", args=[project.project_id]),
        {
            "job_id": "from_form",
            "algorithm": "boosted_trees",
            "training_data_path": str(data),
            "model_type": "classification",
            "preprocess": "on",
            "eta": "0.2",
            "max_depth": "3",
            "learning_rate": "0.5",
            "region": "us-central1",
            "extra_args": "--subsample=0.9",
        },
    )

    assert response.status_code == 302, response.content.decode()[-3000:]
    job = Job.objects.get(job_id="from_form")
    ti = job.training_input
    assert ti["masterConfig"] == {"imageUri": BOOSTED_TREES}
    assert ti["args"] == [
        f"--training_data_path={data}",
        "--model_type=classification",
        "--eta=0.2",
        "--max_depth=3",
        "--preprocess",
        "--subsample=0.9",
    ]
    assert ti["jobDir"].endswith("job-dirs/project-a/from_form")


def test_form_errors_show_next_to_the_argument(developer, project, csv_file):
    data = csv_file("1,2\n3\n")
    page = (
        client_for(developer)
        .post(
            reverse("jobs:submit_builtin", args=[project.project_id]),
            {
                "job_id": "bad_form",
                "algorithm": "boosted_trees",
                "training_data_path": str(data),
                "model_type": "classification",
                "eta": "3",
                "region": "us-central1",
            },
        )
        .content.decode()
    )

    assert 'id="id_eta_errors"' in page and "--eta must be a number above 0 and at most 1; got 3." in page
    assert not Job.objects.exists()
    page = (
        client_for(developer)
        .post(
            reverse("jobs:submit_builtin", args=[project.project_id]),
            {
                "job_id": "bad_form",
                "algorithm": "boosted_trees",
                "training_data_path": str(data),
                "model_type": "classification",
                "region": "us-central1",
            },
        )
        .content.decode()
    )
    assert 'id="id_training_data_path_errors"' in page and "line 2 has 1 columns" in page


@pytest.mark.parametrize("name", ["jobs:submit_builtin", "jobs:data_analysis"])
def test_viewers_get_403_and_outsiders_404(viewer, outsider, project, name):
    assert client_for(viewer).get(reverse(name, args=[project.project_id])).status_code == 403
    assert client_for(outsider).get(reverse(name, args=[project.project_id])).status_code == 404


def test_data_analysis_page_shows_columns_warnings_and_charts_with_tables(developer, project, csv_file):
    rows = classification_rows(200, missing=0.05) + ["1,55.0,5.0,red,201,same"]
    data = csv_file(rows)
    compare = csv_file([r.replace(",red,", ",blue,") for r in classification_rows(100, seed=4)])
    response = client_for(developer).get(
        reverse("jobs:data_analysis", args=[project.project_id]), {"path": str(data), "compare": str(compare)}
    )
    page = response.content.decode()

    assert response.status_code == 200
    assert "201 rows, 6 columns" in page and "<strong>classification</strong>" in page
    for text in (
        "column_2 is missing in",
        "column_1 has 2 values outside its typical range",
        "e.g. 55.0",
        "column_4 has a different value in every row, so preprocessing drops it (row_id)",
        "column_5 has a single value",
        "column_3 shifts between the file and the comparison file",
    ):
        assert text in page, text
    assert "Distribution of column_1" in page and "Most frequent values of column_3" in page
    assert "Label balance" in page and "Correlation with the target" in page
    assert page.count("<summary>Data table:") >= 8  # every chart has its table
    assert 'id="id_path_errors"' not in page


def test_data_analysis_reports_a_bad_file_on_the_path_field(developer, project, csv_file):
    data = csv_file("")
    page = (
        client_for(developer)
        .get(reverse("jobs:data_analysis", args=[project.project_id]), {"path": str(data)})
        .content.decode()
    )
    assert 'id="id_path_errors"' in page and "is empty" in page
    page = (
        client_for(developer)
        .get(reverse("jobs:data_analysis", args=[project.project_id]), {"path": "/etc/passwd"})
        .content.decode()
    )
    assert "is not inside a storage root" in page


def _finished_builtin_job(project, admin, csv_file) -> Job:
    data = csv_file(classification_rows(30))
    body = builtin_body(
        "done_builtin",
        BOOSTED_TREES,
        [f"--training_data_path={data}", "--preprocess", "--model_type=classification"],
        job_dir_for("done_builtin"),
    )
    job = services.submit_job(project, body, actor=admin)
    artifacts = Path(job_dir_for("done_builtin"), "artifacts")
    artifacts.mkdir(parents=True)
    (artifacts / "evaluation.json").write_text(
        json.dumps(
            {
                "model_type": "classification",
                "classes": [0.0, 1.0],
                "model_file": "model.bst",
                "rows": {"test": 6, "validation": 6, "training": 18},
                "test": {"accuracy": 0.8333, "auc": 0.9, "log_loss": 0.31},
                "validation": {"accuracy": 0.5},
                "confusion_matrix": [[3, 1], [0, 2]],
            }
        )
    )
    (artifacts / "metadata.json").write_text(
        json.dumps(
            {
                "rows": {
                    "read": 30,
                    "dropped_missing_target": 0,
                    "dropped_missing_values": 0,
                    "training": 18,
                    "validation": 6,
                    "test": 6,
                },
                "features": ["a", "b"],
                "transform": {"dropped": ["column_5"]},
            }
        )
    )
    Path(job_dir_for("done_builtin"), "model").mkdir()
    Path(job_dir_for("done_builtin"), "model", "model.bst").write_bytes(b"{}")
    Job.objects.filter(pk=job.pk).update(state=JobState.SUCCEEDED)
    return job


def test_a_builtin_jobs_page_shows_its_evaluation_and_deploys_in_one_step(admin, project, csv_file):
    job = _finished_builtin_job(project, admin, csv_file)
    page = client_for(admin).get(reverse("jobs:detail", args=[project.project_id, job.job_id])).content.decode()

    assert "Built-in algorithm: XGBoost (boosted trees)" in page
    assert '<th scope="row">accuracy</th><td>0.8333</td><td>0.5000</td>' in page
    assert "Confusion matrix on the test split" in page
    assert "Dropped columns: column_5." in page
    deploy_url = reverse("models:deploy", args=[project.project_id])
    assert deploy_url in page
    deploy_page = client_for(admin).get(deploy_url, {"job": job.job_id}).content.decode()
    first = deploy_page.index('name="deployment_uri" value="')
    assert deploy_page[first:].startswith(f'name="deployment_uri" value="{job_dir_for("done_builtin")}/model/"')
