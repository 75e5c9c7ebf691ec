"""Server-side admin commands: projects, bindings, users, ``audit verify`` and ``audit purge``.

Most run in this process against the test database (as ``aiconsole …`` would against the data
dir); one runs the real ``aiconsole`` executable on a fresh data dir, end to end.
"""

from __future__ import annotations

import io
import os
import subprocess
import sys
from datetime import timedelta
from pathlib import Path
from unittest.mock import patch

import pytest
import yaml
from django.contrib.auth import get_user_model
from django.utils import timezone

from aiconsole import audit, iam
from aiconsole.models import AuditEntry, Project
from console.cli import main
from tests.helpers.identity import tamper
from tests.helpers.jobs import submit

AICONSOLE = str(Path(sys.executable).with_name("aiconsole"))


@pytest.fixture
def run(capsys, db):
    """``run("projects", "create", …)`` → (exit status, stdout, stderr)."""

    def call(*argv: str, stdin: str | None = None):
        with patch("sys.stdin", io.StringIO(stdin or "")):
            status = main(list(argv))
        captured = capsys.readouterr()
        return status, captured.out, captured.err

    return call


def test_projects_create(run):
    status, out, _ = run("projects", "create", "census-team", "--display-name", "Census team")

    assert status == 0
    assert "Created project [census-team]" in out
    project = Project.objects.get(project_id="census-team")
    assert project.display_name == "Census team"
    entry = AuditEntry.objects.get(method_name="google.cloudresourcemanager.v1.Projects.CreateProject")
    assert (entry.principal, entry.user_agent, entry.project_id) == ("system", "aiconsole-cli", "census-team")


@pytest.mark.parametrize(
    "project_id, message", [("Bad_Id", "Project id must be 6 to 30 characters"), ("project-a", "already exists")]
)
def test_projects_create_refuses_bad_or_taken_ids(run, project, project_id, message):
    status, _, err = run("projects", "create", project_id)

    assert status == 1
    assert message in err


def test_add_and_remove_iam_policy_binding(run, project, admin, outsider):
    status, out, _ = run(
        "projects", "add-iam-policy-binding", "project-a", "--member=user:olga_outsider", "--role=roles/ml.viewer"
    )

    assert status == 0
    assert out.startswith("Updated IAM policy for project [project-a].")
    policy = yaml.safe_load(out.split("\n", 1)[1])
    assert {"role": "roles/ml.viewer", "members": ["user:olga_outsider"]} in policy["bindings"]
    assert iam.roles_of(outsider, project) == {"roles/ml.viewer"}
    entry = AuditEntry.objects.get(method_name="google.iam.v1.IAMPolicy.SetIamPolicy")
    assert (entry.principal, entry.user_agent) == ("system", "aiconsole-cli")

    status, _, _ = run(
        "projects", "remove-iam-policy-binding", "project-a", "--member=user:olga_outsider", "--role=roles/ml.viewer"
    )
    assert status == 0
    assert not iam.can_see_project(outsider, project)


@pytest.mark.parametrize(
    "argv, message",
    [
        (["--member=user:nobody", "--role=roles/ml.viewer"], "User 'nobody' does not exist."),
        (["--member=group:team@example.com", "--role=roles/ml.viewer"], "group members are not supported"),
        (["--member=user:alice_admin", "--role=roles/ml.jobOwnr"], "cannot be granted on a project"),
    ],
)
def test_add_binding_refuses_bad_input(run, project, admin, argv, message):
    status, _, err = run("projects", "add-iam-policy-binding", "project-a", *argv)

    assert status == 1
    assert message in err


def test_add_binding_to_a_missing_project(run, admin):
    assert (
        run("projects", "add-iam-policy-binding", "nope-nope", "--member=user:alice_admin", "--role=roles/ml.admin")[2]
        == "ERROR: Project [nope-nope] not found.\n"
    )


def test_removing_the_last_admin_is_refused(run, project, admin):
    status, _, err = run(
        "projects", "remove-iam-policy-binding", "project-a", "--member=user:alice_admin", "--role=roles/ml.admin"
    )

    assert status == 1
    assert "must keep at least one admin" in err
    assert iam.roles_of(admin, project) == {"roles/ml.admin"}


