"""Which images a project's jobs may run, and images uploaded as archives.

Nothing is ever pulled: an image comes from the engine's own store, where an administrator built
or loaded it on the host (it runs for every project, by its name or id), or from an archive a
project uploaded (``docker save`` / ``podman save`` output: docker-archive or oci-archive, gzipped
or not). An uploaded image is loaded, tagged with the name the user gives and recorded by id as
that project's: another project's jobs may not run it, under any name that reaches the same id.

Loads and deletes go through IAM and the audit log, as every other write.
"""

from __future__ import annotations

import hashlib
import io
import json
import re
import tarfile
import tempfile
import threading
import time
from dataclasses import dataclass
from pathlib import Path

from django.conf import settings
from django.db import transaction

from aiconsole import audit, iam
from aiconsole.errors import AlreadyExists, FailedPrecondition, FieldViolation, InvalidArgument
from aiconsole.models import Project
from aiconsole.protojson import snake
from algorithms import definitions as algos
from jobs import catalogue
from jobs.containers import engine as engines
from jobs.models import ContainerImage
from jobs.runtimes import prebuilt
from jobs.validation import roles

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


def tagged(name: str) -> str:
    """``trainer`` as ``trainer:latest``, as uploads are recorded (ids and digests as they are)."""
    if name.startswith("sha256:") or "@" in name:
        return name
    return name if ":" in name.rsplit("/", 1)[-1] else f"{name}:latest"


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
    """What submitting a container job checks (``kinds.register_submission_check``): its images
    runnable here by this project, an engine, the image in its store, not another project's upload;
    and, with ``AICONSOLE_CONTAINER_GPU_MISSING=refuse``, the GPUs it asks for. A built-in
    algorithm's image is the console's own, checked by its own rules."""
    if algos.for_training_input(training_input):
        return []
    violations = _image_violations(training_input, project)
    gpu = gpu_problem(training_input) if not violations else None
    if gpu and settings.CONTAINER_GPU_MISSING == "refuse":
        violations.append(FieldViolation("job.training_input.master_config.accelerator_config", gpu))
    return violations


def _image_violations(training_input: dict, project: Project) -> list[FieldViolation]:
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
        if prebuilt.recipe_for(image) is not None:
            continue  # one of Google's pre-built images: built here while the job waits, if not yet
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
    """Why ``project`` may not run this image (another project uploaded it), None when it may.

    An image no project uploaded is the host's, and runs for every project. One that a project
    uploaded runs for that project, and for another only by a name the host's administrator gave it
    (a name no project's upload holds, asked for by that very name): never because the image
    happens to carry some name nobody recorded, nor by another project's name for it."""
    uploads = ContainerImage.objects.filter(image_id=resolved.image_id)
    owners = set(uploads.values_list("project_id", flat=True))
    if not owners or project.pk in owners:
        return None
    reference = _full_name(tagged(resolved.reference))
    spellings = {reference, reference.removeprefix("localhost/")}
    uploaded_by_that_name = ContainerImage.objects.filter(name__in=spellings).exists()
    if reference in {_full_name(name) for name in resolved.names} and not uploaded_by_that_name:
        return None  # the host's own store names it so: a project's copy does not take it from the others
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
    if prebuilt.is_prebuilt(name):
        # Google's pre-built images are built here, for every project (jobs/containers/prebuilt.py).
        raise InvalidArgument(
            f"name {name} is one of Google's pre-built training images, which this console builds itself; "
            "choose a name of your own.",
            [FieldViolation("name", "must not be the name of one of Google's pre-built training images")],
        )
    engine = engines.current()
    if not isinstance(engine, engines.Engine):
        raise FailedPrecondition(f"Images cannot be loaded on this server. {engine.reason}")
    _check_name_free(engine, name, project)  # at once, before the upload is stored; again when tagging
    archive = _store_archive(project, stream)
    try:
        _load_as(engine, archive, [name], project=project)
    except AlreadyExists:
        if not ContainerImage.objects.filter(archive=str(archive)).exists():
            archive.unlink(missing_ok=True)
        raise
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


_tagging = threading.Lock()  # one check-then-tag at a time: two uploads never take one name


def _load_as(engine: engines.Engine, archive: Path, names: list[str], *, project: Project | None = None) -> None:
    """Load ``archive`` with none of the names written inside it, then give it ``names``.

    The names inside an archive are the uploader's words: a load that applied them would, for as
    long as it took to put them back, point another project's (or the host's) name at the
    uploader's image, and that project's jobs would run the uploader's code as their own account.
    So the archive is loaded nameless (:func:`_load`) and only then named, by the console. With
    ``project`` (an upload), a name the engine has that the project did not upload is refused
    under the same lock the tagging holds."""
    image_id = _load(engine, archive)
    with _tagging:
        for name in names:
            if project is not None:
                _check_name_free(engine, name, project)
            engine.call("tag", image_id, name)
            forget(name)


