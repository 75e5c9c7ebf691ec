"""Tests for jobs.validation: the v1 Job body validator. Pure; no database."""

from __future__ import annotations

import copy

import pytest
import yaml

from jobs import validation as spec
from jobs.validation import FieldViolation, SpecError

PACKAGE = "gs://bucket/trainer-0.1.tar.gz"
BASIC = {"scaleTier": "BASIC", "packageUris": [PACKAGE], "pythonModule": "trainer.task", "region": "us-central1"}
CUSTOM = {**BASIC, "scaleTier": "CUSTOM", "masterType": "n1-standard-8"}
CONTAINER = {
    "scaleTier": "CUSTOM",
    "masterType": "n1-standard-8",
    "region": "us-central1",
    "masterConfig": {"imageUri": "gcr.io/p/trainer:latest"},
}
PARAM = {"parameterName": "lr", "type": "DOUBLE", "minValue": 0.001, "maxValue": 0.1}
HP = {"goal": "MAXIMIZE", "hyperparameterMetricTag": "accuracy", "maxTrials": 4, "params": [PARAM]}
PREDICTION = {
    "modelName": "projects/p/models/m",
    "dataFormat": "JSON",
    "inputPaths": ["gs://b/in/*"],
    "outputPath": "gs://b/out",
    "region": "us-central1",
}


def _drop_none(data: dict) -> dict:
    return {k: v for k, v in data.items() if v is not None}


def train(base: dict = BASIC, **changes) -> dict:
    """A Job body around a TrainingInput; a change set to None removes that key."""
    return {"jobId": "job_1", "trainingInput": _drop_none({**copy.deepcopy(base), **changes})}


def custom(**changes) -> dict:
    return train(CUSTOM, **changes)


def accel(kind: str, count: object = 1) -> dict:
    return {"acceleratorConfig": {"type": kind, "count": count}}


def hp(**changes) -> dict:
    return train(hyperparameters=_drop_none({**HP, **changes}))


def param(**changes) -> dict:
    return hp(params=[_drop_none({**PARAM, **changes})])


def predict(**changes) -> dict:
    return {"jobId": "job_1", "predictionInput": _drop_none({**PREDICTION, **changes})}


def violations_of(body: dict) -> list[FieldViolation]:
    with pytest.raises(SpecError) as caught:
        spec.validate_job(body)
    return caught.value.violations


