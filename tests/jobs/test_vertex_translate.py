"""Reading Vertex AI bodies as the SDK sends them (integer enums, dropped zero values, int64 as
strings) and translating them onto the engine's v1 TrainingInput: pure functions, no database."""

from __future__ import annotations

import json

import pytest

from aiconsole.errors import FieldViolation, Violations
from jobs import validation as v1
from jobs.vertex import images, launch, schema, translate
from tests.helpers.vertex import SKLEARN_IMAGE, TF_IMAGE, custom_job, package_pool, tuning_job


def parse(body: object, message: str = "CustomJob") -> tuple[dict, list[FieldViolation]]:
    errors = Violations()
    return schema.parse(body, message, "custom_job", errors), list(errors)


# --- integer enums -------------------------------------------------------------------------------


def test_integer_enums_are_read_as_their_names():
    study, errors = parse(
        {
            "metrics": [{"metricId": "loss", "goal": 2}],
            "parameters": [{"parameterId": "lr", "doubleValueSpec": {"maxValue": 0.1}, "scaleType": 2}],
            "algorithm": 3,
            "measurementSelectionType": 2,
        },
        "StudySpec",
    )
    assert errors == []
    assert study["metrics"][0]["goal"] == "MINIMIZE"
    assert study["parameters"][0]["scaleType"] == "UNIT_LOG_SCALE"
    assert (study["algorithm"], study["measurementSelectionType"]) == ("RANDOM_SEARCH", "BEST_MEASUREMENT")
    machine, errors = parse(
        {"machineType": "n1-standard-4", "acceleratorType": 5, "acceleratorCount": 1}, "MachineSpec"
    )
    assert errors == [] and machine["acceleratorType"] == "NVIDIA_TESLA_T4"


def test_enum_names_are_read_too_and_unknown_numbers_are_refused():
    machine, errors = parse({"acceleratorType": "NVIDIA_TESLA_T4", "acceleratorCount": 1}, "MachineSpec")
    assert errors == [] and machine["acceleratorType"] == "NVIDIA_TESLA_T4"
    _, errors = parse({"acceleratorType": 99}, "MachineSpec")
    assert errors[0].field == "custom_job.accelerator_type"
    assert "Invalid value at 'custom_job.accelerator_type'" in errors[0].description
    _, errors = parse({"acceleratorType": "NVIDIA_TESLA_Z9"}, "MachineSpec")
    assert len(errors) == 1


def test_answers_carry_numbers_when_asked_and_names_otherwise():
    resource = {
        "name": "projects/p/locations/l/hyperparameterTuningJobs/1",
        "state": "JOB_STATE_RUNNING",
        "studySpec": {"metrics": [{"metricId": "loss", "goal": "MINIMIZE"}], "algorithm": "GRID_SEARCH"},
        "trialJobSpec": {"workerPoolSpecs": [{"machineSpec": {"acceleratorType": "NVIDIA_TESLA_T4"}}]},
        "trials": [{"id": "1", "state": "SUCCEEDED"}],
    }
    encoded = schema.encode(resource, "HyperparameterTuningJob", enum_ints=True)
    assert encoded["state"] == 3 and encoded["trials"][0]["state"] == 4
    assert encoded["studySpec"]["metrics"][0]["goal"] == 2 and encoded["studySpec"]["algorithm"] == 2
    assert encoded["trialJobSpec"]["workerPoolSpecs"][0]["machineSpec"]["acceleratorType"] == 5
    assert schema.encode(resource, "HyperparameterTuningJob", enum_ints=False) == resource


# --- dropped zero values -------------------------------------------------------------------------


def test_a_bound_left_out_is_zero():
    t = translate.tuning_job(
        tuning_job(
            study={
                "parameters": [
                    {"parameterId": "dropout", "doubleValueSpec": {"maxValue": 0.5}},
                    {"parameterId": "units", "integerValueSpec": {"maxValue": "128"}},
                    {"parameterId": "shift", "integerValueSpec": {"minValue": "-3"}},
                ]
            }
        ),
        location="us-central1",
    )
    params = t.training_input["hyperparameters"]["params"]
    assert [(p["minValue"], p["maxValue"]) for p in params] == [(0.0, 0.5), (0, 128), (-3, 0)]
    assert "scaleType" not in params[0]  # SCALE_TYPE_UNSPECIFIED is the zero value: left out


