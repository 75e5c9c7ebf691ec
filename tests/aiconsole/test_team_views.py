"""The members and sharing pages as a team admin uses them, and what others are refused."""

from __future__ import annotations

import re

import pytest
from django.test import Client

from aiconsole import iam, policies
from aiconsole.models import AuditEntry, RoleBinding
from tests.helpers.identity import entries, make_user
from tests.helpers.jobs import submit

MEMBERS = "/projects/project-a/members/"
SHARING = "/projects/project-a/jobs/shared_job/sharing/"


def signed_in(client, user):
    client.force_login(user)
    return client


def member_rows(html: str) -> dict[str, str]:
    """username → the text of that member's row."""
    rows = re.findall(r'<tr data-member="([^"]+)">(.*?)</tr>', html, re.S)
    return {name: re.sub(r"<[^>]+>", " ", row) for name, row in rows}


# --- the members page ----------------------------------------------------------------------------


def test_admin_sees_members_with_their_roles(client, admin, developer, viewer):
    response = signed_in(client, admin).get(MEMBERS)

    assert response.status_code == 200
    rows = member_rows(response.content.decode())
    assert set(rows) == {"alice_admin", "dave_dev", "vera_viewer"}
    assert "AI Platform Developer" in rows["dave_dev"]
    assert "dave_dev@example.com" in rows["dave_dev"]
    assert "Add a member" in response.content.decode()


@pytest.mark.parametrize("persona, status", [("developer", 403), ("viewer", 403), ("outsider", 404)])
def test_only_admins_may_open_the_members_page(client, admin, request, persona, status):
    assert signed_in(client, request.getfixturevalue(persona)).get(MEMBERS).status_code == status


def test_anonymous_visitor_is_sent_to_sign_in(client, admin):
    response = client.get(MEMBERS)

    assert response.status_code == 302
    assert response["Location"].startswith("/login/")


def test_admin_adds_a_member_by_email(client, admin, outsider):
    response = signed_in(client, admin).post(
        f"{MEMBERS}add/", {"member": "olga_outsider@example.com", "role": "roles/ml.viewer"}, follow=True
    )

    assert response.status_code == 200
    assert "olga_outsider now has AI Platform Viewer." in response.content.decode()
    assert "olga_outsider" in member_rows(response.content.decode())
    assert iam.roles_of(outsider, admin_project(admin)) == {"roles/ml.viewer"}


def admin_project(admin):
    return RoleBinding.objects.get(user=admin, role="roles/ml.admin").project


def test_adding_an_unknown_user_says_so(client, admin):
    response = signed_in(client, admin).post(
        f"{MEMBERS}add/", {"member": "nobody", "role": "roles/ml.viewer"}, follow=True
    )

    assert "User &#x27;nobody&#x27; does not exist." in response.content.decode()
    assert not entries(policies.SET_IAM_POLICY, granted=True)


def test_adding_with_a_role_that_is_not_a_project_role_is_refused(client, admin, outsider):
    response = signed_in(client, admin).post(
        f"{MEMBERS}add/", {"member": "olga_outsider", "role": "roles/ml.owner"}, follow=True
    )

    assert "cannot be granted on a project" in response.content.decode()
    assert not iam.can_see_project(outsider, admin_project(admin))


def test_admin_changes_a_members_role(client, project, admin, viewer):
    signed_in(client, admin).post(f"{MEMBERS}{viewer.pk}/role/", {"role": "roles/ml.developer"})

    assert iam.roles_of(viewer, project) == {"roles/ml.developer"}
    (entry,) = entries(policies.SET_IAM_POLICY)
    assert entry.service_data["policyDelta"]["bindingDeltas"] == [
        {"action": "REMOVE", "role": "roles/ml.viewer", "member": "user:vera_viewer"},
        {"action": "ADD", "role": "roles/ml.developer", "member": "user:vera_viewer"},
    ]
    assert entry.principal == "alice_admin@example.com"


def test_admin_removes_a_member(client, project, admin, viewer):
    response = signed_in(client, admin).post(f"{MEMBERS}{viewer.pk}/remove/", follow=True)

    assert "vera_viewer was removed from project-a." in response.content.decode()
    assert not iam.can_see_project(viewer, project)


