"""A Vertex AI job on the console's job page: its Vertex name, what runs differently here, and its
request as a Vertex body and a gcloud command beside the v1 forms; a study whose trials carry
conditional parameters draws like any other; the GET answers its trials."""

from __future__ import annotations

import json

import yaml
from django.utils import timezone

from jobs.models import Job, JobState, Trial, VertexCollection
from jobs.vertex import equivalent
from tests.helpers.vertex import ENUMS, TF_IMAGE, custom_job, package_pool, tuning_job

BASE = "/v1/projects/project-a/locations/us-central1"


def test_the_job_page_shows_the_vertex_request_and_gcloud_beside_the_v1_forms(api, client, admin, project):
    env = [{"name": "MODE", "value": "fast"}, {"name": "WANDB_API_KEY", "value": "sk-do-not-show"}]
    body = custom_job("census", package_pool(env=env), base="gs://bucket/out", labels={"team": "ml"})
    _, created = api("POST", f"{BASE}/customJobs{ENUMS}", body)
    job = Job.objects.get()
    client.force_login(admin)
    page = client.get(f"/projects/project-a/jobs/{job.job_id}/").content.decode()
    assert created["name"] in page and "Vertex AI CustomJob" in page
    assert "runtime version 2.11" in page and "is not run" in page  # never claims Google's image
    assert "gcloud ai custom-jobs create --region=us-central1 --display-name=census" in page
    assert f"POST {BASE}/customJobs" in page
    assert "MODE" in page and "sk-do-not-show" not in page  # a secret-named variable's value is not shown
    assert "Submit it again from the command line or the API" in page  # the v1 forms stay
    clone = client.get(f"/projects/project-a/jobs/new/?clone={job.job_id}")
    assert clone.status_code == 200 and "n1-standard-4" in clone.content.decode()  # Clone: its v1 form


def test_gcloud_takes_simple_pools_as_flags_and_the_rest_in_its_config_file():
    simple = equivalent.build(
        project_id="p",
        location="us-central1",
        collection=VertexCollection.CUSTOM_JOBS,
        request=custom_job("census", package_pool(args=["--epochs=2"]), base="gs://b/out"),
    )
    assert simple.command == (
        "gcloud ai custom-jobs create --region=us-central1 --display-name=census "
        f"--worker-pool-spec=machine-type=n1-standard-4,replica-count=1,executor-image-uri={TF_IMAGE},"
        "python-module=trainer.task --python-package-uris=gs://trainer-bucket/trainer-0.1.tar.gz --args=--epochs=2 "
        "--config=config.yaml"
    )
    assert yaml.safe_load(simple.config_yaml) == {"baseOutputDirectory": {"outputUriPrefix": "gs://b/out"}}
    assert json.loads(simple.rest_body)["displayName"] == "census"

    with_env = equivalent.build(
        project_id="p",
        location="us-central1",
        collection=VertexCollection.CUSTOM_JOBS,
        request=custom_job("e", package_pool(env=[{"name": "A", "value": "1"}])),
    )
    assert "--worker-pool-spec" not in with_env.command
    assert yaml.safe_load(with_env.config_yaml)["workerPoolSpecs"][0]["pythonPackageSpec"]["env"] == [
        {"name": "A", "value": "1"}
    ]

    uploaded = "/data/storage/packages/p/0123456789abcdef/trainer-0.1.tar.gz"
    hidden = equivalent.build(
        project_id="p",
        location="us-central1",
        collection=VertexCollection.CUSTOM_JOBS,
        request=custom_job("u", package_pool(package=uploaded)),
        uploaded={uploaded: "trainer-0.1.tar.gz"},
    )
    assert uploaded not in hidden.command + hidden.rest_body
    assert "<the uri answered when trainer-0.1.tar.gz is uploaded>" in hidden.rest_body


def test_a_tuning_job_is_an_hp_tuning_jobs_command_with_its_study_in_the_config():
    shown = equivalent.build(
        project_id="p",
        location="us-central1",
        collection=VertexCollection.HYPERPARAMETER_TUNING_JOBS,
        request=tuning_job(),
    )
    assert shown.command.startswith("gcloud ai hp-tuning-jobs create --region=us-central1")
    assert "--max-trial-count=4 --parallel-trial-count=2 --config=config.yaml" in shown.command
    assert set(yaml.safe_load(shown.config_yaml)) == {"studySpec", "trialJobSpec"}


def conditional_study() -> dict:
    return tuning_job(
        study={
            "parameters": [
                {
                    "parameterId": "optimizer",
                    "categoricalValueSpec": {"values": ["adam", "sgd"]},
                    "conditionalParameterSpecs": [
                        {
                            "parentCategoricalValues": {"values": ["sgd"]},
                            "parameterSpec": {"parameterId": "momentum", "discreteValueSpec": {"values": [0.5, 0.9]}},
                        }
                    ],
                },
                {"parameterId": "lr", "doubleValueSpec": {"minValue": 0.01, "maxValue": 0.1}, "scaleType": 2},
            ]
        }
    )


def test_a_study_with_conditional_parameters_draws_and_answers_its_trials(api, client, admin, project):
    _, created = api("POST", f"{BASE}/hyperparameterTuningJobs{ENUMS}", conditional_study())
    job = Job.objects.get()
    now = timezone.now()
    for number, values, objective in (
        (1, {"optimizer": "adam", "lr": "0.05"}, 0.7),
        (2, {"optimizer": "sgd", "momentum": "0.9", "lr": "0.02"}, 0.8),
    ):
        Trial.objects.create(
            job=job,
            trial_id=str(number),
            number=number,
            hyperparameters=values,
            state=JobState.SUCCEEDED,
            start_time=now,
            end_time=now,
            final_metric={"trainingStep": "3", "objectiveValue": objective},
            all_metrics=[{"trainingStep": "3", "objectiveValue": objective}],
        )
    Trial.objects.create(
        job=job,
        trial_id="3",
        number=3,
        hyperparameters={"optimizer": "adam", "lr": "0.03"},
        state=JobState.FAILED,
        start_time=now,
        end_time=now,
        error_message="The replica master 0 exited with a non-zero status of 1.",
    )
    client.force_login(admin)
    for query in ("", "?charts=inline"):
        response = client.get(f"/projects/project-a/jobs/{job.job_id}/{query}")
        assert response.status_code == 200
    assert "momentum" in response.content.decode()

    _, answered = api("GET", f"/v1/{created['name']}{ENUMS}")
    first, second, failed = answered["trials"]
    assert first["parameters"] == [{"parameterId": "optimizer", "value": "adam"}, {"parameterId": "lr", "value": 0.05}]
    assert {"parameterId": "momentum", "value": 0.9} in second["parameters"]
    assert second["finalMeasurement"] == {"stepCount": "3", "metrics": [{"metricId": "accuracy", "value": 0.8}]}
    assert (first["state"], failed["state"]) == (4, 5)  # SUCCEEDED, INFEASIBLE
    assert failed["infeasibleReason"] == "The replica workerpool0-0 exited with a non-zero status of 1."
