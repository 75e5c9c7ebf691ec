"""PredictionInput rules: a batch prediction job is checked for shape only.

Exactly one model, version or URI; known data formats; input and output paths; a known region
and runtime version; positive worker counts and batch sizes.
"""

from __future__ import annotations

import re

from aiconsole.errors import Violations
from aiconsole.protojson import snake
from jobs.catalogue import RUNTIME_VERSIONS
from jobs.validation.placement import check_region_name

_MODEL_NAME_RE = re.compile(r"^projects/[^/]+/models/[^/]+$")
_VERSION_NAME_RE = re.compile(r"^projects/[^/]+/models/[^/]+/versions/[^/]+$")
_INPUT_FORMATS = ("JSON", "TEXT", "TF_RECORD", "TF_RECORD_GZIP")
_OUTPUT_FORMATS = ("JSON", "CSV")


def check_prediction_input(pi: dict, path: str, errors: Violations) -> None:
    sources = [key for key in ("modelName", "versionName", "uri") if key in pi]
    if len(sources) != 1:
        errors.add(
            path,
            "Exactly one of modelName, versionName or uri must be set; got "
            f"{' and '.join(sources) if sources else 'none'}.",
        )
    for key, pattern, example in (
        ("modelName", _MODEL_NAME_RE, "projects/{project}/models/{model}"),
        ("versionName", _VERSION_NAME_RE, "projects/{project}/models/{model}/versions/{version}"),
    ):
        if key in pi and not pattern.match(pi[key]):
            errors.add(f"{path}.{snake(key)}", f"{key} must look like {example}.")
    data_format = pi.get("dataFormat", "DATA_FORMAT_UNSPECIFIED")
    if data_format not in _INPUT_FORMATS:
        errors.add(
            f"{path}.data_format",
            f"dataFormat is required and must be one of {', '.join(_INPUT_FORMATS)}; got {data_format}.",
        )
    output_format = pi.get("outputDataFormat")
    if output_format is not None and output_format not in _OUTPUT_FORMATS:
        errors.add(f"{path}.output_data_format", f"outputDataFormat must be JSON or CSV; got {output_format}.")
    paths = pi.get("inputPaths", [])
    if not paths or not all(p.strip() for p in paths):
        errors.add(
            f"{path}.input_paths",
            "inputPaths is required: list at least one path, wildcards allowed; paths must not be empty.",
        )
    if not pi.get("outputPath"):
        errors.add(f"{path}.output_path", "outputPath is required.")
    check_region_name(pi.get("region"), f"{path}.region", errors)
    runtime = pi.get("runtimeVersion")
    if runtime and runtime not in RUNTIME_VERSIONS:
        errors.add(
            f"{path}.runtime_version",
            f'runtimeVersion "{runtime}" is not supported. Supported runtime versions: {", ".join(RUNTIME_VERSIONS)}.',
        )
    for key in ("maxWorkerCount", "batchSize"):
        if key in pi and int(pi[key]) < 1:
            errors.add(f"{path}.{snake(key)}", f"{key} must be at least 1; got {pi[key]}.")
