"""Real models served for real: trained by the runtime's Python, deployed through the services,
predicted over HTTP against a live server, and the serving processes' life (idle-out, cold
start, fixed counts, crashes, restarts)."""

from __future__ import annotations

import json
import os
import signal
import time

import pytest
import requests

from aiconsole.models import ApiToken
from aiconsole.tokens import create_token, revoke_token
from bench.support.waiting import wait_for
from models_registry import deploy as deployer
from models_registry import services
from models_registry.models import Operation, PredictionLog, Version, VersionState
from tests.helpers.models import deploy, wait_version


@pytest.fixture
def api(live_server, admin):
    _, raw = create_token(admin)
    session = requests.Session()
    session.headers["Authorization"] = f"Bearer {raw}"
    session.base = f"{live_server.url}/v1/projects/project-a"
    return session


@pytest.fixture
def census(project, admin):
    return services.create_model(project, {"name": "census"}, actor=admin)


def predict(api, path: str, body) -> requests.Response:
    data = body if isinstance(body, bytes) else json.dumps(body).encode()
    return api.post(f"{api.base}/models/{path}:predict", data=data, headers={"Content-Type": "application/json"})


def test_a_scikit_learn_model_predicts_over_http(serving, api, census, admin, trained):
    version, operation = deploy(census, "v1", trained["sklearn"], admin)
    assert version.state == VersionState.READY and version.framework == "SCIKIT_LEARN"
    assert operation.done and operation.response["state"] == "READY"
    answer = predict(api, "census", {"instances": trained["probe"]})
    assert answer.status_code == 200
    assert answer.json() == {"predictions": trained["expected"]["sklearn"]}


def test_an_xgboost_model_predicts_and_versions_are_addressed_by_name(serving, api, census, admin, trained):
    deploy(census, "v1", trained["linear"], admin)
    version, _ = deploy(census, "boosted", trained["xgboost"], admin)
    assert version.framework == "XGBOOST" and version.model_file == "model.bst"
    answer = predict(api, "census/versions/boosted", {"instances": trained["probe"]})
    assert answer.json()["predictions"] == pytest.approx(trained["expected"]["xgboost"], rel=1e-6)
    linear = predict(api, "census", {"instances": trained["probe"]}).json()["predictions"]
    assert linear == pytest.approx(trained["expected"]["linear"])


def test_wrong_shapes_and_bad_bodies_get_clear_errors(serving, api, census, admin, trained):
    deploy(census, "v1", trained["sklearn"], admin)
    shape = predict(api, "census", {"instances": [[1.0, 2.0]]})
    assert shape.status_code == 400
    assert shape.json()["error"].startswith("Prediction failed: Exception during sklearn prediction")
    assert "4 features" in shape.json()["error"]

    not_json = predict(api, "census", b"instances=1,2,3")
    assert not_json.status_code == 400 and not_json.json()["error"]["status"] == "INVALID_ARGUMENT"
    assert "Invalid JSON payload" in not_json.json()["error"]["message"]

    for body in ({"inputs": [[1, 2, 3, 4]]}, {"instances": []}, {"instances": {"a": 1}}, [1, 2]):
        refused = predict(api, "census", body)
        assert refused.status_code == 400 and refused.json()["error"]["code"] == 400, body

    huge = predict(api, "census", {"instances": [[0.5] * 4] * 80_000})
    assert huge.status_code == 413 and "exceeds the limit" in huge.json()["error"]["message"]
    # The serving process survived all of it.
    assert predict(api, "census", {"instances": trained["probe"][:1]}).status_code == 200


@pytest.mark.parametrize(
    "folder, reason",
    [
        ("broken", "Could not load model.pkl: UnpicklingError"),
        ("empty", "There is no model in"),
        ("tensorflow", "Could not load the SavedModel"),
    ],
)
def test_versions_that_cannot_serve_end_failed_with_the_reason(serving, census, admin, trained, folder, reason):
    version, operation = deploy(census, "v1", trained[folder], admin)
    assert version.state == VersionState.FAILED
    assert reason in version.error_message
    assert operation.done and operation.error["code"] == 3 and reason in operation.error["message"]
    assert not serving.status(version.pk)["processes"]


def test_a_framework_that_does_not_match_the_files_is_refused(serving, census, admin, trained):
    version, _ = deploy(census, "v1", trained["sklearn"], admin, framework="XGBOOST")
    assert version.state == VersionState.FAILED
    assert "holds a LogisticRegression, not an XGBoost model" in version.error_message
    version, _ = deploy(census, "v2", trained["xgboost"], admin, framework="SCIKIT_LEARN")
    assert version.state == VersionState.FAILED
    assert "SCIKIT_LEARN, which needs model.joblib or model.pkl" in version.error_message


def test_a_failed_default_version_answers_with_its_reason(serving, api, census, admin, trained):
    deploy(census, "v1", trained["broken"], admin)
    refused = predict(api, "census", {"instances": [[1, 2, 3, 4]]})
    assert refused.status_code == 400 and refused.json()["error"]["status"] == "FAILED_PRECONDITION"
    assert "UnpicklingError" in refused.json()["error"]["message"]


