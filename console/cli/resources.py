"""The rest of ``gcloud ai-platform``'s surface that scripts and the original's docs use:
``models update|get-iam-policy|set-iam-policy|add-iam-policy-binding|remove-iam-policy-binding``,
``versions update``, ``operations list|describe|cancel|wait``, ``locations list|describe``, and the
commands this console does not run (``explain``, refused with the reason).

Each command takes gcloud's flags, ``--region`` included (checked, then the one address serves it).
"""

from __future__ import annotations

import argparse
import time

from console.cli import common, output, training
from console.cli.client import ApiError, Client, CliError

POLL_SECONDS = 0.5


def wait_operation(client: Client, operation: dict, message: str, *, timeout: float = 1800) -> dict:
    """Poll an operation until it is done; print gcloud's ``message......done.``; raise on error."""
    output.status(f"{message}", end="")
    deadline = time.monotonic() + timeout
    while not operation.get("done"):
        if time.monotonic() > deadline:
            output.status("")
            raise CliError(
                f"timed out waiting for {operation.get('name')}; it goes on: "
                f"'aiconsole operations' or the console show how it ends"
            )
        time.sleep(POLL_SECONDS)
        output.status(".", end="")
        operation = client.get("/v1/" + operation["name"])
    if operation.get("error"):
        output.status("failed.")
        raise CliError(operation["error"].get("message") or "the operation failed")
    output.status("done.")
    return operation


def _model_path(client: Client, model: str, suffix: str = "") -> str:
    return client.project_path("models", model + suffix)


def _labels_update(current: dict, args) -> dict | None:
    """gcloud's --update-labels/--remove-labels/--clear-labels over the current labels; None: no change."""
    if not (args.update_labels or args.remove_labels or args.clear_labels):
        return None
    labels = {} if args.clear_labels else dict(current or {})
    for key in args.remove_labels or []:
        labels.pop(key, None)
    labels.update(args.update_labels or {})
    return labels


def _finish_update(client: Client, operation: dict, what: str, fmt) -> int:
    done = wait_operation(client, operation, f"Updating {what}...")
    output.status(f"Updated {what}.")
    if fmt:
        output.emit(done.get("response") or {}, fmt)
    return 0


@common.command("models.update")
def cmd_models_update(args) -> int:
    client = common.client(args)
    model = client.get(_model_path(client, args.model))
    body, mask = {}, []
    if args.description is not None:
        body["description"], mask = args.description, [*mask, "description"]
    labels = _labels_update(model.get("labels") or {}, args)
    if labels is not None:
        body["labels"], mask = labels, [*mask, "labels"]
    if not mask:
        output.status("No update to perform.")
        return 0
    operation = client.call("PATCH", _model_path(client, args.model), params={"updateMask": ",".join(mask)}, body=body)
    return _finish_update(client, operation, f"model [{args.model}]", args.format)


def _version_config(args) -> dict | None:
    """The Version in ``--config``, read (and refused) before anything is asked of the console."""
    if not args.config:
        return None
    loaded = common.read_yaml_file(args.config, "--config")
    if not isinstance(loaded, dict):
        raise CliError(f"--config {args.config} must hold a Version (a mapping)", exit_code=2)
    return loaded


def _version_update_body(args, current: dict, config: dict | None) -> tuple[dict, list[str]]:
    body: dict = dict(config or {})
    mask = [key for key in ("description", "requestLoggingConfig") if key in body]
    for group, keys in (("autoScaling", ("minNodes", "maxNodes")), ("manualScaling", ("nodes",))):
        mask += [f"{group}.{key}" for key in keys if key in (body.get(group) or {})]
    if args.description is not None:
        body["description"] = args.description
        mask = [*dict.fromkeys([*mask, "description"])]
    for flag, key in (("min_nodes", "minNodes"), ("max_nodes", "maxNodes")):
        value = getattr(args, flag)
        if value is not None:
            body.setdefault("autoScaling", {})[key] = value
            mask = [*dict.fromkeys([*mask, f"autoScaling.{key}"])]
    labels = _labels_update(current.get("labels") or {}, args)
    if labels is not None:
        body["labels"], mask = labels, [*mask, "labels"]
    return body, mask


@common.command("versions.update")
def cmd_versions_update(args) -> int:
    client = common.client(args)
    config = _version_config(args)
    path = client.project_path("models", args.model, "versions", args.version)
    body, mask = _version_update_body(args, client.get(path), config)
    if not mask:
        output.status("No update to perform.")
        return 0
    operation = client.call("PATCH", path, params={"updateMask": ",".join(mask)}, body=body)
    return _finish_update(client, operation, f"version [{args.version}]", args.format)


# --- IAM policies on a model --------------------------------------------------------------------------


def _policy(client: Client, model: str) -> dict:
    return client.post(_model_path(client, model, ":getIamPolicy"), {})


