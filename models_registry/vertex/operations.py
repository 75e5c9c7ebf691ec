"""Ending the Vertex AI operations that wait on the registry's background work: a model upload's
operation is done when its version is READY (its response names the model and version) or FAILED
(its error is the reason). Called by the deployer, with nothing above it imported."""

from __future__ import annotations

from jobs.models import VertexOperation
from models_registry.models import Version, VersionState
from models_registry.vertex import resources

CODE_INVALID_ARGUMENT = 3


def finish_uploads(version: Version) -> None:
    """End the upload operations waiting for this version: its model, or why it failed."""
    for operation in VertexOperation.objects.filter(waits_for=f"version:{version.pk}"):
        body = dict(operation.body)
        body["done"] = True
        if version.state == VersionState.READY:
            body["response"] = {
                "@type": f"{resources.V1}.UploadModelResponse",
                "model": resources.model_name(version.model, operation.location),
                "modelVersionId": str(version.vertex_version),
            }
        else:
            message = version.error_message or "The model could not be loaded."
            body["error"] = {"code": CODE_INVALID_ARGUMENT, "message": message}
        VertexOperation.objects.filter(pk=operation.pk).update(body=body, waits_for="")
