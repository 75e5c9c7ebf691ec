"""The prediction hot path's reads agree with the ordinary ones: the same grants as iam.can, the
same users as the token authentication, the same model and version."""

from __future__ import annotations

import itertools

import pytest
from django.contrib.auth import get_user_model

from aiconsole import iam
from aiconsole.tokens import create_token, revoke_token, user_for_token
from models_registry import hotpath, services
from models_registry.models import Version
from tests.helpers.identity import make_user

PERMISSIONS = ["ml.models.predict", "ml.versions.predict", "ml.models.get", "ml.versions.delete",
               "ml.models.setIamPolicy", "ml.jobs.create"]


@pytest.fixture
def world(transactional_db, project, other_project, admin, developer, viewer, outsider):
    census = services.create_model(project, {"name": "census"}, actor=admin)
    other = services.create_model(project, {"name": "other"}, actor=admin)
    foreign = services.create_model(other_project, {"name": "foreign"}, actor=outsider)
    users = {
        "admin": admin, "developer": developer, "viewer": viewer, "outsider": outsider,
        "owner": make_user("oscar_owner", "roles/ml.modelOwner", census),
        "user": make_user("ursula_user", "roles/ml.modelUser", census),
        "superuser": make_user("root_like", is_superuser=True),
        "inactive": make_user("ina", "roles/ml.admin", project, is_active=False),
        "nobody": make_user("nobody"),
    }
    return users, [census, other, foreign]


def test_grants_match_the_permission_layer_for_every_persona(world):
    users, models = world
    for (name, user), model, permission in itertools.product(users.items(), models, PERMISSIONS):
        fresh = get_user_model().objects.get(pk=user.pk)
        assert hotpath.can(fresh, permission, model) == iam.can(fresh, permission, model), (name, model, permission)


def test_the_token_user_matches_the_ordinary_authentication(world):
    users, _ = world
    token, raw = create_token(users["developer"])
    user, token_id = hotpath.bearer_user(raw)
    assert token_id == token.pk and user.pk == user_for_token(raw).pk and user.email == "dave_dev@example.com"
    assert hotpath.can(user, "ml.models.predict", world[1][0])
    revoke_token(token)
    assert hotpath.bearer_user(raw) == (None, None) and user_for_token(raw) is None
    _, inactive_raw = create_token(users["inactive"])
    assert hotpath.bearer_user(inactive_raw) == (None, None) and user_for_token(inactive_raw) is None
    assert hotpath.bearer_user("aic_nonsense") == (None, None)


def test_the_target_read_finds_models_versions_and_defaults(world, admin):
    _, (census, _, _) = world
    created = Version.objects.create(model=census, name="v1", deployment_uri="gs://bucket/m/", runtime_version="2.11",
                                     python_version="3.7", machine_type="mls1-c1-m2", auto_scaling={"minNodes": 0})
    census.default_version = created
    census.save()
    model, version = hotpath.target("project-a", "census", None)
    assert version is None and model.default_version.name == "v1" and model.project.project_id == "project-a"
    model, version = hotpath.target("project-a", "census", "v1")
    assert version.pk == Version.objects.get(name="v1").pk and version.auto_scaling == {"minNodes": 0}
    assert version.resource_name == "projects/project-a/models/census/versions/v1"
    assert hotpath.target("project-a", "census", "v2") is None
    assert hotpath.target("project-b", "census", None) is None
    assert hotpath.target("project-a", "other", None)[0].default_version is None


def test_inside_a_transaction_it_defers_to_the_ordinary_path(db, project, admin):
    census = services.create_model(project, {"name": "census"}, actor=admin)
    assert not hotpath.can(admin, "ml.models.predict", census)  # then audit.authorize decides
    assert hotpath.target("project-a", "census", None)[0].pk == census.pk  # Django's own connection