def _set_policy(client: Client, model: str, policy: dict) -> dict:
    updated = client.post(_model_path(client, model, ":setIamPolicy"), {"policy": policy})
    output.status(f"Updated IAM policy for model [{model}].")
    return updated


def _member(text: str) -> str:
    kind, sep, name = text.partition(":")
    if not sep or not name or kind not in ("user", "serviceAccount", "group", "domain"):
        raise argparse.ArgumentTypeError(
            f"{text!r} is not a member; write user:NAME (or serviceAccount:, group:, domain:), as gcloud does"
        )
    return text


@common.command("models.get-iam-policy")
def cmd_get_iam_policy(args) -> int:
    client = common.client(args)
    output.emit(_policy(client, args.model), args.format or output.Format("yaml"))
    return 0


@common.command("models.set-iam-policy")
def cmd_set_iam_policy(args) -> int:
    policy = common.read_yaml_file(args.policy_file, "POLICY_FILE")  # JSON is YAML too
    if not isinstance(policy, dict):
        raise CliError(f"POLICY_FILE {args.policy_file} must hold a policy: a mapping with bindings", exit_code=2)
    client = common.client(args)
    output.emit(_set_policy(client, args.model, policy), args.format or output.Format("yaml"))
    return 0


def _change_binding(args, *, add: bool) -> int:
    client = common.client(args)
    policy = _policy(client, args.model)
    bindings = [dict(b) for b in policy.get("bindings") or []]
    binding = next((b for b in bindings if b.get("role") == args.role and not b.get("condition")), None)
    if add:
        if binding is None:
            bindings.append({"role": args.role, "members": [args.member]})
        elif args.member not in binding.get("members", []):
            binding["members"] = [*binding.get("members", []), args.member]
    else:
        if binding is None or args.member not in binding.get("members", []):
            raise CliError(f"Policy binding with the specified member {args.member} and role {args.role} not found!")
        binding["members"] = [m for m in binding["members"] if m != args.member]
        bindings = [b for b in bindings if b.get("members")]
    changed = {**policy, "bindings": bindings}
    output.emit(_set_policy(client, args.model, changed), args.format or output.Format("yaml"))
    return 0


@common.command("models.add-iam-policy-binding")
def cmd_add_binding(args) -> int:
    return _change_binding(args, add=True)


@common.command("models.remove-iam-policy-binding")
def cmd_remove_binding(args) -> int:
    return _change_binding(args, add=False)


# --- operations and locations --------------------------------------------------------------------


def _operation_path(client: Client, name: str) -> str:
    return client.project_path("operations", name.rsplit("/", 1)[-1])


@common.command("operations.list")
def cmd_operations_list(args) -> int:
    client = common.client(args)
    found, token = [], ""
    while True:
        answer = client.get(client.project_path("operations"), params={"pageSize": 100, "pageToken": token})
        found += answer.get("operations") or []
        token = answer.get("nextPageToken") or ""
        if not token:
            break
    if not found and args.format is None:
        output.status("Listed 0 items.")
        return 0
    rows = [
        [
            op["name"].rsplit("/", 1)[-1],
            (op.get("metadata") or {}).get("operationType", ""),
            "True" if op.get("done") else "",
        ]
        for op in found
    ]
    output.emit_list(found, args.format, output.table(["NAME", "TYPE", "DONE"], rows))
    return 0


@common.command("operations.describe")
def cmd_operations_describe(args) -> int:
    client = common.client(args)
    output.emit(client.get(_operation_path(client, args.operation)), args.format or output.Format("yaml"))
    return 0


@common.command("operations.cancel")
def cmd_operations_cancel(args) -> int:
    client = common.client(args)
    client.post(_operation_path(client, args.operation) + ":cancel", {})
    output.status(f"Cancelled [{args.operation}].")
    return 0


@common.command("operations.wait")
def cmd_operations_wait(args) -> int:
    client = common.client(args)
    operation = client.get(_operation_path(client, args.operation))
    done = wait_operation(client, operation, f"Waiting for operation [{args.operation}] to complete...")
    output.emit(done.get("response") or {}, args.format or output.Format("yaml"))
    return 0


@common.command("locations.list")
def cmd_locations_list(args) -> int:
    client = common.client(args)
    found, token = [], ""
    while True:
        answer = client.get(client.project_path("locations"), params={"pageSize": 100, "pageToken": token})
        found += answer.get("locations") or []
        token = answer.get("nextPageToken") or ""
        if not token:
            break
    output.emit_list(
        found, args.format, output.table(["NAME"], [[loc.get("name", "").rsplit("/", 1)[-1]] for loc in found])
    )
    return 0


