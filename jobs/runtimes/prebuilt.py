"""Google's pre-built training images, and which of them this machine can build.

Jobs name Google's pre-built images as their code: a container job its ``imageUri``
(``us-docker.pkg.dev/vertex-ai/training/pytorch-cpu.1-13:latest``), an AI Platform job with
``--master-image-uri gcr.io/cloud-ml-public/training/pytorch-cpu.1-11`` and a package, a Vertex
AI job a ``pythonPackageSpec.executorImageUri``. No registry is reachable here, so a known image
is built on this machine instead, from a recipe (``prebuilt.toml``; the families the runtime
versions provide come from their locks) and tagged with every name Google gave it.

Pure data and matching; the build is ``jobs.containers.prebuilt``'s.
"""

from __future__ import annotations

import functools
import hashlib
import json
import re
import tomllib
from dataclasses import dataclass, field
from pathlib import Path

from django.conf import settings

from jobs import runtimes

HERE = Path(__file__).resolve().parent
LOCAL_PREFIX = "localhost/ai-console/prebuilt/"  # the console's own tag for the image a recipe made

# Any pre-built training image's name, buildable here or not:
# <host>/<vertex-ai|vertex-ai-restricted|cloud-aiplatform|cloud-ml-public>/training/<family>.<M>-<m>[.pyNNN][:tag]
NAME = re.compile(
    r"^(?P<registry>[a-z0-9.-]+/(?:vertex-ai|vertex-ai-restricted|cloud-aiplatform|cloud-ml-public)/training)/"
    r"(?P<family>[a-z0-9-]+)\.(?P<major>\d+)-(?P<minor>\d+)(?:\.py(?P<python>\d)(?P<python_minor>\d+))?"
    r"(?::(?P<tag>[\w.-]+))?$"
)

# family → the framework whose version its name gives, for the families the runtime versions
# provide (as Runtime.frameworks() labels them)
RUNTIME_FAMILIES = {
    "tf-cpu": "TensorFlow",
    "sklearn-cpu": "scikit-learn",
    "scikit-learn-cpu": "scikit-learn",  # Vertex's older name (scikit-learn-cpu.0-23)
    "xgboost-cpu": "XGBoost",
}
# What a family's name says it needs, when this machine cannot build it
NOT_BUILT = (
    ("tpu", "a TPU"),
    ("xla", "XLA on TPUs"),
    ("gpu", "NVIDIA GPUs and CUDA"),
)


@dataclass(frozen=True)
class Recipe:
    """How one pre-built image is made here."""

    name: str  # "pytorch-cpu.1-13"
    python: str  # "debian" (the suite's python3) or a version ("3.7") copied from this machine
    debian: tuple[str, ...] = ()
    pip: tuple[str, ...] = ()  # requirements from the index, binary only
    python_tools: tuple[str, ...] = ()  # what a copied interpreter gets besides (pip, setuptools, wheel)
    lock: str | None = None  # a runtime's hash-checked lock instead of ``pip``
    suite: str = "bookworm"
    variant: str = "minbase"
    mirror: str | None = None  # mmdebstrap's mirror argument; None: AICONSOLE_PREBUILT_DEBIAN_MIRROR
    registries: tuple[str, ...] = ()  # every registry path that named it
    source: str = ""  # what the job's log says it is built from
    runtime: str | None = None  # the runtime version whose lock it installs

    @property
    def family(self) -> str:
        return self.name.rsplit(".", 1)[0]

    @property
    def version(self) -> str:
        return self.name.rsplit(".", 1)[1].replace("-", ".")

    @property
    def names(self) -> list[str]:
        """Every name Google used for it (``:latest``), first the first registry's."""
        return [f"{registry}/{self.name}:latest" for registry in self.registries]

    @property
    def key(self) -> str:
        """A digest of everything the image is made from: a changed recipe is a new image."""
        made_of = {
            "name": self.name,
            "python": self.python,
            "debian": self.debian,
            "pip": self.pip,
            "python_tools": self.python_tools,
            "lock": Path(self.lock).read_text() if self.lock else None,
            "suite": self.suite,
            "variant": self.variant,
            "mirror": self.mirror,
        }
        return hashlib.sha256(json.dumps(made_of, sort_keys=True).encode()).hexdigest()

    @property
    def local_name(self) -> str:
        """The console's own tag for it, which says which recipe made it."""
        return f"{LOCAL_PREFIX}{self.name}:{self.key[:12]}"


def _read(path: Path) -> dict:
    return tomllib.loads(path.read_text())


