"""Vertex AI's pre-built training images, as this console's runtime versions.

A ``pythonPackageSpec`` names the image its package runs in (``executorImageUri``): Google's
pre-built images, ``…/vertex-ai/training/tf-cpu.2-11.py310:latest``, ``sklearn-cpu.1-0``,
``xgboost-cpu.1-6`` (older ones under ``gcr.io/cloud-aiplatform/training/``). The console does not
have Google's images and never claims to run them: it runs the package on the runtime version
whose framework has the image's version (the newest such runtime), as it runs any package job,
and says so on the job. The families and versions it can honour are read from the runtime list
(``jobs.runtimes``), so they follow it. Other pre-built images this machine can build
(``pytorch-cpu.1-13``: ``jobs.runtimes.prebuilt``) run the package in the image itself; any other
is refused at create, naming them.

Pure functions over the runtime list; no database.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from jobs import runtimes
from jobs.runtimes import prebuilt

# family → the framework whose version the image's name gives (as Runtime.frameworks() labels it)
FAMILIES = {**prebuilt.RUNTIME_FAMILIES, "tf-gpu": "TensorFlow"}
_PREBUILT = prebuilt.NAME


@dataclass(frozen=True)
class Executor:
    """What an ``executorImageUri`` runs on here."""

    image: str
    family: str
    framework: str
    version: str  # the image's framework version, major.minor
    runtime: str  # the console's runtime version
    python: str  # the Python that runtime runs
    image_python: str | None  # the Python Google's image has (its .pyNNN suffix), when it says

    @property
    def note(self) -> str:
        """What the job's page and log say about it, plainly."""
        runtime = runtimes.RUNTIMES[self.runtime]
        stack = ", ".join(f"{name} {version}" for name, version in runtime.frameworks().items())
        python = f"Python {self.python}"
        if self.image_python and self.image_python != self.python:
            python += f", where Google's image has Python {self.image_python}"
        return (
            f"executorImageUri {self.image} is not run: this console has no Google images. The package runs on "
            f"this console's runtime version {self.runtime}, the newest here with {self.framework} {self.version}: "
            f"{stack}, on {python}."
        )


def honoured() -> dict[str, dict[str, str]]:
    """Every family and version this console can honour, with the runtime each maps to:
    ``{"tf-cpu": {"2.11": "2.11", …}, "sklearn-cpu": {"1.0": "2.11", …}, …}``."""
    return {family: prebuilt.runtime_versions(framework) for family, framework in FAMILIES.items()}


def honoured_text() -> str:
    """The families and versions honoured, in a sentence: ``tf-cpu.1-15, 2-1 …; sklearn-cpu.0-20 …``."""
    return "; ".join(
        f"{family}.{', '.join(v.replace('.', '-') for v in versions)}" for family, versions in honoured().items()
    )


def is_prebuilt(image: str) -> bool:
    """Whether the image is one of Google's pre-built training images (any family, honoured or not)."""
    return bool(_PREBUILT.match(image or ""))


def resolve(image: str) -> Executor | None:
    """The runtime an ``executorImageUri`` runs on here; None when it cannot be honoured."""
    match = _PREBUILT.match(image or "")
    if not match or match["family"] not in FAMILIES:
        return None
    version = f"{int(match['major'])}.{int(match['minor'])}"
    runtime_name = honoured()[match["family"]].get(version)
    if runtime_name is None:
        return None
    runtime = runtimes.RUNTIMES[runtime_name]
    image_python = f"{match['python']}.{match['python_minor']}" if match["python"] else None
    return Executor(
        image=image,
        family=match["family"],
        framework=FAMILIES[match["family"]],
        version=version,
        runtime=runtime_name,
        python=runtimes.default_python(runtime),
        image_python=image_python,
    )


def refusal(image: str) -> str:
    """Why an ``executorImageUri`` is refused, with the images that would run."""
    if not prebuilt.is_prebuilt(image):
        return (
            f"executorImageUri {image} is not one of Vertex AI's pre-built training images (a custom image runs "
            f"as a containerSpec.imageUri instead). Packages run on this console's runtime versions for "
            f"{honoured_text()}; and in these images, built here: {prebuilt.buildable_text()}."
        )
    return f"executorImageUri {prebuilt.refusal(image)}"


# --- pre-built prediction images --------------------------------------------------------------------

# Google's pre-built prediction images: registry/vertex-ai/prediction/<family>.<major>-<minor>[:tag]
PREDICTION_IMAGE = re.compile(
    r"^[a-z0-9.-]+/(?:vertex-ai|vertex-ai-restricted|cloud-aiplatform)/prediction/"
    r"(?P<family>[a-z0-9-]+)\.(?P<major>\d+)-(?P<minor>\d+)(?::[\w.-]+)?$"
)
# family → (the framework as the runtime list names it, the model registry's framework)
PREDICTION_FAMILIES = {
    "sklearn-cpu": ("scikit-learn", "SCIKIT_LEARN"),
    "xgboost-cpu": ("XGBoost", "XGBOOST"),
    "tf2-cpu": ("TensorFlow", "TENSORFLOW"),
    "tf-cpu": ("TensorFlow", "TENSORFLOW"),
}


@dataclass(frozen=True)
class Server:
    """What serves a model uploaded with a pre-built prediction image here."""

    runtime: str  # the console's runtime version
    python: str
    framework: str  # SCIKIT_LEARN, XGBOOST or TENSORFLOW


def prediction_server(image: str) -> Server | None:
    """The runtime whose framework server answers for a pre-built prediction image: the one with
    the image's framework version, else the nearest; None for any other image."""
    match = PREDICTION_IMAGE.match(image or "")
    if not match or match["family"] not in PREDICTION_FAMILIES:
        return None
    label, framework = PREDICTION_FAMILIES[match["family"]]
    versions = prebuilt.runtime_versions(label)
    if not versions:
        return None
    asked = int(match["major"]) * 100 + int(match["minor"])

    def distance(version: str) -> tuple[int, int]:
        major, minor = (int(p) for p in version.split("."))
        return abs(major * 100 + minor - asked), -(major * 100 + minor)

    runtime_name = versions[min(versions, key=distance)]
    return Server(runtime_name, runtimes.default_python(runtimes.RUNTIMES[runtime_name]), framework)


def prediction_refusal(image: str) -> str:
    """Why a serving container is not served here, with the images that are."""
    families = []
    for family, (label, _) in PREDICTION_FAMILIES.items():
        versions = ", ".join(v.replace(".", "-") for v in prebuilt.runtime_versions(label))
        if versions:
            families.append(f"{family}.{versions}")
    return (
        f"{image or 'An empty imageUri'} is not served here: models are served by this console's framework "
        "servers, for Google's pre-built prediction images (us-docker.pkg.dev/vertex-ai/prediction/"
        f"FAMILY.VERSION): {'; '.join(families)}; or by a serving container of your own, loaded into the "
        "console's container engine (aiconsole images load)."
    )
