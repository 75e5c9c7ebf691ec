"""The jobs app's REST paths and extensions in the OpenAPI document (aiconsole/openapi.py puts it
together): projects.jobs, the project's config, locations and runtime versions, job metrics,
package uploads and container images, and jobs' IAM policies."""

from __future__ import annotations

from aiconsole.openapi import (
    INT64,
    LABELS,
    PAGING,
    STRING,
    TIMESTAMP,
    Description,
    iam_paths,
    json_body,
    operation,
    path_params,
    query,
    ref,
)

JOB_PATH = "/v1/projects/{projectsId}/jobs/{jobsId}"

SCHEMAS = {
    "ListRuntimeVersionsResponse": {
        "type": "object",
        "additionalProperties": False,
        "properties": {
            "runtimeVersions": {
                "type": "array",
                "items": {
                    "type": "object",
                    "properties": {
                        "runtimeVersion": STRING,
                        "tensorflowVersion": STRING,
                        "extension": {"type": "boolean"},
                        "default": {"type": "boolean"},
                        "defaultPythonVersion": STRING,
                        "frameworks": LABELS,
                        "notes": {"type": "array", "items": STRING},
                        "pythonVersions": {
                            "type": "array",
                            "items": {
                                "type": "object",
                                "properties": {
                                    "pythonVersion": STRING,
                                    "available": {"type": "boolean"},
                                    "reason": STRING,
                                },
                            },
                        },
                    },
                },
            }
        },
    },
    "MetricPoint": {
        "type": "object",
        "required": ["tag", "step", "value", "time", "trialId", "source", "run"],
        "additionalProperties": False,
        "properties": {
            "tag": STRING,
            "step": INT64,
            "value": {"type": "number"},
            "time": TIMESTAMP,
            "trialId": {"type": "string", "description": "The trial's id in a tuning job; empty otherwise."},
            "source": {"type": "string", "enum": ["hypertune", "tfevents"]},
            "run": {
                "type": "string",
                "description": "The event file's folder under the job dir (train, "
                "validation); empty for hypertune reports.",
            },
        },
    },
    "ListMetricsResponse": {
        "type": "object",
        "required": ["metrics"],
        "additionalProperties": False,
        "properties": {"metrics": {"type": "array", "items": ref("MetricPoint")}, "nextPageToken": STRING},
    },
    "ContainerImage": {
        "type": "object",
        "required": ["name", "imageId", "digest", "sizeBytes", "loadedBy", "createTime"],
        "additionalProperties": False,
        "properties": {
            "name": STRING,
            "imageId": STRING,
            "digest": STRING,
            "sizeBytes": INT64,
            "loadedBy": STRING,
            "createTime": TIMESTAMP,
        },
    },
    "ListImagesResponse": {
        "type": "object",
        "required": ["images"],
        "additionalProperties": False,
        "properties": {"images": {"type": "array", "items": ref("ContainerImage")}},
    },
    "UploadResponse": {
        "type": "object",
        "required": ["uri", "name", "sizeBytes", "sha256"],
        "properties": {
            "uri": STRING,
            "name": STRING,
            "sizeBytes": INT64,
            "sha256": STRING,
            "kind": STRING,
            "modules": {"type": "array", "items": STRING},
        },
    },
}

