"""The images a project's job form offers to pick from (a hint, never a rule).

Its uploads first, then the images an administrator put in the engine's own store, less those
another project uploaded (its jobs alone may run them) and the engine's own infrastructure (a pod's
pause image), then Google's pre-built images this machine builds (``jobs.runtimes.prebuilt``).
The submit checks in ``images`` still decide what runs; this only lists, with one engine call,
and an engine that is missing or fails lists nothing from the host rather than failing the page.
"""

from __future__ import annotations

import json

from aiconsole.models import Project
from jobs.containers import engine as engines
from jobs.models import ContainerImage
from jobs.runtimes import prebuilt

MOST = 200  # a datalist longer than this helps nobody
# The engines' own images, which no job runs: a pod's infra container (podman builds its pause image
# locally; Kubernetes' comes from its registry).
INFRASTRUCTURE = ("localhost/podman-pause:", "k8s.gcr.io/pause:", "registry.k8s.io/pause:", "docker.io/library/pause:")
LIST_SECONDS = 10.0


def offered_images(project: Project) -> list[str]:
    """Image references for the form's datalist: ``project``'s uploads, then the host's images."""
    uploads = ContainerImage.objects.filter(project=project)
    own = list(uploads.values_list("name", flat=True))
    own_ids = set(uploads.values_list("image_id", flat=True))
    theirs = set(ContainerImage.objects.exclude(project=project).values_list("image_id", flat=True)) - own_ids
    host = [
        name
        for image_id, name in host_images()
        if not _owned_elsewhere(image_id, theirs)
        and not name.startswith(INFRASTRUCTURE)
        and not name.startswith(prebuilt.LOCAL_PREFIX)
        and not prebuilt.is_prebuilt(name)
    ]
    # Google's pre-built images, built or not (one is built when a job names it), by Vertex's name.
    google = [recipe.names[0] for recipe in prebuilt.catalogue().values() if recipe.names]
    return list(dict.fromkeys(own + sorted(host) + google))[:MOST]


def host_images() -> list[tuple[str, str]]:
    """(image id, name) for every named image in the engine's store; none without an engine."""
    engine = engines.available()
    if engine is None:
        return []
    try:
        text = engine.call("images", "--format", "json", timeout=LIST_SECONDS)
    except engines.EngineError:
        return []
    return parse_listing(text)


def parse_listing(text: str) -> list[tuple[str, str]]:
    """podman's JSON array (``Id``, ``Names``), or docker's JSON object per line (``ID``,
    ``Repository``, ``Tag``); dangling images (``<none>``) are left out."""
    try:
        entries = json.loads(text or "[]")
    except json.JSONDecodeError:
        entries = [_json_line(line) for line in text.splitlines()]
    found = []
    for entry in entries if isinstance(entries, list) else []:
        if not isinstance(entry, dict):
            continue
        image_id = str(entry.get("Id") or entry.get("ID") or "").removeprefix("sha256:")
        names = entry.get("Names") or []
        if not names and entry.get("Repository") not in (None, "", "<none>") and entry.get("Tag") != "<none>":
            names = [f"{entry['Repository']}:{entry.get('Tag') or 'latest'}"]
        found += [(image_id, str(name)) for name in names if name and "<none>" not in str(name)]
    return found


def _json_line(line: str) -> dict | None:
    try:
        return json.loads(line)
    except json.JSONDecodeError:
        return None


def _owned_elsewhere(image_id: str, theirs: set[str]) -> bool:
    # docker lists short ids (12 hex digits); the rows keep the full one.
    return bool(image_id) and any(full.startswith(image_id) for full in theirs)