def test_removing_a_binding_that_does_not_exist(run, project, admin):
    status, _, err = run(
        "projects", "remove-iam-policy-binding", "project-a", "--member=user:alice_admin", "--role=roles/ml.viewer"
    )

    assert status == 1
    assert "does not hold roles/ml.viewer" in err


def test_users_create_prints_a_generated_password_once(run):
    status, out, _ = run("users", "create", "nina", "--email", "nina@example.com")

    assert status == 0
    password = out.split("Password: ")[1].split("\n")[0]
    user = get_user_model().objects.get(username="nina")
    assert user.email == "nina@example.com"
    assert user.check_password(password)
    assert password not in str(AuditEntry.objects.get(method_name="aiconsole.UserService.CreateUser").request)


def test_users_create_with_password_from_stdin(run):
    status, out, _ = run("users", "create", "omar", "--password-stdin", stdin="correct horse battery staple\n")

    assert status == 0
    assert "Password" not in out
    assert get_user_model().objects.get(username="omar").check_password("correct horse battery staple")


@pytest.mark.parametrize(
    "argv, stdin, message",
    [
        (["nina"], "123\n", "This password is too short"),
        (["bad name!"], "correct horse battery staple\n", "Enter a valid username"),
    ],
)
def test_users_create_refuses_weak_passwords_and_bad_names(run, argv, stdin, message):
    status, _, err = run("users", "create", *argv, "--password-stdin", stdin=stdin)

    assert status == 1
    assert message in err


def test_users_create_refuses_a_taken_name(run, admin):
    assert "already exists" in run("users", "create", "alice_admin")[2]


def test_audit_verify_reports_an_intact_log(run, project, admin):
    submit(project, "one", admin)

    status, out, _ = run("audit", "verify")

    assert status == 0
    assert "Audit log intact: 1 Admin Activity and 0 Data Access entries verified." in out


@pytest.mark.parametrize(
    "statement, expected",
    [
        (
            "UPDATE aiconsole_auditentry SET principal = 'mallory@example.com' WHERE seq = 2",
            "#{second} (position 2) was altered",
        ),
        ("DELETE FROM aiconsole_auditentry WHERE seq = 2", "position 2 were removed, just before entry #{third}"),
    ],
)
def test_audit_verify_names_the_first_broken_entry(run, project, admin, statement, expected):
    jobs = [submit(project, name, admin) for name in ("one", "two", "three")]
    ids = list(AuditEntry.objects.filter(log_type="activity").order_by("seq").values_list("pk", flat=True))
    tamper(statement)

    status, _, err = run("audit", "verify")

    assert len(jobs) == 3
    assert status == 1
    assert err.startswith("TAMPERED: Admin Activity log: ")
    assert expected.format(second=ids[1], third=ids[2]) in err


def test_audit_verify_catches_an_inserted_entry(run, project, admin):
    submit(project, "one", admin)
    last = AuditEntry.objects.get()
    forged = AuditEntry(
        timestamp=timezone.now(),
        log_type="activity",
        seq=2,
        project_id="project-a",
        principal="alice_admin@example.com",
        method_name=last.method_name,
        resource_name=last.resource_name,
        permission="ml.jobs.create",
        granted=True,
        prev_hash=last.entry_hash,
        entry_hash="f" * 64,
    )
    forged.save()

    status, _, err = run("audit", "verify")

    assert status == 1
    assert f"entry #{forged.pk} (position 2) was inserted" in err


def test_audit_purge(run, project, admin):
    project.data_access_logs = True
    with patch("django.utils.timezone.now", return_value=timezone.now() - timedelta(days=45)):
        audit.record(
            actor=admin,
            project=project,
            method="google.cloud.ml.v1.JobService.GetJob",
            resource_name=project.resource_name,
            permission="ml.jobs.get",
            data_access=True,
        )
    submit(project, "recent", admin)

    assert "Would remove 1 Data Access entries older than 30 days." in run("audit", "purge", "--dry-run")[1]
    status, out, _ = run("audit", "purge")

    assert status == 0
    assert "Removed 1 Data Access entries older than 30 days." in out
    assert "Removed 0 Admin Activity entries older than 400 days." in out
    assert not AuditEntry.objects.filter(log_type="data_access").exists()
    assert run("audit", "verify")[0] == 0