# (name, body, field, substring of the description)
INVALID = [
    # --- job id, labels, top level --------------------------------------------------------
    ("job id missing", {"trainingInput": BASIC}, "job.job_id", "required"),
    ("job id empty", {**train(), "jobId": ""}, "job.job_id", "required"),
    ("job id starts with digit", {**train(), "jobId": "1job"}, "job.job_id", "start with a letter"),
    ("job id has dash", {**train(), "jobId": "my-job"}, "job.job_id", "underscores"),
    ("job id too long", {**train(), "jobId": "a" * 129}, "job.job_id", "128"),
    ("job id ending in a newline", {**train(), "jobId": "job\n"}, "job.job_id", "start with a letter"),
    ("job id not a string", {**train(), "jobId": 5}, "job.job_id", "(TYPE_STRING), 5"),
    ("label key uppercase", {**train(), "labels": {"Env": "x"}}, "job.labels", 'key "Env"'),
    ("label key starts with digit", {**train(), "labels": {"1a": "x"}}, "job.labels", "Label key"),
    ("label key too long", {**train(), "labels": {"a" * 64: "x"}}, "job.labels", "63"),
    ("label value uppercase", {**train(), "labels": {"env": "Prod"}}, "job.labels", 'value "Prod"'),
    ("label value with dot", {**train(), "labels": {"v": "1.2"}}, "job.labels", "Label value"),
    ("too many labels", {**train(), "labels": {f"k{i}": "v" for i in range(65)}}, "job.labels", "at most 64"),
    ("label value not a string", {**train(), "labels": {"n": 1}}, "job.labels[0].value", "TYPE_STRING"),
    ("neither input", {"jobId": "j"}, "job.training_input", "predictionInput"),
    ("both inputs", {**train(), "predictionInput": PREDICTION}, "job.prediction_input", "not both"),
    (
        "unknown top-level name",
        {**train(), "foo": 1},
        "job",
        "Invalid JSON payload received. Unknown name \"foo\" at 'job': Cannot find field.",
    ),
    (
        "unknown nested name",
        train(fooBar=1),
        "job.training_input",
        "Unknown name \"fooBar\" at 'job.training_input': Cannot find field.",
    ),
    (
        "unknown name in replica config",
        custom(masterConfig={"gpu": 1}),
        "job.training_input.master_config",
        'Unknown name "gpu"',
    ),
    (
        "training input not an object",
        {"jobId": "j", "trainingInput": "x"},
        "job.training_input",
        "google.cloud.ml.v1.TrainingInput",
    ),
    # --- scale tier and cluster shape --------------------------------------------------------
    (
        "unknown scale tier",
        train(scaleTier="HUGE"),
        "job.training_input.scale_tier",
        'TrainingInput.ScaleTier), "HUGE"',
    ),
    ("gcloud spelling of tier", train(scaleTier="basic-gpu"), "job.training_input.scale_tier", "Invalid value"),
    (
        "custom without master type",
        custom(masterType=None),
        "job.training_input.master_type",
        "masterType is required when scaleTier is CUSTOM",
    ),
    (
        "master type outside custom",
        train(masterType="n1-standard-8"),
        "job.training_input.master_type",
        "only be set when scaleTier is CUSTOM",
    ),
    (
        "worker count outside custom",
        train(scaleTier="STANDARD_1", workerCount=2),
        "job.training_input.worker_count",
        "only be set when scaleTier is CUSTOM",
    ),
    ("evaluator type outside custom", train(evaluatorType="standard"), "job.training_input.evaluator_type", "CUSTOM"),
    (
        "unknown master type",
        custom(masterType="n1-standard-1"),
        "job.training_input.master_type",
        'masterType "n1-standard-1" is not a supported machine type',
    ),
    (
        "unknown worker type",
        custom(workerType="m5.large", workerCount=1),
        "job.training_input.worker_type",
        "not a supported machine type",
    ),
    (
        "cloud_tpu as parameter server",
        custom(parameterServerType="cloud_tpu", parameterServerCount=1),
        "job.training_input.parameter_server_type",
        "only be used as masterType or workerType",
    ),
    (
        "mixed categories",
        custom(workerType="complex_model_m", workerCount=2),
        "job.training_input.worker_type",
        "Compute Engine and legacy machine types cannot be mixed",
    ),
    (
        "mixed categories evaluator",
        custom(masterType="standard", evaluatorType="n1-standard-4", evaluatorCount=1),
        "job.training_input.evaluator_type",
        "cannot be mixed",
    ),
    (
        "worker count without type",
        custom(workerCount=3),
        "job.training_input.worker_type",
        "workerType must be specified when workerCount > 0",
    ),
    (
        "ps count without type",
        custom(parameterServerCount="2"),
        "job.training_input.parameter_server_type",
        "parameterServerType must be specified when parameterServerCount > 0",
    ),
    (
        "evaluator count without type",
        custom(evaluatorCount=1),
        "job.training_input.evaluator_type",
        "evaluatorType must be specified",
    ),
    (
        "negative count",
        custom(workerType="n1-standard-8", workerCount=-1),
        "job.training_input.worker_count",
        "0 or greater",
    ),
    ("count not a number", custom(workerCount="abc"), "job.training_input.worker_count", '(TYPE_INT64), "abc"'),
    ("count with a fraction", custom(workerCount=2.5), "job.training_input.worker_count", "TYPE_INT64"),
    ("count as a boolean", custom(workerCount=True), "job.training_input.worker_count", "TYPE_INT64"),
    # --- accelerators ---------------------------------------------------------------------
    (
        "accelerator on legacy type",
        custom(masterType="complex_model_m", masterConfig=accel("NVIDIA_TESLA_K80")),
        "job.training_input.master_config.accelerator_config",
        "only be used with a Compute Engine machine type",
    ),
    (
        "accelerator on legacy gpu type",
        custom(masterType="standard_gpu", masterConfig=accel("NVIDIA_TESLA_K80")),
        "job.training_input.master_config.accelerator_config",
        "built in",
    ),
    (
        "accelerator on tier master",
        train(masterConfig=accel("NVIDIA_TESLA_T4")),
        "job.training_input.master_config.accelerator_config",
        "scale tier BASIC",
    ),
    (
        "accelerator type unspecified",
        custom(masterConfig=accel("ACCELERATOR_TYPE_UNSPECIFIED")),
        "job.training_input.master_config.accelerator_config.type",
        "ACCELERATOR_TYPE_UNSPECIFIED",
    ),
    (
        "accelerator type missing",
        custom(masterConfig={"acceleratorConfig": {"count": 1}}),
        "job.training_input.master_config.accelerator_config.type",
        "type is required",
    ),
    (
        "accelerator type unknown",
        custom(masterConfig=accel("NVIDIA_TESLA_H100")),
        "job.training_input.master_config.accelerator_config.type",
        'google.cloud.ml.v1.AcceleratorType), "NVIDIA_TESLA_H100"',
    ),
    (
        "accelerator count zero",
        custom(masterConfig=accel("NVIDIA_TESLA_T4", 0)),
        "job.training_input.master_config.accelerator_config.count",
        "greater than 0",
    ),
    (
        "accelerator count missing",
        custom(masterConfig={"acceleratorConfig": {"type": "NVIDIA_TESLA_T4"}}),
        "job.training_input.master_config.accelerator_config.count",
        "greater than 0",
    ),
    (
        "accelerator count not allowed",
        custom(masterConfig=accel("NVIDIA_TESLA_P100", "8")),
        "job.training_input.master_config.accelerator_config.count",
        "counts of 1, 2 or 4, not 8",
    ),
    (
        "t4 count three",
        custom(masterConfig=accel("NVIDIA_TESLA_T4", 3)),
        "job.training_input.master_config.accelerator_config.count",
        "not 3",
    ),
    (
        "vcpu ceiling k80",
        custom(masterType="n1-standard-16", masterConfig=accel("NVIDIA_TESLA_K80", 1)),
        "job.training_input.master_config.accelerator_config.count",
        "at most 8 vCPUs. Use 2, 4 or 8 GPUs",
    ),
    (
        "vcpu ceiling v100 on worker",
        custom(workerType="n1-standard-32", workerCount=2, workerConfig=accel("NVIDIA_TESLA_V100", 1)),
        "job.training_input.worker_config.accelerator_config.count",
        "at most 12 vCPUs",
    ),
    (
        "no count fits p100",
        custom(masterType="n1-highmem-96", masterConfig=accel("NVIDIA_TESLA_P100", 4)),
        "job.training_input.master_config.accelerator_config.count",
        "No number of",
    ),
    (
        "a100 on n1",
        custom(masterConfig=accel("NVIDIA_TESLA_A100", 1)),
        "job.training_input.master_config.accelerator_config.type",
        "only be attached to a2",
    ),
    (
        "t4 on a2",
        custom(masterType="a2-highgpu-1g", masterConfig=accel("NVIDIA_TESLA_T4", 1)),
        "job.training_input.master_config.accelerator_config.type",
        "only takes NVIDIA_TESLA_A100",
    ),
    (
        "a2 count mismatch",
        custom(masterType="a2-highgpu-2g", masterConfig=accel("NVIDIA_TESLA_A100", 1)),
        "job.training_input.master_config.accelerator_config.count",
        "count must be 2",
    ),
    (
        "a2 without accelerator",
        custom(masterType="a2-highgpu-4g"),
        "job.training_input.master_config.accelerator_config",
        "NVIDIA_TESLA_A100 and count 4",
    ),
    (
        "tpu on n1",
        custom(masterConfig=accel("TPU_V2", 8)),
        "job.training_input.master_config.accelerator_config.type",
        "cloud_tpu machine type",
    ),
    (
        "gpu on cloud_tpu",
        custom(workerType="cloud_tpu", workerCount=1, workerConfig=accel("NVIDIA_TESLA_V100", 8)),
        "job.training_input.worker_config.accelerator_config.type",
        "takes TPU_V2 or TPU_V3",
    ),
    (
        "tpu core count",
        custom(workerType="cloud_tpu", workerCount=1, workerConfig=accel("TPU_V3", 4)),
        "job.training_input.worker_config.accelerator_config.count",
        "exactly 8 TPU cores",
    ),
    (
        "two tpu workers",
        custom(workerType="cloud_tpu", workerCount=2, workerConfig=accel("TPU_V2", 8)),
        "job.training_input.worker_count",
        "workerCount 1",
    ),
    (
        "cloud_tpu without accelerator",
        custom(workerType="cloud_tpu", workerCount=1),
        "job.training_input.worker_config.accelerator_config",
        "TPU_V2 or TPU_V3 and count 8",
    ),
    (
        "pod type",
        custom(workerType="cloud_tpu", workerCount=1, workerConfig=accel("TPU_V2_POD", 8)),
        "job.training_input.worker_config.accelerator_config.type",
        "not supported for training",
    ),
    (
        "accelerator without replicas",
        custom(evaluatorConfig=accel("NVIDIA_TESLA_T4")),
        "job.training_input.evaluator_config.accelerator_config",
        "no evaluator replicas",
    ),
    # --- code, runtime, containers --------------------------------------------------------
    ("packages missing", train(packageUris=None), "job.training_input.package_uris", "packageUris is required"),
    ("packages empty list", train(packageUris=[]), "job.training_input.package_uris", "required"),
    ("package uri empty", train(packageUris=[PACKAGE, " "]), "job.training_input.package_uris[1]", "must not be empty"),
    ("too many packages", train(packageUris=[PACKAGE] * 101), "job.training_input.package_uris", "at most 100"),
    ("packages not a list", train(packageUris=PACKAGE), "job.training_input.package_uris", "Invalid value"),
    ("module missing", train(pythonModule=None), "job.training_input.python_module", "pythonModule is required"),
    (
        "module is a path",
        train(pythonModule="trainer/task.py"),
        "job.training_input.python_module",
        "dotted Python module name",
    ),
    (
        "image with runtime",
        train(CONTAINER, runtimeVersion="2.11"),
        "job.training_input.runtime_version",
        "cannot be set together with imageUri",
    ),
    (
        "image with python",
        train(CONTAINER, pythonVersion="3.7"),
        "job.training_input.python_version",
        "cannot be set together with imageUri",
    ),
    (
        "image with packages",
        train(CONTAINER, packageUris=["gs://b/trainer-0.1.tar.gz"]),
        "job.training_input.package_uris",
        "cannot be set together with imageUri",
    ),
    (
        "image with a module",
        train(CONTAINER, pythonModule="trainer.task"),
        "job.training_input.python_module",
        "cannot be set together with imageUri",
    ),
    (
        "worker image without master image",
        custom(workerType="n1-standard-8", workerCount=1, workerConfig={"imageUri": "gcr.io/p/w"}),
        "job.training_input.worker_config.image_uri",
        "requires masterConfig.imageUri",
    ),
    (
        "bad image reference",
        train(CONTAINER, masterConfig={"imageUri": "not an image"}),
        "job.training_input.master_config.image_uri",
        "container image reference",
    ),
    (
        "command without image",
        custom(masterConfig={"containerCommand": ["python"]}),
        "job.training_input.master_config.container_command",
        "only be used with a custom container",
    ),
    (
        "container args with args",
        train(CONTAINER, args=["--x"], masterConfig={"imageUri": "gcr.io/p/t", "containerArgs": ["--y"]}),
        "job.training_input.master_config.container_args",
        "cannot be combined with trainingInput.args",
    ),
    (
        "unknown runtime",
        train(runtimeVersion="1.14"),
        "job.training_input.runtime_version",
        'runtimeVersion "1.14" is not supported',
    ),
    (
        "python 2.7 on runtime 2.x",
        train(runtimeVersion="2.3", pythonVersion="2.7"),
        "job.training_input.python_version",
        "Python 2.7 requires runtimeVersion 1.15 or earlier",
    ),
    (
        "python 2.7 on default runtime",
        train(pythonVersion="2.7"),
        "job.training_input.python_version",
        "2.11 (the default)",
    ),
    (
        "python 3.5",
        train(runtimeVersion="1.15", pythonVersion="3.5"),
        "job.training_input.python_version",
        "1.4 to 1.14",
    ),
    ("python 3.9", train(pythonVersion="3.9"), "job.training_input.python_version", '"3.9" is not supported'),
    (
        "tpu tf version on gpu replica",
        custom(masterConfig={"tpuTfVersion": "2.11"}),
        "job.training_input.master_config.tpu_tf_version",
        "only applies to a cloud_tpu",
    ),
    (
        "tpu tf version required",
        train(CONTAINER, workerType="cloud_tpu", workerCount=1, workerConfig=accel("TPU_V2", 8)),
        "job.training_input.worker_config.tpu_tf_version",
        "required",
    ),
    (
        "tpu tf version format",
        train(
            CONTAINER, workerType="cloud_tpu", workerCount=1, workerConfig={**accel("TPU_V2", 8), "tpuTfVersion": "2"}
        ),
        "job.training_input.worker_config.tpu_tf_version",
        "major.minor",
    ),
    (
        "args not strings",
        train(args=["--epochs", 5]),
        "job.training_input.args[1]",
        "Invalid value at 'job.training_input.args[1]' (TYPE_STRING), 5",
    ),
    ("job dir not a string", train(jobDir=["gs://b"]), "job.training_input.job_dir", "TYPE_STRING"),
    # --- region --------------------------------------------------------------------------
    ("region missing", train(region=None), "job.training_input.region", "region is required"),
    (
        "region unknown",
        train(region="mars-north1"),
        "job.training_input.region",
        'Region "mars-north1" is not supported',
    ),
    (
        "gpu not in region",
        custom(region="europe-west2", masterConfig=accel("NVIDIA_TESLA_V100")),
        "job.training_input.master_config.accelerator_config.type",
        "NVIDIA_TESLA_V100 is not available in region europe-west2",
    ),
    (
        "tier gpu not in region",
        train(scaleTier="BASIC_GPU", region="europe-west3"),
        "job.training_input.scale_tier",
        "NVIDIA_TESLA_K80 is not available in region europe-west3",
    ),
    (
        "tier tpu not in region",
        train(scaleTier="BASIC_TPU", region="us-east1"),
        "job.training_input.scale_tier",
        "TPU_V2 is not available in region us-east1",
    ),
    (
        "legacy gpu not in region",
        custom(masterType="standard_v100", region="us-east4"),
        "job.training_input.master_type",
        "not available in region us-east4",
    ),
    # --- scheduling, identity, disks ------------------------------------------------------
    (
        "running time not a duration",
        train(scheduling={"maxRunningTime": "2h"}),
        "job.training_input.scheduling.max_running_time",
        'google.protobuf.Duration), "2h"',
    ),
    (
        "running time a number",
        train(scheduling={"maxRunningTime": 7200}),
        "job.training_input.scheduling.max_running_time",
        "Duration",
    ),
    (
        "running time zero",
        train(scheduling={"maxRunningTime": "0s"}),
        "job.training_input.scheduling.max_running_time",
        "longer than 0s",
    ),
    (
        "wait time too short",
        train(scheduling={"maxWaitTime": "600s"}),
        "job.training_input.scheduling.max_wait_time",
        "at least 1800s",
    ),
    (
        "priority too high",
        train(scheduling={"priority": 1001}),
        "job.training_input.scheduling.priority",
        "between 0 and 1000",
    ),
    (
        "priority negative",
        train(scheduling={"priority": "-1"}),
        "job.training_input.scheduling.priority",
        "between 0 and 1000",
    ),
    (
        "priority a fraction",
        train(scheduling={"priority": 1.5}),
        "job.training_input.scheduling.priority",
        "TYPE_INT32",
    ),
    (
        "network by name",
        train(network="default"),
        "job.training_input.network",
        "projects/{projectNumber}/global/networks/{network}",
    ),
    (
        "network with project id",
        train(network="projects/my-proj/global/networks/v"),
        "job.training_input.network",
        "projectNumber",
    ),
    ("service account not an email", train(serviceAccount="robot"), "job.training_input.service_account", "email"),
    (
        "kms key malformed",
        train(encryptionConfig={"kmsKeyName": "my-key"}),
        "job.training_input.encryption_config.kms_key_name",
        "keyRings",
    ),
    ("kms key missing", train(encryptionConfig={}), "job.training_input.encryption_config.kms_key_name", "kmsKeyName"),
    ("web access not a bool", train(enableWebAccess="yes"), "job.training_input.enable_web_access", "TYPE_BOOL"),
    ("chief flag not a bool", train(useChiefInTfConfig=1), "job.training_input.use_chief_in_tf_config", "TYPE_BOOL"),
    (
        "boot disk too small",
        custom(masterConfig={"diskConfig": {"bootDiskSizeGb": 5}}),
        "job.training_input.master_config.disk_config.boot_disk_size_gb",
        "between 10 and 64000",
    ),
    (
        "boot disk type",
        custom(masterConfig={"diskConfig": {"bootDiskType": "pd-balanced"}}),
        "job.training_input.master_config.disk_config.boot_disk_type",
        "pd-ssd or pd-standard",
    ),
    # --- hyperparameters ------------------------------------------------------------------
    ("goal unknown", hp(goal="BIGGER"), "job.training_input.hyperparameters.goal", "HyperparameterSpec.GoalType"),
    ("params missing", hp(params=None), "job.training_input.hyperparameters.params", "at least one parameter"),
    ("params empty", hp(params=[]), "job.training_input.hyperparameters.params", "at least one parameter"),
    (
        "duplicate parameter name",
        hp(params=[PARAM, PARAM]),
        "job.training_input.hyperparameters.params[1].parameter_name",
        "used twice",
    ),
    (
        "parameter name missing",
        param(parameterName=None),
        "job.training_input.hyperparameters.params[0].parameter_name",
        "required",
    ),
    (
        "parameter name with space",
        param(parameterName="learning rate"),
        "job.training_input.hyperparameters.params[0].parameter_name",
        "spaces",
    ),
    (
        "parameter type missing",
        param(type=None),
        "job.training_input.hyperparameters.params[0].type",
        "type is required",
    ),
    (
        "parameter type unspecified",
        param(type="PARAMETER_TYPE_UNSPECIFIED"),
        "job.training_input.hyperparameters.params[0].type",
        "type is required",
    ),
    (
        "parameter type unknown",
        param(type="FLOAT"),
        "job.training_input.hyperparameters.params[0].type",
        "ParameterSpec.ParameterType",
    ),
    (
        "double without min",
        param(minValue=None),
        "job.training_input.hyperparameters.params[0].min_value",
        "minValue is required",
    ),
    (
        "integer without max",
        param(type="INTEGER", minValue=1, maxValue=None),
        "job.training_input.hyperparameters.params[0].max_value",
        "maxValue is required",
    ),
    (
        "min equals max",
        param(minValue=1, maxValue=1),
        "job.training_input.hyperparameters.params[0].min_value",
        "less than maxValue",
    ),
    (
        "min above max",
        param(minValue=2, maxValue=1),
        "job.training_input.hyperparameters.params[0].min_value",
        "less than maxValue",
    ),
    (
        "integer with fraction",
        param(type="INTEGER", minValue=1.5, maxValue=10),
        "job.training_input.hyperparameters.params[0].min_value",
        "whole number",
    ),
    (
        "min value not a number",
        param(minValue="low"),
        "job.training_input.hyperparameters.params[0].min_value",
        "TYPE_DOUBLE",
    ),
    (
        "log scale from zero",
        param(minValue=0, scaleType="UNIT_LOG_SCALE"),
        "job.training_input.hyperparameters.params[0].min_value",
        "strictly positive",
    ),
    (
        "reverse log scale negative",
        param(minValue=-1, scaleType="UNIT_REVERSE_LOG_SCALE"),
        "job.training_input.hyperparameters.params[0].min_value",
        "strictly positive",
    ),
    (
        "scale type unknown",
        param(scaleType="LOG"),
        "job.training_input.hyperparameters.params[0].scale_type",
        "ParameterSpec.ScaleType",
    ),
    (
        "discrete values on double",
        param(discreteValues=[1, 2]),
        "job.training_input.hyperparameters.params[0].discrete_values",
        "only be set for DISCRETE",
    ),
    (
        "categorical without values",
        param(type="CATEGORICAL", minValue=None, maxValue=None),
        "job.training_input.hyperparameters.params[0].categorical_values",
        "must not be empty",
    ),
    (
        "categorical repeated value",
        param(type="CATEGORICAL", minValue=None, maxValue=None, categoricalValues=["a", "a"]),
        "job.training_input.hyperparameters.params[0].categorical_values",
        "repeat",
    ),
    (
        "categorical with bounds",
        param(type="CATEGORICAL", categoricalValues=["a", "b"]),
        "job.training_input.hyperparameters.params[0].min_value",
        "must not be set for CATEGORICAL",
    ),
    (
        "categorical with scale",
        param(type="CATEGORICAL", minValue=None, maxValue=None, categoricalValues=["a"], scaleType="UNIT_LINEAR_SCALE"),
        "job.training_input.hyperparameters.params[0].scale_type",
        "must not be set for CATEGORICAL",
    ),
    (
        "discrete without values",
        param(type="DISCRETE"),
        "job.training_input.hyperparameters.params[0].discrete_values",
        "must not be empty",
    ),
    (
        "discrete not increasing",
        param(type="DISCRETE", discreteValues=[1, 3, 2]),
        "job.training_input.hyperparameters.params[0].discrete_values",
        "strictly increasing",
    ),
    (
        "discrete repeated",
        param(type="DISCRETE", discreteValues=[1, 1]),
        "job.training_input.hyperparameters.params[0].discrete_values",
        "strictly increasing",
    ),
    (
        "discrete too many",
        param(type="DISCRETE", discreteValues=list(range(1001))),
        "job.training_input.hyperparameters.params[0].discrete_values",
        "at most 1000",
    ),
    (
        "discrete log scale with zero",
        param(type="DISCRETE", discreteValues=[0, 1], scaleType="UNIT_LOG_SCALE"),
        "job.training_input.hyperparameters.params[0].discrete_values",
        "strictly positive",
    ),
    ("max trials zero", hp(maxTrials=0), "job.training_input.hyperparameters.max_trials", "at least 1"),
    (
        "max parallel trials zero",
        hp(maxParallelTrials=0),
        "job.training_input.hyperparameters.max_parallel_trials",
        "at least 1",
    ),
    (
        "max failed trials negative",
        hp(maxFailedTrials=-1),
        "job.training_input.hyperparameters.max_failed_trials",
        "at least 0",
    ),
    ("max trials not a number", hp(maxTrials="many"), "job.training_input.hyperparameters.max_trials", "TYPE_INT32"),
    (
        "algorithm unknown",
        hp(algorithm="GENETIC"),
        "job.training_input.hyperparameters.algorithm",
        "HyperparameterSpec.Algorithm",
    ),
    (
        "grid search with double",
        hp(algorithm="GRID_SEARCH"),
        "job.training_input.hyperparameters.params[0].type",
        "GRID_SEARCH needs every parameter",
    ),
    (
        "early stopping not a bool",
        hp(enableTrialEarlyStopping="maybe"),
        "job.training_input.hyperparameters.enable_trial_early_stopping",
        "TYPE_BOOL",
    ),
    (
        "resume from bad job id",
        hp(resumePreviousJobId="old-job"),
        "job.training_input.hyperparameters.resume_previous_job_id",
        "start with a letter",
    ),
    # --- prediction input -----------------------------------------------------------------
    (
        "prediction without model",
        predict(modelName=None),
        "job.prediction_input",
        "Exactly one of modelName, versionName or uri",
    ),
    ("prediction with two models", predict(uri="gs://b/model"), "job.prediction_input", "Exactly one of"),
    (
        "prediction model name format",
        predict(modelName="m"),
        "job.prediction_input.model_name",
        "projects/{project}/models/{model}",
    ),
    (
        "prediction version name format",
        predict(modelName=None, versionName="projects/p/models/m"),
        "job.prediction_input.version_name",
        "versions",
    ),
    (
        "prediction data format missing",
        predict(dataFormat=None),
        "job.prediction_input.data_format",
        "dataFormat is required",
    ),
    ("prediction csv input", predict(dataFormat="CSV"), "job.prediction_input.data_format", "got CSV"),
    (
        "prediction data format unknown",
        predict(dataFormat="PARQUET"),
        "job.prediction_input.data_format",
        "PredictionInput.DataFormat",
    ),
    (
        "prediction tfrecord output",
        predict(outputDataFormat="TF_RECORD"),
        "job.prediction_input.output_data_format",
        "JSON or CSV",
    ),
    (
        "prediction input paths missing",
        predict(inputPaths=None),
        "job.prediction_input.input_paths",
        "inputPaths is required",
    ),
    (
        "prediction output path missing",
        predict(outputPath=None),
        "job.prediction_input.output_path",
        "outputPath is required",
    ),
    ("prediction region missing", predict(region=None), "job.prediction_input.region", "region is required"),
    ("prediction batch size zero", predict(batchSize=0), "job.prediction_input.batch_size", "at least 1"),
    (
        "prediction worker count text",
        predict(maxWorkerCount="ten"),
        "job.prediction_input.max_worker_count",
        "TYPE_INT64",
    ),
    (
        "prediction runtime unknown",
        predict(runtimeVersion="0.9"),
        "job.prediction_input.runtime_version",
        "not supported",
    ),
]


