"""The console's REST extension for a project's container images: list, load an archive, delete.

``POST …/images:load?name=NAME`` takes the archive (``docker save`` / ``podman save`` output,
gzipped or not) as the raw body, as the package upload does, or as the ``file`` part of a
multipart form. Thin adapters over ``jobs.containers.images``.
"""

from __future__ import annotations

import io

from rest_framework.decorators import api_view, parser_classes
from rest_framework.parsers import MultiPartParser
from rest_framework.response import Response

from aiconsole import accounts
from jobs.containers import images


@api_view(["GET"])
def images_collection(request, project_id):
    project = accounts.find_project(project_id, actor=request.user)
    found = images.list_images(project, actor=request.user)
    return Response({"images": [images.image_resource(image) for image in found]})


@api_view(["POST"])
@parser_classes([MultiPartParser])  # a raw body is read as it streams in, never parsed
def image_load(request, project_id):
    project = accounts.find_project(project_id, actor=request.user)
    name = request.query_params.get("name", "")
    if request.content_type.startswith("multipart/form-data"):
        name = name or request.data.get("name", "")
        stream = request.FILES.get("file") or io.BytesIO()  # a missing part is an empty archive
    else:
        stream = request.stream or io.BytesIO()  # None when the body is empty
    image = images.load_image(project, name, stream, actor=request.user)
    return Response(images.image_resource(image))


@api_view(["DELETE"])
def image_item(request, project_id, name):
    project = accounts.find_project(project_id, actor=request.user)
    images.delete_image(project, name, actor=request.user)
    return Response({})