PATHS = {
    "/v1/projects/{projectsId}/jobs": {
        "parameters": path_params("projectsId"),
        "get": operation(
            "ml.projects.jobs.list",
            "Lists the jobs in the project.",
            ref("ListJobsResponse"),
            parameters=[
                *PAGING,
                query("filter", {"type": "string", "maxLength": 2000}, "e.g. jobId:census* AND state:FAILED"),
            ],
        ),
        "post": operation(
            "ml.projects.jobs.create",
            "Creates a training job.",
            ref("Job"),
            codes=(400, 401, 403, 404, 409, 413),
            body=json_body(ref("Job")),
        ),
    },
    JOB_PATH: {
        "parameters": path_params("projectsId", "jobsId"),
        "get": operation("ml.projects.jobs.get", "Describes a job.", ref("Job")),
        "patch": operation(
            "ml.projects.jobs.patch",
            "Updates a job's labels.",
            ref("Job"),
            codes=(400, 401, 403, 404, 409, 413),
            body=json_body(ref("Job")),
            parameters=[query("updateMask", STRING, "labels and/or etag")],
        ),
    },
    JOB_PATH + ":cancel": {
        "parameters": path_params("projectsId", "jobsId"),
        "post": operation(
            "ml.projects.jobs.cancel", "Cancels a running job.", ref("Empty"), body=json_body({"type": "object"})
        ),
    },
    JOB_PATH + "/metrics": {
        "parameters": path_params("projectsId", "jobsId"),
        "get": operation(
            "aiconsole.jobs.metrics.list",
            "Our extension: the job's metric points (cloudml-hypertune reports and TensorFlow "
            "summary scalars under its job dir), in the order they were recorded. Needs ml.jobs.get.",
            ref("ListMetricsResponse"),
            parameters=[
                query("tag", STRING, "Only this metric tag."),
                query("trialId", STRING, "Only this trial of a tuning job."),
                query("pageSize", {"type": "integer", "minimum": 0}, "Default 1,000, at most 10,000."),
                query("pageToken", STRING, "nextPageToken of the previous page."),
            ],
        ),
    },
    "/v1/projects/{projectsId}:getConfig": {
        "parameters": path_params("projectsId"),
        "get": operation(
            "ml.projects.getConfig", "The service account the project's jobs run as.", ref("GetConfigResponse")
        ),
    },
    "/v1/projects/{projectsId}/locations": {
        "parameters": path_params("projectsId"),
        "get": operation(
            "ml.projects.locations.list",
            "Regions and their capabilities.",
            ref("ListLocationsResponse"),
            parameters=PAGING,
        ),
    },
    "/v1/projects/{projectsId}/runtimeVersions": {
        "parameters": path_params("projectsId"),
        "get": operation(
            "ml.projects.runtimeVersions.list",
            "Extension: the runtime versions, their Pythons and "
            "frameworks, and whether this installation can run each pair now.",
            ref("ListRuntimeVersionsResponse"),
        ),
    },
    "/v1/projects/{projectsId}/locations/{locationsId}": {
        "parameters": path_params("projectsId", "locationsId"),
        "get": operation("ml.projects.locations.get", "One region.", ref("Location")),
    },
    "/upload/v1/projects/{projectsId}/packages": {
        "parameters": path_params("projectsId"),
        "post": {
            **operation(
                "aiconsole.packages.upload",
                "Our extension: upload a trainer package (sdist or wheel) as the raw body.",
                ref("UploadResponse"),
                codes=(400, 401, 403, 404, 413),
                parameters=[query("name", STRING, "The file name, e.g. trainer-0.1.tar.gz")],
            ),
            "requestBody": {
                "required": True,
                "content": {"application/octet-stream": {"schema": {"type": "string", "format": "binary"}}},
            },
        },
    },
    "/v1/projects/{projectsId}/images": {
        "parameters": path_params("projectsId"),
        "get": operation(
            "aiconsole.images.list",
            "Our extension: the container images uploaded to the project (images on the host's own "
            "engine store are not listed; they run for every project). Needs ml.jobs.list.",
            ref("ListImagesResponse"),
        ),
    },
    "/v1/projects/{projectsId}/images:load": {
        "parameters": path_params("projectsId"),
        "post": {
            **operation(
                "aiconsole.images.load",
                "Our extension: load an image archive (docker save or podman save output, docker-archive or "
                "oci-archive, gzipped or not), tag it with name and keep it as the project's own: other "
                "projects' jobs may not run it. The archive is the raw body, or the file part of a form. "
                "Needs ml.jobs.create.",
                ref("ContainerImage"),
                codes=(400, 401, 403, 404, 409, 413),
                parameters=[query("name", STRING, "The image's name, e.g. gcr.io/my-project/trainer:v1")],
            ),
            "requestBody": {
                "required": True,
                "content": {
                    "application/octet-stream": {"schema": {"type": "string", "format": "binary"}},
                    "multipart/form-data": {
                        "schema": {
                            "type": "object",
                            "properties": {"file": {"type": "string", "format": "binary"}, "name": STRING},
                        }
                    },
                },
            },
        },
    },
    "/v1/projects/{projectsId}/images/{imagesId}": {
        "parameters": [
            *path_params("projectsId"),
            {
                "name": "imagesId",
                "in": "path",
                "required": True,
                "description": "The image's name as loaded, slashes and colons included "
                "(gcr.io/my-project/trainer:v1).",
                "schema": {"type": "string", "pattern": r"^[a-z0-9][a-z0-9._/:-]*$"},
            },
        ],
        "delete": operation(
            "aiconsole.images.delete",
            "Our extension: forget one of the project's uploaded images and remove its name from the engine. "
            "Needs ml.jobs.create.",
            ref("Empty"),
        ),
    },
}
PATHS.update(iam_paths(JOB_PATH, path_params("projectsId", "jobsId"), "projects.jobs"))

DESCRIPTION = Description(PATHS, SCHEMAS)
