"""Model registry services: the state machine, default-version rules, audit entries and the
permission matrix. No serving processes here (versions stay CREATING unless a test says so)."""

from __future__ import annotations

import pytest

from aiconsole import iam
from aiconsole.errors import AlreadyExists, FailedPrecondition, InvalidArgument
from aiconsole.models import AuditEntry, RoleBinding
from models_registry import operations, services
from models_registry.models import Model, Operation, Version, VersionState
from models_registry.resources import model_resource, version_resource
from tests.helpers.identity import entries, make_user

URI = "gs://models-bucket/census/"


@pytest.fixture
def model(project, admin):
    return services.create_model(project, {"name": "census", "description": "Census income"}, actor=admin)


def version(model, name, actor, state=VersionState.CREATING):
    services.create_version(model, {"name": name, "deploymentUri": URI}, actor=actor)
    created = Version.objects.get(model=model, name=name)
    if state != VersionState.CREATING:
        Version.objects.filter(pk=created.pk).update(state=state)
        created.refresh_from_db()
    model.refresh_from_db()
    created.model = model
    return created


# --- models -----------------------------------------------------------------------------------------


def test_the_creator_of_a_model_owns_it(project, developer):
    created = services.create_model(project, {"name": "census"}, actor=developer)
    assert iam.roles_of(developer, created) == {"roles/ml.developer", "roles/ml.modelOwner"}
    entry = entries("google.cloud.ml.v1.ModelService.CreateModel")[0]
    assert entry.permission == "ml.models.create" and entry.granted
    assert entry.response["name"] == "projects/project-a/models/census"
    assert entry.response["@type"] == "type.googleapis.com/google.cloud.ml.v1.Model"


def test_model_names_are_unique_in_a_project(project, admin, model):
    with pytest.raises(AlreadyExists) as duplicate:
        services.create_model(project, {"name": "census"}, actor=admin)
    assert duplicate.value.violations[0].field == "model.name"


def test_the_model_resource_is_fully_qualified(model):
    resource = model_resource(model)
    assert resource["name"] == "projects/project-a/models/census"
    assert resource["regions"] == ["us-central1"] and "defaultVersion" not in resource


def test_a_model_with_versions_cannot_be_deleted(model, admin):
    version(model, "v1", admin)
    with pytest.raises(FailedPrecondition):
        services.delete_model(model, actor=admin)
    assert Model.objects.filter(pk=model.pk).exists()


def test_deleting_a_model_is_a_done_operation_and_drops_its_bindings(model, admin):
    operation = services.delete_model(model, actor=admin)
    resource = operations.operation_resource(operation)
    assert resource["done"] and resource["metadata"]["operationType"] == "DELETE_MODEL"
    assert operation.operation_id.startswith("delete_census-")
    assert not RoleBinding.objects.filter(resource_type="model").exists()
    assert entries("google.cloud.ml.v1.ModelService.DeleteModel")[0].resource_name == "projects/project-a/models/census"


def test_patching_a_model_returns_an_update_operation(model, admin):
    operation = services.update_model(
        model, {"description": "new", "labels": {"team": "ml"}}, "description,labels", actor=admin
    )
    assert operation.operation_type == "UPDATE_MODEL" and operation.done
    assert operation.response["description"] == "new"
    model.refresh_from_db()
    assert model.labels == {"team": "ml"}


def test_patch_refuses_fields_outside_the_mask_list(model, admin):
    with pytest.raises(InvalidArgument):
        services.update_model(model, {"regions": ["europe-west4"]}, "regions", actor=admin)


# --- versions and the default ----------------------------------------------------------------------


def test_creating_a_version_is_a_long_running_operation(model, admin):
    operation = services.create_version(model, {"name": "v1", "deploymentUri": URI}, actor=admin)
    assert operation.operation_id.startswith("create_census_v1-")
    resource = operations.operation_resource(operation)
    assert "done" not in resource
    metadata = resource["metadata"]
    assert metadata["operationType"] == "CREATE_VERSION"
    assert metadata["modelName"] == "projects/project-a/models/census"
    assert metadata["version"]["name"] == "projects/project-a/models/census/versions/v1"
    assert Version.objects.get(name="v1").state == VersionState.CREATING
    entry = entries("google.cloud.ml.v1.ModelService.CreateVersion")[0]
    assert entry.permission == "ml.versions.create" and entry.response["name"] == operation.resource_name