@common.command("locations.describe")
def cmd_locations_describe(args) -> int:
    client = common.client(args)
    try:
        found = client.get(client.project_path("locations", args.location))
    except ApiError as error:
        if error.code == 404:
            raise CliError(
                f"Location [{args.location}] is not a region this console knows; 'aiconsole locations list' names them."
            ) from None
        raise
    output.emit(found, args.format or output.Format("yaml"))
    return 0


# --- what this console does not run ----------------------------------------------------------------

REFUSED = {
    "explain": "explanations (AI Explanations) are not supported on this server: versions with an "
    "explanationConfig are refused, so there is nothing to explain; use 'predict'",
}


def refused(name: str):
    @common.command(name)
    def run(args) -> int:
        raise CliError(f"'{name}' is not available: {REFUSED[name]}.", exit_code=2)

    return run


# --- the parser -------------------------------------------------------------------------------------


def _label_flags(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--update-labels",
        type=training.labels,
        action=training.MergeDict,
        metavar="KEY=VALUE,...",
        help="labels to add or change",
    )
    parser.add_argument(
        "--remove-labels",
        type=training.label_keys,
        action=training.ExtendList,
        metavar="KEY,...",
        help="labels to remove (missing ones are ignored)",
    )
    parser.add_argument("--clear-labels", action="store_true", help="remove every label first")


def register_model_commands(models, versions) -> None:
    """Called by ``console.cli.models`` with its two command groups."""
    update = models.add_parser("update", help="change a model's description or labels")
    update.add_argument("model", metavar="MODEL")
    update.add_argument("--description")
    _label_flags(update)
    common.region_flag(update)
    common.connection_flags(update)
    update.set_defaults(func=cmd_models_update)

    for name, func, text in (
        ("get-iam-policy", cmd_get_iam_policy, "show who may do what with a model"),
        ("set-iam-policy", cmd_set_iam_policy, "replace a model's IAM policy from a file"),
        ("add-iam-policy-binding", cmd_add_binding, "give a member a role on a model"),
        ("remove-iam-policy-binding", cmd_remove_binding, "take a member's role on a model"),
    ):
        parser = models.add_parser(name, help=text)
        parser.add_argument("model", metavar="MODEL")
        if name == "set-iam-policy":
            parser.add_argument("policy_file", metavar="POLICY_FILE", help="a JSON or YAML policy (bindings, etag)")
        elif name.endswith("binding"):
            parser.add_argument("--member", type=_member, required=True, help="e.g. user:alice")
            parser.add_argument("--role", required=True, help="e.g. roles/ml.modelUser")
        common.region_flag(parser)
        common.connection_flags(parser)
        parser.set_defaults(func=func)

    version = versions.add_parser("update", help="change a version's description, labels or scaling")
    version.add_argument("version", metavar="VERSION")
    version.add_argument("--model", required=True)
    version.add_argument("--description")
    version.add_argument(
        "--config", metavar="YAML_FILE", help="description, autoScaling, manualScaling, requestLoggingConfig to change"
    )
    version.add_argument("--min-nodes", type=training.count, metavar="N")
    version.add_argument("--max-nodes", type=training.count, metavar="N")
    _label_flags(version)
    common.region_flag(version)
    common.connection_flags(version)
    version.set_defaults(func=cmd_versions_update)


def register(commands) -> None:
    operations = common.add_group(
        commands, "operations", "long-running operations of models and versions (gcloud ai-platform operations)"
    )
    listing = operations.add_parser("list", help="list the project's operations")
    common.region_flag(listing)
    common.connection_flags(listing)
    listing.set_defaults(func=cmd_operations_list)
    for name, func, text in (
        ("describe", cmd_operations_describe, "show an operation"),
        ("cancel", cmd_operations_cancel, "cancel an operation"),
        ("wait", cmd_operations_wait, "wait for an operation to end; print its result"),
    ):
        parser = operations.add_parser(name, help=text)
        parser.add_argument("operation", metavar="OPERATION", help="its name (or its last part)")
        common.region_flag(parser)
        common.connection_flags(parser)
        parser.set_defaults(func=func)

    locations = common.add_group(commands, "locations", "regions and what each offers (gcloud ai-platform locations)")
    listing = locations.add_parser("list", help="list the regions")
    common.connection_flags(listing)
    listing.set_defaults(func=cmd_locations_list)
    describe = locations.add_parser("describe", help="show a region's capabilities")
    describe.add_argument("location", metavar="LOCATION")
    common.connection_flags(describe)
    describe.set_defaults(func=cmd_locations_describe)

    for name in REFUSED:
        # No prefix characters: whatever gcloud flags follow are taken as words, and the refusal says why.
        parser = commands.add_parser(
            name,
            help=f"(not available here: {REFUSED[name].split(':')[0]})",
            add_help=False,
            allow_abbrev=False,
            prefix_chars="\0",
        )
        parser.add_argument("rest", nargs=argparse.REMAINDER, help=argparse.SUPPRESS)
        parser.set_defaults(func=refused(name))
