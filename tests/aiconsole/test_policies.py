"""IAM policies over REST: getIamPolicy, setIamPolicy, testIamPermissions on jobs and projects."""

from __future__ import annotations

import pytest
from google.oauth2.credentials import Credentials
from googleapiclient import discovery
from googleapiclient.errors import HttpError

from aiconsole import iam, policies
from aiconsole.models import AuditEntry, RoleBinding
from aiconsole.tokens import create_token
from jobs import services
from jobs.models import Job, JobState
from tests.helpers.identity import bearer, entries, make_user
from tests.helpers.jobs import submit

JOB = "/v1/projects/project-a/jobs/shared_job"
PROJECT = "/v1/projects/project-a"
GET = policies.GET_IAM_POLICY
SET = policies.SET_IAM_POLICY
TEST = policies.TEST_IAM_PERMISSIONS


def get_policy(client, user, path=JOB, query=""):
    return client.get(f"{path}:getIamPolicy{query}", **bearer(user))


def set_policy(client, user, policy, path=JOB, **extra):
    return client.post(
        f"{path}:setIamPolicy", {"policy": policy, **extra}, content_type="application/json", **bearer(user)
    )


def owners(*names):
    return [{"role": "roles/ml.jobOwner", "members": [f"user:{n}" for n in names]}]


def violation(response) -> tuple[str, str]:
    error = response.json()["error"]
    field = error["details"][0]["fieldViolations"][0]
    return field["field"], field["description"]


# --- getIamPolicy --------------------------------------------------------------------------------


def test_job_policy_holds_the_creators_owner_binding(client, job, admin):
    response = get_policy(client, admin)

    assert response.status_code == 200
    policy = response.json()
    assert policy["version"] == 1
    assert policy["bindings"] == owners("alice_admin")
    assert isinstance(policy["etag"], str) and len(policy["etag"]) == 12  # base64 of 8 bytes


def test_job_policy_does_not_repeat_project_bindings(client, job, admin, developer):
    # The developer's project role applies to the job, but belongs to the project's policy.
    assert "user:dave_dev" not in str(get_policy(client, admin).json())


def test_job_without_bindings_has_an_empty_policy(client, job, admin):
    assert set_policy(client, admin, {"bindings": []}).status_code == 200

    assert get_policy(client, admin).json() == {}


@pytest.mark.parametrize("version", ["0", "1", "3"])
def test_valid_requested_policy_versions_are_accepted(client, job, admin, version):
    response = get_policy(client, admin, query=f"?options.requestedPolicyVersion={version}")

    assert response.status_code == 200
    assert response.json()["version"] == 1


def test_unknown_requested_policy_version_is_refused(client, job, admin):
    response = get_policy(client, admin, query="?options.requestedPolicyVersion=2")

    assert response.status_code == 400
    assert violation(response)[0] == "options.requested_policy_version"


def test_developer_may_read_but_not_change_a_job_policy(client, job, developer):
    assert get_policy(client, developer).status_code == 200

    response = set_policy(client, developer, {"bindings": owners("dave_dev")})

    assert response.status_code == 403
    assert response.json()["error"]["status"] == "PERMISSION_DENIED"
    assert not RoleBinding.objects.filter(user=developer, resource_type="job").exists()


def test_viewer_cannot_read_a_job_policy(client, job, viewer):
    response = get_policy(client, viewer)

    assert response.status_code == 403
    assert "ml.jobs.getIamPolicy" in response.json()["error"]["message"]


def test_outsider_gets_404_for_a_job_policy(client, job, outsider):
    assert get_policy(client, outsider).json()["error"]["status"] == "NOT_FOUND"
    assert set_policy(client, outsider, {"bindings": owners("olga_outsider")}).status_code == 404


def test_missing_job_policy_is_404(client, project, admin):
    assert get_policy(client, admin, path="/v1/projects/project-a/jobs/nope").status_code == 404


# --- setIamPolicy --------------------------------------------------------------------------------


def test_set_policy_replaces_the_bindings_and_grants_for_real(client, job, admin, viewer):
    etag = get_policy(client, admin).json()["etag"]

    response = set_policy(client, admin, {"bindings": owners("vera_viewer"), "etag": etag}, updateMask="bindings,etag")

    assert response.status_code == 200
    assert response.json()["bindings"] == owners("vera_viewer")
    assert response.json()["etag"] != etag
    assert iam.can(viewer, "ml.jobs.cancel", job)
    assert list(RoleBinding.objects.filter(resource_type="job").values_list("user__username", flat=True)) == [
        "vera_viewer"
    ]
    client.post(f"{JOB}:cancel", **bearer(viewer))
    assert Job.objects.get(pk=job.pk).state == JobState.CANCELLED