def test_zero_valued_fields_are_as_if_left_out():
    job, errors = parse(custom_job(job_spec={"enableWebAccess": False, "serviceAccount": ""}))
    assert errors == [] and "enableWebAccess" not in job["jobSpec"] and "serviceAccount" not in job["jobSpec"]
    # an unsupported field at its zero value is no request for the feature
    _, errors = parse(custom_job(job_spec={"persistentResourceId": "", "experiment": ""}))
    assert errors == []
    _, errors = parse(custom_job(job_spec={"persistentResourceId": "pool-1"}))
    assert errors[0].field == "custom_job.job_spec.persistent_resource_id"
    assert "persistent resources" in errors[0].description


def test_a_pool_without_an_accelerator_count_has_no_accelerator_and_a_missing_chief_count_is_zero():
    pool = package_pool()
    pool["machineSpec"]["acceleratorType"] = 5
    with pytest.raises(translate.VertexError) as refused:
        translate.custom_job(custom_job("x", pool), location="us-central1")
    assert refused.value.violations[0].field.endswith("machine_spec.accelerator_count")
    chief = package_pool()
    del chief["replicaCount"]
    with pytest.raises(translate.VertexError) as refused:
        translate.custom_job(custom_job("x", chief), location="us-central1")
    assert "replicaCount must be 1" in refused.value.violations[0].description


# --- one reader for both APIs ------------------------------------------------------------------------


def test_a_map_entry_of_the_wrong_type_is_named_by_its_entry_in_both_apis():
    _, errors = parse(custom_job(labels={"team": "a", "n": 1}))
    assert [(e.field, e.description) for e in errors] == [
        ("custom_job.labels[1].value", "Invalid value at 'custom_job.labels[1].value' (TYPE_STRING), 1")
    ]
    _, errors = parse({"trafficSplit": {"0": "half"}}, "DeployModelRequest")
    assert errors[0].field == "custom_job.traffic_split[0].value" and "(TYPE_INT32)" in errors[0].description
    with pytest.raises(v1.SpecError) as refused:
        v1.validate_job({"jobId": "j", "labels": {"n": 1}, "trainingInput": {}})
    assert refused.value.violations[0].field == "job.labels[0].value"


def test_a_string_past_its_limit_is_refused_naming_the_field_and_the_limit_in_both_apis():
    _, errors = parse({"args": ["ok", "x" * 5000]}, "ContainerSpec")
    assert [(e.field, e.description) for e in errors] == [
        ("custom_job.args[1]", "args is too long: at most 4096 characters; got 5000.")
    ]
    with pytest.raises(v1.SpecError) as refused:
        v1.validate_training_input({"args": ["ok", "x" * 5000]})
    assert refused.value.violations[0].description == "args is too long: at most 4096 characters; got 5000."


# --- int64 as strings ------------------------------------------------------------------------------


def test_int64_fields_arrive_as_strings_or_numbers_and_leave_as_strings():
    for count in ("3", 3, 3.0):
        pool, errors = parse({"replicaCount": count}, "WorkerPoolSpec")
        assert errors == [] and pool["replicaCount"] == "3"
    _, errors = parse({"replicaCount": "3.5"}, "WorkerPoolSpec")
    assert "Invalid value at 'custom_job.replica_count' (TYPE_INT64)" in errors[0].description
    _, errors = parse({"replicaCount": str(2**63)}, "WorkerPoolSpec")
    assert len(errors) == 1
    spec, errors = parse({"minValue": "-2", "maxValue": 9}, "IntegerValueSpec")
    assert errors == [] and spec == {"minValue": "-2", "maxValue": "9"}
    machine, errors = parse({"acceleratorCount": "2"}, "MachineSpec")  # int32 read from a string too
    assert errors == [] and machine["acceleratorCount"] == 2


def test_worker_pools_become_roles_with_their_counts_as_int64_strings():
    body = custom_job(
        "dist",
        package_pool(),
        package_pool(replicas=3),
        package_pool(replicas=2),
        {**package_pool(), "diskSpec": {"bootDiskType": "pd-standard", "bootDiskSizeGb": 200}},
    )
    ti = translate.custom_job(body, location="europe-west4").training_input
    assert (ti["workerCount"], ti["parameterServerCount"], ti["evaluatorCount"]) == ("3", "2", "1")
    assert ti["evaluatorConfig"] == {"diskConfig": {"bootDiskType": "pd-standard", "bootDiskSizeGb": 200}}
    assert ti["region"] == "europe-west4" and ti["scaleTier"] == "CUSTOM"
    assert v1.validate_job({"jobId": "dist_1", "trainingInput": ti})["trainingInput"]["workerCount"] == "3"


def test_an_empty_pool_is_no_replicas_of_its_role():
    ti = translate.custom_job(
        custom_job("x", package_pool(), {}, package_pool()), location="us-central1"
    ).training_input
    assert "workerCount" not in ti and "workerType" not in ti
    assert ti["parameterServerCount"] == "1"


