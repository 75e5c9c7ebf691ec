"""The permission layer: the role table, require/scope, job ownership, and the persona matrix."""

from __future__ import annotations

import pytest

from aiconsole import iam
from aiconsole.models import RoleBinding
from aiconsole.tokens import create_token
from jobs import services
from jobs.models import Job, JobState
from tests.helpers.identity import make_user
from tests.helpers.jobs import PACKAGE, body, submit

# --- the role table, checked against the reference (api-facts §7.1) ----------------------------


def _expand(prefix: str, verbs: str) -> set[str]:
    return {f"{prefix}.{verb}" for verb in verbs.split(",")}


REFERENCE_ALL_ML = (
    _expand("ml.jobs", "cancel,create,get,getIamPolicy,list,setIamPolicy,update")
    | _expand("ml.locations", "get,list")
    | _expand("ml.models", "create,delete,get,getIamPolicy,list,predict,setIamPolicy,update")
    | _expand("ml.operations", "cancel,get,list")
    | {"ml.projects.getConfig"}
    | _expand("ml.studies", "create,delete,get,getIamPolicy,list,setIamPolicy")
    | _expand("ml.trials", "create,delete,get,list,update")
    | _expand("ml.versions", "create,delete,get,list,predict,update")
)

# The console's extension, held by roles/ml.admin only: managing members, reading the audit log,
# and the project's notification rules.
CONSOLE_EXTENSION = {
    "resourcemanager.projects.getIamPolicy",
    "resourcemanager.projects.setIamPolicy",
    "logging.privateLogEntries.list",
    "monitoring.notificationChannels.list",
    "monitoring.notificationChannels.update",
}

REFERENCE_ROLES = {
    "roles/ml.admin": REFERENCE_ALL_ML | {"resourcemanager.projects.get"} | CONSOLE_EXTENSION,
    "roles/ml.developer": (
        _expand("ml.jobs", "create,get,getIamPolicy,list")
        | _expand("ml.locations", "get,list")
        | _expand("ml.models", "create,get,getIamPolicy,list,predict")
        | _expand("ml.operations", "get,list")
        | {"ml.projects.getConfig"}
        | _expand("ml.studies", "create,delete,get,getIamPolicy,list,setIamPolicy")
        | _expand("ml.trials", "create,delete,get,list,update")
        | _expand("ml.versions", "get,list,predict")
        | {"resourcemanager.projects.get"}
    ),
    "roles/ml.viewer": (
        _expand("ml.jobs", "get,list")
        | _expand("ml.locations", "get,list")
        | _expand("ml.models", "get,list")
        | _expand("ml.operations", "get,list")
        | {"ml.projects.getConfig"}
        | _expand("ml.studies", "get,getIamPolicy,list")
        | _expand("ml.trials", "get,list")
        | _expand("ml.versions", "get,list")
        | {"resourcemanager.projects.get"}
    ),
    "roles/ml.jobOwner": _expand("ml.jobs", "cancel,create,get,getIamPolicy,list,setIamPolicy,update"),
    "roles/ml.modelOwner": (
        _expand("ml.models", "create,delete,get,getIamPolicy,list,predict,setIamPolicy,update")
        | _expand("ml.versions", "create,delete,get,list,predict,update")
    ),
    "roles/ml.modelUser": _expand("ml.models", "get,predict") | _expand("ml.versions", "get,list,predict"),
    "roles/ml.operationOwner": _expand("ml.operations", "cancel,get,list"),
}


def test_role_table_lists_exactly_the_reference_roles():
    assert set(iam.ROLES) == set(REFERENCE_ROLES)


@pytest.mark.parametrize("role", sorted(REFERENCE_ROLES))
def test_role_permissions_match_the_reference(role):
    assert set(iam.ROLES[role].permissions) == REFERENCE_ROLES[role]


def test_admin_holds_every_ml_permission():
    ml_permissions = {p for p in iam.ALL_PERMISSIONS if p.startswith("ml.")}

    assert ml_permissions == REFERENCE_ALL_ML
    assert ml_permissions <= iam.ROLES["roles/ml.admin"].permissions


def test_developer_can_create_jobs_but_not_cancel_or_update_them():
    permissions = iam.ROLES["roles/ml.developer"].permissions

    assert "ml.jobs.create" in permissions
    assert "ml.jobs.cancel" not in permissions
    assert "ml.jobs.update" not in permissions


