"""Which images a project's jobs may run, and images uploaded as archives.

Nothing is ever pulled: an image comes from the engine's own store, where an administrator built
or loaded it on the host (it runs for every project, by its name or id), or from an archive a
project uploaded (``docker save`` / ``podman save`` output: docker-archive or oci-archive, gzipped
or not). An uploaded image is loaded, tagged with the name the user gives and recorded by id as
that project's: another project's jobs may not run it, under any name that reaches the same id.

Loads and deletes go through IAM and the audit log, as every other write.
"""

from __future__ import annotations

import gzip
import hashlib
import re
import shutil
import tempfile
import threading
import time
import uuid
from dataclasses import dataclass
from pathlib import Path

from django.conf import settings
from django.db import transaction

from aiconsole import audit, iam
from aiconsole.errors import AlreadyExists, FailedPrecondition, FieldViolation, InvalidArgument
from aiconsole.models import Project
from aiconsole.v1schema import snake
from jobs import catalogue
from jobs.containers import engine as engines
from jobs.models import ContainerImage
from jobs.spec import roles

IMAGE_SERVICE = "aiconsole.ImageService"
LOAD_METHOD = f"{IMAGE_SERVICE}.LoadImage"
DELETE_METHOD = f"{IMAGE_SERVICE}.DeleteImage"
_NAME_RE = re.compile(r"^[a-z0-9]+(?:[._\-/:][a-z0-9]+)*(?::[A-Za-z0-9_][A-Za-z0-9_.\-]{0,127})?$")
_LOADED_RE = re.compile(r"^Loaded image(?:\(s\)| ID)?:\s*(.+)$", re.MULTILINE)  # docker: "Loaded image ID:"
_CHUNK = 1024 * 1024


@dataclass(frozen=True)
class Resolved:
    """An image reference as the engine resolves it."""

    reference: str
    image_id: str
    size: int
    names: tuple[str, ...] = ()  # every name the engine knows the image by


# How long a reference the engine found stays resolved in this process. Asking the engine costs a
# whole ``podman image inspect`` (50-90 ms), which a job paid at submit and again at its start, and
# every trial of a study again. A replica runs the image by the id resolved here, so a name moved
# to another image meanwhile never runs unchecked; an image removed meanwhile fails at ``run``, in
# the engine's words. A reference not found is asked again each time (it may just have been loaded).
RESOLVED_SECONDS = 10.0
_resolved: dict[str, tuple[float, Resolved]] = {}
_resolved_lock = threading.Lock()


def resolve(reference: str) -> Resolved | None:
    """The image ``reference`` names in the engine's store, None when it has none."""
    now = time.monotonic()
    with _resolved_lock:
        kept = _resolved.get(reference)
    if kept is not None and now - kept[0] < RESOLVED_SECONDS:
        return kept[1]
    engine = engines.available()
    if engine is None:
        return None
    found = engine.inspect_image(reference)
    if not found:
        forget(reference)
        return None
    names = tuple(found.get("RepoTags") or ())
    resolved = Resolved(reference, _bare_id(found.get("Id", "")), int(found.get("Size") or 0), names)
    with _resolved_lock:
        _resolved[reference] = (now, resolved)
    return resolved


def forget(reference: str | None = None) -> None:
    """Drop what this process resolved (one reference, or all): its images were loaded or deleted."""
    with _resolved_lock:
        if reference is None:
            _resolved.clear()
        else:
            _resolved.pop(reference, None)


def _full_name(name: str) -> str:
    """``trainer:v1`` as podman stores it (``localhost/trainer:v1``), to compare names."""
    first = name.split("/", 1)[0]
    return name if "/" in name and ("." in first or ":" in first or first == "localhost") else f"localhost/{name}"


def _bare_id(image_id: str) -> str:
    return image_id.removeprefix("sha256:")


def how_to_bring(reference: str) -> str:
    return (
        f"The image {reference} is not on this server, and images are never pulled here. Upload it "
        "(`docker save IMAGE | gzip > image.tar.gz`, then the project's Container images page or `aiconsole images "
        f"load image.tar.gz --name {reference}`), or have an administrator load it on the host "
        "(`podman load`)."
    )