@pytest.mark.parametrize(("name", "body", "field", "text"), INVALID, ids=[c[0] for c in INVALID])
def test_invalid_job_is_rejected_naming_the_field(name, body, field, text):
    violations = violations_of(body)
    matching = [v for v in violations if v.field == field and text in v.description]
    assert matching, f"{name}: expected {field!r} containing {text!r}, got {violations}"


# --- valid bodies ------------------------------------------------------------------------

GCLOUD_CONFIG = """
jobId: my_job
labels: {type: prod, owner: alice}
trainingInput: {scaleTier: BASIC, packageUris: [gs://bucket/trainer.tar.gz], region: us-east1}
"""

DISTRIBUTED_YAML = """
trainingInput:
  scaleTier: CUSTOM
  masterType: n1-highcpu-16
  workerType: n1-highcpu-16
  parameterServerType: n1-highmem-8
  evaluatorType: n1-highcpu-16
  workerCount: 9
  parameterServerCount: 3
  evaluatorCount: 1
  scheduling: {maxRunningTime: 7200s, maxWaitTime: 3600s}
"""

HPTUNING_YAML = """
trainingInput:
  scaleTier: CUSTOM
  masterType: complex_model_m
  workerType: complex_model_m
  parameterServerType: large_model
  workerCount: 9
  parameterServerCount: 3
  hyperparameters:
    goal: MAXIMIZE
    hyperparameterMetricTag: accuracy
    maxTrials: 30
    maxParallelTrials: 1
    enableTrialEarlyStopping: True
    algorithm: ALGORITHM_UNSPECIFIED
    params:
    - {parameterName: hidden1, type: INTEGER, minValue: 40, maxValue: 400, scaleType: UNIT_LINEAR_SCALE}
    - {parameterName: learning_rate, type: DOUBLE, minValue: 0.0001, maxValue: 0.1, scaleType: UNIT_LOG_SCALE}
    - {parameterName: numRnnCells, type: DISCRETE, discreteValues: [1, 2, 3, 4]}
    - {parameterName: rnnCellType, type: CATEGORICAL, categoricalValues: [BasicLSTMCell, GRUCell, LSTMCell]}
"""