def test_viewer_role_is_read_only():
    writes = ("create", "cancel", "update", "delete", "setIamPolicy", "predict")
    permissions = iam.ROLES["roles/ml.viewer"].permissions

    assert not [p for p in permissions if p.rsplit(".", 1)[1] in writes]


def test_job_owner_holds_only_job_permissions():
    assert all(p.startswith("ml.jobs.") for p in iam.ROLES["roles/ml.jobOwner"].permissions)


def test_model_user_can_predict_but_not_update():
    permissions = iam.ROLES["roles/ml.modelUser"].permissions

    assert {"ml.models.predict", "ml.versions.predict"} <= permissions
    assert "ml.models.update" not in permissions
    assert "ml.versions.update" not in permissions


def test_project_only_role_cannot_be_granted_on_a_job(project, admin):
    job = submit(project, "j1", admin)
    someone = make_user("sam")

    with pytest.raises(ValueError):
        iam.grant(someone, "roles/ml.developer", job)


def test_unknown_permission_is_a_programming_error(project, admin):
    with pytest.raises(ValueError):
        iam.can(admin, "ml.jobs.delete", project)


# --- require ------------------------------------------------------------------------------------


def test_require_gives_not_found_to_an_outsider(project, admin, outsider):
    job = submit(project, "j1", admin)

    with pytest.raises(iam.NotFound):
        iam.require(outsider, "ml.jobs.list", project)
    with pytest.raises(iam.NotFound):
        iam.require(outsider, "ml.jobs.get", job)


def test_require_gives_permission_denied_to_a_viewer_lacking_the_permission(project, admin, viewer):
    job = submit(project, "j1", admin)

    iam.require(viewer, "ml.jobs.get", job)
    with pytest.raises(iam.PermissionDenied) as refusal:
        iam.require(viewer, "ml.jobs.cancel", job)
    assert refusal.value.permission == "ml.jobs.cancel"
    assert refusal.value.resource_name == "projects/project-a/jobs/j1"
    with pytest.raises(iam.PermissionDenied):
        iam.require(viewer, "ml.jobs.create", project)


# --- scope and ownership ------------------------------------------------------------------------


def test_scope_returns_jobs_of_the_users_projects_and_jobs_they_own(project, other_project, admin, developer, outsider):
    a1, a2 = submit(project, "a1", admin), submit(project, "a2", admin)
    b1, b2 = submit(other_project, "b1", outsider), submit(other_project, "b2", outsider)
    iam.grant(developer, "roles/ml.jobOwner", b1)

    visible = set(iam.scope(Job.objects.all(), developer, "ml.jobs.get"))

    assert visible == {a1, a2, b1}
    assert b2 not in visible


def test_scope_by_permission_only_counts_roles_granting_it(project, admin, developer, viewer):
    submit(project, "by_admin", admin)
    own = submit(project, "by_dev", developer)

    assert list(iam.scope(Job.objects.all(), developer, "ml.jobs.cancel")) == [own]
    assert list(iam.scope(Job.objects.all(), viewer, "ml.jobs.cancel")) == []
    assert iam.scope(Job.objects.all(), viewer, "ml.jobs.get").count() == 2


def test_creator_of_a_job_is_bound_as_its_job_owner(project, developer):
    job = submit(project, "mine", developer)

    binding = RoleBinding.objects.get(user=developer, resource_type="job")
    assert (binding.role, binding.resource_id, binding.project) == ("roles/ml.jobOwner", job.pk, project)
    assert iam.can(developer, "ml.jobs.cancel", job)


def test_developer_can_cancel_the_job_they_submitted(project, developer):
    job = submit(project, "mine", developer)

    services.cancel_job(job, actor=developer)

    assert Job.objects.get(pk=job.pk).state == JobState.CANCELLED


def test_developer_cannot_cancel_another_developers_job(project, developer):
    job = submit(project, "theirs", developer)
    other_dev = make_user("dan_dev", "roles/ml.developer", project)

    with pytest.raises(iam.PermissionDenied):
        services.cancel_job(job, actor=other_dev)

    assert Job.objects.get(pk=job.pk).state == JobState.QUEUED


def test_job_level_owner_sees_only_that_job(project, admin):
    owned, _other = submit(project, "owned", admin), submit(project, "other", admin)
    contractor = make_user("carl", "roles/ml.jobOwner", owned)

    assert list(iam.scope(Job.objects.all(), contractor, "ml.jobs.get")) == [owned]
    assert iam.can(contractor, "ml.jobs.cancel", owned)
    # Job-level ownership gives no project-level rights.
    with pytest.raises(iam.PermissionDenied):
        iam.require(contractor, "ml.jobs.create", project)