def test_the_first_version_becomes_the_default_and_later_ones_do_not(model, admin):
    first = version(model, "v1", admin)
    second = version(model, "v2", admin)
    assert first.is_default and not Version.objects.get(pk=second.pk).is_default
    assert version_resource(first)["isDefault"] is True
    assert "isDefault" not in version_resource(second)


def test_version_names_are_unique_within_a_model(model, admin):
    version(model, "v1", admin)
    with pytest.raises(AlreadyExists):
        services.create_version(model, {"name": "v1", "deploymentUri": URI}, actor=admin)


def test_a_local_deployment_uri_must_lie_in_a_storage_root(model, admin):
    with pytest.raises(InvalidArgument) as refused:
        services.create_version(model, {"name": "v1", "deploymentUri": "/etc"}, actor=admin)
    assert refused.value.violations[0].field == "version.deployment_uri"


def test_set_default_needs_a_ready_version(model, admin):
    version(model, "v1", admin, VersionState.READY)
    creating = version(model, "v2", admin)
    with pytest.raises(FailedPrecondition):
        services.set_default_version(creating, actor=admin)
    ready = version(model, "v3", admin, VersionState.READY)
    services.set_default_version(ready, actor=admin)
    model.refresh_from_db()
    assert model.default_version_id == ready.pk
    assert entries("google.cloud.ml.v1.ModelService.SetDefaultVersion")[0].permission == "ml.versions.update"


def test_the_default_version_cannot_be_deleted_while_others_exist(model, admin, django_capture_on_commit_callbacks):
    default = version(model, "v1", admin, VersionState.READY)
    other = version(model, "v2", admin, VersionState.READY)
    with pytest.raises(FailedPrecondition):
        services.delete_version(default, actor=admin)
    with django_capture_on_commit_callbacks(execute=True):
        operation = services.delete_version(other, actor=admin)
    assert operation.done and operation.operation_type == "DELETE_VERSION"
    assert not Version.objects.filter(pk=other.pk).exists()
    with django_capture_on_commit_callbacks(execute=True):
        services.delete_version(default, actor=admin)  # the last one may go
    model.refresh_from_db()
    assert model.default_version is None


def test_a_busy_version_cannot_be_updated_or_deleted(model, admin):
    creating = version(model, "v1", admin)
    with pytest.raises(FailedPrecondition):
        services.delete_version(creating, actor=admin)
    with pytest.raises(FailedPrecondition):
        services.update_version(creating, {"description": "x"}, "description", actor=admin)


def test_version_patch_changes_scaling_and_request_logging(model, admin):
    ready = version(model, "v1", admin, VersionState.READY)
    operation = services.update_version(
        ready,
        {"autoScaling": {"minNodes": 2}, "requestLoggingConfig": {"samplingPercentage": 0.5}},
        "autoScaling.minNodes,requestLoggingConfig",
        actor=admin,
    )
    assert operation.operation_type == "UPDATE_VERSION" and operation.done
    ready.refresh_from_db()
    assert ready.auto_scaling == {"minNodes": 2} and ready.request_logging_config == {"samplingPercentage": 0.5}
    with pytest.raises(InvalidArgument):
        services.update_version(ready, {"manualScaling": {"nodes": 2}}, "manualScaling.nodes", actor=admin)


def test_state_transitions_are_guarded(model, admin):
    created = version(model, "v1", admin)
    assert created.mark_ready() and created.state == VersionState.READY
    assert not created.mark_ready()  # READY → READY is no transition
    assert created.mark_deleting() and not created.mark_failed("late")


def test_lists_filter_by_name_and_state(project, model, admin):
    services.create_model(project, {"name": "other"}, actor=admin)
    assert [m.name for m in services.list_models(project, actor=admin, filter_text="name:cen*")] == ["census"]
    version(model, "v1", admin, VersionState.READY)
    version(model, "v2", admin)
    assert [v.name for v in services.list_versions(model, actor=admin, filter_text="state=READY")] == ["v1"]
    with pytest.raises(InvalidArgument):
        services.list_models(project, actor=admin, filter_text="colour=blue")


def test_cancelling_a_finished_operation_changes_nothing(project, model, admin):
    operation = services.delete_model(model, actor=admin)
    cancelled = operations.cancel_operation(project, operation.operation_id, actor=admin)
    assert cancelled.done and not cancelled.cancellation_requested