def _from_yaml(text: str, **command_line) -> dict:
    """A gcloud --config file with the flags gcloud adds (module, packages, region, job id)."""
    body = yaml.safe_load(text)
    body.setdefault("jobId", "job_1")
    body["trainingInput"] = {**command_line, **body["trainingInput"]}
    return body


FLAGS = {"packageUris": [PACKAGE], "pythonModule": "trainer.task", "region": "us-central1"}

VALID = [
    ("gcloud config example", _from_yaml(GCLOUD_CONFIG, pythonModule="trainer.task")),
    ("distributed custom cluster yaml", _from_yaml(DISTRIBUTED_YAML, **FLAGS)),
    ("hyperparameter tuning yaml", _from_yaml(HPTUNING_YAML, **FLAGS)),
    ("basic with one package", train()),
    ("scale tier left out means basic", train(scaleTier=None)),
    ("standard_1", train(scaleTier="STANDARD_1")),
    ("premium_1", train(scaleTier="PREMIUM_1")),
    ("basic_gpu", train(scaleTier="BASIC_GPU")),
    ("basic_tpu in us-central1", train(scaleTier="BASIC_TPU")),
    (
        "custom with evaluator",
        custom(
            masterType="n1-highcpu-16",
            workerType="n1-highcpu-16",
            workerCount=9,
            parameterServerType="n1-highmem-8",
            parameterServerCount=3,
            evaluatorType="n1-highcpu-16",
            evaluatorCount=1,
        ),
    ),
    ("n1-standard-8 with one t4", custom(masterConfig=accel("NVIDIA_TESLA_T4", 1))),
    ("n1-standard-16 with two k80", custom(masterType="n1-standard-16", masterConfig=accel("NVIDIA_TESLA_K80", "2"))),
    ("gpu workers", custom(workerType="n1-standard-8", workerCount=2, workerConfig=accel("NVIDIA_TESLA_V100", 1))),
    (
        "tpu worker",
        custom(masterType="n1-standard-16", workerType="cloud_tpu", workerCount=1, workerConfig=accel("TPU_V2", "8")),
    ),
    (
        "tpu worker with legacy master",
        custom(
            masterType="standard",
            workerType="cloud_tpu",
            workerCount=1,
            workerConfig=accel("TPU_V3", 8),
            region="europe-west4",
        ),
    ),
    ("a2 with its a100s", custom(masterType="a2-highgpu-2g", masterConfig=accel("NVIDIA_TESLA_A100", 2))),
    (
        "legacy gpu cluster",
        custom(
            masterType="complex_model_m_gpu",
            workerType="standard_gpu",
            workerCount=2,
            parameterServerType="large_model",
            parameterServerCount=1,
        ),
    ),
    ("worker type without count", custom(workerType="n1-standard-8")),
    ("custom container", train(CONTAINER, args=["--epochs", "2"], useChiefInTfConfig=True)),
    (
        "custom container with command",
        train(
            CONTAINER,
            masterConfig={
                "imageUri": "us-docker.pkg.dev/p/r/trainer@sha256:abc",
                "containerCommand": ["python"],
                "containerArgs": ["-m", "trainer.task"],
            },
        ),
    ),
    (
        "container on tpu",
        train(
            CONTAINER,
            workerType="cloud_tpu",
            workerCount=1,
            workerConfig={**accel("TPU_V2", 8), "tpuTfVersion": "2.11"},
        ),
    ),
    ("runtime 1.15 with python 2.7", train(runtimeVersion="1.15", pythonVersion="2.7")),
    ("runtime 2.1 with python 3.7", train(runtimeVersion="2.1", pythonVersion="3.7")),
    (
        "everything optional",
        train(
            jobDir="gs://b/out",
            args=["--x=1"],
            runtimeVersion="2.11",
            pythonVersion="3.7",
            scheduling={"maxRunningTime": "3600.5s", "maxWaitTime": "1800s", "priority": 1000},
            network="projects/12345/global/networks/myVPC",
            serviceAccount="trainer@my-proj.iam.gserviceaccount.com",
            encryptionConfig={"kmsKeyName": "projects/p/locations/us-central1/keyRings/k/cryptoKeys/c"},
            enableWebAccess=True,
            masterConfig={"diskConfig": {"bootDiskSizeGb": 200, "bootDiskType": "pd-standard"}},
        ),
    ),
    (
        "labels with international and empty values",
        {**train(), "labels": {"env": "", "ñandú": "日本", "team-1": "ml_ops"}},
    ),
    ("hp tag with spaces", hp(hyperparameterMetricTag="val accuracy")),
    (
        "hp minimize with grid search",
        hp(
            goal="MINIMIZE",
            algorithm="GRID_SEARCH",
            params=[{"parameterName": "n", "type": "INTEGER", "minValue": 1, "maxValue": 4}],
        ),
    ),
    ("hp resume", hp(resumePreviousJobId="earlier_job", enableTrialEarlyStopping="false")),
    ("hp discrete ignores bounds", param(type="DISCRETE", discreteValues=[0.1, 0.5, 1])),
    ("batch prediction", predict(outputDataFormat="CSV", batchSize="128", maxWorkerCount=5)),
    ("batch prediction from uri", predict(modelName=None, uri="gs://b/saved_model", dataFormat="TF_RECORD_GZIP")),
    (
        "output-only fields ignored",
        {
            **train(),
            "state": "SUCCEEDED",
            "etag": "AAA=",
            "createTime": "2020-01-01T00:00:00Z",
            "jobPosition": "3",
            "trainingOutput": {"consumedMLUnits": 1},
        },
    ),
    ("null means unset", train(jobDir=None, args=None) | {"labels": None}),
]


