"""The Vertex AI v1 wire schema of CustomJob, HyperparameterTuningJob and TrainingPipeline, and reading
a body against it.

Written from ``google.cloud.aiplatform.v1``'s protos (``tests/jobs/test_vertex_schema.py`` compares
it with the descriptors the ``google-cloud-aiplatform`` SDK ships, so a renamed or retyped field
fails CI). What the SDK sends over REST (``$alt=json;enum-encoding=int``), and what this module
reads, is proto3 JSON:

- **enums as integers** (``"goal": 2``), though names are accepted too, as any proto3 parser does;
- **zero values dropped**: an absent ``minValue`` is 0, an absent enum its ``…_UNSPECIFIED``;
- **int64 as strings** (``"replicaCount": "1"``), numbers accepted too; int32 as numbers.

``parse`` (the one reader of request bodies, ``aiconsole.protojson``, given this schema) returns
the canonical copy the rest of ``jobs.vertex`` works on: camelCase names, enums
by name, int64 as strings, int32 as ints, durations as ``"<seconds>s"``, output-only fields
dropped. ``encode`` writes a resource back with enums as numbers when the caller asked for
``enum-encoding=int``. Pure data and functions: no database, no Django.
"""

from __future__ import annotations

from aiconsole import protojson
from aiconsole.errors import Violations
from aiconsole.protojson import Field

S, B, I32, I64, D = Field("string"), Field("bool"), Field("int32"), Field("int64"), Field("double")
STRINGS = Field("string", repeated=True, max_chars=4096)
DURATION = Field("duration")
MAP = Field("map")


def _out(type_: str, ref: str = "", **options) -> Field:
    return Field(type_, ref, output_only=True, **options)


def _msg(name: str, **options) -> Field:
    return Field("message", name, **options)


def _enum(name: str, **options) -> Field:
    return Field("enum", name, **options)


def _no(type_: str, reason: str, **options) -> Field:
    return Field(type_, unsupported=reason, **options)


ENUMS: dict[str, dict[str, int]] = {
    "JobState": {
        "JOB_STATE_UNSPECIFIED": 0,
        "JOB_STATE_QUEUED": 1,
        "JOB_STATE_PENDING": 2,
        "JOB_STATE_RUNNING": 3,
        "JOB_STATE_SUCCEEDED": 4,
        "JOB_STATE_FAILED": 5,
        "JOB_STATE_CANCELLING": 6,
        "JOB_STATE_CANCELLED": 7,
        "JOB_STATE_PAUSED": 8,
        "JOB_STATE_EXPIRED": 9,
        "JOB_STATE_UPDATING": 10,
        "JOB_STATE_PARTIALLY_SUCCEEDED": 11,
    },
    "PipelineState": {
        "PIPELINE_STATE_UNSPECIFIED": 0,
        "PIPELINE_STATE_QUEUED": 1,
        "PIPELINE_STATE_PENDING": 2,
        "PIPELINE_STATE_RUNNING": 3,
        "PIPELINE_STATE_SUCCEEDED": 4,
        "PIPELINE_STATE_FAILED": 5,
        "PIPELINE_STATE_CANCELLING": 6,
        "PIPELINE_STATE_CANCELLED": 7,
        "PIPELINE_STATE_PAUSED": 8,
    },
    "AcceleratorType": {
        "ACCELERATOR_TYPE_UNSPECIFIED": 0,
        "NVIDIA_TESLA_K80": 1,
        "NVIDIA_TESLA_P100": 2,
        "NVIDIA_TESLA_V100": 3,
        "NVIDIA_TESLA_P4": 4,
        "NVIDIA_TESLA_T4": 5,
        "TPU_V2": 6,
        "TPU_V3": 7,
        "NVIDIA_TESLA_A100": 8,
        "NVIDIA_A100_80GB": 9,
        "TPU_V4_POD": 10,
        "NVIDIA_L4": 11,
        "TPU_V5_LITEPOD": 12,
        "NVIDIA_H100_80GB": 13,
        "NVIDIA_H100_MEGA_80GB": 14,
        "NVIDIA_H200_141GB": 15,
        "NVIDIA_B200": 16,
        "NVIDIA_GB200": 17,
        "NVIDIA_RTX_PRO_6000": 18,
    },
    "Scheduling.Strategy": {
        "STRATEGY_UNSPECIFIED": 0,
        "ON_DEMAND": 1,
        "LOW_COST": 2,
        "STANDARD": 3,
        "SPOT": 4,
        "FLEX_START": 6,
    },
    "StudySpec.Algorithm": {"ALGORITHM_UNSPECIFIED": 0, "GRID_SEARCH": 2, "RANDOM_SEARCH": 3},
    "StudySpec.ObservationNoise": {"OBSERVATION_NOISE_UNSPECIFIED": 0, "LOW": 1, "HIGH": 2},
    "StudySpec.MeasurementSelectionType": {
        "MEASUREMENT_SELECTION_TYPE_UNSPECIFIED": 0,
        "LAST_MEASUREMENT": 1,
        "BEST_MEASUREMENT": 2,
    },
    "StudySpec.MetricSpec.GoalType": {"GOAL_TYPE_UNSPECIFIED": 0, "MAXIMIZE": 1, "MINIMIZE": 2},
    "StudySpec.ParameterSpec.ScaleType": {
        "SCALE_TYPE_UNSPECIFIED": 0,
        "UNIT_LINEAR_SCALE": 1,
        "UNIT_LOG_SCALE": 2,
        "UNIT_REVERSE_LOG_SCALE": 3,
    },
    "Model.DeploymentResourcesType": {
        "DEPLOYMENT_RESOURCES_TYPE_UNSPECIFIED": 0,
        "DEDICATED_RESOURCES": 1,
        "AUTOMATIC_RESOURCES": 2,
        "SHARED_RESOURCES": 3,
    },
    "Trial.State": {
        "STATE_UNSPECIFIED": 0,
        "REQUESTED": 1,
        "ACTIVE": 2,
        "STOPPING": 3,
        "SUCCEEDED": 4,
        "INFEASIBLE": 5,
    },
}