def test_members_may_be_named_by_email(client, job, admin, viewer):
    response = set_policy(
        client,
        admin,
        {"bindings": [{"role": "roles/ml.jobOwner", "members": ["user:Vera_Viewer@Example.com", "user:alice_admin"]}]},
    )

    assert response.status_code == 200
    assert response.json()["bindings"] == owners("alice_admin", "vera_viewer")


def test_stale_etag_is_aborted_and_changes_nothing(client, job, admin, viewer):
    stale = get_policy(client, admin).json()["etag"]
    set_policy(client, admin, {"bindings": owners("alice_admin", "vera_viewer")})

    response = set_policy(client, admin, {"bindings": owners("alice_admin"), "etag": stale})

    assert response.status_code == 409
    assert response.json()["error"]["status"] == "ABORTED"
    assert "concurrent policy changes" in response.json()["error"]["message"]
    assert get_policy(client, admin).json()["bindings"] == owners("alice_admin", "vera_viewer")


def test_etag_outside_the_update_mask_is_not_checked(client, job, admin, viewer):
    response = set_policy(
        client, admin, {"bindings": owners("vera_viewer"), "etag": "AAAAAAAAAAA="}, updateMask="bindings"
    )

    assert response.status_code == 200


def test_update_mask_without_bindings_leaves_them(client, job, admin):
    response = set_policy(client, admin, {"bindings": []}, updateMask="etag")

    assert response.json()["bindings"] == owners("alice_admin")


def test_unknown_update_mask_field_is_refused(client, job, admin):
    response = set_policy(client, admin, {"bindings": []}, updateMask="bindings,owners")

    assert response.status_code == 400
    assert violation(response)[0] == "update_mask"


@pytest.mark.parametrize(
    "role, reason",
    [
        ("roles/ml.superuser", "Role roles/ml.superuser is not supported."),
        ("roles/ml.admin", "Role roles/ml.admin is not supported for this resource"),
        ("roles/ml.modelOwner", "a job can be granted roles/ml.jobOwner"),
    ],
)
def test_unknown_or_ungrantable_role_is_refused_naming_the_binding(client, job, admin, role, reason):
    response = set_policy(client, admin, {"bindings": [{"role": role, "members": ["user:alice_admin"]}]})

    assert response.status_code == 400
    assert response.json()["error"]["status"] == "INVALID_ARGUMENT"
    field, description = violation(response)
    assert field == "policy.bindings[0].role"
    assert reason in description
    assert get_policy(client, admin).json()["bindings"] == owners("alice_admin")


@pytest.mark.parametrize(
    "member, reason",
    [
        ("alice_admin", "Invalid member 'alice_admin'"),
        ("group:ml-team@example.com", "group members are not supported"),
        ("user:", "Invalid member"),
        ("user:nobody", "User 'nobody' does not exist."),
        ("user:nobody@example.com", "does not exist"),
    ],
)
def test_malformed_or_unknown_member_is_refused_naming_it(client, job, admin, member, reason):
    response = set_policy(
        client, admin, {"bindings": [{"role": "roles/ml.jobOwner", "members": ["user:alice_admin", member]}]}
    )

    assert response.status_code == 400
    field, description = violation(response)
    assert field == "policy.bindings[0].members[1]"
    assert reason in description


def test_conditional_bindings_are_refused(client, job, admin):
    response = set_policy(
        client,
        admin,
        {
            "bindings": [
                {"role": "roles/ml.jobOwner", "members": ["user:alice_admin"], "condition": {"expression": "true"}}
            ]
        },
    )

    assert response.status_code == 400
    assert violation(response)[0] == "policy.bindings[0].condition"


def test_set_policy_without_a_policy_is_refused(client, job, admin):
    response = client.post(f"{JOB}:setIamPolicy", {}, content_type="application/json", **bearer(admin))

    assert response.status_code == 400
    assert violation(response)[0] == "policy"


# --- testIamPermissions --------------------------------------------------------------------------


