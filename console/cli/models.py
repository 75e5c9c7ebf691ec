"""``aiconsole models …``, ``aiconsole versions …`` and ``aiconsole predict``: gcloud ai-platform's
model commands against the console's REST API.

models create/list/describe/delete; versions create/list/describe/delete/set-default (with
``--model``); predict ``--model M [--version V]`` with ``--json-instances``, ``--json-request``
or ``--text-instances``. Long-running operations are waited for, with gcloud's messages, unless
``--async`` is given.
"""

from __future__ import annotations

import argparse
import itertools
import json
import sys
from pathlib import Path

import requests

from aiconsole import v1schema
from console.cli import common, gcs, output, resources, training
from console.cli.client import Client, CliError, error_from_response

MAX_STAGED_FILES = 1000  # as a deploymentUri may hold (AICONSOLE_MODEL_MAX_FILES' default)
FRAMEWORKS = {"scikit-learn": "SCIKIT_LEARN", "xgboost": "XGBOOST", "tensorflow": "TENSORFLOW"}
# gcloud's versions create flags for what this console does not serve: refused by name, with the
# schema's reason, rather than dropped (a version that silently lost its container would mislead).
_UNSERVED_VERSION_FLAGS = {
    "accelerator": "acceleratorConfig",
    "prediction_class": "predictionClass",
    "package_uris": "packageUris",
    "explanation_method": "explanationConfig",
    "num_integral_steps": "explanationConfig",
    "num_paths": "explanationConfig",
    "image": "container",
    "command": "container",
    "args": "container",
    "env_vars": "container",
    "ports": "container",
    "predict_route": "routes",
    "health_route": "routes",
}


def framework(text: str) -> str:
    """``--framework``: gcloud's choices, also as the API's enum names the samples write (SCIKIT_LEARN)."""
    key = text.strip().lower().replace("_", "-")
    if key not in FRAMEWORKS:
        raise argparse.ArgumentTypeError(
            f"invalid choice {text!r}; choose from: {', '.join(sorted(FRAMEWORKS))} "
            "(or TENSORFLOW, SCIKIT_LEARN, XGBOOST)"
        )
    return FRAMEWORKS[key]


def _node_count(text: str) -> int:
    if not text.strip().isdigit():
        raise argparse.ArgumentTypeError(f"expected a whole number of nodes ≥ 0, not {text!r}")
    return int(text)


def _model_path(client: Client, model: str, *suffix: str) -> str:
    return client.project_path("models", model, *suffix) if suffix else client.project_path("models", model)


def _version_path(client: Client, model: str, version: str, verb: str = "") -> str:
    return client.project_path("models", model, "versions", version + verb)


# --- models ---------------------------------------------------------------------------------------


@common.command("models.create")
def cmd_models_create(args) -> int:
    client = common.client(args)
    body: dict = {"name": args.model}
    # gcloud: --regions names the model's region (global endpoint); a regional --region creates it there.
    region = (args.regions[0] if args.regions else None) or args.region or common.settings(args).region
    if region and region != "global":
        body["regions"] = [region]
    if args.description:
        body["description"] = args.description
    if args.enable_logging:
        body["onlinePredictionLogging"] = True
    if args.enable_console_logging:
        body["onlinePredictionConsoleLogging"] = True
    if args.labels:
        body["labels"] = args.labels
    model = client.post(client.project_path("models"), body)
    output.status(f"Created ai platform model [{model.get('name', args.model)}].")
    if args.format:
        output.emit(model, args.format)
    return 0


@common.command("models.list")
def cmd_models_list(args) -> int:
    client = common.client(args)
    models, token = [], ""
    while True:
        answer = client.get(
            client.project_path("models"), params={"pageSize": 100, "pageToken": token, "filter": args.filter}
        )
        models += answer.get("models") or []
        token = answer.get("nextPageToken") or ""
        if not token:
            break
    if not models and args.format is None:
        output.status("Listed 0 items.")
        return 0
    rows = [
        [m["name"].rsplit("/", 1)[-1], ((m.get("defaultVersion") or {}).get("name") or "").rsplit("/", 1)[-1]]
        for m in models
    ]
    output.emit_list(models, args.format, output.table(["NAME", "DEFAULT_VERSION_NAME"], rows))
    return 0


@common.command("models.describe")
def cmd_models_describe(args) -> int:
    client = common.client(args)
    output.emit(client.get(_model_path(client, args.model)), args.format or output.Format("yaml"))
    return 0


