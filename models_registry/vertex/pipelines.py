"""A Vertex AI training pipeline's ``modelToUpload``: once its job has SUCCEEDED, the model its
trainer wrote to ``AIP_MODEL_DIR`` is uploaded as its creator (``models:upload``), and the pipeline
answers SUCCEEDED once that upload's operation is done (``jobs.vertex.resources``), so the SDK's
``run()`` returns the ``aiplatform.Model``."""

from __future__ import annotations

import logging

from aiconsole import iam
from aiconsole.errors import ServiceError
from jobs.models import VertexJob
from models_registry.vertex import services

logger = logging.getLogger("aiconsole.models")


def upload_trained_model(job) -> None:
    """Registered with ``jobs.kinds.register_success_hook``: nothing for any other job."""
    vertex = VertexJob.objects.filter(job=job).select_related("job__project", "job__created_by").first()
    engine = dict(vertex.engine or {}) if vertex is not None else {}
    pipeline = dict(engine.get("pipeline") or {})
    upload = pipeline.get("upload")
    if not upload or pipeline.get("uploadOperation") or pipeline.get("uploadError"):
        return
    assert vertex is not None
    actor = vertex.job.created_by
    try:
        if actor is None:
            raise ServiceError("The pipeline's creator no longer exists: nobody to upload its model as.")
        operation = services.upload_model(
            vertex.job.project, vertex.location, upload, actor=actor, pipeline=vertex.resource_name
        )
        pipeline["uploadOperation"] = operation["name"].rsplit("/", 1)[1]
    except (ServiceError, iam.NotFound, iam.PermissionDenied) as error:
        message = error.message if isinstance(error, ServiceError) else str(error)
        pipeline["uploadError"] = f"The trained model could not be uploaded: {message}"
        logger.warning("%s: %s", vertex.resource_name, pipeline["uploadError"])
    engine["pipeline"] = pipeline
    VertexJob.objects.filter(pk=vertex.pk).update(engine=engine)