def check_submission(training_input: dict, *, project: Project) -> list[FieldViolation]:
    """A container job's images must be runnable here by this project: an engine, the image in its
    store, and not another project's upload."""
    images: dict[str, str] = {}
    for _, _, _, key, _ in roles.ROLES:
        image = (training_input.get(key) or {}).get("imageUri")
        if image:
            images.setdefault(image, f"job.training_input.{snake(key)}.image_uri")
    if not images:
        return []
    engine = engines.current()
    if not isinstance(engine, engines.Engine) and settings.EXECUTOR != "inprocess":
        return []  # scaled mode: the workers with an engine check their images before a replica starts
    if not isinstance(engine, engines.Engine):
        field = next(iter(images.values()))
        return [FieldViolation(field, f"Custom containers cannot run on this server. {engine.reason}")]
    violations = []
    for image, field in images.items():
        try:
            runnable(image, project)
        except ImageUnavailable as error:
            violations.append(FieldViolation(field, str(error)))
    return violations


class ImageUnavailable(Exception):
    """The image cannot run for this project; the message says why and what to do."""


def runnable(image: str, project: Project) -> Resolved:
    """The image as ``project`` may run it now: in the engine's store and not another project's
    upload (checked at submit, and again when a replica is prepared)."""
    resolved = resolve(image)
    if resolved is None:
        raise ImageUnavailable(how_to_bring(image))
    problem = ownership_problem(resolved, project)
    if problem:
        raise ImageUnavailable(problem)
    return resolved


def ownership_problem(resolved: Resolved, project: Project) -> str | None:
    """Why ``project`` may not run this image (another project uploaded it), None when it may."""
    uploads = ContainerImage.objects.filter(image_id=resolved.image_id)
    owners = set(uploads.values_list("project_id", flat=True))
    if not owners or project.pk in owners:
        return None
    uploaded_names = {_full_name(name) for name in uploads.values_list("name", flat=True)}
    if any(_full_name(name) not in uploaded_names for name in resolved.names):
        return None  # the host's own store names it too: a project's copy does not take it from the others
    return (
        f"The image {resolved.reference} was uploaded by another project and only its jobs may run it. "
        "Upload the image to this project to use it here."
    )


def gpu_problem(training_input: dict) -> str | None:
    """Why a container replica asking for GPUs cannot have them here, None when it can (or asks none)."""
    wants = [
        plan
        for plan in catalogue.replica_plan(training_input)
        if plan.accelerator_count and "TPU" not in (plan.accelerator_type or "")
    ]
    if not wants:
        return None
    engine = engines.available()
    if engine is not None and len(engine.gpus) >= max(plan.accelerator_count for plan in wants):
        return None
    have = len(engine.gpus) if engine else 0
    return (
        f"A replica asks for {max(p.accelerator_count for p in wants)} GPU(s), and the container engine on this "
        f"server can give containers {have}."
    )


# --- listing ---------------------------------------------------------------------------------------------


def image_resource(image: ContainerImage) -> dict:
    return {
        "name": image.name,
        "imageId": f"sha256:{image.image_id}",
        "digest": image.digest,
        "sizeBytes": str(image.size_bytes),
        "loadedBy": image.loaded_by.username if image.loaded_by else "",
        "createTime": image.create_time.isoformat().replace("+00:00", "Z"),
    }


def list_images(project: Project, *, actor) -> list[ContainerImage]:
    iam.require(actor, "ml.jobs.list", project)
    return list(ContainerImage.objects.filter(project=project).select_related("loaded_by"))


# --- loading an uploaded archive ---------------------------------------------------------------------


def check_name(name: str) -> str:
    name = (name or "").strip()
    if not name or len(name) > 1024 or not _NAME_RE.match(name):
        raise InvalidArgument(
            "name must be an image reference in lower case such as gcr.io/my-project/trainer:v1.",
            [FieldViolation("name", "must be an image reference in lower case such as gcr.io/my-project/trainer:v1")],
        )
    return name if ":" in name.rsplit("/", 1)[-1] else f"{name}:latest"


