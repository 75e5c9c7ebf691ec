"""Vertex AI's BatchPredictionJob as a batch prediction job of the engine (``models_registry.batch``).

``read`` turns the create body into the v1 PredictionInput that job runs: the model (``projects/P/
locations/L/models/ID[@version]``) becomes its version's ``versionName``, ``gcsSource.uris`` the
input paths, and the predictions go to a folder of their own under ``gcsDestination``
(``prediction-<model>-<time>``, as Vertex names it), one ``predictions_NNNNN.jsonl`` per serving
process, each line ``{"instance": …, "prediction": …}``. Get, list, cancel and delete are the
other Vertex jobs' (``jobs.vertex``), which this registers the reader with.
"""

from __future__ import annotations

import re

from django.utils import timezone

from aiconsole import iam
from aiconsole.errors import Violations
from aiconsole.models import Project
from jobs.vertex import schema
from jobs.vertex.translate import Translation, VertexError
from models_registry.serving import containers
from models_registry.vertex.services import find_model

PATH = "batch_prediction_job"
READ_FORMATS = ("jsonl",)
WRITE_FORMATS = ("jsonl",)
_FOLDER_CHARS = re.compile(r"[^A-Za-z0-9_-]+")


def read(body: object, *, location: str, project: Project, actor) -> Translation:
    errors = Violations()
    request = schema.parse(body, "BatchPredictionJob", PATH, errors)
    if errors:
        raise VertexError(errors)
    display_name = request.get("displayName", "").strip()
    if not display_name:
        errors.add(f"{PATH}.display_name", "displayName is required.")
    version = None
    reference = request.get("model", "")
    if not reference:
        errors.add(f"{PATH}.model", "model is required: projects/P/locations/L/models/ID, or ID@VERSION.")
    else:
        try:
            _, version = find_model(project, location, reference.rsplit("/models/", 1)[-1], actor=actor)
        except iam.NotFound:
            errors.add(f"{PATH}.model", f"Model {reference} does not exist.")
        if version is not None and containers.is_custom(version):
            errors.add(
                f"{PATH}.model",
                f"Model {reference} is served by its own container, which batch prediction does not run here yet: "
                "predict its instances online through an endpoint, or upload it with a pre-built prediction image.",
            )
    inputs = request.get("inputConfig") or {}
    outputs = request.get("outputConfig") or {}
    read_format = inputs.get("instancesFormat", "")
    if read_format not in READ_FORMATS:
        errors.add(
            f"{PATH}.input_config.instances_format",
            f"instancesFormat {read_format or '(none)'} is not read here; it reads {', '.join(READ_FORMATS)} "
            "(one JSON instance per line).",
        )
    uris = (inputs.get("gcsSource") or {}).get("uris", [])
    if not uris:
        errors.add(f"{PATH}.input_config.gcs_source.uris", "At least one input file is required.")
    write_format = outputs.get("predictionsFormat", "")
    if write_format not in WRITE_FORMATS:
        errors.add(
            f"{PATH}.output_config.predictions_format",
            f"predictionsFormat {write_format or '(none)'} is not written here; it writes {', '.join(WRITE_FORMATS)}.",
        )
    prefix = (outputs.get("gcsDestination") or {}).get("outputUriPrefix", "")
    if not prefix:
        errors.add(f"{PATH}.output_config.gcs_destination.output_uri_prefix", "outputUriPrefix is required.")
    if errors:
        raise VertexError(errors)
    assert version is not None
    model_label = _FOLDER_CHARS.sub("_", version.model.display_name or version.model.name)[:64]
    stamp = timezone.now().strftime("%Y_%m_%dT%H_%M_%S_%f")[:-3] + "Z"
    folder = f"{prefix.rstrip('/')}/prediction-{model_label}-{stamp}"
    prediction_input: dict = {
        "dataFormat": "JSON",
        "inputPaths": uris,
        "outputPath": folder,
        "versionName": version.resource_name,
        "region": location,
    }
    resources = request.get("dedicatedResources") or {}
    workers = max(int(resources.get("maxReplicaCount") or 0), int(resources.get("startingReplicaCount") or 0))
    if workers:
        prediction_input["maxWorkerCount"] = str(workers)
    batch_size = (request.get("manualBatchTuningParameters") or {}).get("batchSize")
    if batch_size:
        prediction_input["batchSize"] = str(batch_size)
    return Translation(
        display_name=display_name,
        labels=request.get("labels") or {},
        request=request,
        training_input={},
        engine={"modelVersionId": str(version.vertex_version or ""), "outputDirectory": folder},
        prediction_input=prediction_input,
        origins={
            "job.prediction_input.input_paths": f"{PATH}.input_config.gcs_source.uris",
            "job.prediction_input.output_path": f"{PATH}.output_config.gcs_destination.output_uri_prefix",
            "job.prediction_input.max_worker_count": f"{PATH}.dedicated_resources.max_replica_count",
            "job.prediction_input.batch_size": f"{PATH}.manual_batch_tuning_parameters.batch_size",
            "job.prediction_input.version_name": f"{PATH}.model",
            "job.prediction_input": PATH,
        },
    )
