"""REST adapters for IAM policies: ``:getIamPolicy``, ``:setIamPolicy``, ``:testIamPermissions``.

The project itself (our extension, used by ``aiconsole projects add-iam-policy-binding``) here;
jobs (as in the original, ``projects.jobs.*IamPolicy``, in ``jobs/api/iam.py``) and models plug in
with three routes each that call ``get_iam_policy``, ``set_iam_policy`` and ``held_permissions``
with their own lookup.
"""

from __future__ import annotations

from rest_framework.decorators import api_view
from rest_framework.response import Response

from aiconsole import accounts, policies
from aiconsole.errors import FieldViolation, InvalidArgument
from aiconsole.models import Project


def _requested_version(request) -> int | None:
    if request.method == "GET":
        raw = request.query_params.get("options.requestedPolicyVersion")
    else:
        options = request.data.get("options") if isinstance(request.data, dict) else None
        raw = options.get("requestedPolicyVersion") if isinstance(options, dict) else None
    if raw in (None, ""):
        return None
    try:
        return int(raw)
    except (TypeError, ValueError):
        raise InvalidArgument.from_violations(
            [FieldViolation("options.requested_policy_version", f"Invalid value {raw!r}: expected an integer.")]
        ) from None


def _body(request) -> dict:
    if not isinstance(request.data, dict):
        raise InvalidArgument("Invalid JSON payload received. Expected an object.")
    return request.data


def get_iam_policy(request, resource) -> Response:
    return Response(policies.get_policy(resource, actor=request.user, requested_version=_requested_version(request)))


def set_iam_policy(request, resource) -> Response:
    body = _body(request)
    if "policy" not in body:
        raise InvalidArgument.from_violations([FieldViolation("policy", "The policy is required.")])
    update_mask = body.get("updateMask")
    if update_mask is not None and not isinstance(update_mask, str):
        raise InvalidArgument.from_violations([FieldViolation("update_mask", "Must be a comma-separated string.")])
    return Response(policies.set_policy(resource, body["policy"], actor=request.user, update_mask=update_mask))


def held_permissions(request, kind: str, resource) -> Response:
    """``resource`` is None when it does not exist: the answer is then an empty set, never 404."""
    held = policies.permissions_held(
        policies.KINDS[kind], resource, _body(request).get("permissions", []), actor=request.user
    )
    return Response({"permissions": held} if held else {})


# --- projects (our extension) -----------------------------------------------------------------


@api_view(["GET", "POST"])
def project_get_iam_policy(request, project_id):
    return get_iam_policy(request, accounts.find_project(project_id, actor=request.user))


@api_view(["POST"])
def project_set_iam_policy(request, project_id):
    return set_iam_policy(request, accounts.find_project(project_id, actor=request.user))


@api_view(["POST"])
def project_test_iam_permissions(request, project_id):
    return held_permissions(request, "project", Project.objects.filter(project_id=project_id).first())
