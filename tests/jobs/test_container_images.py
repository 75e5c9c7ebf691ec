"""A project's container images: uploaded as archives over REST and the console page, listed,
deleted, audited, and owned by the project that uploaded them.

Images are busybox roots made on the spot (bench/support/images.py), each with a script of its
own so that no other test shares it; every name a test puts in the engine is removed after it.
"""

from __future__ import annotations

import contextlib
import gzip
import uuid
from pathlib import Path

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile

from aiconsole.errors import InvalidArgument
from bench.support.images import make_image, saved_archive
from jobs import services
from jobs.containers import engine as engines
from jobs.containers import images
from jobs.models import ContainerImage
from tests.helpers.identity import bearer, entries
from tests.helpers.images import require_engine

IMAGES = "/v1/projects/project-a/images"


@pytest.fixture
def engine():
    return require_engine()


@pytest.fixture
def made(engine):
    """Names this test put in the engine's store: all removed when it ends."""
    names: list[str] = []
    yield names
    for name in names:
        with contextlib.suppress(engines.EngineError):  # a test may have deleted it already
            engine.call("rmi", "--force", name)


def fresh_image(engine, made, name: str | None = None) -> str:
    """An image no other test has: its script says a value of its own."""
    image = make_image(engine, f"echo {uuid.uuid4().hex}\n", name)
    made.append(image)
    return image


def upload_name(made, prefix: str = "localhost/aic-test/uploaded") -> str:
    name = f"{prefix}-{uuid.uuid4().hex[:12]}:v1"
    made.append(name)
    return name


def archive(engine, image: str, folder: Path, kind: str) -> Path:
    """``podman save`` of ``image``: docker-archive, oci-archive, or docker-archive gzipped."""
    fmt = kind.removesuffix("+gzip")
    path = folder / f"{uuid.uuid4().hex}.tar"
    saved_archive(engine, image, path, format=fmt)
    if kind.endswith("+gzip"):
        zipped = path.with_suffix(".tar.gz")
        zipped.write_bytes(gzip.compress(path.read_bytes()))
        return zipped
    return path


def load(api, name: str, path: Path):
    return api("POST", f"{IMAGES}:load?name={name}", path.read_bytes(), content_type="application/octet-stream")


def listed(api) -> dict[str, dict]:
    status, body = api("GET", IMAGES)
    assert status == 200, body
    return {image["name"]: image for image in body["images"]}


# --- REST -------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("kind", "as_form"),
    [("docker-archive", False), ("oci-archive", True), ("docker-archive+gzip", False)],
    ids=["docker-archive as the body", "oci-archive as a form's file", "gzipped docker-archive"],
)
def test_an_uploaded_archive_is_listed_with_its_name_and_size(
    engine, made, api, client, admin, tmp_path, kind, as_form
):
    image = fresh_image(engine, made)
    path = archive(engine, image, tmp_path, kind)
    name = upload_name(made)
    if as_form:
        with path.open("rb") as handle:
            response = client.post(f"{IMAGES}:load?name={name}", {"file": handle}, **bearer(admin))
        status, body = response.status_code, response.json()
    else:
        status, body = load(api, name, path)
    assert status == 200, body

    in_engine = engine.inspect_image(name)
    assert in_engine is not None, "the name is in the engine's store"
    shown = listed(api)[name]
    assert shown == body
    assert shown["sizeBytes"] == str(in_engine["Size"]) and int(shown["sizeBytes"]) > 0
    assert shown["imageId"] == "sha256:" + in_engine["Id"]
    assert shown["loadedBy"] == admin.username


def test_a_file_that_is_not_an_image_archive_is_refused_naming_the_field(engine, api, project, settings):
    stored = settings.DATA_DIR / "containers" / "archives" / "project-a"
    before = set(stored.rglob("*")) if stored.exists() else set()
    status, body = api(
        "POST",
        f"{IMAGES}:load?name=gcr.io/project-a/trainer:v1",
        b"not an archive at all",
        content_type="application/octet-stream",
    )
    assert status == 400 and body["error"]["status"] == "INVALID_ARGUMENT"
    violations = body["error"]["details"][0]["fieldViolations"]
    assert [v["field"] for v in violations] == ["file"]
    assert "not an image archive" in violations[0]["description"]
    assert listed(api) == {}
    assert (set(stored.rglob("*")) if stored.exists() else set()) == before  # nothing kept