# --- the rest of the translation ---------------------------------------------------------------------


def test_the_executor_image_maps_to_the_runtime_with_that_framework_version():
    assert images.resolve(TF_IMAGE).runtime == "2.11"
    assert images.resolve(SKLEARN_IMAGE).runtime == "2.11"  # the newest with scikit-learn 1.0
    assert images.resolve("gcr.io/cloud-aiplatform/training/tf-cpu.2-3:latest").runtime == "2.3"
    assert images.resolve("europe-docker.pkg.dev/vertex-ai/training/xgboost-cpu.1-1:latest").runtime == "2.2"
    assert images.resolve("us-docker.pkg.dev/vertex-ai/training/tf-cpu.2-15.py310:latest") is None
    assert images.resolve("gcr.io/my-project/trainer:v1") is None
    note = images.resolve(TF_IMAGE).note
    assert "is not run" in note and "Python 3.7, where Google's image has Python 3.10" in note


def test_pools_must_run_the_same_package_and_not_mix_packages_with_containers():
    with pytest.raises(translate.VertexError) as refused:
        translate.custom_job(custom_job("x", package_pool(), package_pool(args=["--other"])), location="us-central1")
    assert refused.value.violations[0].field == "custom_job.job_spec.worker_pool_specs[1].python_package_spec.args"
    container = {
        "machineSpec": {"machineType": "n1-standard-4"},
        "replicaCount": "1",
        "containerSpec": {"imageUri": "b"},
    }
    with pytest.raises(translate.VertexError) as refused:
        translate.custom_job(custom_job("x", package_pool(), container), location="us-central1")
    assert "mix pythonPackageSpec and containerSpec" in refused.value.violations[0].description


def test_container_pools_keep_their_own_image_command_args_and_env():
    pools = [
        {
            "machineSpec": {"machineType": "n1-standard-4"},
            "replicaCount": "1",
            "containerSpec": {
                "imageUri": "trainer:v1",
                "command": ["/run"],
                "args": ["a"],
                "env": [{"name": "X", "value": "1"}],
            },
        },
        {
            "machineSpec": {"machineType": "n1-standard-4"},
            "replicaCount": "2",
            "containerSpec": {"imageUri": "trainer:v2"},
        },
    ]
    t = translate.custom_job(custom_job("c", *pools), location="us-central1")
    ti = t.training_input
    assert ti["masterConfig"] == {"imageUri": "trainer:v1", "containerCommand": ["/run"], "containerArgs": ["a"]}
    assert ti["workerConfig"] == {"imageUri": "trainer:v2"} and "runtimeVersion" not in ti
    assert t.engine["pools"] == [{"X": "1"}, {}]


def test_environment_names_the_platform_sets_are_refused():
    with pytest.raises(translate.VertexError) as refused:
        translate.custom_job(
            custom_job("x", package_pool(env=[{"name": "AIP_MODEL_DIR", "value": "/x"}, {"name": "1X", "value": ""}])),
            location="us-central1",
        )
    assert [v.field for v in refused.value.violations] == [
        "custom_job.job_spec.worker_pool_specs[0].python_package_spec.env[0].name",
        "custom_job.job_spec.worker_pool_specs[0].python_package_spec.env[1].name",
    ]


def test_conditional_parameters_follow_their_parent_with_their_condition():
    study = {
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
            {
                "parameterId": "layers",
                "integerValueSpec": {"minValue": "1", "maxValue": "4"},
                "conditionalParameterSpecs": [
                    {
                        "parentIntValues": {"values": ["3", "4"]},
                        "parameterSpec": {"parameterId": "width", "doubleValueSpec": {"maxValue": 1}, "scaleType": 1},
                    }
                ],
            },
        ]
    }
    t = translate.tuning_job(tuning_job(study=study), location="us-central1")
    names = [p["parameterName"] for p in t.training_input["hyperparameters"]["params"]]
    assert names == ["optimizer", "momentum", "layers", "width"]
    assert t.engine["conditions"] == {
        "momentum": {"parent": "optimizer", "values": ["sgd"]},
        "width": {"parent": "layers", "values": ["3", "4"]},
    }
    tuned = launch.LaunchProfile("1", {}, conditions=t.engine["conditions"]).tuning_spec(
        t.training_input["hyperparameters"]
    )
    assert tuned["params"][1]["condition"] == {"parent": "optimizer", "values": ["sgd"]}


