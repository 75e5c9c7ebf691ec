"""``aiconsole ai custom-jobs|hp-tuning-jobs``: Vertex AI's gcloud commands, on the console's
Vertex API (``gcloud ai custom-jobs …`` reaches them through the gcloud wrapper).

``create --region R --display-name N [--config FILE] [--worker-pool-spec K=V,…] [--python-package-uris
U,…] [--args A,…] [--labels K=V,…]``, and for tuning jobs ``--max-trial-count``,
``--parallel-trial-count``; ``describe``, ``list [--filter]``, ``cancel`` and ``stream-logs`` of a job
named by its number or its full name. ``--config`` is gcloud's: a CustomJobSpec for custom jobs
(``workerPoolSpecs``, ``baseOutputDirectory``…), a HyperparameterTuningJob's fields for tuning jobs
(``studySpec``, ``trialJobSpec``…); the flags add to it as gcloud's do.
"""

from __future__ import annotations

import argparse

from console.cli import common, logs, output
from console.cli.client import CliError

KINDS = {
    "custom-jobs": ("customJobs", "CustomJob"),
    "hp-tuning-jobs": ("hyperparameterTuningJobs", "HyperparameterTuningJob"),
}
# --worker-pool-spec keys (gcloud's) → where each goes in a WorkerPoolSpec
_POOL_KEYS = {
    "machine-type": ("machineSpec", "machineType"),
    "accelerator-type": ("machineSpec", "acceleratorType"),
    "accelerator-count": ("machineSpec", "acceleratorCount"),
    "replica-count": (None, "replicaCount"),
    "container-image-uri": ("containerSpec", "imageUri"),
    "executor-image-uri": ("pythonPackageSpec", "executorImageUri"),
    "python-module": ("pythonPackageSpec", "pythonModule"),
}


def _pool(text: str) -> dict:
    pool: dict = {}
    for item in text.split(","):
        key, _, value = item.partition("=")
        key = key.strip()
        if key == "local-package-path" or key == "script":
            raise CliError(
                "--worker-pool-spec: local-package-path and script are not supported here: build the package "
                "(python -m build), put it in the project's storage or a bucket, and name it with "
                "--python-package-uris",
                exit_code=2,
            )
        if key not in _POOL_KEYS or not value:
            raise CliError(
                f"--worker-pool-spec: {item!r} is not KEY=VALUE with a key of {', '.join(_POOL_KEYS)}", exit_code=2
            )
        section, field = _POOL_KEYS[key]
        (pool.setdefault(section, {}) if section else pool)[field] = value
    return pool


def _spec(args, kind: str) -> dict:
    """The create body from --config and the flags, as gcloud builds it."""
    config = common.read_yaml_file(args.config, "--config") if args.config else {}
    if not isinstance(config, dict):
        raise CliError(f"--config {args.config}: expected a mapping of the job's fields", exit_code=2)
    spec = dict(config.get("trialJobSpec") or {}) if kind == "hp-tuning-jobs" else dict(config)
    pools = [_pool(text) for text in args.worker_pool_spec or []]
    if pools:
        spec["workerPoolSpecs"] = pools
    for pool in spec.get("workerPoolSpecs") or []:
        package = pool.get("pythonPackageSpec")
        if package is not None:
            if args.python_package_uris:
                package["packageUris"] = args.python_package_uris.split(",")
            if args.args is not None:
                package["args"] = args.args.split(",") if args.args else []
        elif "containerSpec" in pool and args.args is not None:
            pool["containerSpec"]["args"] = args.args.split(",") if args.args else []
    body: dict = {"displayName": args.display_name}
    if args.labels:
        body["labels"] = dict(item.partition("=")[::2] for item in args.labels.split(","))
    if kind == "custom-jobs":
        body["jobSpec"] = spec
        return body
    body.update({key: value for key, value in config.items() if key != "trialJobSpec"})
    body["trialJobSpec"] = spec
    for flag, field in (("max_trial_count", "maxTrialCount"), ("parallel_trial_count", "parallelTrialCount")):
        if getattr(args, flag, None) is not None:
            body[field] = getattr(args, flag)
    return body


def _said(words: str) -> str:
    """A command to suggest: ``gcloud ai custom-jobs …`` through the wrapper, else ``aiconsole ai …``."""
    return common.spoken(words if common.spoken_as.endswith(" ai") else f"ai {words}")


def _path(client, args, number: str = "") -> str:
    collection = KINDS[args.kind][0]
    parts = ["locations", args.region, collection, *([number] if number else [])]
    return client.project_path(*parts)