_NO_PERSISTENT = "persistent resources are a Vertex AI feature this server does not have; leave it unset."
_NO_NETWORK_RANGES = "this server has no VPC peering; leave it unset."
_NO_EXPERIMENTS = (
    "Vertex AI Experiments are not served here; the job's metrics and TensorBoard are on its page in the console."
)
_NO_MOUNTS = "this server mounts no NFS or Lustre shares; use packageUris and baseOutputDirectory paths instead."
_NO_PARTITIONS = "this server has no GPU partitions, TPU topologies or reservations; leave it unset."
_NO_STOPPING = (
    "this server stops trials early by the median rule only: use medianAutomatedStoppingSpec "
    "(Optuna's MedianPruner, as for v1 tuning jobs)."
)

_NO_DATASETS = (
    "Vertex AI managed datasets are not served here: give the training script its data by path or gs:// URI "
    "in its args (the pipeline runs its custom job with no dataset split)."
)
_NO_EXPLANATIONS = "Vertex Explainable AI is not served here; leave the explanation spec unset."
_NO_PRIVATE = "this server has no VPC or Private Service Connect; an endpoint here is reached at the console's address."
_NO_SHARED = "this server has no deployment resource pools; deploy with dedicatedResources or automaticResources."
_NO_GARDEN = "Model Garden is not served here; leave it unset."

