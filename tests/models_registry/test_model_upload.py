"""A model version from an uploaded model file or archive, stored and inspected by a service."""

from __future__ import annotations

import io
import tarfile
import zipfile

import pytest
from django.conf import settings
from django.core.files.uploadedfile import SimpleUploadedFile
from django.test import Client

from aiconsole.errors import InvalidArgument
from aiconsole.models import AuditEntry
from models_registry import services
from models_registry.models import Version


@pytest.fixture
def census(project, admin):
    return services.create_model(project, {"name": "census"}, actor=admin)


def zipped(entries: dict[str, bytes]) -> io.BytesIO:
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as archive:
        for name, data in entries.items():
            archive.writestr(name, data)
    buffer.seek(0)
    return buffer


def tarred(entries: dict[str, bytes]) -> io.BytesIO:
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w:gz") as archive:
        for name, data in entries.items():
            info = tarfile.TarInfo(name)
            info.size = len(data)
            archive.addfile(info, io.BytesIO(data))
    buffer.seek(0)
    return buffer


def test_a_model_file_is_stored_as_a_model_folder_and_audited(census, admin):
    uploaded = services.upload_model(census, "my_classifier.joblib", io.BytesIO(b"not really"), actor=admin)
    assert uploaded["framework"] == "SCIKIT_LEARN" and uploaded["name"] == "my_classifier.joblib"
    folder = settings.STORAGE_DIR.resolve() / "packages" / "project-a"
    assert (
        uploaded["uri"].startswith(str(folder)) and (settings.STORAGE_DIR / uploaded["uri"] / "model.joblib").exists()
    )
    entry = AuditEntry.objects.filter(method_name="aiconsole.ModelService.UploadModel").latest("pk")
    assert entry.resource_name == census.resource_name and entry.granted


def test_a_saved_model_archive_with_a_top_folder_is_extracted(census, admin):
    archive = tarred({"export/saved_model.pb": b"pb", "export/variables/variables.index": b"i"})
    uploaded = services.upload_model(census, "export.tar.gz", archive, actor=admin)
    assert uploaded["framework"] == "TENSORFLOW" and uploaded["uri"].endswith("/model/export")


def test_an_archive_that_escapes_its_folder_is_refused_and_nothing_is_kept(census, admin, tmp_path):
    before = set((settings.STORAGE_DIR / "packages" / "project-a").glob("*"))
    archive = zipped({"model.joblib": b"x", "../../outside.txt": b"evil"})
    with pytest.raises(InvalidArgument) as refused:
        services.upload_model(census, "evil.zip", archive, actor=admin)
    assert "evil.zip" in str(refused.value) and str(settings.STORAGE_DIR) not in str(refused.value)
    assert set((settings.STORAGE_DIR / "packages" / "project-a").glob("*")) == before


def test_an_archive_without_a_model_and_a_wrong_kind_of_file_are_refused(census, admin):
    with pytest.raises(InvalidArgument, match="no model in notes.zip"):
        services.upload_model(census, "notes.zip", zipped({"readme.txt": b"hi"}), actor=admin)
    with pytest.raises(InvalidArgument, match="model.exe is not a model file"):
        services.upload_model(census, "model.exe", io.BytesIO(b"MZ"), actor=admin)


def test_a_viewer_cannot_upload_a_model(census, viewer):
    from aiconsole.iam import PermissionDenied

    with pytest.raises(PermissionDenied):
        services.upload_model(census, "m.pkl", io.BytesIO(b"x"), actor=viewer)


def test_the_new_version_form_creates_a_version_from_an_upload(census, admin):
    client = Client()
    client.force_login(admin)
    answer = client.post(
        "/projects/project-a/models/census/versions/create/",
        {
            "name": "v1",
            "runtime_version": "2.11",
            "machine_type": "n1-standard-2",
            "model_file": SimpleUploadedFile("clf.pkl", b"pickle"),
        },
    )
    assert answer.status_code == 302
    version = Version.objects.get(model=census, name="v1")
    assert (
        version.deployment_uri.endswith("/model")
        and (settings.STORAGE_DIR / version.deployment_uri / "model.pkl").exists()
    )