def ask_permissions(client, user, permissions, path=JOB):
    return client.post(
        f"{path}:testIamPermissions", {"permissions": permissions}, content_type="application/json", **bearer(user)
    )


ASKED = ["ml.jobs.get", "ml.jobs.cancel", "ml.jobs.setIamPolicy"]


@pytest.mark.parametrize(
    "persona, held",
    [
        ("admin", ASKED),
        ("developer", ["ml.jobs.get"]),
        ("viewer", ["ml.jobs.get"]),
        ("outsider", []),
    ],
)
def test_test_iam_permissions_returns_the_subset_held(client, job, request, persona, held):
    user = request.getfixturevalue(persona)

    response = ask_permissions(client, user, ASKED)

    assert response.status_code == 200
    assert response.json() == ({"permissions": held} if held else {})


def test_job_owner_holds_cancel_on_their_own_job(client, project, developer):
    submit(project, "mine", developer)

    response = ask_permissions(client, developer, ASKED, path="/v1/projects/project-a/jobs/mine")

    assert response.json() == {"permissions": ASKED}


def test_test_iam_permissions_on_a_missing_job_is_an_empty_set(client, project, admin):
    response = ask_permissions(client, admin, ASKED, path="/v1/projects/project-a/jobs/nope")
    assert (response.status_code, response.json()) == (200, {})

    response = ask_permissions(client, admin, ASKED, path="/v1/projects/no-such-project/jobs/nope")
    assert (response.status_code, response.json()) == (200, {})


def test_test_iam_permissions_refuses_permissions_of_another_resource_type(client, job, admin):
    response = ask_permissions(client, admin, ["ml.jobs.get", "ml.models.get"])

    assert response.status_code == 400
    assert violation(response) == ("permissions[1]", "Permission ml.models.get is not valid for this resource.")


# --- audit entries -------------------------------------------------------------------------------


def test_get_iam_policy_is_a_data_access_entry_when_enabled(client, project, job, admin):
    get_policy(client, admin)
    assert entries(GET) == []

    project.data_access_logs = True
    project.save()
    get_policy(client, admin)

    (entry,) = entries(GET)
    assert entry.log_type == AuditEntry.LogType.DATA_ACCESS
    assert (entry.resource_name, entry.permission, entry.granted) == (
        "projects/project-a/jobs/shared_job",
        "ml.jobs.getIamPolicy",
        True,
    )
    assert entry.response["bindings"] == owners("alice_admin")


def test_set_iam_policy_is_an_admin_activity_entry_with_the_deltas(client, job, admin, viewer):
    response = set_policy(client, admin, {"bindings": owners("vera_viewer")})

    (entry,) = entries(SET)
    assert entry.log_type == AuditEntry.LogType.ADMIN_ACTIVITY
    assert (entry.resource_name, entry.permission, entry.granted) == (
        "projects/project-a/jobs/shared_job",
        "ml.jobs.setIamPolicy",
        True,
    )
    assert entry.request["policy"] == {"bindings": owners("vera_viewer")}
    assert entry.response == response.json()
    assert entry.service_data["policyDelta"]["bindingDeltas"] == [
        {"action": "REMOVE", "role": "roles/ml.jobOwner", "member": "user:alice_admin"},
        {"action": "ADD", "role": "roles/ml.jobOwner", "member": "user:vera_viewer"},
    ]


def test_denied_set_iam_policy_is_recorded(client, job, developer):
    set_policy(client, developer, {"bindings": owners("dave_dev")})

    (entry,) = entries(SET)
    assert (entry.granted, entry.principal, entry.permission) == (False, "dave_dev@example.com", "ml.jobs.setIamPolicy")
    assert entry.request["policy"] == {"bindings": owners("dave_dev")}


def test_rejected_policy_changes_nothing_and_writes_no_granted_entry(client, job, admin):
    set_policy(client, admin, {"bindings": owners("nobody")})

    assert not AuditEntry.objects.filter(method_name=SET, granted=True).exists()


def test_test_iam_permissions_is_a_data_access_entry(client, project, job, admin):
    project.data_access_logs = True
    project.save()

    ask_permissions(client, admin, ["ml.jobs.cancel"])

    (entry,) = entries(TEST)
    assert entry.log_type == AuditEntry.LogType.DATA_ACCESS
    assert entry.response == {"permissions": ["ml.jobs.cancel"]}