@pytest.mark.parametrize(("name", "body"), VALID, ids=[c[0] for c in VALID])
def test_valid_job_is_accepted(name, body):
    result = spec.validate_job(copy.deepcopy(body))
    assert result["jobId"] == body["jobId"]


def test_validation_does_not_change_the_input():
    body = custom(workerType="n1-standard-8", workerCount=2)
    before = copy.deepcopy(body)
    spec.validate_job(body)
    assert body == before


# --- normalisation -------------------------------------------------------------------------


def test_int64_fields_become_strings_and_int32_fields_ints():
    body = custom(
        workerType="n1-standard-8",
        workerCount=9,
        parameterServerType="n1-standard-8",
        parameterServerCount="3",
        evaluatorType="n1-standard-8",
        evaluatorCount=1.0,
        workerConfig={**accel("NVIDIA_TESLA_T4", 1), "diskConfig": {"bootDiskSizeGb": "200"}},
        scheduling={"priority": "7"},
        hyperparameters={**HP, "maxTrials": "30", "maxParallelTrials": 2.0, "maxFailedTrials": 0},
    )
    ti = spec.validate_job(body)["trainingInput"]
    assert (ti["workerCount"], ti["parameterServerCount"], ti["evaluatorCount"]) == ("9", "3", "1")
    assert ti["workerConfig"]["acceleratorConfig"] == {"count": "1", "type": "NVIDIA_TESLA_T4"}
    assert ti["workerConfig"]["diskConfig"]["bootDiskSizeGb"] == 200
    assert ti["scheduling"]["priority"] == 7
    hyper = ti["hyperparameters"]
    assert (hyper["maxTrials"], hyper["maxParallelTrials"], hyper["maxFailedTrials"]) == (30, 2, 0)