def test_superuser_sees_and_may_do_everything_without_bindings(project, other_project, admin, outsider):
    a, b = submit(project, "a", admin), submit(other_project, "b", outsider)
    root = make_user("root", is_superuser=True, is_staff=True)

    assert set(iam.scope(Job.objects.all(), root, "ml.jobs.cancel")) == {a, b}
    assert set(iam.projects_for(root)) == {project, other_project}
    assert iam.can(root, "ml.jobs.cancel", b)
    iam.require(root, "ml.jobs.create", project)


@pytest.mark.parametrize("superuser", [False, True])
def test_inactive_user_sees_and_may_do_nothing(project, admin, superuser):
    job = submit(project, "a", admin)
    gone = make_user("gone", is_superuser=superuser)
    iam.grant(gone, "roles/ml.admin", project)
    gone.is_active = False
    gone.save()

    assert list(iam.scope(Job.objects.all(), gone, "ml.jobs.get")) == []
    assert list(iam.projects_for(gone)) == []
    assert not iam.can(gone, "ml.jobs.get", job)
    with pytest.raises(iam.NotFound):
        iam.require(gone, "ml.jobs.get", job)


# --- the persona matrix: persona × entry point × action -----------------------------------------

PERSONAS = ["admin", "developer", "viewer", "outsider", "job_owner"]
ACTIONS = ["list", "get", "submit", "cancel"]

# What each persona gets; HTML submit and cancel are POSTs that redirect on success.
EXPECTED = {
    ("admin", "list"): (200, 200),
    ("admin", "get"): (200, 200),
    ("admin", "submit"): (302, 200),
    ("admin", "cancel"): (302, 200),
    ("developer", "list"): (200, 200),
    ("developer", "get"): (200, 200),
    ("developer", "submit"): (302, 200),
    ("developer", "cancel"): (403, 403),
    ("viewer", "list"): (200, 200),
    ("viewer", "get"): (200, 200),
    ("viewer", "submit"): (403, 403),
    ("viewer", "cancel"): (403, 403),
    ("outsider", "list"): (404, 404),
    ("outsider", "get"): (404, 404),
    ("outsider", "submit"): (404, 404),
    ("outsider", "cancel"): (404, 404),
    ("job_owner", "list"): (200, 200),
    ("job_owner", "get"): (200, 200),
    ("job_owner", "submit"): (302, 200),
    ("job_owner", "cancel"): (302, 200),
}


@pytest.fixture
def persona_and_job(request, project, admin):
    """(user, target job): the job was submitted by the admin, or by the persona if it owns it."""
    name = request.param
    if name == "job_owner":
        user = request.getfixturevalue("developer")
        return user, submit(project, "target", user)
    user = admin if name == "admin" else request.getfixturevalue(name)
    return user, submit(project, "target", admin)


def html_call(client, action: str, job: Job):
    base = f"/projects/{job.project.project_id}/jobs/"
    if action == "list":
        return client.get(base)
    if action == "get":
        return client.get(f"{base}{job.job_id}/")
    if action == "submit":
        return client.post(
            f"{base}new/",
            {
                "job_id": "submitted",
                "package_uris": PACKAGE,
                "python_module": "trainer.task",
                "region": "us-central1",
                "runtime_version": "2.11",
                "python_version": "3.7",
                "scale_tier": "BASIC",
            },
        )
    return client.post(f"{base}{job.job_id}/cancel/")


def rest_call(client, action: str, job: Job, raw_token: str):
    auth = {"HTTP_AUTHORIZATION": f"Bearer {raw_token}"}
    base = f"/v1/projects/{job.project.project_id}/jobs"
    if action == "list":
        return client.get(base, **auth)
    if action == "get":
        return client.get(f"{base}/{job.job_id}", **auth)
    if action == "submit":
        return client.post(base, body("submitted"), content_type="application/json", **auth)
    return client.post(f"{base}/{job.job_id}:cancel", **auth)


def _check_side_effects(action: str, status: int, job: Job) -> None:
    succeeded = status in (200, 302)
    if action == "submit":
        assert Job.objects.filter(job_id="submitted").exists() == succeeded
    if action == "cancel":
        expected = JobState.CANCELLED if succeeded else JobState.QUEUED
        assert Job.objects.get(pk=job.pk).state == expected