def test_an_empty_body_is_refused_naming_the_file(engine, api, project):
    status, body = api(
        "POST", f"{IMAGES}:load?name=gcr.io/project-a/trainer:v1", b"", content_type="application/octet-stream"
    )
    assert status == 400
    assert body["error"]["details"][0]["fieldViolations"] == [
        {"field": "file", "description": "The image archive is empty."}
    ]


def test_a_name_that_is_not_an_image_reference_is_refused_naming_the_name(api, project):
    status, body = api("POST", f"{IMAGES}:load?name=Not%20A%20Name", b"x", content_type="application/octet-stream")
    assert status == 400 and body["error"]["details"][0]["fieldViolations"][0]["field"] == "name"


def test_a_viewer_cannot_load_or_delete_images_and_the_refusals_are_audited(client, project, viewer):
    as_viewer = bearer(viewer)
    response = client.get(IMAGES, **as_viewer)
    assert response.status_code == 200 and response.json() == {"images": []}

    response = client.post(
        f"{IMAGES}:load?name=gcr.io/project-a/trainer:v1",
        b"archive",
        content_type="application/octet-stream",
        **as_viewer,
    )
    assert response.status_code == 403
    assert response.json()["error"] == {
        "code": 403,
        "status": "PERMISSION_DENIED",
        "message": "Permission 'ml.jobs.create' denied on resource 'projects/project-a'.",
        "details": [],
    }
    response = client.delete(f"{IMAGES}/gcr.io/project-a/trainer:v1", **as_viewer)
    assert response.status_code == 403 and response.json()["error"]["status"] == "PERMISSION_DENIED"

    for method in (images.LOAD_METHOD, images.DELETE_METHOD):
        [refusal] = entries(method)
        assert refusal.granted is False and refusal.principal == viewer.email
        assert refusal.request == {"name": "gcr.io/project-a/trainer:v1"}


def test_an_outsider_gets_404_for_the_projects_images(client, project, outsider):
    response = client.get(IMAGES, **bearer(outsider))
    assert response.status_code == 404 and response.json()["error"]["status"] == "NOT_FOUND"


def test_deleting_an_image_removes_it_and_the_audit_log_shows_load_and_delete(engine, made, api, project, tmp_path):
    image = fresh_image(engine, made)
    name = upload_name(made, "gcr.io/project-a/trainer")  # slashes, dots and a colon in the path
    status, body = load(api, name, archive(engine, image, tmp_path, "docker-archive"))
    assert status == 200, body

    status, body = api("DELETE", f"{IMAGES}/{name}")
    assert status == 200 and body == {}
    assert listed(api) == {} and not ContainerImage.objects.exists()
    assert engine.inspect_image(name) is None, "its name is gone from the engine"
    assert engine.inspect_image(image) is not None, "the host's name for the same image stays"

    resource = f"projects/project-a/images/{name}"
    assert [(e.resource_name, e.granted) for e in entries(images.LOAD_METHOD)] == [(resource, True)]
    assert [(e.resource_name, e.granted) for e in entries(images.DELETE_METHOD)] == [(resource, True)]
    status, body = api("DELETE", f"{IMAGES}/{name}")
    assert status == 404 and body["error"]["message"] == f"{resource} not found."


# --- who may run an uploaded image ------------------------------------------------------------------


def container_body(job_id: str, image: str) -> dict:
    return {
        "jobId": job_id,
        "trainingInput": {"scaleTier": "BASIC", "region": "us-central1", "masterConfig": {"imageUri": image}},
    }