def test_prediction_counts_become_strings():
    pi = spec.validate_job(predict(batchSize=64, maxWorkerCount="10"))["predictionInput"]
    assert (pi["batchSize"], pi["maxWorkerCount"]) == ("64", "10")


def test_booleans_and_doubles_are_normalised():
    body = hp(
        enableTrialEarlyStopping="TRUE",
        params=[
            {"parameterName": "n", "type": "INTEGER", "minValue": 40.0, "maxValue": "400"},
            {"parameterName": "lr", "type": "DOUBLE", "minValue": "1e-4", "maxValue": 0.5},
        ],
    )
    body["trainingInput"]["enableWebAccess"] = "false"
    ti = spec.validate_job(body)["trainingInput"]
    assert ti["enableWebAccess"] is False
    assert ti["hyperparameters"]["enableTrialEarlyStopping"] is True
    first, second = ti["hyperparameters"]["params"]
    assert (first["minValue"], first["maxValue"]) == (40, 400)
    assert isinstance(first["minValue"], int)
    assert (second["minValue"], second["maxValue"]) == (0.0001, 0.5)


def test_yaml_true_becomes_a_bool():
    ti = spec.validate_job(_from_yaml(HPTUNING_YAML, **FLAGS))["trainingInput"]
    assert ti["hyperparameters"]["enableTrialEarlyStopping"] is True
    assert ti["workerCount"] == "9"