@pytest.mark.parametrize("action", ACTIONS)
@pytest.mark.parametrize("persona_and_job", PERSONAS, indirect=True)
def test_html_permission_matrix(client, persona_and_job, action, request):
    user, job = persona_and_job
    persona = request.node.callspec.params["persona_and_job"]
    client.force_login(user)

    response = html_call(client, action, job)

    assert response.status_code == EXPECTED[(persona, action)][0]
    _check_side_effects(action, response.status_code, job)
    if response.status_code == 302:
        assert response["Location"].startswith(
            f"/projects/project-a/jobs/{'submitted' if action == 'submit' else 'target'}/"
        )


@pytest.mark.parametrize("action", ACTIONS)
@pytest.mark.parametrize("persona_and_job", PERSONAS, indirect=True)
def test_rest_permission_matrix(client, persona_and_job, action, request):
    user, job = persona_and_job
    persona = request.node.callspec.params["persona_and_job"]
    _, raw = create_token(user)

    response = rest_call(client, action, job, raw)

    expected = EXPECTED[(persona, action)][1]
    assert response.status_code == expected, response.content
    _check_side_effects(action, response.status_code, job)
    if expected == 403:
        assert response.json()["error"]["status"] == "PERMISSION_DENIED"
    if expected == 404:
        assert response.json()["error"]["status"] == "NOT_FOUND"


def test_outsider_gets_404_for_job_page_of_a_job_that_does_not_exist_either(client, project, outsider):
    client.force_login(outsider)

    assert client.get("/projects/project-a/jobs/nope/").status_code == 404
    assert client.get("/projects/no-such-project/jobs/").status_code == 404


# --- the matrix, continued: policies, members, sharing, the audit log, the live-log socket ------

# (HTML, REST) per persona; None where the action has no such entry point. "newbie" exists but has
# no role: the actions that change something try to give them one.
TEAM_ACTIONS = ["members", "add_member", "audit_log", "job_policy", "set_job_policy", "test_job_permissions"]
TEAM_EXPECTED = {
    "admin": {
        "members": (200, 200),
        "add_member": (302, 200),
        "audit_log": (200, None),
        "job_policy": (200, 200),
        "set_job_policy": (302, 200),
        "test_job_permissions": (None, 200),
    },
    "developer": {
        "members": (403, 403),
        "add_member": (403, 403),
        "audit_log": (403, None),
        "job_policy": (200, 200),
        "set_job_policy": (403, 403),
        "test_job_permissions": (None, 200),
    },
    "viewer": {
        "members": (403, 403),
        "add_member": (403, 403),
        "audit_log": (403, None),
        "job_policy": (403, 403),
        "set_job_policy": (403, 403),
        "test_job_permissions": (None, 200),
    },
    "outsider": {
        "members": (404, 404),
        "add_member": (404, 404),
        "audit_log": (404, None),
        "job_policy": (404, 404),
        "set_job_policy": (404, 404),
        "test_job_permissions": (None, 200),
    },
    "job_owner": {
        "members": (403, 403),
        "add_member": (403, 403),
        "audit_log": (403, None),
        "job_policy": (200, 200),
        "set_job_policy": (302, 200),
        "test_job_permissions": (None, 200),
    },
}
# Over REST, "members" and "add_member" are the project's getIamPolicy and setIamPolicy.
TEAM_HTML_CASES = [(p, a) for p in PERSONAS for a in TEAM_ACTIONS if TEAM_EXPECTED[p][a][0] is not None]
TEAM_REST_CASES = [(p, a) for p in PERSONAS for a in TEAM_ACTIONS if TEAM_EXPECTED[p][a][1] is not None]


@pytest.fixture
def newbie(db):
    return make_user("newbie")


def team_html_call(client, action: str, job: Job):
    project, job_page = "/projects/project-a/", f"/projects/project-a/jobs/{job.job_id}/"
    return {
        "members": lambda: client.get(project + "members/"),
        "add_member": lambda: client.post(project + "members/add/", {"member": "newbie", "role": "roles/ml.viewer"}),
        "audit_log": lambda: client.get(project + "audit/"),
        "job_policy": lambda: client.get(job_page + "sharing/"),
        "set_job_policy": lambda: client.post(
            job_page + "sharing/add/", {"member": "newbie", "role": "roles/ml.jobOwner"}
        ),
    }[action]()