# --- the project policy (our extension) ----------------------------------------------------------


def project_bindings(client, admin) -> dict:
    return {b["role"]: b["members"] for b in get_policy(client, admin, path=PROJECT).json()["bindings"]}


def test_project_policy_lists_the_project_roles(client, admin, developer, viewer):
    assert project_bindings(client, admin) == {
        "roles/ml.admin": ["user:alice_admin"],
        "roles/ml.developer": ["user:dave_dev"],
        "roles/ml.viewer": ["user:vera_viewer"],
    }


def test_project_policy_is_for_admins_only(client, admin, developer, outsider):
    assert get_policy(client, developer, path=PROJECT).status_code == 403
    assert get_policy(client, outsider, path=PROJECT).status_code == 404
    assert set_policy(client, developer, {"bindings": []}, path=PROJECT).status_code == 403


def test_read_modify_write_adds_a_member(client, admin, outsider):
    policy = get_policy(client, admin, path=PROJECT).json()
    policy["bindings"].append({"role": "roles/ml.viewer", "members": ["user:olga_outsider"]})

    response = set_policy(client, admin, policy, path=PROJECT)

    assert response.status_code == 200
    assert iam.can_see_project(outsider, RoleBinding.objects.get(user=outsider, role="roles/ml.viewer").project)


def test_removing_the_last_admin_is_refused(client, admin, developer):
    response = set_policy(
        client,
        admin,
        {"bindings": [{"role": "roles/ml.developer", "members": ["user:alice_admin", "user:dave_dev"]}]},
        path=PROJECT,
    )

    assert response.status_code == 400
    assert response.json()["error"]["status"] == "FAILED_PRECONDITION"
    assert "at least one admin" in response.json()["error"]["message"]
    assert project_bindings(client, admin)["roles/ml.admin"] == ["user:alice_admin"]


def test_a_job_role_may_be_granted_project_wide(client, admin, developer):
    response = set_policy(
        client,
        admin,
        {
            "bindings": [
                {"role": "roles/ml.admin", "members": ["user:alice_admin"]},
                {"role": "roles/ml.jobOwner", "members": ["user:dave_dev"]},
            ]
        },
        path=PROJECT,
    )

    assert response.status_code == 200
    assert set(project_bindings(client, admin)) == {"roles/ml.admin", "roles/ml.jobOwner"}


def test_audit_configs_switch_data_access_logs(client, project, admin):
    policy = get_policy(client, admin, path=PROJECT).json()
    assert "auditConfigs" not in policy
    policy["auditConfigs"] = [{"service": "allServices", "auditLogConfigs": [{"logType": "ADMIN_READ"}]}]

    response = set_policy(client, admin, policy, path=PROJECT, updateMask="bindings,etag,auditConfigs")

    assert response.status_code == 200
    assert response.json()["auditConfigs"] == [
        {"service": "ml.googleapis.com", "auditLogConfigs": [{"logType": "ADMIN_READ"}]}
    ]
    project.refresh_from_db()
    assert project.data_access_logs is True
    (entry,) = entries(SET, granted=True)
    assert entry.service_data["policyDelta"]["auditConfigDeltas"] == [
        {"action": "ADD", "service": "ml.googleapis.com", "logType": "ADMIN_READ"}
    ]
    assert entry.service_name == "cloudresourcemanager.googleapis.com"

    get_policy(client, admin, path=PROJECT)
    assert entries(GET)[0].log_type == AuditEntry.LogType.DATA_ACCESS


def test_audit_configs_outside_the_mask_are_left_alone(client, project, admin):
    project.data_access_logs = True
    project.save()
    policy = get_policy(client, admin, path=PROJECT).json()
    del policy["auditConfigs"]

    set_policy(client, admin, policy, path=PROJECT)

    project.refresh_from_db()
    assert project.data_access_logs is True


def test_audit_configs_can_turn_data_access_off(client, project, admin):
    project.data_access_logs = True
    project.save()
    policy = get_policy(client, admin, path=PROJECT).json()
    policy["auditConfigs"] = []

    set_policy(client, admin, policy, path=PROJECT, updateMask="auditConfigs")

    project.refresh_from_db()
    assert project.data_access_logs is False