@common.command("models.delete")
def cmd_models_delete(args) -> int:
    client = common.client(args)
    operation = client.call("DELETE", _model_path(client, args.model))
    resources.wait_operation(client, operation, f"Deleting model [{args.model}]...")
    output.status(f"Deleted model [{args.model}].")
    return 0


# --- versions ------------------------------------------------------------------------------------


def _version_body(args) -> dict:
    body: dict = {}
    if args.config:
        loaded = common.read_yaml_file(args.config, "--config")
        if not isinstance(loaded, dict):
            raise CliError(f"--config {args.config} must hold a Version (a mapping)", exit_code=2)
        body.update(loaded)
    body["name"] = args.version
    fields = v1schema.message("Version").fields
    refused = [
        f"--{name.replace('_', '-')}: {fields[field].unsupported}"
        for name, field in _UNSERVED_VERSION_FLAGS.items()
        if getattr(args, f"unserved_{name}") is not None
    ]
    if refused:
        raise CliError("cannot create the version:\n" + "\n".join(f"  - {line}" for line in refused), exit_code=2)
    given = {
        "deploymentUri": args.origin,
        "runtimeVersion": args.runtime_version,
        "pythonVersion": args.python_version,
        "machineType": args.machine_type,
        "description": args.description,
        "framework": args.framework,
        "serviceAccount": args.service_account,
    }
    body.update({key: value for key, value in given.items() if value is not None})
    if args.min_nodes is not None or args.max_nodes is not None:
        scaling = dict(body.get("autoScaling") or {})
        scaling.update(
            {
                key: value
                for key, value in (("minNodes", args.min_nodes), ("maxNodes", args.max_nodes))
                if value is not None
            }
        )
        body["autoScaling"] = scaling
    if args.labels:
        body["labels"] = {**(body.get("labels") or {}), **args.labels}
    if not body.get("deploymentUri"):
        raise CliError(
            "--origin is required (or deploymentUri in --config): the folder with the model file", exit_code=2
        )
    origin = body["deploymentUri"]
    if args.staging_bucket and not args.staging_bucket.startswith("gs://"):
        raise CliError(f"--staging-bucket must be a gs:// URI, not {args.staging_bucket!r}", exit_code=2)
    if "://" not in origin and args.staging_bucket:
        body["deploymentUri"] = _stage_origin(Path(origin).expanduser(), args.staging_bucket, args.model, args.version)
    elif "://" not in origin:
        body["deploymentUri"] = str(Path(origin).expanduser().resolve())  # the server resolves nothing relative
    return body


def _stage_origin(origin: Path, bucket: str, model: str, version: str) -> str:
    """A local model folder (or file) copied to ``BUCKET/MODEL/VERSION/``, as gcloud staged one."""
    if not origin.exists():
        raise CliError(f"--origin {origin}: no such file or folder", exit_code=2)
    found = [origin] if origin.is_file() else (p for p in origin.rglob("*") if p.is_file())
    files = sorted(itertools.islice(found, MAX_STAGED_FILES + 1))  # a link loop ends at the limit too
    if len(files) > MAX_STAGED_FILES:
        raise CliError(
            f"--origin {origin} holds more than {MAX_STAGED_FILES} files; a model folder holds "
            "the model file and what it needs",
            exit_code=2,
        )
    base = f"{bucket.rstrip('/')}/{model}/{version}"
    output.status(f"Uploading {len(files)} file{'s' if len(files) != 1 else ''} of {origin} to {base}/...")
    for path in files:
        relative = path.name if path == origin else path.relative_to(origin).as_posix()
        gcs.upload(path, f"{base}/{relative}")
    return base + "/"


@common.command("versions.create")
def cmd_versions_create(args) -> int:
    client = common.client(args)
    operation = client.post(_model_path(client, args.model, "versions"), _version_body(args))
    if args.async_:
        output.status(f"Creating version [{args.version}]: operation {operation.get('name')}.")
        return 0
    done = resources.wait_operation(client, operation, "Creating version (this might take a few minutes)......")
    if args.format:
        output.emit(done.get("response") or {}, args.format)
    return 0


@common.command("versions.list")
def cmd_versions_list(args) -> int:
    client = common.client(args)
    versions, token = [], ""
    while True:
        answer = client.get(
            _model_path(client, args.model, "versions"),
            params={"pageSize": 100, "pageToken": token, "filter": args.filter},
        )
        versions += answer.get("versions") or []
        token = answer.get("nextPageToken") or ""
        if not token:
            break
    if not versions and args.format is None:
        output.status("Listed 0 items.")
        return 0
    rows = [
        [
            v["name"].rsplit("/", 1)[-1],
            v.get("deploymentUri", ""),
            v.get("state", ""),
            "yes" if v.get("isDefault") else "",
        ]
        for v in versions
    ]
    output.emit_list(versions, args.format, output.table(["NAME", "DEPLOYMENT_URI", "STATE", "DEFAULT"], rows))
    return 0


