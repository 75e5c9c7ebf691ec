"""Vertex AI request bodies as the SDK sends them over REST: integer enums, int64 as strings, zero
values left out."""

from __future__ import annotations

from tests.helpers.jobs import PACKAGE

TF_IMAGE = "us-docker.pkg.dev/vertex-ai/training/tf-cpu.2-11.py310:latest"
SKLEARN_IMAGE = "us-docker.pkg.dev/vertex-ai/training/sklearn-cpu.1-0:latest"
ENUMS = "?%24alt=json%3Benum-encoding%3Dint"  # what the SDK adds to every request


def package_pool(*, image: str = TF_IMAGE, package: str = PACKAGE, replicas: int = 1, **spec) -> dict:
    return {
        "machineSpec": {"machineType": "n1-standard-4"},
        "replicaCount": str(replicas),
        "pythonPackageSpec": {
            "executorImageUri": image,
            "packageUris": [package],
            "pythonModule": "trainer.task",
            **spec,
        },
    }


def custom_job(display_name: str = "census", *pools: dict, base: str | None = None, **extra) -> dict:
    job_spec: dict = {"workerPoolSpecs": list(pools) or [package_pool()]}
    if base:
        job_spec["baseOutputDirectory"] = {"outputUriPrefix": base}
    job_spec.update(extra.pop("job_spec", {}))
    return {"displayName": display_name, "jobSpec": job_spec, **extra}


def tuning_job(display_name: str = "census-tuning", *, trials: int = 4, parallel: int = 2, **extra) -> dict:
    study = {
        "metrics": [{"metricId": "accuracy", "goal": 1}],  # MAXIMIZE
        "parameters": [
            {"parameterId": "lr", "doubleValueSpec": {"minValue": 0.001, "maxValue": 0.1}, "scaleType": 2},
            {"parameterId": "layers", "integerValueSpec": {"minValue": "1", "maxValue": "4"}, "scaleType": 1},
        ],
        "measurementSelectionType": 2,  # BEST_MEASUREMENT, the SDK's default
    }
    study.update(extra.pop("study", {}))
    return {
        "displayName": display_name,
        "studySpec": study,
        "maxTrialCount": trials,
        "parallelTrialCount": parallel,
        "trialJobSpec": extra.pop("trial_job_spec", None) or {"workerPoolSpecs": [package_pool()]},
        **extra,
    }