@pytest.mark.parametrize(
    "config, field",
    [
        (
            {"service": "storage.googleapis.com", "auditLogConfigs": [{"logType": "ADMIN_READ"}]},
            "policy.audit_configs[0].service",
        ),
        (
            {"service": "ml.googleapis.com", "auditLogConfigs": [{"logType": "EVERYTHING"}]},
            "policy.audit_configs[0].audit_log_configs[0].log_type",
        ),
        (
            {
                "service": "ml.googleapis.com",
                "auditLogConfigs": [{"logType": "ADMIN_READ", "exemptedMembers": ["user:alice_admin"]}],
            },
            "policy.audit_configs[0].audit_log_configs[0].exempted_members",
        ),
    ],
)
def test_bad_audit_configs_are_refused(client, project, admin, config, field):
    response = set_policy(
        client,
        admin,
        {"bindings": [{"role": "roles/ml.admin", "members": ["user:alice_admin"]}], "auditConfigs": [config]},
        path=PROJECT,
        updateMask="auditConfigs",
    )

    assert response.status_code == 400
    assert violation(response)[0] == field


def test_project_test_iam_permissions(client, project, developer):
    response = ask_permissions(
        client, developer, ["ml.jobs.create", "resourcemanager.projects.setIamPolicy"], path=PROJECT
    )

    assert response.json() == {"permissions": ["ml.jobs.create"]}


# --- services used by the pages and the CLI ------------------------------------------------------


def test_add_member_by_email_and_remove_binding(project, admin, outsider):
    policies.add_member(project, "olga_outsider@example.com", "roles/ml.viewer", actor=admin)
    assert iam.can(outsider, "ml.jobs.list", project)

    policies.remove_binding(project, "user:olga_outsider", "roles/ml.viewer", actor=admin)
    assert not iam.can_see_project(outsider, project)


def test_remove_binding_the_member_does_not_hold_is_refused(project, admin, viewer):
    with pytest.raises(policies.InvalidArgument, match="does not hold roles/ml.admin"):
        policies.remove_binding(project, "vera_viewer", "roles/ml.admin", actor=admin)


def test_system_principal_may_change_any_policy(project, admin, viewer):
    policies.change_member_role(project, viewer, "roles/ml.developer", actor=iam.SYSTEM)

    assert iam.roles_of(viewer, project) == {"roles/ml.developer"}
    assert entries(SET)[0].principal == "system"


def test_platform_admin_without_a_binding_does_not_count_as_the_last_admin(project, admin):
    root = make_user("root", is_superuser=True)

    with pytest.raises(policies.FailedPrecondition):
        policies.remove_member(project, admin, actor=root)


def test_inactive_admins_do_not_keep_a_project_administered(project, admin):
    ghost = make_user("ghost", "roles/ml.admin", project)
    ghost.is_active = False
    ghost.save()

    with pytest.raises(policies.FailedPrecondition):
        policies.remove_member(project, admin, actor=admin)


def test_creator_can_hand_a_job_over(project, developer, viewer):
    job = submit(project, "handover", developer)

    policies.set_policy(job, {"bindings": owners("vera_viewer")}, actor=developer)

    assert not iam.can(developer, "ml.jobs.cancel", job)
    services.cancel_job(job, actor=viewer)


# --- the official Google API client ----------------------------------------------------------------


@pytest.fixture
def ml(live_server, admin):
    _, raw = create_token(admin)
    return discovery.build(
        "ml",
        "v1",
        credentials=Credentials(token=raw),
        cache_discovery=False,
        client_options={"api_endpoint": live_server.url},
    )


def test_google_client_reads_and_changes_a_job_policy(ml, project, admin, viewer):
    submit(project, "via_client", admin)
    name = "projects/project-a/jobs/via_client"
    jobs = ml.projects().jobs()

    policy = jobs.getIamPolicy(resource=name, options_requestedPolicyVersion=3).execute()
    policy["bindings"][0]["members"].append("user:vera_viewer")
    updated = jobs.setIamPolicy(resource=name, body={"policy": policy, "updateMask": "bindings,etag"}).execute()
    held = jobs.testIamPermissions(resource=name, body={"permissions": ["ml.jobs.cancel"]}).execute()

    assert updated["bindings"] == owners("alice_admin", "vera_viewer")
    assert held == {"permissions": ["ml.jobs.cancel"]}
    with pytest.raises(HttpError) as stale:
        jobs.setIamPolicy(resource=name, body={"policy": policy}).execute()
    assert stale.value.resp.status == 409
