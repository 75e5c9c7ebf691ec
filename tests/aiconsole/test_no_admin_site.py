"""There is no Django admin site: it changed users (``is_superuser`` among them) with no audit
entry. Accounts, projects and roles change only through the audited services."""

from __future__ import annotations

import pytest
from django.apps import apps
from django.contrib.auth import get_user_model


@pytest.mark.parametrize("path", ["/admin/", "/admin/auth/user/", "/admin/login/"])
def test_a_platform_admin_finds_no_admin_site(client, db, path):
    root = get_user_model().objects.create_superuser("root_admin", "root@example.com", "pw-root")
    client.force_login(root)

    assert client.get(path).status_code == 404


def test_a_superuser_cannot_be_made_through_a_post_to_the_old_admin(client, db):
    root = get_user_model().objects.create_superuser("root_admin", "root@example.com", "pw-root")
    someone = get_user_model().objects.create_user("someone", "someone@example.com", "pw")
    client.force_login(root)

    response = client.post(
        f"/admin/auth/user/{someone.pk}/change/", {"username": "someone", "is_superuser": "on", "is_staff": "on"}
    )

    assert response.status_code in (403, 404)
    someone.refresh_from_db()
    assert not someone.is_superuser


def test_the_admin_app_is_not_installed():
    assert not apps.is_installed("django.contrib.admin")