def test_a_condition_on_a_value_the_parent_cannot_take_is_refused():
    study = {
        "parameters": [
            {
                "parameterId": "layers",
                "integerValueSpec": {"minValue": "1", "maxValue": "4"},
                "conditionalParameterSpecs": [
                    {
                        "parentIntValues": {"values": ["9"]},
                        "parameterSpec": {"parameterId": "w", "doubleValueSpec": {"maxValue": 1}},
                    }
                ],
            }
        ]
    }
    with pytest.raises(translate.VertexError) as refused:
        translate.tuning_job(tuning_job(study=study), location="us-central1")
    assert refused.value.violations[0].field.endswith("conditional_parameter_specs[0].parent_int_values.values[0]")


def test_study_rules_and_v1_refusals_are_named_by_vertex_fields():
    with pytest.raises(translate.VertexError) as refused:
        translate.tuning_job(tuning_job(study={"metrics": []}, trials=0), location="us-central1")
    fields = {v.field for v in refused.value.violations}
    assert {"hyperparameter_tuning_job.study_spec.metrics", "hyperparameter_tuning_job.max_trial_count"} <= fields
    t = translate.tuning_job(
        tuning_job(study={"parameters": [{"parameterId": "lr", "doubleValueSpec": {"maxValue": 1}, "scaleType": 2}]}),
        location="us-central1",
    )
    with pytest.raises(v1.SpecError) as invalid:
        v1.validate_job({"jobId": "j_1", "trainingInput": t.training_input})
    (violation,) = t.vertex_violations(invalid.value.violations)
    assert violation.field == "hyperparameter_tuning_job.study_spec.parameters[0].double_value_spec.min_value"


def test_median_stopping_and_the_metric_become_the_v1_study():
    t = translate.tuning_job(tuning_job(study={"medianAutomatedStoppingSpec": {}}), location="us-central1")
    hp = t.training_input["hyperparameters"]
    assert hp["enableTrialEarlyStopping"] is True and hp["goal"] == "MAXIMIZE"
    assert t.engine["measurementSelection"] == "BEST_MEASUREMENT"
    with pytest.raises(translate.VertexError) as refused:
        translate.tuning_job(tuning_job(study={"decayCurveStoppingSpec": {"useElapsedDuration": True}}), location="l")
    assert "median rule only" in refused.value.violations[0].description


# --- what a replica gets ---------------------------------------------------------------------------


def test_a_replica_gets_vertexs_cluster_spec_tf_config_and_output_dirs():
    engine_spec = {
        "cluster": {
            "master": ["127.0.0.1:1"],
            "worker": ["127.0.0.1:2", "127.0.0.1:3"],
            "ps": ["127.0.0.1:4"],
            "evaluator": ["127.0.0.1:5"],
        },
        "task": {"type": "worker", "index": 1, "trial": "7"},
    }
    profile = launch.LaunchProfile("123", {"workerPoolSpecs": []}, pool_env=[{}, {"MODE": "w"}])
    env = profile.environment(task_type="worker", job_dir="gs://b/out/7", cluster_spec=engine_spec, trial_id="7")
    cluster = json.loads(env["CLUSTER_SPEC"])
    assert cluster["cluster"] == {
        "workerpool0": ["127.0.0.1:1"],
        "workerpool1": ["127.0.0.1:2", "127.0.0.1:3"],
        "workerpool2": ["127.0.0.1:4"],
        "workerpool3": ["127.0.0.1:5"],
    }
    assert cluster["task"] == {"type": "workerpool1", "index": 1, "trial": "7"}
    tf_config = json.loads(env["TF_CONFIG"])
    assert set(tf_config["cluster"]) == {"chief", "worker", "ps"} and tf_config["task"]["type"] == "worker"
    assert (env["CLOUD_ML_JOB_ID"], env["CLOUD_ML_TRIAL_ID"], env["MODE"]) == ("123", "7", "w")
    assert env["AIP_MODEL_DIR"] == "gs://b/out/7/model/"
    assert env["AIP_CHECKPOINT_DIR"] == "gs://b/out/7/checkpoints/"
    assert env["AIP_TENSORBOARD_LOG_DIR"] == "gs://b/out/7/logs/"


def test_a_trial_job_specs_timeout_limits_each_trial_and_a_custom_jobs_the_job():
    spec = {"workerPoolSpecs": [package_pool()], "scheduling": {"timeout": "600s"}}
    study = translate.tuning_job(tuning_job(trial_job_spec=spec), location="us-central1")
    assert study.engine["trialTimeoutSeconds"] == 600 and "scheduling" not in study.training_input
    job = translate.custom_job(custom_job(job_spec={"scheduling": {"timeout": "600s"}}), location="us-central1")
    assert job.training_input["scheduling"] == {"maxRunningTime": "600s"}