@common.command("versions.describe")
def cmd_versions_describe(args) -> int:
    client = common.client(args)
    output.emit(client.get(_version_path(client, args.model, args.version)), args.format or output.Format("yaml"))
    return 0


@common.command("versions.delete")
def cmd_versions_delete(args) -> int:
    client = common.client(args)
    operation = client.call("DELETE", _version_path(client, args.model, args.version))
    resources.wait_operation(client, operation, f"Deleting version [{args.version}]......")
    output.status(f"Deleted version [{args.version}].")
    return 0


@common.command("versions.set-default")
def cmd_versions_set_default(args) -> int:
    client = common.client(args)
    version = client.post(_version_path(client, args.model, args.version, ":setDefault"), {})
    output.emit(version, args.format or output.Format("yaml"))
    return 0


# --- predict -----------------------------------------------------------------------------------------


def _read(path: str) -> str:
    try:
        return sys.stdin.read() if path == "-" else Path(path).expanduser().read_text()
    except OSError as error:
        raise CliError(f"cannot read {path}: {error.strerror or error}", exit_code=2) from None


def request_body(args) -> dict:
    """gcloud's three input forms: newline-delimited JSON instances, a whole request, text lines."""
    if args.json_request:
        try:
            body = json.loads(_read(args.json_request))
        except ValueError as error:
            raise CliError(f"--json-request {args.json_request} is not JSON: {error}", exit_code=2) from None
        if not isinstance(body, dict) or "instances" not in body:
            raise CliError(f'--json-request {args.json_request} must hold {{"instances": [...]}}', exit_code=2)
        return body
    if args.json_instances:
        instances = []
        for number, line in enumerate(_read(args.json_instances).splitlines(), 1):
            if not line.strip():
                continue
            try:
                instances.append(json.loads(line))
            except ValueError as error:
                raise CliError(
                    f"--json-instances {args.json_instances}, line {number}: not JSON ({error}); "
                    "write one JSON instance per line",
                    exit_code=2,
                ) from None
    else:
        instances = [line for line in _read(args.text_instances).splitlines() if line.strip()]
    if not instances:
        raise CliError("no instances to predict: the file is empty", exit_code=2)
    body: dict = {"instances": instances}
    if args.signature_name:
        body["signature_name"] = args.signature_name
    return body


def predictions_text(predictions: list) -> str:
    """A table when every prediction is an object with the same keys, else one JSON value a line."""
    if predictions and all(isinstance(p, dict) for p in predictions):
        keys = sorted({k for p in predictions for k in p})
        if all(set(p) == set(keys) for p in predictions):
            return output.table(
                [k.upper() for k in keys],
                [[json.dumps(p[k]) if isinstance(p[k], list | dict) else p[k] for k in keys] for p in predictions],
            )
    return "\n".join(json.dumps(p) for p in predictions) + "\n"


def _post_predict(client: Client, path: str, body: dict) -> dict:
    """POST a prediction; a model's own failure (``{"error": "..."}``) is reported in its words."""
    try:
        response = client.session.post(client.base + path, json=body, timeout=(10, 300))
    except requests.RequestException as error:
        raise CliError(f"cannot reach the console at {client.base} ({error}). Is it running?") from None
    if response.status_code >= 400:
        try:
            failure = response.json().get("error")
        except (ValueError, AttributeError):
            failure = None
        if isinstance(failure, str):
            raise CliError(failure)
        raise error_from_response(response)
    try:
        return response.json()
    except ValueError:
        raise CliError(f"the console answered {path} with something that is not JSON") from None


@common.command("predict")
def cmd_predict(args) -> int:
    client = common.client(args)
    path = (
        _version_path(client, args.model, args.version, ":predict")
        if args.version
        else _model_path(client, args.model + ":predict")
    )
    answer = _post_predict(client, path, request_body(args))
    predictions = answer.get("predictions") or []
    output.emit(answer, args.format, predictions_text(predictions))
    return 0


# --- the parser -------------------------------------------------------------------------------------------