def test_audit_purge_refuses_a_tampered_log(run, project, admin):
    submit(project, "one", admin)
    tamper("UPDATE aiconsole_auditentry SET principal = 'mallory'")

    status, _, err = run("audit", "purge")

    assert status == 1
    assert "Refusing to purge" in err


# --- the real executable ---------------------------------------------------------------------------


@pytest.mark.slow
def test_a_fresh_server_set_up_from_the_command_line(tmp_path):
    env = {k: v for k, v in os.environ.items() if not k.startswith("AICONSOLE_") and k != "DJANGO_SETTINGS_MODULE"}
    env["AICONSOLE_DATA_DIR"] = str(tmp_path / "data")

    def aiconsole(*argv: str, stdin: str = "") -> subprocess.CompletedProcess:
        return subprocess.run([AICONSOLE, *argv], input=stdin, capture_output=True, text=True, env=env, timeout=120)

    assert aiconsole("users", "create", "alice", "--email", "alice@example.com").returncode == 0
    assert aiconsole("projects", "create", "census-team").returncode == 0
    added = aiconsole(
        "projects", "add-iam-policy-binding", "census-team", "--member=user:alice@example.com", "--role=roles/ml.admin"
    )
    assert added.returncode == 0, added.stderr
    assert "- user:alice" in added.stdout

    verified = aiconsole("audit", "verify")
    assert verified.returncode == 0, verified.stderr
    assert "Audit log intact: 3 Admin Activity" in verified.stdout


def test_users_set_password_recovers_a_locked_out_admin_and_ends_their_sessions(run, client):
    alice = get_user_model().objects.create_superuser("alice_only_admin", password="forgotten-long-ago-1")
    client.force_login(alice)
    status, out, _ = run("users", "set-password", "alice_only_admin")

    assert status == 0
    password = out.split("Password: ")[1].split()[0]
    alice.refresh_from_db()
    assert alice.check_password(password)
    assert client.get("/profile/").status_code == 302  # the old session ended
    entry = AuditEntry.objects.get(method_name="aiconsole.UserService.SetPassword")
    assert (entry.principal, entry.user_agent) == ("system", "aiconsole-cli")
    assert password not in str(entry.request) + str(entry.response)


def test_users_set_password_from_stdin_names_the_rule_it_breaks(run, admin):
    status, _, err = run("users", "set-password", admin.username, "--password-stdin", stdin="short\n")
    assert status == 1 and "This password is too short" in err
    status, out, _ = run("users", "set-password", admin.username, "--password-stdin", stdin="a-long-enough-pass-7\n")
    assert status == 0 and "Password:" not in out
    admin.refresh_from_db()
    assert admin.check_password("a-long-enough-pass-7")
    status, _, err = run("users", "set-password", "nobody_here")
    assert status == 2 and "No user named 'nobody_here'" in err


def test_users_deactivate_revokes_tokens_and_keeps_the_last_platform_admin(run, admin):
    from aiconsole.tokens import authenticate_bearer, create_token

    _, raw = create_token(admin)
    status, out, _ = run("users", "deactivate", admin.username)
    assert status == 0 and "API tokens were revoked" in out
    assert authenticate_bearer(raw) is None
    status, out, _ = run("users", "list")
    assert [line.split()[-1] for line in out.splitlines() if line.startswith(admin.username)] == ["no"]
    status, _, _ = run("users", "reactivate", admin.username)
    admin.refresh_from_db()
    assert status == 0 and admin.is_active and authenticate_bearer(raw) is None  # tokens stay revoked

    only = get_user_model().objects.create_superuser("the_only_root", password="pw-the-only-root-1")
    status, _, err = run("users", "deactivate", only.username)
    assert status == 1 and "is the last active platform admin" in err