MESSAGES: dict[str, dict[str, Field]] = {
    "TrainingPipeline": {
        "name": _out("string"),
        "displayName": S,
        "inputDataConfig": _no("object", _NO_DATASETS),
        "trainingTaskDefinition": S,
        "trainingTaskInputs": Field("object", max_chars=None),
        "trainingTaskMetadata": _out("object"),
        "modelToUpload": _msg("Model"),
        "modelId": S,
        "parentModel": S,
        "state": _out("enum", "PipelineState"),
        "error": _out("object"),
        "createTime": _out("timestamp"),
        "startTime": _out("timestamp"),
        "endTime": _out("timestamp"),
        "updateTime": _out("timestamp"),
        "labels": MAP,
        "encryptionSpec": _msg("EncryptionSpec"),
    },
    "CustomJob": {
        "name": _out("string"),
        "displayName": S,
        "jobSpec": _msg("CustomJobSpec"),
        "state": _out("enum", "JobState"),
        "createTime": _out("timestamp"),
        "startTime": _out("timestamp"),
        "endTime": _out("timestamp"),
        "updateTime": _out("timestamp"),
        "error": _out("object"),
        "labels": MAP,
        "encryptionSpec": _msg("EncryptionSpec"),
        "webAccessUris": _out("map"),
        "satisfiesPzs": _out("bool"),
        "satisfiesPzi": _out("bool"),
    },
    "CustomJobSpec": {
        "persistentResourceId": _no("string", _NO_PERSISTENT),
        "workerPoolSpecs": _msg("WorkerPoolSpec", repeated=True),
        "scheduling": _msg("Scheduling"),
        "serviceAccount": S,
        "network": S,
        "reservedIpRanges": _no("string", _NO_NETWORK_RANGES, repeated=True),
        "pscInterfaceConfig": _no("object", _NO_NETWORK_RANGES),
        "baseOutputDirectory": _msg("GcsDestination"),
        "protectedArtifactLocationId": _no("string", "artifacts stay where baseOutputDirectory says; leave it unset."),
        "tensorboard": S,
        "enableWebAccess": B,
        "enableDashboardAccess": B,
        "experiment": _no("string", _NO_EXPERIMENTS),
        "experimentRun": _no("string", _NO_EXPERIMENTS),
        "models": _no("string", "Model Garden models are not served here; leave it unset.", repeated=True),
    },
    "WorkerPoolSpec": {
        "containerSpec": _msg("ContainerSpec"),
        "pythonPackageSpec": _msg("PythonPackageSpec"),
        "machineSpec": _msg("MachineSpec"),
        "replicaCount": I64,
        "nfsMounts": _no("object", _NO_MOUNTS, repeated=True),
        "lustreMounts": _no("object", _NO_MOUNTS, repeated=True),
        "diskSpec": _msg("DiskSpec"),
    },
    "ContainerSpec": {
        "imageUri": S,
        "command": STRINGS,
        "args": STRINGS,
        "env": _msg("EnvVar", repeated=True),
    },
    "PythonPackageSpec": {
        "executorImageUri": S,
        "packageUris": Field("string", repeated=True, max_chars=2048),
        "pythonModule": S,
        "args": STRINGS,
        "env": _msg("EnvVar", repeated=True),
    },
    "EnvVar": {"name": S, "value": Field("string", max_chars=32768)},
    "MachineSpec": {
        "machineType": S,
        "acceleratorType": _enum("AcceleratorType"),
        "acceleratorCount": I32,
        "gpuPartitionSize": _no("string", _NO_PARTITIONS),
        "tpuTopology": _no("string", _NO_PARTITIONS),
        "reservationAffinity": _no("object", _NO_PARTITIONS),
    },
    "DiskSpec": {"bootDiskType": S, "bootDiskSizeGb": I32},
    "Scheduling": {
        "timeout": DURATION,
        "restartJobOnWorkerRestart": B,
        "strategy": _enum("Scheduling.Strategy"),
        "disableRetries": B,
        "maxWaitDuration": DURATION,
    },
    "GcsDestination": {"outputUriPrefix": Field("string", max_chars=2048)},
    "EncryptionSpec": {"kmsKeyName": S},
    "HyperparameterTuningJob": {
        "name": _out("string"),
        "displayName": S,
        "studySpec": _msg("StudySpec"),
        "maxTrialCount": I32,
        "parallelTrialCount": I32,
        "maxFailedTrialCount": I32,
        "trialJobSpec": _msg("CustomJobSpec"),
        "trials": _out("object", repeated=True),
        "state": _out("enum", "JobState"),
        "createTime": _out("timestamp"),
        "startTime": _out("timestamp"),
        "endTime": _out("timestamp"),
        "updateTime": _out("timestamp"),
        "error": _out("object"),
        "labels": MAP,
        "encryptionSpec": _msg("EncryptionSpec"),
        "satisfiesPzs": _out("bool"),
        "satisfiesPzi": _out("bool"),
    },
    "StudySpec": {
        "decayCurveStoppingSpec": _no("object", _NO_STOPPING),
        "medianAutomatedStoppingSpec": _msg("MedianAutomatedStoppingSpec"),
        "convexAutomatedStoppingSpec": _no("object", _NO_STOPPING),
        "metrics": _msg("MetricSpec", repeated=True),
        "parameters": _msg("ParameterSpec", repeated=True),
        "algorithm": _enum("StudySpec.Algorithm"),
        "observationNoise": _enum("StudySpec.ObservationNoise"),
        "measurementSelectionType": _enum("StudySpec.MeasurementSelectionType"),
        "studyStoppingConfig": _no(
            "object", "a study here stops at maxTrialCount or maxFailedTrialCount; leave studyStoppingConfig unset."
        ),
    },
    "MedianAutomatedStoppingSpec": {"useElapsedDuration": B},
    "MetricSpec": {
        "metricId": S,
        "goal": _enum("StudySpec.MetricSpec.GoalType"),
        "safetyConfig": _no("object", "safety metrics are a Vertex AI Vizier feature; leave safetyConfig unset."),
    },
    "ParameterSpec": {
        "doubleValueSpec": _msg("DoubleValueSpec"),
        "integerValueSpec": _msg("IntegerValueSpec"),
        "categoricalValueSpec": _msg("CategoricalValueSpec"),
        "discreteValueSpec": _msg("DiscreteValueSpec"),
        "parameterId": S,
        "scaleType": _enum("StudySpec.ParameterSpec.ScaleType"),
        "conditionalParameterSpecs": _msg("ConditionalParameterSpec", repeated=True),
    },
    # defaultValue is read and kept, and, as on Vertex (whose tuning jobs ignore it), not used.
    "DoubleValueSpec": {"minValue": D, "maxValue": D, "defaultValue": D},
    "IntegerValueSpec": {"minValue": I64, "maxValue": I64, "defaultValue": I64},
    "CategoricalValueSpec": {"values": STRINGS, "defaultValue": S},
    "DiscreteValueSpec": {"values": Field("double", repeated=True), "defaultValue": D},
    "ConditionalParameterSpec": {
        "parentDiscreteValues": _msg("DiscreteValueCondition"),
        "parentIntValues": _msg("IntValueCondition"),
        "parentCategoricalValues": _msg("CategoricalValueCondition"),
        "parameterSpec": _msg("ParameterSpec"),
    },
    "DiscreteValueCondition": {"values": Field("double", repeated=True)},
    "IntValueCondition": {"values": Field("int64", repeated=True)},
    "CategoricalValueCondition": {"values": STRINGS},
    # --- ModelService, EndpointService: models, their serving container, endpoints ---
    "Model": {
        "name": _out("string"),
        "versionId": _out("string"),
        "versionAliases": Field("string", repeated=True, max_chars=128),
        "versionCreateTime": _out("timestamp"),
        "versionUpdateTime": _out("timestamp"),
        "displayName": S,
        "description": Field("string", max_chars=8192),
        "versionDescription": Field("string", max_chars=8192),
        "defaultCheckpointId": _no("string", "checkpoints of a model are not served here; leave it unset."),
        "predictSchemata": _msg("PredictSchemata"),
        "metadataSchemaUri": S,
        "metadata": Field("object", max_chars=None),
        "supportedExportFormats": _out("object", repeated=True),
        "trainingPipeline": _out("string"),
        "pipelineJob": _no("string", "Vertex AI Pipelines (KFP) are not served here; leave it unset."),
        "containerSpec": _msg("ModelContainerSpec"),
        "artifactUri": Field("string", max_chars=2048),
        "supportedDeploymentResourcesTypes": _out("enum", "Model.DeploymentResourcesType", repeated=True),
        "supportedInputStorageFormats": _out("string", repeated=True),
        "supportedOutputStorageFormats": _out("string", repeated=True),
        "createTime": _out("timestamp"),
        "updateTime": _out("timestamp"),
        "deployedModels": _out("object", repeated=True),
        "explanationSpec": _no("object", _NO_EXPLANATIONS),
        "etag": S,
        "labels": MAP,
        "dataStats": _out("object"),
        "encryptionSpec": _msg("EncryptionSpec"),
        "modelSourceInfo": _out("object"),
        "originalModelInfo": _out("object"),
        "metadataArtifact": _out("string"),
        "baseModelSource": _no("object", _NO_GARDEN),
        "satisfiesPzs": _out("bool"),
        "satisfiesPzi": _out("bool"),
        "checkpoints": _out("object", repeated=True),
    },
    "ModelContainerSpec": {
        "imageUri": S,
        "command": STRINGS,
        "args": STRINGS,
        "env": _msg("EnvVar", repeated=True),
        "ports": _msg("Port", repeated=True),
        "predictRoute": S,
        "healthRoute": S,
        "invokeRoutePrefix": S,
        "grpcPorts": _no("object", "a serving container here answers over HTTP; leave grpcPorts unset.", repeated=True),
        "deploymentTimeout": DURATION,
        "sharedMemorySizeMb": I64,
        "startupProbe": Field("object"),
        "healthProbe": Field("object"),
        "livenessProbe": Field("object"),
    },
    "Port": {"containerPort": I32},
    "PredictSchemata": {"instanceSchemaUri": S, "parametersSchemaUri": S, "predictionSchemaUri": S},
    "UploadModelRequest": {
        "parent": S,
        "parentModel": S,
        "modelId": S,
        "model": _msg("Model"),
        "serviceAccount": S,
    },
    "Endpoint": {
        "name": _out("string"),
        "displayName": S,
        "description": Field("string", max_chars=8192),
        "deployedModels": _out("object", repeated=True),
        "trafficSplit": Field("map", "int32"),
        "etag": S,
        "labels": MAP,
        "createTime": _out("timestamp"),
        "updateTime": _out("timestamp"),
        "encryptionSpec": _msg("EncryptionSpec"),
        "network": _no("string", _NO_PRIVATE),
        "enablePrivateServiceConnect": _no("bool", _NO_PRIVATE),
        "privateServiceConnectConfig": _no("object", _NO_PRIVATE),
        "modelDeploymentMonitoringJob": _out("string"),
        "predictRequestResponseLoggingConfig": Field("object"),
        "dedicatedEndpointEnabled": B,
        "dedicatedEndpointDns": _out("string"),
        "clientConnectionConfig": Field("object"),
        "satisfiesPzs": _out("bool"),
        "satisfiesPzi": _out("bool"),
        "genAiAdvancedFeaturesConfig": _no("object", "generative AI features are not served here; leave it unset."),
        "privateModelServerEnabled": _no("bool", _NO_PRIVATE),
    },
    "DeployedModel": {
        "dedicatedResources": _msg("DedicatedResources"),
        "automaticResources": _msg("AutomaticResources"),
        "sharedResources": _no("string", _NO_SHARED),
        "id": S,
        "model": S,
        "modelVersionId": _out("string"),
        "displayName": S,
        "createTime": _out("timestamp"),
        "explanationSpec": _no("object", _NO_EXPLANATIONS),
        "disableExplanations": B,
        "serviceAccount": S,
        "disableContainerLogging": B,
        "enableAccessLogging": B,
        "privateEndpoints": _out("object"),
        "fasterDeploymentConfig": Field("object"),
        "status": _out("object"),
        "systemLabels": MAP,
        "checkpointId": _no("string", "checkpoints of a model are not served here; leave it unset."),
        "speculativeDecodingSpec": _no("object", "speculative decoding is for generative models; leave it unset."),
    },
    "DedicatedResources": {
        "machineSpec": _msg("MachineSpec"),
        "minReplicaCount": I32,
        "maxReplicaCount": I32,
        "requiredReplicaCount": I32,
        "autoscalingMetricSpecs": Field("object", repeated=True),
        "spot": B,
    },
    "AutomaticResources": {"minReplicaCount": I32, "maxReplicaCount": I32},
    # --- JobService: batch prediction ---
    "BatchPredictionJob": {
        "name": _out("string"),
        "displayName": S,
        "model": S,
        "modelVersionId": _out("string"),
        "unmanagedContainerModel": _no(
            "object", "a batch prediction here runs a model of the registry: name it in model."
        ),
        "inputConfig": _msg("BatchPredictionJob.InputConfig"),
        "instanceConfig": _no("object", "instances are sent as read here; leave instanceConfig unset."),
        "modelParameters": _no("object", "model parameters are not passed to batch predictions here; leave it unset."),
        "outputConfig": _msg("BatchPredictionJob.OutputConfig"),
        "dedicatedResources": _msg("BatchDedicatedResources"),
        "serviceAccount": _no("string", "a batch prediction runs as the project's account here; leave it unset."),
        "manualBatchTuningParameters": _msg("ManualBatchTuningParameters"),
        "generateExplanation": _no("bool", _NO_EXPLANATIONS),
        "explanationSpec": _no("object", _NO_EXPLANATIONS),
        "outputInfo": _out("object"),
        "state": _out("enum", "JobState"),
        "error": _out("object"),
        "partialFailures": _out("object", repeated=True),
        "resourcesConsumed": _out("object"),
        "completionStats": _out("object"),
        "createTime": _out("timestamp"),
        "startTime": _out("timestamp"),
        "endTime": _out("timestamp"),
        "updateTime": _out("timestamp"),
        "labels": MAP,
        "encryptionSpec": _msg("EncryptionSpec"),
        "disableContainerLogging": B,
        "satisfiesPzs": _out("bool"),
        "satisfiesPzi": _out("bool"),
    },
    "BatchPredictionJob.InputConfig": {
        "gcsSource": _msg("GcsSource"),
        "bigquerySource": _no("object", "BigQuery is not served here; give the instances as files in gcsSource."),
        "vertexMultimodalDatasetSource": _no("object", _NO_DATASETS),
        "instancesFormat": S,
    },
    "BatchPredictionJob.OutputConfig": {
        "gcsDestination": _msg("GcsDestination"),
        "bigqueryDestination": _no("object", "BigQuery is not served here; write the predictions to gcsDestination."),
        "vertexMultimodalDatasetDestination": _no("object", _NO_DATASETS),
        "predictionsFormat": S,
    },
    "GcsSource": {"uris": Field("string", repeated=True, max_chars=2048)},
    "BatchDedicatedResources": {
        "machineSpec": _msg("MachineSpec"),
        "startingReplicaCount": I32,
        "maxReplicaCount": I32,
    },
    "ManualBatchTuningParameters": {"batchSize": I32},
    "DeployModelRequest": {
        "endpoint": S,
        "deployedModel": _msg("DeployedModel"),
        "trafficSplit": Field("map", "int32"),
    },
    "UndeployModelRequest": {"endpoint": S, "deployedModelId": S, "trafficSplit": Field("map", "int32")},
}