def register(commands) -> None:
    models = common.add_group(commands, "models", "create and manage models (gcloud ai-platform models)")
    create = models.add_parser("create", help="create a model")
    create.add_argument("model", metavar="MODEL")
    common.region_flag(create)
    create.add_argument(
        "--regions",
        type=training.comma_list,
        metavar="REGION",
        help="the model's region (default: --region unless global, else us-central1)",
    )
    create.add_argument("--description")
    create.add_argument("--enable-logging", action="store_true", help="log online prediction requests")
    create.add_argument("--enable-console-logging", action="store_true", help="keep what the serving processes print")
    create.add_argument("--labels", type=training.labels, action=training.MergeDict, metavar="KEY=VALUE,...")
    common.connection_flags(create)
    create.set_defaults(func=cmd_models_create)

    listing = models.add_parser("list", help="list models")
    listing.add_argument("--filter", help="e.g. name:census*")
    common.region_flag(listing)
    common.connection_flags(listing)
    listing.set_defaults(func=cmd_models_list)

    for name, func, text in (
        ("describe", cmd_models_describe, "show a model"),
        ("delete", cmd_models_delete, "delete a model (it must have no versions)"),
    ):
        parser = models.add_parser(name, help=text)
        parser.add_argument("model", metavar="MODEL")
        common.region_flag(parser)
        common.connection_flags(parser)
        parser.set_defaults(func=func)

    versions = common.add_group(commands, "versions", "create and manage model versions (gcloud ai-platform versions)")
    create = versions.add_parser("create", help="deploy a model version")
    create.add_argument("version", metavar="VERSION")
    create.add_argument("--model", required=True)
    create.add_argument("--origin", help="folder (local path or gs://) holding the model file")
    create.add_argument("--runtime-version")
    create.add_argument("--python-version")
    create.add_argument(
        "--framework",
        type=framework,
        metavar="FRAMEWORK",
        help=f"one of: {', '.join(sorted(FRAMEWORKS))} (TENSORFLOW, SCIKIT_LEARN, XGBOOST too)",
    )
    create.add_argument("--machine-type")
    create.add_argument("--min-nodes", type=_node_count, metavar="N", help="autoScaling.minNodes")
    create.add_argument("--max-nodes", type=_node_count, metavar="N", help="autoScaling.maxNodes")
    create.add_argument("--service-account", metavar="EMAIL")
    create.add_argument(
        "--staging-bucket",
        metavar="gs://BUCKET",
        help="upload a local --origin there first and deploy from Cloud Storage, as gcloud did",
    )
    common.region_flag(create)
    unserved = create.add_argument_group("refused here, with the reason (gcloud's beta flags included)")
    for name in _UNSERVED_VERSION_FLAGS:
        unserved.add_argument(
            f"--{name.replace('_', '-')}", dest=f"unserved_{name}", metavar="VALUE", help=argparse.SUPPRESS
        )
    create.add_argument("--description")
    create.add_argument("--labels", type=training.labels, action=training.MergeDict, metavar="KEY=VALUE,...")
    create.add_argument("--config", metavar="FILE", help="YAML holding a Version (autoScaling, manualScaling, ...)")
    create.add_argument("--async", dest="async_", action="store_true", help="return without waiting")
    common.connection_flags(create)
    create.set_defaults(func=cmd_versions_create)

    listing = versions.add_parser("list", help="list a model's versions")
    listing.add_argument("--model", required=True)
    listing.add_argument("--filter", help="e.g. state=READY")
    common.region_flag(listing)
    common.connection_flags(listing)
    listing.set_defaults(func=cmd_versions_list)

    for name, func, text in (
        ("describe", cmd_versions_describe, "show a version"),
        ("delete", cmd_versions_delete, "delete a version"),
        ("set-default", cmd_versions_set_default, "make a version the model's default"),
    ):
        parser = versions.add_parser(name, help=text)
        parser.add_argument("version", metavar="VERSION")
        parser.add_argument("--model", required=True)
        common.region_flag(parser)
        common.connection_flags(parser)
        parser.set_defaults(func=func)

    resources.register_model_commands(models, versions)

    predict = commands.add_parser("predict", help="online prediction (gcloud ai-platform predict)", allow_abbrev=False)
    predict.add_argument("--model", required=True)
    predict.add_argument("--version", help="a version; default: the model's default version")
    inputs = predict.add_mutually_exclusive_group(required=True)
    inputs.add_argument("--json-instances", metavar="FILE", help="one JSON instance per line ('-' for stdin)")
    inputs.add_argument("--json-request", metavar="FILE", help='a whole request: {"instances": [...]}')
    inputs.add_argument("--text-instances", metavar="FILE", help="one text instance per line")
    predict.add_argument("--signature-name", help="the SavedModel signature (TensorFlow)")
    common.region_flag(predict)
    common.connection_flags(predict)
    predict.set_defaults(func=cmd_predict)