@functools.cache
def _catalogue_from(extra: str) -> dict[str, Recipe]:
    shipped = _read(HERE / "prebuilt.toml")
    defaults, registries = shipped.get("defaults", {}), dict(shipped.get("registries", {}))
    recipes = _recipes(shipped, defaults, registries)
    for family, framework in RUNTIME_FAMILIES.items():
        for version, runtime_name in runtime_versions(framework).items():
            name = f"{family}.{version.replace('.', '-')}"
            runtime = runtimes.RUNTIMES[runtime_name]
            python = runtimes.default_python(runtime)
            if not runtime.lock_path(python, "cpu").is_file():
                continue
            recipes.setdefault(
                name,
                Recipe(
                    name=name,
                    python=python,
                    debian=tuple(defaults.get("debian", ())),
                    python_tools=tuple(defaults.get("python_tools", ())),
                    lock=str(runtime.lock_path(python, "cpu")),
                    suite=defaults.get("suite", "bookworm"),
                    variant=defaults.get("variant", "minbase"),
                    registries=tuple(registries["vertex"]),
                    source=f"runtime version {runtime_name}'s packages on Python {python}",
                    runtime=runtime_name,
                ),
            )
    if extra:  # the site's own: its defaults apply to its images alone
        site = _read(Path(extra))
        registries.update(site.get("registries", {}))
        recipes.update(_recipes(site, {**defaults, **site.get("defaults", {})}, registries))
    return dict(sorted(recipes.items(), key=lambda item: _sort_key(item[0])))


def _recipes(data: dict, defaults: dict, registries: dict[str, list[str]]) -> dict[str, Recipe]:
    recipes = {}
    for name, entry in data.get("image", {}).items():
        suite = entry.get("suite", defaults.get("suite", "bookworm"))
        source = f"Debian {suite}" + (f" ({', '.join(entry['debian'])})" if entry.get("debian") else "")
        source += f" and the package index ({', '.join(entry['pip'])})" if entry.get("pip") else ""
        recipes[name] = Recipe(
            name=name,
            python=entry["python"],
            debian=tuple(defaults.get("debian", ())) + tuple(entry.get("debian", ())),
            pip=tuple(entry.get("pip", ())),
            python_tools=tuple(entry.get("python_tools", defaults.get("python_tools", ()))),
            suite=suite,
            variant=entry.get("variant", defaults.get("variant", "minbase")),
            mirror=entry.get("mirror", defaults.get("mirror")),
            registries=tuple(path for group in entry.get("registries", ["vertex"]) for path in registries[group]),
            source=entry.get("source", source),
        )
    return recipes


def catalogue() -> dict[str, Recipe]:
    """Every pre-built image this machine can build, by ``family.M-m``."""
    return _catalogue_from(settings.PREBUILT_IMAGES or "")


def _sort_key(name: str) -> tuple:
    family, _, version = name.rpartition(".")
    return (family, tuple(int(part) for part in version.split("-")))


def runtime_versions(framework: str) -> dict[str, str]:
    """``{"0.23": "2.3", …}``: each version of a framework the runtime versions have, with the newest
    runtime that has it, oldest version first."""
    versions: dict[str, str] = {}
    for runtime in runtimes.RUNTIMES.values():  # oldest first: the newest runtime wins
        found = runtime.frameworks().get(framework)
        if found:
            versions[".".join(found.split(".")[:2])] = runtime.name
    return dict(sorted(versions.items(), key=lambda item: tuple(int(p) for p in item[0].split("."))))


@dataclass(frozen=True)
class Asked:
    """A pre-built image's name, parsed."""

    reference: str
    registry: str
    family: str
    version: str  # "1.13"
    python: str | None  # what its .pyNNN suffix says ("3.10"), when it has one
    name: str = field(init=False)

    def __post_init__(self):
        object.__setattr__(self, "name", f"{self.family}.{self.version.replace('.', '-')}")


def parse(reference: str) -> Asked | None:
    """The parts of a pre-built image's name; None for any other image."""
    match = NAME.match(reference or "")
    if not match:
        return None
    python = f"{match['python']}.{match['python_minor']}" if match["python"] else None
    return Asked(reference, match["registry"], match["family"], f"{int(match['major'])}.{int(match['minor'])}", python)


def is_prebuilt(reference: str) -> bool:
    """Whether ``reference`` names one of Google's pre-built training images, buildable or not."""
    return parse(reference) is not None


def recipe_for(reference: str) -> Recipe | None:
    """The recipe of the pre-built image ``reference`` names, None when it is none this machine builds."""
    asked = parse(reference)
    return catalogue().get(asked.name) if asked else None


def buildable_text() -> str:
    """What can be built, by family: ``pytorch-cpu.1-4, 1-6 …; tf-cpu.1-15 …``."""
    families: dict[str, list[str]] = {}
    for recipe in catalogue().values():
        families.setdefault(recipe.family, []).append(recipe.name.rsplit(".", 1)[1])
    return "; ".join(f"{family}.{', '.join(versions)}" for family, versions in families.items())


def refusal(reference: str) -> str:
    """Why a pre-built image cannot be built here, with what can."""
    asked = parse(reference)
    assert asked is not None
    needs = next((what for word, what in NOT_BUILT if word in asked.family.split("-")), None)
    families = {recipe.family for recipe in catalogue().values()}
    if needs:
        why = f"{reference} needs {needs}, and its image cannot be built on this machine"
    elif asked.family in families:
        why = f"{reference} asks for version {asked.version}, which this machine cannot build"
    else:
        why = f"{reference} is a pre-built image of a family ({asked.family}) this machine cannot build"
    return (
        f"{why}. Google's pre-built images are built here from Debian and the package index; these can be "
        f"(any registry Google used, any .pyNNN suffix): {buildable_text()}."
    )