def _number(name: str) -> str:
    """A job named by its number or by its full name (``projects/P/locations/L/customJobs/N``)."""
    number = name.rstrip("/").rsplit("/", 1)[-1]
    if not number.isdigit():
        raise CliError(f"{name!r} is not a job's number or its name (projects/P/locations/L/…/N)", exit_code=2)
    return number


@common.command("ai.create")
def cmd_create(args) -> int:
    client = common.client(args)
    created = client.post(_path(client, args), _spec(args, args.kind))
    name = created["name"]
    noun = KINDS[args.kind][1]
    output.status(
        f"{noun} [{name}] is submitted successfully.\n\nYour job is still active. You may view the status of your "
        f"job with the command\n\n  $ {_said(f'{args.kind} describe {name}')}\n\nor continue streaming "
        f"the logs with the command\n\n  $ {_said(f'{args.kind} stream-logs {name}')}"
    )
    if args.format:
        output.emit(created, args.format)
    return 0


@common.command("ai.describe")
def cmd_describe(args) -> int:
    client = common.client(args)
    # gcloud describes in YAML unless told otherwise
    output.emit(client.get(_path(client, args, _number(args.job))), args.format or output.parse_format("yaml"))
    return 0


@common.command("ai.list")
def cmd_list(args) -> int:
    client = common.client(args)
    collection = KINDS[args.kind][0]
    found: list[dict] = []
    token = ""
    while True:
        answer = client.get(_path(client, args), params={"filter": args.filter, "pageToken": token})
        found += answer.get(collection) or []
        token = answer.get("nextPageToken") or ""
        if not token:
            break
    rows = [[job["name"].rsplit("/", 1)[1], job.get("displayName", ""), job.get("state", "")] for job in found]
    output.emit_list(found, args.format, output.table(["CUSTOM_JOB_ID", "DISPLAY_NAME", "STATE"], rows))
    return 0


@common.command("ai.cancel")
def cmd_cancel(args) -> int:
    client = common.client(args)
    number = _number(args.job)
    client.post(_path(client, args, number) + ":cancel", {})
    output.status(
        f"Request to cancel {KINDS[args.kind][1]} [{number}] has been sent. You may view the status of your job "
        f"with the command\n\n  $ {_said(f'{args.kind} describe {number} --region {args.region}')}"
    )
    return 0


@common.command("ai.stream-logs")
def cmd_stream_logs(args) -> int:
    from jobs.job_ids import vertex_job_id  # pure: no Django settings needed

    client = common.client(args)
    number = _number(args.job)
    job = client.get(_path(client, args, number))
    job_id = vertex_job_id(job.get("displayName", ""), number)
    state = logs.follow(client, job_id)
    return logs.outcome(client, job_id, state)


def _verb(verbs, kind: str, name: str, func, help_text: str, *, job: bool = True) -> argparse.ArgumentParser:
    parser = verbs.add_parser(name, help=help_text)
    if job:
        parser.add_argument("job", help="the job's number, or its full name")
    parser.add_argument("--region", required=True, help="the job's location, e.g. us-central1")
    common.connection_flags(parser)
    parser.set_defaults(func=func, kind=kind)
    return parser


def register(commands) -> None:
    ai = commands.add_parser("ai", help="Vertex AI's gcloud ai custom-jobs and hp-tuning-jobs, on this console")
    kinds = ai.add_subparsers(dest="ai_group", required=True)
    for kind in KINDS:
        group = kinds.add_parser(kind, help=f"gcloud ai {kind}")
        verbs = group.add_subparsers(dest="verb", required=True)
        create = _verb(verbs, kind, "create", cmd_create, "create a job", job=False)
        create.add_argument("--display-name", dest="display_name", required=True)
        create.add_argument("--config", help="YAML or JSON of the job's spec (gcloud's --config)")
        create.add_argument("--worker-pool-spec", dest="worker_pool_spec", action="append", help="KEY=VALUE,…")
        create.add_argument("--python-package-uris", dest="python_package_uris", help="comma-separated")
        create.add_argument("--args", help="the trainer's arguments, comma-separated")
        create.add_argument("--labels", help="KEY=VALUE,…")
        if kind == "hp-tuning-jobs":
            create.add_argument("--max-trial-count", dest="max_trial_count", type=int)
            create.add_argument("--parallel-trial-count", dest="parallel_trial_count", type=int)
        _verb(verbs, kind, "describe", cmd_describe, "show a job")
        _verb(verbs, kind, "list", cmd_list, "list the location's jobs", job=False).add_argument("--filter", default="")
        _verb(verbs, kind, "cancel", cmd_cancel, "cancel a job")
        _verb(verbs, kind, "stream-logs", cmd_stream_logs, "print a job's log until it ends; exit 1 unless it succeeds")