def load_image(project: Project, name: str, stream, *, actor) -> ContainerImage:
    """Store an uploaded image archive, load it into the engine, tag it ``name`` and record it as
    ``project``'s. ``stream``: a binary file object (the upload)."""
    audit.authorize(actor, "ml.jobs.create", project, method=LOAD_METHOD, request={"name": name})
    name = check_name(name)
    engine = engines.current()
    if not isinstance(engine, engines.Engine):
        raise FailedPrecondition(f"Images cannot be loaded on this server. {engine.reason}")
    if engine.inspect_image(name) and not ContainerImage.objects.filter(project=project, name=name).exists():
        # Tagging would re-point a name the host's image or another project's upload answers to.
        message = (
            f"An image named {name} is already on this server (loaded on the host, or uploaded by another "
            "project). Choose another name."
        )
        raise AlreadyExists(message, [FieldViolation("name", message)])
    archive = _store_archive(project, stream)
    try:
        _load_as(engine, archive, [name])
    except engines.EngineError as error:
        if not ContainerImage.objects.filter(archive=str(archive)).exists():
            archive.unlink(missing_ok=True)
        message = f"The file is not an image archive the engine can load (docker save or podman save output): {error}"
        raise InvalidArgument(message, [FieldViolation("file", message)]) from None
    forget(name)
    found = engine.inspect_image(name) or {}
    digests = found.get("RepoDigests") or []
    with transaction.atomic():
        image, _ = ContainerImage.objects.update_or_create(
            project=project,
            name=name,
            defaults={
                "image_id": _bare_id(found.get("Id", "")),
                "digest": found.get("Digest") or (digests[0].rsplit("@", 1)[-1] if digests else ""),
                "size_bytes": int(found.get("Size") or 0),
                "archive": str(archive),
                "loaded_by": actor,
            },
        )
        audit.record(
            actor=actor,
            project=project,
            method=LOAD_METHOD,
            resource_name=f"{project.resource_name}/images/{name}",
            permission="ml.jobs.create",
            request={"name": name},
            response=image_resource(image),
        )
    return image


def _store_archive(project: Project, stream) -> Path:
    """The upload, under the data dir by content hash; an archive over the size limit is refused."""
    folder = settings.DATA_DIR / "containers" / "archives" / project.project_id
    folder.mkdir(parents=True, exist_ok=True)
    digest, size = hashlib.sha256(), 0
    with tempfile.NamedTemporaryFile(dir=folder, prefix=".upload-", delete=False) as scratch:
        while chunk := stream.read(_CHUNK):
            size += len(chunk)
            if size > settings.CONTAINER_IMAGE_MAX_BYTES:
                Path(scratch.name).unlink()
                limit = settings.CONTAINER_IMAGE_MAX_BYTES
                message = f"An image archive may be at most {limit:,} bytes (AICONSOLE_CONTAINER_IMAGE_MAX_BYTES)."
                raise InvalidArgument(message, [FieldViolation("file", message)])
            digest.update(chunk)
            scratch.write(chunk)
    if size == 0:
        Path(scratch.name).unlink()
        raise InvalidArgument("The image archive is empty.", [FieldViolation("file", "The image archive is empty.")])
    path = folder / f"{digest.hexdigest()}.tar"
    Path(scratch.name).replace(path)
    return path


def _load_as(engine: engines.Engine, archive: Path, names: list[str]) -> None:
    """Load ``archive`` and tag it with ``names`` only. The names written inside the archive are
    the uploader's: a load that added one would offer the image to every project under it, and one
    that re-pointed a name already here would swap the host's (or another project's) image for it,
    so each is put back as it was before ``names`` are given (one of them may be the same name)."""
    before = _names(engine)
    loaded = _load(engine, archive)
    image_id = _bare_id((engine.inspect_image(loaded[0]) or {}).get("Id", "")) or loaded[0]
    hold = f"localhost/aiconsole-loading/{uuid.uuid4().hex}:hold"  # keeps the image while its names go
    engine.call("tag", image_id, hold)
    try:
        for name in loaded:
            if name.startswith("sha256:") or before.get(name) == image_id:
                continue
            try:
                if name in before:
                    engine.call("tag", before[name], name)
                else:
                    engine.call("rmi", name)  # only the name: ``hold`` keeps the image
            except engines.EngineError:
                pass  # the image loaded; a name left behind still answers to this image's owner
        for name in names:
            engine.call("tag", image_id, name)
    finally:
        try:
            engine.call("rmi", hold)
        except engines.EngineError:
            pass