def test_another_projects_upload_is_refused_at_submit_while_its_own_project_may_run_it(
    engine, made, api, project, other_project, admin, outsider, tmp_path
):
    image = fresh_image(engine, made)
    path = archive(engine, image, tmp_path, "oci-archive")
    image_id = engine.inspect_image(image)["Id"].removeprefix("sha256:")
    engine.call("rmi", image)  # only the upload brings it: the host's store has no name for it
    name = upload_name(made)
    assert load(api, name, path)[0] == 200

    for reference in (name, image_id):  # under its uploaded name, and under its id
        with pytest.raises(InvalidArgument) as refused:
            services.submit_job(other_project, container_body("theirs", reference), actor=outsider)
        assert f"The image {reference} was uploaded by another project" in str(refused.value)

    job = services.submit_job(project, container_body("ours", name), actor=admin)
    assert job.state == "QUEUED"


def test_an_upload_of_an_image_the_host_has_too_takes_it_from_no_one(
    engine, made, api, project, other_project, outsider, tmp_path
):
    image = fresh_image(engine, made)  # the host's own, by this name
    name = upload_name(made)
    assert load(api, name, archive(engine, image, tmp_path, "docker-archive"))[0] == 200

    job = services.submit_job(other_project, container_body("hosts", image), actor=outsider)
    assert job.state == "QUEUED"  # the host's image stays every project's


def test_a_name_already_on_the_host_is_refused_and_the_hosts_image_kept(engine, made, api, project, tmp_path):
    hosted = fresh_image(engine, made)
    hosted_id = engine.inspect_image(hosted)["Id"]
    other = fresh_image(engine, made)
    status, body = load(api, hosted, archive(engine, other, tmp_path, "docker-archive"))
    assert status == 409 and body["error"]["details"][0]["fieldViolations"][0]["field"] == "name"
    assert "already on this server" in body["error"]["message"]
    assert engine.inspect_image(hosted)["Id"] == hosted_id
    assert listed(api) == {}


@pytest.mark.slow
def test_the_names_inside_an_archive_are_not_left_to_every_project(engine, made, api, project, tmp_path):
    """The archive's own name goes; a host name it carried is put back on the host's image."""
    inside = f"localhost/aic-test/inside-{uuid.uuid4().hex[:12]}:v1"
    uploaded = fresh_image(engine, made, inside)
    path = archive(engine, uploaded, tmp_path, "docker-archive")
    uploaded_id = engine.inspect_image(inside)["Id"]
    engine.call("rmi", "--force", inside)

    name = upload_name(made)
    assert load(api, name, path)[0] == 200
    assert engine.inspect_image(name)["Id"] == uploaded_id
    assert engine.inspect_image(inside) is None, "the archive's own name was not added to the host's"

    hosted = fresh_image(engine, made, inside)  # now the host has an image of its own by that name
    hosted_id = engine.inspect_image(hosted)["Id"]
    assert load(api, upload_name(made), path)[0] == 200
    assert engine.inspect_image(inside)["Id"] == hosted_id, "the host's name still names the host's image"


def test_an_archive_loads_under_the_name_it_was_saved_with(engine, made, api, project, tmp_path):
    short = f"aic-test-short-{uuid.uuid4().hex[:12]}"  # podman keeps it as localhost/<name>:latest
    image = fresh_image(engine, made, short)
    path = archive(engine, image, tmp_path, "docker-archive")
    engine.call("rmi", "--force", image)

    status, body = load(api, short, path)
    assert status == 200, body
    made.append(body["name"])
    assert body["name"] == f"{short}:latest" and engine.inspect_image(body["name"]) is not None


# --- the console page -------------------------------------------------------------------------------