def team_rest_call(client, action: str, job: Job, user, raw_token: str):
    auth = {"HTTP_AUTHORIZATION": f"Bearer {raw_token}"}
    project, job_path = "/v1/projects/project-a", f"/v1/projects/project-a/jobs/{job.job_id}"
    keep_admin = {"role": "roles/ml.admin", "members": ["user:alice_admin"]}

    def post(path, payload):
        return client.post(path, payload, content_type="application/json", **auth)

    return {
        "members": lambda: client.get(project + ":getIamPolicy", **auth),
        "add_member": lambda: post(
            project + ":setIamPolicy",
            {"policy": {"bindings": [keep_admin, {"role": "roles/ml.viewer", "members": ["user:newbie"]}]}},
        ),
        "job_policy": lambda: client.get(job_path + ":getIamPolicy", **auth),
        "set_job_policy": lambda: post(
            job_path + ":setIamPolicy",
            {
                "policy": {
                    "bindings": [
                        {"role": "roles/ml.jobOwner", "members": [f"user:{user.get_username()}", "user:newbie"]}
                    ]
                }
            },
        ),
        "test_job_permissions": lambda: post(job_path + ":testIamPermissions", {"permissions": ["ml.jobs.get"]}),
    }[action]()


def _check_team_side_effects(action: str, status: int, job: Job, newbie) -> None:
    succeeded = status in (200, 302)
    if action == "add_member":
        assert iam.can_see_project(newbie, job.project) == succeeded
    if action == "set_job_policy":
        assert iam.can(newbie, "ml.jobs.cancel", job) == succeeded


@pytest.mark.parametrize("persona_and_job, action", TEAM_HTML_CASES, indirect=["persona_and_job"])
def test_html_team_permission_matrix(client, persona_and_job, action, request, newbie):
    user, job = persona_and_job
    persona = request.node.callspec.params["persona_and_job"]
    client.force_login(user)

    response = team_html_call(client, action, job)

    assert response.status_code == TEAM_EXPECTED[persona][action][0]
    _check_team_side_effects(action, response.status_code, job, newbie)


@pytest.mark.parametrize("persona_and_job, action", TEAM_REST_CASES, indirect=["persona_and_job"])
def test_rest_team_permission_matrix(client, persona_and_job, action, request, newbie):
    user, job = persona_and_job
    persona = request.node.callspec.params["persona_and_job"]
    _, raw = create_token(user)

    response = team_rest_call(client, action, job, user, raw)

    expected = TEAM_EXPECTED[persona][action][1]
    assert response.status_code == expected, response.content
    _check_team_side_effects(action, response.status_code, job, newbie)
    if expected == 403:
        assert response.json()["error"]["status"] == "PERMISSION_DENIED"
    if expected == 404:
        assert response.json()["error"]["status"] == "NOT_FOUND"


# The live-log WebSocket checks ml.jobs.get when it opens: accepted (200), or closed with 4403/4404.
WS_EXPECTED = {"admin": 200, "developer": 200, "viewer": 200, "outsider": 404, "job_owner": 200}


async def _open_log_socket(user, job) -> int:
    from channels.db import database_sync_to_async
    from channels.testing import WebsocketCommunicator
    from django.test import Client

    from console.asgi import application

    def cookie():
        browser = Client()
        browser.force_login(user)
        return browser.cookies["sessionid"].value

    session = await database_sync_to_async(cookie)()
    socket = WebsocketCommunicator(
        application,
        f"/ws/projects/project-a/jobs/{job.job_id}/logs/",
        headers=[
            (b"host", b"testserver"),
            (b"origin", b"http://testserver"),
            (b"cookie", f"sessionid={session}".encode()),
        ],
    )
    try:
        connected, _ = await socket.connect(timeout=10)
        if not connected:
            return 403
        message = await socket.receive_output(timeout=10)
        if message["type"] == "websocket.close":
            return {4403: 403, 4404: 404}.get(message["code"], message["code"])
        return 200
    finally:
        await socket.disconnect()


@pytest.mark.asyncio
@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize("persona_and_job", PERSONAS, indirect=True)
async def test_websocket_permission_matrix(persona_and_job, request):
    user, job = persona_and_job

    assert await _open_log_socket(user, job) == WS_EXPECTED[request.node.callspec.params["persona_and_job"]]


@pytest.mark.asyncio
@pytest.mark.django_db(transaction=True)
async def test_websocket_refuses_someone_who_sees_the_project_but_not_its_jobs(project, admin):
    from channels.db import database_sync_to_async

    job = await database_sync_to_async(submit)(project, "target", admin)
    # roles/ml.modelUser bound on the project: a member, without ml.jobs.get.
    model_user = await database_sync_to_async(make_user)("mo_model", "roles/ml.modelUser", project)

    assert await _open_log_socket(model_user, job) == 403