def test_the_last_admin_cannot_be_removed_or_demoted(client, project, admin, developer):
    client = signed_in(client, admin)

    page = client.get(MEMBERS).content.decode()
    assert "The last admin" in member_rows(page)["alice_admin"]
    assert f"/members/{admin.pk}/remove/" not in page  # no button …

    response = client.post(f"{MEMBERS}{admin.pk}/remove/", follow=True)  # … and the server refuses anyway
    assert "must keep at least one admin" in response.content.decode()
    response = client.post(f"{MEMBERS}{admin.pk}/role/", {"role": "roles/ml.viewer"}, follow=True)
    assert "must keep at least one admin" in response.content.decode()
    assert iam.roles_of(admin, project) == {"roles/ml.admin"}


def test_with_two_admins_either_may_go(client, project, admin):
    second = make_user("amy_admin", "roles/ml.admin", project)

    page = signed_in(client, admin).get(MEMBERS).content.decode()
    assert f"/members/{admin.pk}/remove/" in page and f"/members/{second.pk}/remove/" in page

    client.post(f"{MEMBERS}{admin.pk}/remove/")
    assert not iam.can_see_project(admin, project)


def test_developer_cannot_change_members_by_posting(client, project, admin, developer, viewer):
    client = signed_in(client, developer)

    assert client.post(f"{MEMBERS}add/", {"member": "dave_dev", "role": "roles/ml.admin"}).status_code == 403
    assert client.post(f"{MEMBERS}{viewer.pk}/remove/").status_code == 403
    assert client.post(f"{MEMBERS}data-access-logs/", {"enabled": "on"}).status_code == 403

    assert iam.roles_of(developer, project) == {"roles/ml.developer"}
    assert iam.can_see_project(viewer, project)
    denied = AuditEntry.objects.filter(method_name=policies.SET_IAM_POLICY, granted=False)
    assert denied.count() == 3


def test_outsider_cannot_change_members_either(client, project, admin, viewer, outsider):
    response = signed_in(client, outsider).post(f"{MEMBERS}{viewer.pk}/remove/")

    assert response.status_code == 404
    assert iam.can_see_project(viewer, project)


def test_htmx_change_returns_the_refreshed_members_section(client, project, admin, viewer):
    response = signed_in(client, admin).post(
        f"{MEMBERS}{viewer.pk}/role/", {"role": "roles/ml.developer"}, HTTP_HX_REQUEST="true"
    )

    html = response.content.decode()
    assert html.lstrip().startswith('<div id="members">')
    assert "<html" not in html
    assert "vera_viewer now has AI Platform Developer." in html
    assert "AI Platform Developer" in member_rows(html)["vera_viewer"]


def test_htmx_refusal_is_shown_inline(client, project, admin):
    response = signed_in(client, admin).post(f"{MEMBERS}{admin.pk}/remove/", HTTP_HX_REQUEST="true")

    assert response.status_code == 200
    assert 'role="alert"' in response.content.decode()
    assert "must keep at least one admin" in response.content.decode()


def test_data_access_logs_switch(client, project, admin):
    client = signed_in(client, admin)
    assert 'name="enabled" checked' not in client.get(MEMBERS).content.decode()

    client.post(f"{MEMBERS}data-access-logs/", {"enabled": "on"})
    project.refresh_from_db()
    assert project.data_access_logs is True
    assert 'name="enabled" checked' in client.get(MEMBERS).content.decode()

    client.post(f"{MEMBERS}data-access-logs/", {})
    project.refresh_from_db()
    assert project.data_access_logs is False
    deltas = [e.service_data["policyDelta"]["auditConfigDeltas"][0]["action"] for e in entries(policies.SET_IAM_POLICY)]
    assert deltas == ["ADD", "REMOVE"]


def test_opening_the_members_page_is_a_data_access_read(client, project, admin):
    project.data_access_logs = True
    project.save()

    signed_in(client, admin).get(MEMBERS)

    (entry,) = entries(policies.GET_IAM_POLICY)
    assert (entry.log_type, entry.resource_name) == ("data_access", "projects/project-a")


@pytest.mark.parametrize(
    "path, data",
    [
        ("add/", {"member": "vera_viewer", "role": "roles/ml.admin"}),
        ("data-access-logs/", {"enabled": "on"}),
    ],
)
def test_member_changes_need_the_csrf_token(project, admin, viewer, path, data):
    browser = Client(enforce_csrf_checks=True)
    browser.force_login(admin)

    assert browser.post(MEMBERS + path, data).status_code == 403

    page = browser.get(MEMBERS)
    token = page.cookies["csrftoken"].value
    assert 'name="csrfmiddlewaretoken"' in page.content.decode()
    assert browser.post(MEMBERS + path, data, HTTP_X_CSRFTOKEN=token).status_code == 302