def test_the_images_page_shows_the_engine_the_table_and_uploads_through_its_form(
    engine, made, client, project, developer, tmp_path
):
    client.force_login(developer)
    page = client.get("/projects/project-a/images/")
    html = page.content.decode()
    assert page.status_code == 200
    assert "<h1>Container images</h1>" in html and 'id="engine-title">Container engine</h2>' in html
    assert f"{engine.name} {engine.version}" in html and engine.path not in html  # the path is for admins
    assert "No images uploaded to this project yet." in html
    assert 'aria-current="page">Container images</a>' in html

    name = upload_name(made)
    path = archive(engine, fresh_image(engine, made), tmp_path, "docker-archive+gzip")
    upload = SimpleUploadedFile(path.name, path.read_bytes(), content_type="application/gzip")
    response = client.post("/projects/project-a/images/", {"name": name, "file": upload}, follow=True)
    html = response.content.decode()
    stored = ContainerImage.objects.get(project=project, name=name)
    assert f"Loaded {name}" in html
    assert f'<tr data-image="{name}">' in html and f"<code>{name}</code>" in html
    assert f">{stored.image_id[:12]}</code>" in html and stored.size_bytes > 0
    assert f"<td>{developer.username}</td>" in html

    response = client.post("/projects/project-a/images/delete/", {"name": name}, follow=True)
    assert f"Deleted {name}." in response.content.decode()
    assert not ContainerImage.objects.filter(name=name).exists()


def test_the_upload_form_shows_what_is_wrong_beside_each_field(engine, client, project, developer):
    client.force_login(developer)
    response = client.post("/projects/project-a/images/", {"name": "Not A Name"})
    html = response.content.decode()
    assert response.status_code == 200
    assert 'id="id_file_errors"' in html and "This field is required." in html

    not_archive = SimpleUploadedFile("image.tar", b"plain text, no image here")
    response = client.post("/projects/project-a/images/", {"name": "Not A Name", "file": not_archive})
    assert 'id="id_name_errors"' in response.content.decode()

    not_archive.seek(0)
    response = client.post("/projects/project-a/images/", {"name": "gcr.io/project-a/x:v1", "file": not_archive})
    html = response.content.decode()
    assert 'id="id_file_errors"' in html and "not an image archive the engine can load" in html
    assert not ContainerImage.objects.exists()


def test_a_viewer_sees_the_images_but_no_upload_form_and_cannot_post_one(client, project, viewer):
    client.force_login(viewer)
    html = client.get("/projects/project-a/images/").content.decode()
    assert "Images uploaded to project-a" in html and "Upload an image" not in html
    refused = client.post("/projects/project-a/images/", {"name": "gcr.io/project-a/x:v1"})
    assert refused.status_code == 403
    assert entries(images.LOAD_METHOD, granted=False)
    assert client.post("/projects/project-a/images/delete/", {"name": "gcr.io/project-a/x:v1"}).status_code == 403


def test_without_an_engine_the_page_says_why(client, project, developer, monkeypatch):
    monkeypatch.setattr(
        engines, "current", lambda: engines.Unavailable("No container engine was found on this server.")
    )
    client.force_login(developer)
    html = client.get("/projects/project-a/images/").content.decode()
    assert "No container engine: custom container jobs are refused." in html
    assert "No container engine was found on this server." in html


def test_a_worker_whose_engine_lacks_an_uploaded_image_loads_it_from_the_stored_archive(
    engine, made, api, project, tmp_path
):
    from jobs.containers import images

    image = fresh_image(engine, made)
    path = archive(engine, image, tmp_path, "docker-archive")
    name = upload_name(made)
    assert load(api, name, path)[0] == 200
    engine.call("rmi", "--force", name, image)  # as on another worker's engine
    assert engine.inspect_image(name) is None

    assert images.load_uploaded(project, name)
    assert engine.inspect_image(name) is not None
    assert not images.load_uploaded(project, "localhost/aic-test/never-uploaded:v1")


# --- names written inside an archive, and archives that unpack without end -----------------------------


def _renamed_archive(source: Path, target: Path, names: list[str]) -> Path:
    """A docker-archive whose manifest names the image ``names`` (what an attacker writes in it)."""
    import io
    import json
    import tarfile

    with tarfile.open(source) as original, tarfile.open(target, "w") as copy:
        for member in original:
            data = original.extractfile(member).read() if member.isfile() else None
            if member.name == "manifest.json":
                manifest = json.loads(data)
                manifest[0]["RepoTags"] = names
                data = json.dumps(manifest).encode()
                member.size = len(data)
            copy.addfile(member, io.BytesIO(data) if data is not None else None)
    return target