def enum_name(enum: str, value: object) -> str | None:
    """The value's name, given as a name or as a number; None when it is neither."""
    return READER.enum_name(enum, value)


# Vertex AI's bodies go through the one reader, with proto3's zero values read as unset and the
# fields of Vertex's this server does not have refused with their reasons while reading.
READER = protojson.Schema(
    "google.cloud.aiplatform.v1", MESSAGES.__getitem__, ENUMS, zero_is_unset=True, refuse_unsupported=True
)


def parse(value: object, message: str, path: str, errors: Violations) -> dict:
    """Read one JSON object against a Vertex message into its canonical copy. Unknown names, wrong
    types and bad enum values are violations, as Google's JSON front end reports them."""
    return protojson.read(value, READER, message, path, errors)


def encode(resource: object, message: str, *, enum_ints: bool) -> object:
    """A canonical resource for the wire: enums as numbers when ``enum_ints`` (the caller sent
    ``$alt=json;enum-encoding=int``), as names otherwise. Fields the schema does not know (a
    trial's, an error's) pass unchanged unless ``EXTRA_ENUMS`` names them."""
    if not enum_ints or not isinstance(resource, dict):
        return resource
    fields = MESSAGES.get(message, {})
    out = {}
    for name, value in resource.items():
        spec = fields.get(name)
        enum = spec.ref if spec is not None and spec.type == "enum" else EXTRA_ENUMS.get((message, name))
        if enum:
            out[name] = ENUMS[enum].get(value, value) if isinstance(value, str) else value
        elif spec is not None and spec.type == "message":
            if spec.repeated:
                out[name] = [encode(item, spec.ref, enum_ints=True) for item in value]
            else:
                out[name] = encode(value, spec.ref, enum_ints=True)
        elif (message, name) in EXTRA_MESSAGES:
            out[name] = [encode(item, EXTRA_MESSAGES[(message, name)], enum_ints=True) for item in value]
        else:
            out[name] = value
    return out


# Output-only parts the schema keeps as plain objects, and the enums inside them.
EXTRA_MESSAGES = {("HyperparameterTuningJob", "trials"): "Trial"}
EXTRA_ENUMS = {("Trial", "state"): "Trial.State"}
