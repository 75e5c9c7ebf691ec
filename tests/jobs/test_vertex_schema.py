"""The Vertex AI schema the console reads (jobs/vertex/schema.py) against the protos the
google-cloud-aiplatform SDK ships: a field renamed, retyped or renumbered there fails here."""

from __future__ import annotations

import pytest
from google.cloud.aiplatform_v1.types import (
    accelerator_type,
    batch_prediction_job,
    custom_job,
    encryption_spec,
    endpoint,
    endpoint_service,
    env_var,
    hyperparameter_tuning_job,
    io,
    job_state,
    machine_resources,
    manual_batch_tuning_parameters,
    model,
    model_service,
    pipeline_state,
    study,
    training_pipeline,
)
from google.protobuf.descriptor import FieldDescriptor

from jobs.vertex import schema

SDK_MESSAGES = {
    "TrainingPipeline": training_pipeline.TrainingPipeline,
    "CustomJob": custom_job.CustomJob,
    "CustomJobSpec": custom_job.CustomJobSpec,
    "WorkerPoolSpec": custom_job.WorkerPoolSpec,
    "ContainerSpec": custom_job.ContainerSpec,
    "PythonPackageSpec": custom_job.PythonPackageSpec,
    "EnvVar": env_var.EnvVar,
    "MachineSpec": machine_resources.MachineSpec,
    "DiskSpec": machine_resources.DiskSpec,
    "Scheduling": custom_job.Scheduling,
    "GcsDestination": io.GcsDestination,
    "EncryptionSpec": encryption_spec.EncryptionSpec,
    "HyperparameterTuningJob": hyperparameter_tuning_job.HyperparameterTuningJob,
    "StudySpec": study.StudySpec,
    "MedianAutomatedStoppingSpec": study.StudySpec.MedianAutomatedStoppingSpec,
    "MetricSpec": study.StudySpec.MetricSpec,
    "ParameterSpec": study.StudySpec.ParameterSpec,
    "DoubleValueSpec": study.StudySpec.ParameterSpec.DoubleValueSpec,
    "IntegerValueSpec": study.StudySpec.ParameterSpec.IntegerValueSpec,
    "CategoricalValueSpec": study.StudySpec.ParameterSpec.CategoricalValueSpec,
    "DiscreteValueSpec": study.StudySpec.ParameterSpec.DiscreteValueSpec,
    "ConditionalParameterSpec": study.StudySpec.ParameterSpec.ConditionalParameterSpec,
    "DiscreteValueCondition": study.StudySpec.ParameterSpec.ConditionalParameterSpec.DiscreteValueCondition,
    "IntValueCondition": study.StudySpec.ParameterSpec.ConditionalParameterSpec.IntValueCondition,
    "CategoricalValueCondition": study.StudySpec.ParameterSpec.ConditionalParameterSpec.CategoricalValueCondition,
    "Model": model.Model,
    "ModelContainerSpec": model.ModelContainerSpec,
    "Port": model.Port,
    "PredictSchemata": model.PredictSchemata,
    "UploadModelRequest": model_service.UploadModelRequest,
    "Endpoint": endpoint.Endpoint,
    "DeployedModel": endpoint.DeployedModel,
    "DedicatedResources": machine_resources.DedicatedResources,
    "AutomaticResources": machine_resources.AutomaticResources,
    "DeployModelRequest": endpoint_service.DeployModelRequest,
    "UndeployModelRequest": endpoint_service.UndeployModelRequest,
    "BatchPredictionJob": batch_prediction_job.BatchPredictionJob,
    "BatchPredictionJob.InputConfig": batch_prediction_job.BatchPredictionJob.InputConfig,
    "BatchPredictionJob.OutputConfig": batch_prediction_job.BatchPredictionJob.OutputConfig,
    "GcsSource": io.GcsSource,
    "BatchDedicatedResources": machine_resources.BatchDedicatedResources,
    "ManualBatchTuningParameters": manual_batch_tuning_parameters.ManualBatchTuningParameters,
}
SDK_ENUMS = {
    "JobState": job_state.JobState,
    "PipelineState": pipeline_state.PipelineState,
    "AcceleratorType": accelerator_type.AcceleratorType,
    "Scheduling.Strategy": custom_job.Scheduling.Strategy,
    "StudySpec.Algorithm": study.StudySpec.Algorithm,
    "StudySpec.ObservationNoise": study.StudySpec.ObservationNoise,
    "StudySpec.MeasurementSelectionType": study.StudySpec.MeasurementSelectionType,
    "StudySpec.MetricSpec.GoalType": study.StudySpec.MetricSpec.GoalType,
    "StudySpec.ParameterSpec.ScaleType": study.StudySpec.ParameterSpec.ScaleType,
    "Trial.State": study.Trial.State,
    "Model.DeploymentResourcesType": model.Model.DeploymentResourcesType,
}
_SCALARS = {
    FieldDescriptor.TYPE_STRING: "string",
    FieldDescriptor.TYPE_BOOL: "bool",
    FieldDescriptor.TYPE_INT32: "int32",
    FieldDescriptor.TYPE_INT64: "int64",
    FieldDescriptor.TYPE_DOUBLE: "double",
    FieldDescriptor.TYPE_ENUM: "enum",
}
_WELL_KNOWN = {
    "google.protobuf.Duration": "duration",
    "google.protobuf.Timestamp": "timestamp",
}


def _sdk_type(descriptor) -> str:
    if descriptor.type == FieldDescriptor.TYPE_MESSAGE:
        if descriptor.message_type.GetOptions().map_entry:
            return "map"
        return _WELL_KNOWN.get(descriptor.message_type.full_name, "message")
    return _SCALARS[descriptor.type]


@pytest.mark.parametrize("name", sorted(SDK_MESSAGES))
def test_every_message_has_the_sdks_fields_with_their_types(name):
    fields = {f.json_name: f for f in SDK_MESSAGES[name].pb().DESCRIPTOR.fields}
    ours = schema.MESSAGES[name]
    assert set(ours) == set(fields), f"{name}: fields differ from the SDK's"
    for field_name, spec in ours.items():
        sdk = fields[field_name]
        expected = _sdk_type(sdk)
        if spec.type == "object":  # kept as plain JSON: a message of ours we do not read (or a Status)
            assert expected == "message", (name, field_name)
            continue
        assert spec.type == expected, (name, field_name, spec.type, expected)
        assert spec.repeated == (sdk.is_repeated and expected != "map"), (name, field_name)
        if spec.type == "message":
            assert sdk.message_type.name == spec.ref or sdk.message_type.full_name.endswith("." + spec.ref)


@pytest.mark.parametrize("name", sorted(SDK_ENUMS))
def test_every_enum_has_the_sdks_numbers(name):
    assert schema.ENUMS[name] == {member.name: member.value for member in SDK_ENUMS[name]}