def test_proto_field_names_are_accepted_and_written_in_camel_case():
    body = {
        "job_id": "snake_job",
        "training_input": {
            "scale_tier": "CUSTOM",
            "master_type": "n1-standard-8",
            "master_config": {"accelerator_config": {"type": "NVIDIA_TESLA_T4", "count": 1}},
            "package_uris": [PACKAGE],
            "python_module": "trainer.task",
            "region": "us-central1",
        },
    }
    job = spec.validate_job(body)
    assert job == {
        "jobId": "snake_job",
        "trainingInput": {
            "scaleTier": "CUSTOM",
            "masterType": "n1-standard-8",
            "masterConfig": {"acceleratorConfig": {"count": "1", "type": "NVIDIA_TESLA_T4"}},
            "packageUris": [PACKAGE],
            "pythonModule": "trainer.task",
            "region": "us-central1",
        },
    }


def test_same_field_under_both_names_is_rejected():
    body = {**train(), "job_id": "other"}
    [violation] = violations_of(body)
    assert violation.field == "job"
    assert 'Duplicate field "job_id"' in violation.description


def test_output_only_fields_are_dropped():
    body = {**train(), "state": "RUNNING", "errorMessage": "x", "etag": "AAA="}
    assert set(spec.validate_job(body)) == {"jobId", "trainingInput"}


