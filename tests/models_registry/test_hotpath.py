"""The prediction's reads: the one bearer authentication (``tokens.authenticate_bearer``) and the
one permission decision (``iam.can``) on the pooled connections agree with the ORM's view of the
same rows, and the target read finds the same model and version."""

from __future__ import annotations

import itertools

import pytest
from django.contrib.auth import get_user_model
from django.db.models import Q

from aiconsole import iam
from aiconsole.models import RoleBinding
from aiconsole.tokens import authenticate_bearer, create_token, revoke_token
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


def _orm_can(user, permission: str, model) -> bool:
    """The decision written with the ORM, independently of ``iam``'s pooled read."""
    if not user.is_active:
        return False
    bound = Q(resource_type=RoleBinding.ResourceType.PROJECT) | Q(resource_type=model.iam_resource_type,
                                                                   resource_id=model.pk)
    roles = set(RoleBinding.objects.filter(bound, user=user, project_id=model.project_id).values_list("role", flat=True))
    if user.is_superuser:
        roles.add(iam.ADMIN_ROLE)
    return any(permission in iam.ROLES[role].permissions for role in roles if role in iam.ROLES)


def test_grants_match_the_bindings_for_every_persona(world):
    users, models = world
    for (name, user), model, permission in itertools.product(users.items(), models, PERMISSIONS):
        fresh = get_user_model().objects.get(pk=user.pk)
        assert iam.can(fresh, permission, model) == _orm_can(fresh, permission, model), (name, model, permission)


def test_the_token_user_is_the_tokens_active_owner(world):
    users, _ = world
    token, raw = create_token(users["developer"])
    user = authenticate_bearer(raw)
    assert user.pk == users["developer"].pk and user.email == "dave_dev@example.com"
    assert user.get_username() == "dave_dev" and user.is_active and not user.is_superuser
    assert iam.can(user, "ml.models.predict", world[1][0])
    assert authenticate_bearer(f"  {raw} ").pk == user.pk  # as the header's value may come
    revoke_token(token)
    assert authenticate_bearer(raw) is None
    _, inactive_raw = create_token(users["inactive"])
    assert authenticate_bearer(inactive_raw) is None
    assert authenticate_bearer("aic_nonsense") is None and authenticate_bearer("") is None


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


def test_inside_a_transaction_the_reads_see_its_rows(db, project, admin, developer):
    census = services.create_model(project, {"name": "census"}, actor=admin)  # not committed
    raw = create_token(developer)[1]
    assert authenticate_bearer(raw).pk == developer.pk  # Django's own connection
    assert authenticate_bearer(raw).pk == developer.pk  # last_used now set: read back as a date
    assert iam.can(developer, "ml.models.predict", census)
    assert hotpath.target("project-a", "census", None)[0].pk == census.pk
