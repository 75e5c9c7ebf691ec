"""The ASGI front answers bearer-token predictions exactly as the view does, and passes every
other request to the application it wraps."""

from __future__ import annotations

import json

import pytest
from asgiref.testing import ApplicationCommunicator

from aiconsole.models import AuditEntry
from aiconsole.tokens import create_token
from models_registry import services
from models_registry.asgi import PredictFront
from tests.helpers.models import deploy


async def _passed_through(scope, receive, send):
    await send({"type": "http.response.start", "status": 299, "headers": []})
    await send({"type": "http.response.body", "body": b"inner"})


async def call(front, path: str, body: bytes, headers: dict | None = None, method: str = "POST") -> tuple:
    headers = {"Host": "testserver", **(headers or {})}  # the front checks it as Django does
    scope = {
        "type": "http",
        "method": method,
        "path": path,
        "client": ("10.1.2.3", 5555),
        "headers": [(k.lower().encode(), v.encode()) for k, v in headers.items()],
    }
    communicator = ApplicationCommunicator(front, scope)
    await communicator.send_input({"type": "http.request", "body": body, "more_body": False})
    start = await communicator.receive_output(30)
    content = await communicator.receive_output(30)
    await communicator.wait(5)
    return start["status"], dict(start["headers"]), content["body"]


@pytest.fixture
def front():
    return PredictFront(_passed_through)


@pytest.mark.asyncio
async def test_the_front_answers_like_the_view(serving, project, admin, trained, front):
    from channels.db import database_sync_to_async

    @database_sync_to_async
    def setup():
        project.data_access_logs = True
        project.save()
        model = services.create_model(project, {"name": "census"}, actor=admin)
        deploy(model, "v1", trained["linear"], admin)
        return create_token(admin)[1]

    raw = await setup()
    auth = {"Authorization": f"Bearer {raw}", "User-Agent": "front-test", "X-Request-Id": "req-42"}
    status, headers, body = await call(
        front,
        "/v1/projects/project-a/models/census:predict",
        json.dumps({"instances": trained["probe"]}).encode(),
        auth,
    )
    assert status == 200 and headers[b"x-request-id"] == b"req-42"
    assert json.loads(body)["predictions"] == pytest.approx(trained["expected"]["linear"])

    status, _, body = await call(
        front, "/v1/projects/project-a/models/census/versions/v1:predict", b'{"instances": [[1, 2]]}', auth
    )
    assert status == 400 and json.loads(body)["error"].startswith("Prediction failed")
    status, _, body = await call(front, "/v1/projects/project-a/models/nope:predict", b'{"instances": [[1]]}', auth)
    assert status == 404 and json.loads(body)["error"]["status"] == "NOT_FOUND"
    status, _, body = await call(front, "/v1/projects/project-a/models/census:predict", b"x" * 2_000_000, auth)
    assert status == 413
    status, headers, _ = await call(
        front, "/v1/projects/project-a/models/census:predict", b"{}", {"Authorization": "Bearer aic_wrong"}
    )
    assert status == 401 and headers[b"www-authenticate"] == b'Bearer realm="aiconsole"'

    @database_sync_to_async
    def audited():
        return list(
            AuditEntry.objects.filter(method_name=services.PREDICT).values_list(
                "request_id", "user_agent", "caller_ip", "granted"
            )
        )

    entries = await audited()
    assert ("req-42", "front-test", "10.1.2.3", True) in entries


@pytest.mark.asyncio
async def test_everything_else_goes_to_the_wrapped_application(front):
    assert (await call(front, "/v1/projects/p/models/m:predict", b"{}"))[0] == 299  # no token: the view
    assert (await call(front, "/v1/projects/p/models/m:predict", b"{}", {"Authorization": "Basic eA=="}))[0] == 299
    assert (await call(front, "/v1/projects/p/models/m", b"{}", {"Authorization": "Bearer x"}))[0] == 299
    assert (await call(front, "/v1/projects/p/models/m:predict", b"", {"Authorization": "Bearer x"}, method="GET"))[
        0
    ] == 299


@pytest.mark.asyncio
async def test_the_front_answers_a_vertex_endpoints_predictions_as_its_view_does(
    serving, project, admin, trained, front
):
    from channels.db import database_sync_to_async

    from models_registry.vertex import services as vertex

    @database_sync_to_async
    def setup():
        from models_registry.models import Version

        model = services.create_model(project, {"name": "census"}, actor=admin)
        version, _ = deploy(model, "v1", trained["linear"], admin)
        Version.objects.filter(pk=version.pk).update(vertex_version=1)
        created = vertex.create_endpoint(project, "us-central1", {"displayName": "e"}, actor=admin)
        endpoint = created["response"]["name"]
        name = f"projects/project-a/locations/us-central1/models/{model.vertex_id}"
        vertex.deploy_model(
            project, "us-central1", endpoint.rsplit("/", 1)[1], {"deployedModel": {"model": name}}, actor=admin
        )
        return create_token(admin)[1], endpoint, name

    raw, endpoint, model_name = await setup()
    auth = {"Authorization": f"Bearer {raw}"}
    status, headers, body = await call(
        front, f"/v1/{endpoint}:predict", json.dumps({"instances": trained["probe"]}).encode(), auth
    )
    assert status == 200, body
    answer = json.loads(body)
    assert answer["predictions"] == pytest.approx(trained["expected"]["linear"]) and answer["model"] == model_name
    assert headers[b"x-vertex-ai-model"] == model_name.encode()
    status, _, body = await call(
        front, f"/v1/{endpoint}:rawPredict", json.dumps({"instances": trained["probe"]}).encode(), auth
    )
    assert status == 200 and json.loads(body) == {"predictions": pytest.approx(trained["expected"]["linear"])}
    status, _, body = await call(front, f"/v1/{endpoint}:predict", b"{}", auth)
    assert status == 400 and json.loads(body)["error"]["status"] == "INVALID_ARGUMENT"
    status, _, _ = await call(front, f"/v1/{endpoint}:predict", b"{}", {"Authorization": "Bearer nope"})
    assert status == 401
