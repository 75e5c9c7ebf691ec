"""A user creates and revokes their own API tokens on the profile page."""

from __future__ import annotations

import re

from aiconsole.models import ApiToken, AuditEntry
from aiconsole.tokens import create_token


def _new_token_on_page(html: str) -> str | None:
    match = re.search(r'id="new-token-value"[^>]*value="([^"]+)"', html)
    return match.group(1) if match else None


def test_created_token_is_shown_once_and_works_for_the_api(client, developer, project):
    client.force_login(developer)
    response = client.post("/profile/tokens/", {"name": "CI pipeline"}, follow=True)
    raw = _new_token_on_page(response.content.decode())
    assert raw and raw.startswith("aic_")
    assert _new_token_on_page(client.get("/profile/").content.decode()) is None  # shown once only
    assert "CI pipeline" in client.get("/profile/").content.decode()

    client.logout()
    api = client.get("/v1/projects/project-a/jobs", HTTP_AUTHORIZATION=f"Bearer {raw}")
    assert api.status_code == 200
    assert not ApiToken.objects.filter(key_hash=raw).exists()  # only the hash is stored


def test_a_new_token_is_kept_in_no_session_and_no_cache(client, developer, project):
    from django.contrib.sessions.models import Session

    client.force_login(developer)
    response = client.post("/profile/tokens/", {"name": "one look"})
    raw = _new_token_on_page(response.content.decode())

    assert response.status_code == 201 and raw
    assert response["Cache-Control"] == "no-store"
    stored = [str(session.get_decoded()) for session in Session.objects.all()]
    assert stored and not any(raw in text for text in stored)


def test_revoked_token_no_longer_authenticates(client, developer, project):
    token, raw = create_token(developer, actor=developer)
    client.force_login(developer)
    response = client.post(f"/profile/tokens/{token.pk}/revoke/", follow=True)
    assert "revoked" in response.content.decode()
    client.logout()
    assert client.get("/v1/projects/project-a/jobs", HTTP_AUTHORIZATION=f"Bearer {raw}").status_code == 401


def test_someone_elses_token_cannot_be_revoked_from_your_profile(client, developer, viewer):
    token, _ = create_token(viewer, actor=viewer)
    client.force_login(developer)
    assert client.post(f"/profile/tokens/{token.pk}/revoke/").status_code == 404
    token.refresh_from_db()
    assert token.revoked is None


def test_creating_and_revoking_are_audited(client, developer, project):
    client.force_login(developer)
    client.post("/profile/tokens/", {"name": "audited"})
    token = ApiToken.objects.get(user=developer)
    client.post(f"/profile/tokens/{token.pk}/revoke/")
    methods = list(AuditEntry.objects.filter(principal=developer.email).values_list("method_name", flat=True))
    assert any(m.endswith("CreateToken") for m in methods) and any(m.endswith("RevokeToken") for m in methods)


def test_profile_requires_login(client):
    assert client.get("/profile/").status_code == 302