def name_host_image(engine: engines.Engine, image_id: str, names: list[str]) -> list[str]:
    """Give an image of the host's own (one the console built) ``names``, under the lock uploads are
    named under; the names a project's upload holds are left to it, and returned."""
    refused = []
    with _tagging:
        for name in names:
            spellings = {name, _full_name(name), _full_name(name).removeprefix("localhost/")}
            if ContainerImage.objects.filter(name__in=spellings).exists():
                refused.append(name)
                continue
            engine.call("tag", image_id, name)
            forget(name)
    return refused


def _check_name_free(engine: engines.Engine, name: str, project: Project) -> None:
    if engine.inspect_image(name) and not ContainerImage.objects.filter(project=project, name=name).exists():
        # Tagging would re-point a name the host's image or another project's upload answers to.
        message = (
            f"An image named {name} is already on this server (loaded on the host, or uploaded by another "
            "project). Choose another name."
        )
        raise AlreadyExists(message, [FieldViolation("name", message)])


# An image archive's layers are mostly compressed already: its gzip seldom saves more than a few
# times its size. Unpacking to more than this many times the upload (past a floor), or past the
# setting, is a bomb, stopped there.
UNPACK_RATIO = 20
UNPACK_FLOOR_BYTES = 256 * 1024**2
NAMES_FILES = {"manifest.json", "index.json", "repositories"}
NAMES_FILE_MAX_BYTES = 16 * 1024**2


class _TooLarge(Exception):
    pass


class _Counted:
    """A file that refuses to grow past ``limit`` bytes."""

    def __init__(self, handle, limit: int):
        self.handle, self.limit, self.written = handle, limit, 0

    def write(self, data: bytes) -> int:
        self.written += len(data)
        if self.written > self.limit:
            raise _TooLarge()
        return self.handle.write(data)


def unpack_limit(archive_bytes: int) -> int:
    return min(settings.CONTAINER_IMAGE_MAX_UNPACKED_BYTES, max(UNPACK_FLOOR_BYTES, UNPACK_RATIO * archive_bytes))


def _load(engine: engines.Engine, archive: Path) -> str:
    """Load ``archive`` (docker-archive or oci-archive, gzipped or not) without its names; the id
    of the image it holds. It is rewritten on the way, unpacked into a file that is never linked
    into any folder (gone when closed, even by a crash) and bounded by :func:`unpack_limit`."""
    limit = unpack_limit(archive.stat().st_size)
    with tempfile.TemporaryFile() as plain:
        try:
            with open(archive, "rb") as source:
                _without_names(source, _Counted(plain, limit))
        except _TooLarge:
            raise engines.EngineError(
                f"it unpacks to more than {limit:,} bytes, the most an upload of its size may "
                "(AICONSOLE_CONTAINER_IMAGE_MAX_UNPACKED_BYTES)"
            ) from None
        except (tarfile.TarError, OSError, EOFError, ValueError) as error:
            raise engines.EngineError(f"it is not a tar archive, gzipped or not ({error})") from None
        plain.seek(0)
        output = engine.call("load", stdin=plain, timeout=1800)
    loaded = [line.strip() for match in _LOADED_RE.finditer(output) for line in match.group(1).split(",")]
    if len(loaded) != 1:
        raise engines.EngineError(f"it holds {len(loaded)} images where one was expected ({output.strip()[:200]})")
    return _bare_id((engine.inspect_image(loaded[0]) or {}).get("Id", "")) or _bare_id(loaded[0])


def _without_names(source, out) -> None:
    """Copy a tar stream, dropping the image names from its docker-archive (``manifest.json``'s
    ``RepoTags``, ``repositories``) and oci-archive (``index.json``'s reference annotations) files."""
    with (
        tarfile.open(fileobj=source, mode="r|*") as archive,
        tarfile.open(fileobj=out, mode="w|", format=tarfile.PAX_FORMAT) as copy,
    ):
        for member in archive:
            name = member.name.removeprefix("./")
            if name == "repositories":
                continue
            if member.isfile() and name in NAMES_FILES:
                handle = archive.extractfile(member)
                assert handle is not None  # a regular file's
                data = _nameless(name, handle.read(NAMES_FILE_MAX_BYTES + 1))
                member.size = len(data)
                copy.addfile(member, io.BytesIO(data))
            else:
                copy.addfile(member, archive.extractfile(member) if member.isfile() else None)


def _nameless(name: str, data: bytes) -> bytes:
    if len(data) > NAMES_FILE_MAX_BYTES:
        raise ValueError(f"its {name} is larger than {NAMES_FILE_MAX_BYTES} bytes")
    document = json.loads(data)
    if name == "manifest.json":
        for image in document if isinstance(document, list) else []:
            if isinstance(image, dict):
                image["RepoTags"] = None
    else:
        for manifest in document.get("manifests", []) if isinstance(document, dict) else []:
            annotations = manifest.get("annotations") if isinstance(manifest, dict) else None
            if isinstance(annotations, dict):
                for key in ("org.opencontainers.image.ref.name", "io.containerd.image.name"):
                    annotations.pop(key, None)
    return json.dumps(document).encode()


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