# --- navigation ----------------------------------------------------------------------------------


def test_admin_sees_members_and_audit_links(client, project, admin):
    page = signed_in(client, admin).get("/projects/project-a/jobs/").content.decode()

    assert 'href="/projects/project-a/members/"' in page
    assert 'href="/projects/project-a/audit/"' in page


@pytest.mark.parametrize("persona", ["developer", "viewer"])
def test_others_do_not_see_members_and_audit_links(client, project, admin, request, persona):
    page = signed_in(client, request.getfixturevalue(persona)).get("/projects/project-a/jobs/").content.decode()

    assert "/members/" not in page
    assert "/audit/" not in page


# --- sharing a job -------------------------------------------------------------------------------


def test_owner_sees_who_shares_the_job(client, job, admin):
    response = signed_in(client, admin).get(SHARING)

    assert response.status_code == 200
    rows = member_rows(response.content.decode())
    assert set(rows) == {"alice_admin"}
    assert "AI Platform Job Owner" in rows["alice_admin"]


def test_owner_shares_a_job_and_the_new_owner_may_cancel_it(client, project, developer, viewer):
    job = submit(project, "dev_job", developer)
    base = "/projects/project-a/jobs/dev_job/sharing/"

    response = signed_in(client, developer).post(
        f"{base}add/", {"member": "vera_viewer", "role": "roles/ml.jobOwner"}, follow=True
    )

    assert "vera_viewer now has AI Platform Job Owner on job dev_job." in response.content.decode()
    assert iam.can(viewer, "ml.jobs.cancel", job)
    (entry,) = entries(policies.SET_IAM_POLICY)
    assert (entry.resource_name, entry.permission) == ("projects/project-a/jobs/dev_job", "ml.jobs.setIamPolicy")


def test_owner_removes_a_sharer(client, job, admin, viewer):
    iam.grant(viewer, "roles/ml.jobOwner", job)

    signed_in(client, admin).post(f"{SHARING}{viewer.pk}/remove/")

    assert not iam.can(viewer, "ml.jobs.cancel", job)


def test_developer_sees_sharing_without_buttons_and_cannot_post(client, job, developer, viewer):
    client = signed_in(client, developer)

    page = client.get(SHARING).content.decode()
    assert "alice_admin" in member_rows(page)
    assert "Share</button>" not in page and "/remove/" not in page

    assert client.post(f"{SHARING}add/", {"member": "dave_dev", "role": "roles/ml.jobOwner"}).status_code == 403
    assert not iam.can(developer, "ml.jobs.cancel", job)


@pytest.mark.parametrize("persona, status", [("viewer", 403), ("outsider", 404)])
def test_sharing_page_refusals(client, job, request, persona, status):
    assert signed_in(client, request.getfixturevalue(persona)).get(SHARING).status_code == status


def test_sharing_offers_only_roles_grantable_on_a_job(client, job, admin):
    page = signed_in(client, admin).get(SHARING).content.decode()
    options = re.findall(r'<option value="(roles/[^"]+)"', page)

    assert options == ["roles/ml.jobOwner"]

    response = client.post(f"{SHARING}add/", {"member": "alice_admin", "role": "roles/ml.admin"}, follow=True)
    assert "cannot be granted on a job" in response.content.decode()


def test_sharing_a_missing_job_is_404(client, project, admin):
    assert signed_in(client, admin).get("/projects/project-a/jobs/nope/sharing/").status_code == 404


# --- the template tags ---------------------------------------------------------------------------


@pytest.mark.parametrize("persona, shown", [("admin", "yes"), ("developer", "no"), ("job_owner", "yes")])
def test_can_tag_hides_what_the_user_may_not_use(rf, project, admin, developer, persona, shown):
    from django.template import Context, Template

    job = submit(project, "tagged", developer if persona == "job_owner" else admin)
    request = rf.get("/")
    request.user = developer if persona in ("developer", "job_owner") else admin
    template = Template(
        '{% load iam_tags %}{% can "ml.jobs.cancel" job as may %}{% if may %}yes{% else %}no{% endif %}'
    )

    assert template.render(Context({"request": request, "job": job})) == shown