def test_an_idle_version_stops_and_cold_starts_on_the_next_request(serving, api, census, admin, trained, settings):
    settings.MODEL_IDLE_SECONDS = 0.5
    version, _ = deploy(census, "v1", trained["linear"], admin)
    assert predict(api, "census", {"instances": trained["probe"]}).status_code == 200
    wait_for(lambda: serving.status(version.pk)["processes"] == 0, 10, message="the version to idle out")
    answer = predict(api, "census", {"instances": trained["probe"]})
    assert answer.status_code == 200
    cold_ms = float(answer.headers["X-AIConsole-Cold-Start-Ms"])
    assert 0 < cold_ms < 5000
    status = serving.status(version.pk)
    assert (
        status["processes"] == 1
        and status["coldStarts"] == 1
        and status["lastColdStartMs"] == pytest.approx(cold_ms, abs=1)
    )
    warm = predict(api, "census", {"instances": trained["probe"]})
    assert "X-AIConsole-Cold-Start-Ms" not in warm.headers
    wait_for(
        lambda: Version.objects.get(pk=version.pk).last_use_time is not None, 15, message="lastUseTime to be written"
    )


@pytest.mark.slow
def test_manual_scaling_keeps_a_fixed_count_and_replaces_crashed_processes(
    serving, api, census, admin, trained, settings
):
    settings.MODEL_IDLE_SECONDS = 0.2
    version, _ = deploy(census, "v1", trained["linear"], admin, manualScaling={"nodes": 2})
    wait_for(lambda: serving.status(version.pk)["processes"] == 2, 20, message="two serving processes")
    pool = serving.pools[version.pk]
    victim = pool.processes[0]
    os.kill(victim.pid, signal.SIGKILL)
    wait_for(
        lambda: victim not in pool.processes and len(pool.live()) == 2, 20, message="the killed process to be replaced"
    )
    time.sleep(0.5)  # longer than the idle time: a fixed count never idles out
    assert serving.status(version.pk)["processes"] == 2
    answers = {predict(api, "census", {"instances": trained["probe"]}).status_code for _ in range(6)}
    assert answers == {200}
    assert {p.requests > 0 for p in pool.processes} == {True}  # round-robin used both


def test_min_nodes_are_kept_warm_and_patch_changes_them(serving, census, admin, trained):
    version, _ = deploy(census, "v1", trained["linear"], admin, autoScaling={"minNodes": 2})
    wait_for(lambda: serving.status(version.pk)["processes"] == 2, 20, message="two warm processes")
    services.update_version(version, {"autoScaling": {"minNodes": 1}}, "autoScaling.minNodes", actor=admin)
    assert serving.status(version.pk)["minNodes"] == 1


def test_deleting_a_version_stops_its_processes_and_removes_its_files(serving, census, admin, trained):
    version, _ = deploy(census, "v1", trained["sklearn"], admin)
    folder = deployer.version_dir(version)
    pids = [p.pid for p in serving.pools[version.pk].processes]
    assert folder.is_dir() and pids
    operation = services.delete_version(version, actor=admin)
    assert Operation.objects.get(pk=operation.pk).done
    assert version.pk not in serving.pools and not folder.exists()
    wait_for(
        lambda: all(not os.path.exists(f"/proc/{pid}") or _zombie(pid) for pid in pids),
        10,
        message="the serving process to exit",
    )