def _names(engine: engines.Engine) -> dict[str, str]:
    """Every name in the engine's store and the id of the image it names."""
    listing = engine.call("images", "--no-trunc", "--format", "{{.Repository}}:{{.Tag}} {{.ID}}")
    found = {}
    for line in listing.splitlines():
        name, _, image_id = line.strip().rpartition(" ")
        if name and "<none>" not in name:
            found[name] = _bare_id(image_id)
    return found


def _load(engine: engines.Engine, archive: Path) -> list[str]:
    """Load ``archive`` (gzipped or not: podman 4.3 reads a gzipped one only from a stream) and
    return what the engine calls the loaded image (its names, or its id)."""
    with open(archive, "rb") as head:
        gzipped = head.read(2) == b"\x1f\x8b"
    with tempfile.TemporaryFile() as plain:
        if gzipped:
            try:
                with gzip.open(archive, "rb") as unzipped:
                    shutil.copyfileobj(unzipped, plain, _CHUNK)
            except (OSError, EOFError) as error:
                raise engines.EngineError(f"it is gzipped but cannot be unpacked ({error})") from None
        else:
            with open(archive, "rb") as source:
                shutil.copyfileobj(source, plain, _CHUNK)
        plain.seek(0)
        output = engine.call("load", stdin=plain, timeout=1800)
    names = [line.strip() for match in _LOADED_RE.finditer(output) for line in match.group(1).split(",")]
    if not names:
        raise engines.EngineError(f"it loaded nothing the engine named ({output.strip()[:200]})")
    return names


def delete_image(project: Project, name: str, *, actor) -> None:
    """Forget the project's image ``name`` and remove it from the engine when nothing else names it."""
    audit.authorize(actor, "ml.jobs.create", project, method=DELETE_METHOD, request={"name": name})
    image = ContainerImage.objects.filter(project=project, name=name).first()
    if image is None:
        raise iam.NotFound(f"{project.resource_name}/images/{name}")
    with transaction.atomic():
        response = image_resource(image)
        image.delete()
        audit.record(
            actor=actor,
            project=project,
            method=DELETE_METHOD,
            resource_name=f"{project.resource_name}/images/{name}",
            permission="ml.jobs.create",
            request={"name": name},
            response=response,
        )
    engine = engines.available()
    if engine is not None:
        try:
            engine.call("rmi", name)  # the tag; the image itself goes once no tag or container holds it
        except engines.EngineError:
            pass
        forget(name)
    if not ContainerImage.objects.filter(archive=image.archive).exists():
        Path(image.archive).unlink(missing_ok=True)


def load_uploaded(project: Project, name: str) -> bool:
    """Scaled mode: a worker whose engine lacks the project's uploaded image ``name`` loads it from
    the stored archive (on the data dir the workers share); whether it did."""
    try:
        name = check_name(name)
    except InvalidArgument:
        return False  # an id or a name no upload could have
    record = ContainerImage.objects.filter(project=project, name=name).first()
    return record is not None and ensure_loaded(record.image_id)


def ensure_loaded(image_id: str) -> bool:
    """Scaled mode: load an uploaded image on a worker whose engine lacks it, from its stored archive."""
    engine = engines.available()
    if engine is None:
        return False
    if engine.inspect_image(image_id):
        return True
    record = ContainerImage.objects.filter(image_id=image_id).exclude(archive="").first()
    if record is None or not Path(record.archive).is_file():
        return False
    try:
        _load_as(
            engine,
            Path(record.archive),
            list(ContainerImage.objects.filter(image_id=image_id).values_list("name", flat=True)),
        )
    except engines.EngineError:
        return False
    return True