def test_defaults_are_not_filled_in():
    ti = spec.validate_job(train())["trainingInput"]
    assert ti == BASIC


def test_empty_strings_count_as_unset():
    ti = spec.validate_job(train(runtimeVersion="", jobDir=""))["trainingInput"]
    assert "runtimeVersion" not in ti and "jobDir" not in ti


# --- error reporting ------------------------------------------------------------------------


def test_every_violation_is_reported():
    body = {
        "jobId": "9lives",
        "labels": {"Bad": "x"},
        "trainingInput": {"scaleTier": "CUSTOM", "workerCount": 2, "region": "nowhere"},
    }
    fields = {v.field for v in violations_of(body)}
    assert fields >= {
        "job.job_id",
        "job.labels",
        "job.training_input.master_type",
        "job.training_input.worker_type",
        "job.training_input.package_uris",
        "job.training_input.python_module",
        "job.training_input.region",
    }


def test_message_has_one_line_per_violation():
    error = SpecError(
        [
            FieldViolation("job.job_id", "A job id is required."),
            FieldViolation("job.training_input.region", "region is required."),
        ]
    )
    assert error.message == (
        "Field: job.job_id Error: A job id is required.\nField: job.training_input.region Error: region is required."
    )
    assert str(error) == error.message


def test_unknown_field_message_uses_google_wording():
    with pytest.raises(SpecError) as caught:
        spec.validate_job({**train(), "trainingInput": {**BASIC, "foo": 1}})
    assert caught.value.message == (
        "Invalid JSON payload received. Unknown name \"foo\" at 'job.training_input': Cannot find field."
    )
    assert caught.value.violations == [
        FieldViolation(
            "job.training_input",
            "Invalid JSON payload received. Unknown name \"foo\" at 'job.training_input': Cannot find field.",
        )
    ]


def test_payload_errors_are_reported_before_service_rules():
    # The front end rejects a malformed payload before any service rule runs.
    body = {"jobId": "1bad", "trainingInput": {"workerCount": "x", "bogus": True}}
    fields = [v.field for v in violations_of(body)]
    assert fields == ["job.training_input.worker_count", "job.training_input"]


def test_body_that_is_not_an_object_is_rejected():
    [violation] = violations_of(["not", "a", "job"])
    assert violation.field == "job"


# --- the smaller entry points -------------------------------------------------------------


@pytest.mark.parametrize("job_id", ["a", "Job_1", "x" * 128, "census_20200101_0930"])
def test_good_job_ids(job_id):
    assert spec.validate_job_id(job_id) == []


@pytest.mark.parametrize("job_id", [None, "", "_a", "a b", "a-b", "a.b", "x" * 129, "ñ"])
def test_bad_job_ids(job_id):
    [violation] = spec.validate_job_id(job_id)
    assert violation.field == "job.job_id"


def test_labels_field_can_be_named():
    [violation] = spec.validate_labels({"A": "b"}, field="labels")
    assert violation.field == "labels"


def test_labels_must_be_a_map():
    [violation] = spec.validate_labels(["a"])
    assert "map" in violation.description


def test_good_labels():
    labels = {f"key_{i}": f"value-{i}" for i in range(64)}
    assert spec.validate_labels(labels) == []


def test_validate_training_input_alone():
    result = spec.validate_training_input({**BASIC, "workerCount": 0})
    assert result["workerCount"] == "0"
    with pytest.raises(SpecError) as caught:
        spec.validate_training_input({**BASIC, "region": None, "pythonModule": None}, field="trainingInput")
    fields = {v.field for v in caught.value.violations}
    assert fields == {"trainingInput.python_module", "trainingInput.region"}


def test_validate_hyperparameters_alone():
    result = spec.validate_hyperparameters({**HP, "maxTrials": "8"})
    assert result["maxTrials"] == 8
    with pytest.raises(SpecError) as caught:
        spec.validate_hyperparameters({"params": []}, field="hp")
    assert [v.field for v in caught.value.violations] == ["hp.params"]