def _zombie(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as stat:
            return stat.read().split(")")[-1].split()[0] == "Z"
    except OSError:
        return True


def test_a_restarted_console_resumes_versions_left_creating(serving, census, admin, trained):
    version = Version.objects.create(
        model=census,
        name="v1",
        deployment_uri=trained["sklearn"],
        runtime_version="2.11",
        python_version="3.7",
        machine_type="mls1-c1-m2",
        auto_scaling={"minNodes": 0},
    )
    operation = Operation.objects.create(
        project=census.project,
        operation_id="create_census_v1-1",
        operation_type="CREATE_VERSION",
        target_version=version,
    )
    for thread in deployer.resume():
        thread.join(60)
    assert wait_version(version).state == VersionState.READY
    operation.refresh_from_db()
    assert operation.done and operation.response["name"].endswith("/versions/v1")


def test_cancelling_the_create_operation_fails_the_version(serving, census, admin, trained):
    operation = services.create_version(census, {"name": "v1", "deploymentUri": trained["sklearn"]}, actor=admin)
    Operation.objects.filter(pk=operation.pk).update(cancellation_requested=True)
    version = wait_version(Version.objects.get(name="v1"))
    operation.refresh_from_db()
    # The deployer checks between its steps: a cancel that arrives in time wins, one that arrives
    # after the model loaded leaves it READY, as the original's operations did.
    if version.state == VersionState.FAILED:
        assert operation.error == {"code": 1, "message": "Version creation was cancelled."}
    else:
        assert operation.response["state"] == "READY"


def test_a_revoked_token_and_an_outsider_cannot_predict(serving, live_server, census, admin, outsider, trained):
    deploy(census, "v1", trained["linear"], admin)
    token, raw = create_token(admin)
    url = f"{live_server.url}/v1/projects/project-a/models/census:predict"
    body = {"instances": trained["probe"]}
    assert requests.post(url, json=body, headers={"Authorization": f"Bearer {raw}"}).status_code == 200
    revoke_token(token)
    assert ApiToken.objects.get(pk=token.pk).revoked
    refused = requests.post(url, json=body, headers={"Authorization": f"Bearer {raw}"})
    assert refused.status_code == 401 and refused.json()["error"]["status"] == "UNAUTHENTICATED"
    _, other = create_token(outsider)
    assert requests.post(url, json=body, headers={"Authorization": f"Bearer {other}"}).status_code == 404
    assert requests.post(url, json=body).status_code == 401


def _logged_model(api, project, admin, trained):
    """A model with request logging on, predicted from three times, and its three log rows."""
    logged = services.create_model(project, {"name": "logged", "onlinePredictionLogging": True}, actor=admin)
    deploy(logged, "v1", trained["linear"], admin, requestLoggingConfig={"samplingPercentage": 1})
    for _ in range(3):
        assert predict(api, "logged", {"instances": trained["probe"]}).status_code == 200
    from models_registry import requestlog

    wait_for(lambda: requestlog.flush() or PredictionLog.objects.count() == 3, 10, message="three log rows")
    return logged


def test_request_logging_samples_bodies_when_the_model_enables_it(serving, api, project, admin, trained):
    _logged_model(api, project, admin, trained)
    row = PredictionLog.objects.first()
    assert row.status_code == 200 and row.instance_count == 3 and row.principal == admin.email
    assert json.loads(row.response)["predictions"] == pytest.approx(trained["expected"]["linear"])


def test_logged_prediction_bodies_are_shown_only_to_those_who_may_update_the_model(
    serving, api, project, admin, viewer, client, trained
):
    logged = _logged_model(api, project, admin, trained)
    page = "/projects/project-a/models/logged/versions/v1/"
    client.force_login(admin)
    owner_view = client.get(page).content.decode()
    assert "0.9, 0.8, 0.1, 0.2" in owner_view and "predictions" in owner_view
    client.force_login(viewer)
    viewer_view = client.get(page)
    assert viewer_view.status_code == 200 and admin.email in viewer_view.content.decode()
    assert "0.9, 0.8, 0.1, 0.2" not in viewer_view.content.decode()
    assert "predictions" not in viewer_view.content.decode()
    assert logged.online_prediction_logging


@pytest.mark.slow
def test_a_version_deploys_from_cloud_storage(serving, api, census, admin, trained, gcs_emulator):
    from pathlib import Path

    data = (Path(trained["xgboost"]) / "model.bst").read_bytes()
    gcs_emulator.upload("model-bucket", "census/xgb/model.bst", data)
    gcs_emulator.upload("model-bucket", "census/xgb/assets/notes.txt", b"kept with the model")
    version, operation = deploy(census, "v1", "gs://model-bucket/census/xgb/", admin)
    assert version.state == VersionState.READY, version.error_message
    assert (deployer.version_dir(version) / "assets" / "notes.txt").read_bytes() == b"kept with the model"
    answer = predict(api, "census", {"instances": trained["probe"]})
    assert answer.json()["predictions"] == pytest.approx(trained["expected"]["xgboost"], rel=1e-6)
    empty, _ = deploy(census, "v2", "gs://model-bucket/nothing-here/", admin)
    assert empty.state == VersionState.FAILED and "There is no model in" in empty.error_message


def test_archives_single_files_and_the_file_limit(serving, census, admin, trained, settings):
    import tarfile
    from pathlib import Path

    folder = settings.STORAGE_DIR / "packaged" / "project-a"
    folder.mkdir(parents=True, exist_ok=True)
    archive = folder / "census-model.tar.gz"
    with tarfile.open(archive, "w:gz") as tar:
        tar.add(Path(trained["sklearn"]) / "model.joblib", arcname="export/model.joblib")
    packed, _ = deploy(census, "packed", str(archive), admin)
    assert packed.state == VersionState.READY and packed.local_dir.endswith("/export")
    single, _ = deploy(census, "single", str(Path(trained["linear"]) / "model.pkl"), admin)
    assert single.state == VersionState.READY and single.model_file == "model.pkl"
    crowded = folder / "crowded"
    crowded.mkdir(exist_ok=True)
    for index in range(6):
        (crowded / f"part-{index}.txt").write_text("x")
    settings.MODEL_MAX_FILES = 5
    too_many, _ = deploy(census, "crowded", str(crowded), admin)
    assert too_many.state == VersionState.FAILED and "more than 5 files" in too_many.error_message
