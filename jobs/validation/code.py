"""TrainingInput rules for what a job runs: Python packages, or custom containers.

A job runs either Python packages (``packageUris`` and ``pythonModule``, on a runtime and Python
version) or containers (``imageUri``, which bring their own runtime), never both, except a package
in one of Google's pre-built images (``jobs.runtimes.prebuilt``), as the original ran them; the
container fields and ``tpuTfVersion`` are checked per replica.
"""

from __future__ import annotations

import re

from aiconsole.errors import Violations
from aiconsole.protojson import snake
from jobs.catalogue import CLOUD_TPU, DEFAULT_RUNTIME_VERSION, RUNTIME_VERSIONS
from jobs.runtimes import prebuilt
from jobs.validation import roles
from jobs.validation.schema import one_of

_MODULE_RE = re.compile(r"^[A-Za-z_]\w*(\.[A-Za-z_]\w*)*$")
_IMAGE_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._\-/:@]*$")
_MAX_PACKAGES = 100


def check_code(ti: dict, path: str, errors: Violations) -> None:
    configs = {key: ti.get(key) or {} for _, _, _, key, _ in roles.ROLES}
    master_image = configs["masterConfig"].get("imageUri")
    container = any(config.get("imageUri") for config in configs.values())
    # A trainer package in one of Google's pre-built images (AI Platform's PyTorch images were used so:
    # --master-image-uri gcr.io/cloud-ml-public/training/pytorch-cpu.1-11 with --package-path).
    package_in_image = bool(
        master_image
        and prebuilt.recipe_for(master_image) is not None
        and (ti.get("packageUris") or ti.get("pythonModule"))
    )
    for key, config in configs.items():
        image = config.get("imageUri")
        field = f"{path}.{snake(key)}.image_uri"
        if image and not _IMAGE_RE.match(image):
            errors.add(
                field, f"{key}.imageUri must be a container image reference such as gcr.io/my-project/trainer:latest."
            )
        elif image and prebuilt.is_prebuilt(image) and prebuilt.recipe_for(image) is None:
            errors.add(field, f"{key}.imageUri {prebuilt.refusal(image)}")
        if image and not master_image:
            errors.add(
                field,
                f"{key}.imageUri requires masterConfig.imageUri: a job runs either Python packages or containers.",
            )
        elif image and package_in_image and key != "masterConfig" and image != master_image:
            errors.add(
                field,
                f"{key}.imageUri cannot differ from masterConfig.imageUri with packageUris: every replica runs the "
                "trainer package in the master's pre-built image.",
            )
    _check_packages(ti, path, errors, required=not master_image or package_in_image)
    if container:
        for key in ("runtimeVersion", "pythonVersion"):
            if ti.get(key):
                errors.add(
                    f"{path}.{snake(key)}",
                    f"{key} cannot be set together with imageUri: a custom container brings its own runtime.",
                )
        for key in ("packageUris", "pythonModule"):
            if ti.get(key) and not package_in_image:
                errors.add(
                    f"{path}.{snake(key)}",
                    f"{key} cannot be set together with imageUri: a custom container brings its own code "
                    "(only Google's pre-built images run a trainer package, e.g. "
                    "gcr.io/cloud-ml-public/training/pytorch-cpu.1-11).",
                )
    else:
        _check_runtime(ti, path, errors)
    _check_container_fields(ti, path, configs, container, errors, package_in_image=package_in_image)


def _check_packages(ti: dict, path: str, errors: Violations, *, required: bool) -> None:
    packages = ti.get("packageUris", [])
    if required and not packages:
        errors.add(
            f"{path}.package_uris",
            "packageUris is required: give at least one Python "
            "package, or set masterConfig.imageUri to run a custom container.",
        )
    if len(packages) > _MAX_PACKAGES:
        errors.add(
            f"{path}.package_uris", f"packageUris can list at most {_MAX_PACKAGES} packages; got {len(packages)}."
        )
    for i, uri in enumerate(packages):
        if not uri.strip():
            errors.add(f"{path}.package_uris[{i}]", "A package URI must not be empty.")
    module = ti.get("pythonModule")
    if required and not module:
        errors.add(
            f"{path}.python_module",
            "pythonModule is required: name the module to run, "
            "e.g. trainer.task, or set masterConfig.imageUri to run a custom container.",
        )
    elif module and not _MODULE_RE.match(module):
        errors.add(
            f"{path}.python_module",
            f'pythonModule "{module}" must be a dotted Python module name such as trainer.task.',
        )


def _check_runtime(ti: dict, path: str, errors: Violations) -> None:
    runtime = ti.get("runtimeVersion")
    if runtime and runtime not in RUNTIME_VERSIONS:
        errors.add(
            f"{path}.runtime_version",
            f'runtimeVersion "{runtime}" is not supported. Supported runtime versions: {", ".join(RUNTIME_VERSIONS)}.',
        )
        return
    python = ti.get("pythonVersion")
    effective = runtime or DEFAULT_RUNTIME_VERSION
    allowed = RUNTIME_VERSIONS[effective].python_versions
    if python and python not in allowed:
        why = {
            "3.7": "Python 3.7 requires runtimeVersion 1.15 or later.",
            "2.7": "Python 2.7 requires runtimeVersion 1.15 or earlier.",
            "3.5": "Python 3.5 requires a runtimeVersion from 1.4 to 1.14.",
        }.get(python, f'pythonVersion "{python}" is not supported.')
        default = "" if runtime else " (the default)"
        errors.add(
            f"{path}.python_version", f"{why} runtimeVersion {effective}{default} supports Python {one_of(allowed)}."
        )


def _check_container_fields(
    ti: dict, path: str, configs: dict, container: bool, errors: Violations, *, package_in_image: bool = False
) -> None:
    master_image = configs["masterConfig"].get("imageUri")
    machines = roles.role_machines(ti)
    for task, _, _, key, _ in roles.ROLES:
        config, field = configs[key], f"{path}.{snake(key)}"
        for name in ("containerCommand", "containerArgs"):
            if not config.get(name):
                continue
            if not (config.get("imageUri") or master_image):
                errors.add(f"{field}.{snake(name)}", f"{name} can only be used with a custom container (set imageUri).")
            elif package_in_image:
                errors.add(
                    f"{field}.{snake(name)}",
                    f"{name} cannot be combined with packageUris: the image runs the trainer package "
                    "(python -m pythonModule); put its arguments in trainingInput.args.",
                )
            elif ti.get("args"):
                errors.add(
                    f"{field}.{snake(name)}",
                    f"{name} cannot be combined with trainingInput.args; put the arguments in containerArgs instead.",
                )
        machine, count = machines[task]
        tf_version = config.get("tpuTfVersion")
        if tf_version and machine != CLOUD_TPU:
            errors.add(f"{field}.tpu_tf_version", "tpuTfVersion only applies to a cloud_tpu replica.")
        elif tf_version and not re.fullmatch(r"\d+\.\d+", tf_version):
            errors.add(
                f"{field}.tpu_tf_version",
                f'tpuTfVersion "{tf_version}" must be a runtime version as major.minor, e.g. 2.11.',
            )
        elif machine == CLOUD_TPU and count > 0 and container and not tf_version:
            errors.add(
                f"{field}.tpu_tf_version",
                "tpuTfVersion is required for a cloud_tpu replica that runs a custom container.",
            )
