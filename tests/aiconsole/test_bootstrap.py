"""First start: the admin and the default project are created once, and the log says so."""

from __future__ import annotations

from aiconsole import audit, iam
from aiconsole.bootstrap import ensure_admin_and_project
from aiconsole.models import AuditEntry, RoleBinding


def test_first_start_creates_an_audited_admin_and_project_once(db, monkeypatch, settings):
    settings.ADMIN_USER = "root_admin"
    monkeypatch.delenv("AICONSOLE_ADMIN_PASSWORD", raising=False)
    first = ensure_admin_and_project()
    assert first.password  # generated, to be shown once
    admin = RoleBinding.objects.get().user
    assert admin.username == "root_admin" and iam.can(admin, "ml.jobs.create", first.project)
    methods = set(AuditEntry.objects.values_list("method_name", flat=True))
    assert {"aiconsole.UserService.CreateUser", "google.cloudresourcemanager.v1.Projects.CreateProject"} <= methods
    assert any(m.endswith("SetIamPolicy") for m in methods)
    assert set(AuditEntry.objects.values_list("principal", flat=True)) == {"system"}

    entries = AuditEntry.objects.count()
    second = ensure_admin_and_project()
    assert second.password is None and AuditEntry.objects.count() == entries
    assert RoleBinding.objects.count() == 1
    assert not audit.verify_chain()