@pytest.mark.slow
def test_an_archive_naming_another_projects_image_never_moves_that_name(
    engine, made, api, client, project, other_project, outsider, tmp_path
):
    """Project B's image is named in project A's archive, after 60 throw-away names that would
    widen the window; while A's upload loads, B's name answers to B's image every time it is asked."""
    import threading

    theirs = fresh_image(engine, made)
    their_name = f"localhost/aic-test/theirs-{uuid.uuid4().hex[:12]}:v1"
    made.append(their_name)
    with archive(engine, theirs, tmp_path, "docker-archive").open("rb") as upload:
        images.load_image(other_project, their_name, upload, actor=outsider)
    their_id = engine.inspect_image(their_name)["Id"]

    ours = fresh_image(engine, made)
    throwaway = [f"localhost/aic-test/throwaway-{uuid.uuid4().hex[:8]}:v{i}" for i in range(60)]
    made.extend(throwaway)
    saved = archive(engine, ours, tmp_path, "docker-archive")
    hostile = _renamed_archive(saved, tmp_path / "hostile.tar", [*throwaway, their_name])
    seen, done = set(), threading.Event()

    def watch():
        while not done.is_set():
            found = engine.inspect_image(their_name)
            seen.add(found["Id"] if found else None)

    watcher = threading.Thread(target=watch)
    watcher.start()
    try:
        status, body = load(api, upload_name(made), hostile)
    finally:
        done.set()
        watcher.join()

    assert status == 200, body
    assert seen == {their_id}
    assert all(engine.inspect_image(name) is None for name in throwaway)
    images.forget()
    assert images.runnable(their_name, other_project).image_id == their_id.removeprefix("sha256:")


def test_another_projects_upload_is_refused_whatever_other_name_it_carries(
    engine, made, api, project, other_project, outsider, tmp_path
):
    """A name nobody recorded on an uploaded image is no permission to run it by another name."""
    image = fresh_image(engine, made)
    path = archive(engine, image, tmp_path, "docker-archive")
    engine.call("rmi", image)
    name = upload_name(made)
    assert load(api, name, path)[0] == 200
    stray = f"localhost/aic-test/stray-{uuid.uuid4().hex[:12]}:v1"
    made.append(stray)
    engine.call("tag", name, stray)  # a name the image carries that no upload recorded
    images.forget()

    with pytest.raises(InvalidArgument, match="was uploaded by another project"):
        services.submit_job(other_project, container_body("theirs", name), actor=outsider)


@pytest.mark.slow
def test_an_archive_that_unpacks_past_its_limit_is_refused_and_leaves_nothing_behind(
    engine, api, project, settings, tmp_path, monkeypatch
):
    import io
    import tarfile
    import tempfile

    settings.CONTAINER_IMAGE_MAX_UNPACKED_BYTES = 50 * 1024**2
    raw = io.BytesIO()
    with tarfile.open(fileobj=raw, mode="w") as tar:
        info = tarfile.TarInfo("layer.tar")
        info.size = 200 * 1024**2
        tar.addfile(info, io.BytesIO(bytes(info.size)))
    bomb = gzip.compress(raw.getvalue(), compresslevel=9)
    assert len(bomb) < 1024**2
    stored = settings.DATA_DIR / "containers" / "archives" / "project-a"
    kept = set(stored.rglob("*")) if stored.exists() else set()
    # A temporary folder of the test's own, for the console and the engine alike: other tests
    # running beside this one (make fast) write to the shared one.
    temporary = tmp_path / "tmp"
    temporary.mkdir()
    monkeypatch.setenv("TMPDIR", str(temporary))
    monkeypatch.setattr(tempfile, "tempdir", str(temporary))

    status, body = api(
        "POST", f"{IMAGES}:load?name=gcr.io/project-a/bomb:v1", bomb, content_type="application/octet-stream"
    )

    assert status == 400, body
    violation = body["error"]["details"][0]["fieldViolations"][0]
    assert violation["field"] == "file"
    assert "AICONSOLE_CONTAINER_IMAGE_MAX_UNPACKED_BYTES" in violation["description"]
    assert (set(stored.rglob("*")) if stored.exists() else set()) == kept
    assert list(temporary.iterdir()) == []