def test_a_model_level_owner_lists_only_the_models_they_own(project, admin):
    mine = services.create_model(project, {"name": "mine"}, actor=admin)
    services.create_model(project, {"name": "theirs"}, actor=admin)
    owner = make_user("mo", "roles/ml.modelOwner", mine)
    assert [m.name for m in services.list_models(project, actor=owner)] == ["mine"]


# --- the permission matrix ----------------------------------------------------------------------------


@pytest.fixture
def personas(project, other_project, admin, developer, viewer, outsider, model):
    return {
        "admin": admin,
        "developer": developer,
        "viewer": viewer,
        "outsider": outsider,
        "modelOwner": make_user("mia_owner", "roles/ml.modelOwner", model),
        "modelUser": make_user("mark_user", "roles/ml.modelUser", model),
    }


def _create_model(project, model, user):
    services.create_model(project, {"name": "another"}, actor=user)


def _create_version(project, model, user):
    services.create_version(model, {"name": "v9", "deploymentUri": URI}, actor=user)


def _predict(project, model, user):
    # The default version is CREATING: with the permission, the call gets as far as that.
    services.predict(model, None, b'{"instances": [[1]]}', actor=user)


def _delete_version(project, model, user):
    services.delete_version(Version.objects.get(model=model, name="v1"), actor=user)


def _delete_model(project, model, user):
    services.delete_model(model, actor=user)


ACTIONS = {
    "create model": _create_model,
    "create version": _create_version,
    "predict": _predict,
    "delete version": _delete_version,
    "delete model": _delete_model,
}
ALLOWED, DENIED, HIDDEN = "allowed", 403, 404
MATRIX = {
    "admin": dict.fromkeys(ACTIONS, ALLOWED),
    "developer": {
        "create model": ALLOWED,
        "create version": DENIED,
        "predict": ALLOWED,
        "delete version": DENIED,
        "delete model": DENIED,
    },
    "viewer": dict.fromkeys(ACTIONS, DENIED),
    "modelOwner": {
        "create model": DENIED,
        "create version": ALLOWED,
        "predict": ALLOWED,
        "delete version": ALLOWED,
        "delete model": ALLOWED,
    },
    "modelUser": {
        "create model": DENIED,
        "create version": DENIED,
        "predict": ALLOWED,
        "delete version": DENIED,
        "delete model": DENIED,
    },
    "outsider": dict.fromkeys(ACTIONS, HIDDEN),
}


@pytest.mark.parametrize("persona, action, expected", [(p, a, e) for p, row in MATRIX.items() for a, e in row.items()])
def test_permission_matrix(personas, project, model, admin, persona, action, expected):
    version(model, "v1", admin)  # CREATING: deletes and predictions stop right after the permission check
    user = personas[persona]
    try:
        ACTIONS[action](project, model, user)
        outcome = ALLOWED
    except FailedPrecondition:
        outcome = ALLOWED  # permitted, refused only for the version's state
    except iam.PermissionDenied:
        outcome = DENIED
    except iam.NotFound:
        outcome = HIDDEN
    assert outcome == expected


def test_refusals_are_audited(personas, model):
    with pytest.raises(iam.PermissionDenied):
        _create_version(None, model, personas["developer"])
    entry = AuditEntry.objects.filter(method_name="google.cloud.ml.v1.ModelService.CreateVersion").get()
    assert not entry.granted and entry.permission == "ml.versions.create" and entry.status_code == 7


def test_predict_is_a_data_access_entry_when_the_project_turns_them_on(project, model, admin):
    project.data_access_logs = True
    project.save()
    model.refresh_from_db()
    version(model, "v1", admin)
    with pytest.raises(FailedPrecondition):
        services.predict(model, None, b"{}", actor=admin)
    # The refusal for the version's state comes after the permission check, which was granted:
    # the entry is written when the prediction is answered, so none exists for this one.
    assert not AuditEntry.objects.filter(method_name=services.PREDICT, granted=True).exists()
    denied = make_user("nobody_here", "roles/ml.viewer", project)
    with pytest.raises(iam.PermissionDenied):
        services.predict(model, None, b"{}", actor=denied)
    entry = AuditEntry.objects.get(method_name=services.PREDICT)
    assert entry.log_type == "data_access" and entry.permission == "ml.models.predict" and not entry.granted


def test_operations_are_listed_newest_first(project, model, admin):
    version(model, "v1", admin)
    version(model, "v2", admin)
    names = [o.operation_id.split("-")[0] for o in operations.list_operations(project, actor=admin)]
    assert names == ["create_census_v2", "create_census_v1"]
    assert Operation.objects.filter(target_version__name="v1").exists()
