"""``aiconsole jobs …``: gcloud ai-platform's job commands, against the console's REST API.

submit training, describe [--summarize], list, cancel, update (labels), stream-logs; and our
``metrics`` and ``compare``. Flags, messages and exit statuses follow gcloud's, so scripts written for it keep
working.
"""

from __future__ import annotations

import argparse
import csv
import json
import sys
from pathlib import Path

from aiconsole import csvsafe
from console.cli import common, logs, output, training
from console.cli.client import ApiError, Client, CliError

# --- submit training ---------------------------------------------------------------------------


def _follow_up(job_id: str, args) -> str:
    project = f" --project {args.project}" if getattr(args, "project", None) else ""
    return (
        f"Your job is still active. You may view the status of your job with the command\n\n"
        f"  $ {common.spoken(f'jobs describe {job_id}{project}')}\n\n"
        f"or continue streaming the logs with the command\n\n"
        f"  $ {common.spoken(f'jobs stream-logs {job_id}{project}')}"
    )


def short_view(job: dict) -> str:
    """gcloud's submit output: ``yaml(jobId, state, startTime.date(tz=LOCAL), endTime...)``."""
    lines = [f"jobId: {job.get('jobId', '')}", f"state: {job.get('state', '')}"]
    for key in ("startTime", "endTime"):
        if job.get(key):
            lines.append(f"{key}: '{output.local_time(job[key])}'")
    return "\n".join(lines)


def _check_before_upload(client: Client, job_id: str) -> None:
    """Fail before uploading anything when the token is refused or the job id is taken."""
    try:
        client.get(client.job_path(job_id))
    except ApiError as error:
        if error.code in (401, 400):
            raise
        return  # 404 (free), 403 (create will decide)
    raise ApiError(409, "ALREADY_EXISTS", f"A job with id {job_id!r} already exists in project {client.project}.")


def _check_runtime(client: Client, training_input: dict) -> None:
    """Refuse a runtime/Python pair the console cannot run before building or uploading anything."""
    if (training_input.get("masterConfig") or {}).get("imageUri"):
        return  # a custom container or a built-in algorithm's image brings its own runtime
    try:
        catalogue = client.get(client.project_path("runtimeVersions")).get("runtimeVersions", [])
    except ApiError as error:
        if error.code == 404:
            return  # a console without the extension: its submit decides
        raise
    wanted = training_input.get("runtimeVersion")
    runtime = next((r for r in catalogue if r["runtimeVersion"] == wanted or (not wanted and r.get("default"))), None)
    if runtime is None:
        return  # unknown to the server: its INVALID_ARGUMENT names the supported ones
    python = training_input.get("pythonVersion") or runtime.get("defaultPythonVersion")
    pair = next((p for p in runtime["pythonVersions"] if p["pythonVersion"] == python), None)
    if pair is not None and not pair["available"]:
        raise CliError(f"cannot submit the job: {pair['reason']}", exit_code=2)


@common.command("jobs.submit.training")
def cmd_submit_training(args) -> int:
    settings = common.settings(args)
    config_job = training.load_config(args.config) if args.config else {}
    body = training.job_body(args.job, args, config_job, project=settings.project, default_region=settings.region)
    local_files = training.local_package_files(args)
    if args.package_path and not Path(args.package_path).expanduser().is_dir():
        raise CliError(f"--package-path {args.package_path}: no such directory", exit_code=2)
    training.check_before_upload(body, args, has_local_packages=bool(args.package_path or args.packages))

    client = Client(settings)
    _check_runtime(client, body["trainingInput"])
    if args.package_path or local_files:
        _check_before_upload(client, args.job)
    if args.package_path or args.packages:
        body["trainingInput"]["packageUris"] = training.stage_packages(client, args, body, args.job, local_files)
    job = client.post(client.project_path("jobs"), body)
    job_id = job.get("jobId", args.job)
    output.status(f"Job [{job_id}] submitted successfully.")
    if args.stream_logs:
        state = logs.follow(client, job_id)
        return logs.outcome(client, job_id, state)
    output.status(_follow_up(job_id, args))
    output.emit(job, args.format, short_view(job))
    return 0


# --- submit prediction -------------------------------------------------------------------------

DATA_FORMATS = {
    "text": "TEXT",
    "json": "JSON",
    "tf-record": "TF_RECORD",
    "tf-record-gzip": "TF_RECORD_GZIP",
    "csv": "CSV",
}


def _absolute(path: str) -> str:
    """Local paths are made absolute: the server resolves nothing relative to this shell."""
    return path if "://" in path else str(Path(path).expanduser().resolve())


@common.command("jobs.submit.prediction")
def cmd_submit_prediction(args) -> int:
    settings = common.settings(args)
    if args.version and args.model_dir:
        raise CliError("--version cannot be used with --model-dir", exit_code=2)
    prediction_input = {
        "dataFormat": DATA_FORMATS[args.data_format],
        "inputPaths": [_absolute(p) for p in args.input_paths],
        "outputPath": _absolute(args.output_path),
        "region": args.region or settings.region or "",
    }
    if not prediction_input["region"]:
        raise CliError("--region is required (or $AICONSOLE_REGION)", exit_code=2)
    if args.model_dir:
        prediction_input["uri"] = _absolute(args.model_dir)
    elif args.version:
        prediction_input["versionName"] = f"projects/{settings.project}/models/{args.model}/versions/{args.version}"
    else:
        prediction_input["modelName"] = f"projects/{settings.project}/models/{args.model}"
    optional = {
        "batchSize": args.batch_size,
        "maxWorkerCount": args.max_worker_count,
        "runtimeVersion": args.runtime_version,
        "signatureName": args.signature_name,
    }
    prediction_input.update({k: str(v) if isinstance(v, int) else v for k, v in optional.items() if v is not None})
    body = {"jobId": args.job, "predictionInput": prediction_input}
    if args.labels:
        body["labels"] = args.labels
    client = Client(settings)
    job = client.post(client.project_path("jobs"), body)
    output.status(f"Job [{job.get('jobId', args.job)}] submitted successfully.")
    output.status(_follow_up(job.get("jobId", args.job), args))
    output.emit(job, args.format, short_view(job))
    return 0


# --- describe ----------------------------------------------------------------------------------


def _optional_box(title: str, columns: list[tuple[str, object]]) -> str:
    """A one-row box of the columns that have a value (gcloud's ``:optional`` columns)."""
    shown = [(name, value) for name, value in columns if value not in (None, "", [], {})]
    if not shown:
        return ""
    return output.box(title, [name for name, _ in shown], [[value for _, value in shown]])


def _trials_box(trials: list[dict]) -> str:
    def number(trial: dict) -> tuple[int, str]:
        trial_id = str(trial.get("trialId", ""))
        return (int(trial_id) if trial_id.isdigit() else 0, trial_id)

    rows = []
    for trial in sorted(trials, key=number):
        metric = trial.get("finalMetric") or {}
        params = trial.get("hyperparameters") or {}
        rows.append(
            [
                trial.get("trialId", ""),
                trial.get("state", ""),
                metric.get("objectiveValue", ""),
                metric.get("trainingStep", ""),
                "\n".join(f"{k}={v}" for k, v in sorted(params.items())),
            ]
        )
    return output.box("Training Output Trials", ["TRIAL", "STATE", "OBJECTIVE_VALUE", "STEP", "HYPERPARAMETERS"], rows)


def summary(job: dict) -> str:
    """``describe --summarize``: gcloud's boxed overview, input, output and trial tables."""
    parts = [
        output.box(
            "Job Overview",
            ["JOB_ID", "CREATE_TIME", "START_TIME", "END_TIME", "STATE"],
            [
                [
                    job.get("jobId", ""),
                    output.local_time(job.get("createTime")),
                    output.local_time(job.get("startTime")),
                    output.local_time(job.get("endTime")),
                    job.get("state", ""),
                ]
            ],
        )
    ]
    if job.get("errorMessage"):
        parts.append(output.box("Error", ["ERROR_MESSAGE"], [[job["errorMessage"].strip()]]))
    if "trainingInput" in job:
        ti = job["trainingInput"]
        parts.append(
            _optional_box(
                "Training Input Summary",
                [
                    ("RUNTIME_VERSION", ti.get("runtimeVersion")),
                    ("PYTHON_VERSION", ti.get("pythonVersion")),
                    ("SCALE_TIER", ti.get("scaleTier")),
                    ("PYTHON_MODULE", ti.get("pythonModule")),
                    ("MASTER_TYPE", ti.get("masterType")),
                    ("WORKER_TYPE", ti.get("workerType")),
                    ("WORKER_COUNT", ti.get("workerCount")),
                    ("PARAMETER_SERVER_TYPE", ti.get("parameterServerType")),
                    ("PARAMETER_SERVER_COUNT", ti.get("parameterServerCount")),
                    ("REGION", ti.get("region")),
                    ("JOB_DIR", ti.get("jobDir")),
                ],
            )
        )
        out = job.get("trainingOutput") or {}
        hp = bool(ti.get("hyperparameters")) or out.get("isHyperparameterTuningJob")
        columns = [("TRIALS", out.get("completedTrialCount", "0"))] if hp else []
        columns.append(("ML_UNITS", out.get("consumedMLUnits", 0)))
        if hp and out.get("hyperparameterMetricTag"):
            columns.append(("METRIC_TAG", out["hyperparameterMetricTag"]))
        parts.append(output.box("Training Output Summary", [c for c, _ in columns], [[v for _, v in columns]]))
        if out.get("trials"):
            parts.append(_trials_box(out["trials"]))
    if "predictionInput" in job:
        pi = job["predictionInput"]
        parts.append(
            _optional_box(
                "Predict Input Summary",
                [
                    ("DATA_FORMAT", pi.get("dataFormat")),
                    ("INPUT_PATHS", ", ".join(pi.get("inputPaths") or [])),
                    ("OUTPUT_PATH", pi.get("outputPath")),
                    ("MODEL", pi.get("versionName") or pi.get("modelName") or pi.get("uri")),
                    ("REGION", pi.get("region")),
                ],
            )
        )
        po = job.get("predictionOutput") or {}
        parts.append(
            output.box(
                "Predict Output Summary",
                ["PREDICTION_COUNT", "ERROR_COUNT", "NODE_HOURS"],
                [[po.get("predictionCount", "0"), po.get("errorCount", "0"), po.get("nodeHours", 0)]],
            )
        )
    return "".join(part for part in parts if part)


@common.command("jobs.describe")
def cmd_describe(args) -> int:
    client = common.client(args)
    job = client.get(client.job_path(args.job))
    if args.summarize:
        if args.format:
            output.status("WARNING: --format is ignored when --summarize is present.")
        output.emit(job, None, summary(job))
    else:
        output.emit(job, args.format or output.Format("yaml"))
    output.status(
        f"\nView job in the console at:\n{client.base}/projects/{client.project}/jobs/{args.job}/\n\n"
        f"View its logs with:\n  $ {common.spoken(f'jobs stream-logs {args.job}')}"
    )
    return 0


# --- list --------------------------------------------------------------------------------------


def _sort(jobs: list[dict], sort_by: list[str]) -> list[dict]:
    for spec in reversed(sort_by):
        descending = spec.startswith("~")
        field = spec.lstrip("~")
        present = [j for j in jobs if output.lookup(j, field) is not None]
        missing = [j for j in jobs if output.lookup(j, field) is None]
        present.sort(
            key=lambda j, f=field: (
                str(output.lookup(j, f)) if not isinstance(output.lookup(j, f), int | float) else output.lookup(j, f)
            ),
            reverse=descending,
        )
        jobs = present + missing
    return jobs


@common.command("jobs.list")
def cmd_list(args) -> int:
    client = common.client(args)
    limit = args.limit
    page_size = args.page_size or (min(limit, 100) if limit and not args.sort_by else 100)
    jobs: list[dict] = []
    token = ""
    while True:
        answer = client.get(
            client.project_path("jobs"), params={"filter": args.filter, "pageSize": page_size, "pageToken": token}
        )
        jobs += answer.get("jobs") or []
        token = answer.get("nextPageToken") or ""
        if not token or (limit and not args.sort_by and len(jobs) >= limit):
            break
    if args.sort_by:
        jobs = _sort(jobs, args.sort_by)
    if limit:
        jobs = jobs[:limit]
    if not jobs and args.format is None:
        output.status("Listed 0 items.")
        return 0
    rows = [[j.get("jobId", ""), j.get("state", ""), output.local_time(j.get("createTime"))] for j in jobs]
    output.emit_list(jobs, args.format, output.table(["JOB_ID", "STATUS", "CREATED"], rows))
    return 0


# --- cancel, update ----------------------------------------------------------------------------


@common.command("jobs.cancel")
def cmd_cancel(args) -> int:
    client = common.client(args)
    client.post(client.job_path(args.job, ":cancel"), {})
    output.status(f"Cancelled job [{args.job}].")
    if args.format:
        output.emit(client.get(client.job_path(args.job)), args.format)
    return 0


def new_labels(current: dict, args) -> dict:
    labels = {} if args.clear_labels else dict(current)
    for key in args.remove_labels or []:
        labels.pop(key, None)
    labels.update(args.update_labels or {})
    return labels


@common.command("jobs.update")
def cmd_update(args) -> int:
    client = common.client(args)
    path = client.job_path(args.job)
    for attempt in range(3):
        job = client.get(path)
        current = job.get("labels") or {}
        labels = new_labels(current, args)
        if labels == current:
            output.status("No update to perform.")
            return 0
        try:
            # The etag in the mask makes the server refuse the change if the job moved on since
            # we read it; we then read it again and re-apply the same edits.
            updated = client.call(
                "PATCH",
                path,
                params={"updateMask": "labels,etag"},
                body={"labels": labels, "etag": job.get("etag", "")},
            )
            break
        except ApiError as error:
            if error.status != "ABORTED" or attempt == 2:
                raise
    output.status(f"Updated job [{args.job}].")
    if args.format:
        output.emit(updated, args.format)
    return 0


# --- stream-logs -------------------------------------------------------------------------------


@common.command("jobs.stream-logs")
def cmd_stream_logs(args) -> int:
    client = common.client(args)
    wait = max(1, min(args.polling_interval, logs.WAIT_SECONDS)) if args.polling_interval else logs.WAIT_SECONDS
    state = logs.follow(client, args.job, task_name=args.task_name, multiline=args.allow_multiline_logs, wait=wait)
    return logs.outcome(client, args.job, state)


# --- metrics -----------------------------------------------------------------------------------

METRIC_COLUMNS = ["tag", "step", "value", "time", "trialId", "source", "run"]  # the console's CSV download's


def fetch_metrics(client: Client, job_id: str, *, tag: str = "", trial_id: str = "", source: str = "") -> list[dict]:
    """Every point of the job's metrics (our extension), page by page."""
    points: list[dict] = []
    token = ""
    while True:
        answer = client.get(
            client.job_path(job_id, "/metrics"),
            params={"tag": tag, "trialId": trial_id, "source": source, "pageSize": 10_000, "pageToken": token},
        )
        points += answer.get("metrics") or []
        token = answer.get("nextPageToken") or ""
        if not token:
            return points


@common.command("jobs.metrics.points")
def cmd_metrics(args) -> int:
    client = common.client(args)
    points = fetch_metrics(client, args.job, tag=args.tag or "", trial_id=args.trial_id or "", source=args.source or "")
    if args.format == "json":
        sys.stdout.write(json.dumps(points, indent=1) + "\n")
        return 0
    writer = csv.writer(sys.stdout, lineterminator="\n")
    writer.writerow(METRIC_COLUMNS)
    writer.writerows(csvsafe.row(point.get(column, "") for column in METRIC_COLUMNS) for point in points)
    if not points:
        output.status(f"Job [{args.job}] has no metrics{' tagged ' + repr(args.tag) if args.tag else ''} yet.")
    return 0


@common.command("jobs.trials")
def cmd_trials(args) -> int:
    """A tuning job's trials, as the study page's download gives them (every trial, or those a
    state names), as CSV or JSON."""
    client = common.client(args)
    params = {"trial_sort": args.sort or "", "trial_state": args.state or ""}
    answer = client.get(client.job_path(args.job, "/trials"), params=params)
    if args.format == "json":
        sys.stdout.write(json.dumps(answer, indent=1) + "\n")
        return 0
    names = answer.get("columns") or []
    writer = csv.writer(sys.stdout, lineterminator="\n")
    writer.writerow(csvsafe.row(names))
    for trial in answer.get("trials") or []:
        writer.writerow(csvsafe.row("" if trial.get(name) is None else trial.get(name) for name in names))
    return 0


# --- compare -----------------------------------------------------------------------------------


def _compared(client: Client, entry) -> tuple[str, dict, dict | None]:
    """(label, job, trial or None) for ``JOB`` or ``JOB/TRIAL``; a tuning job alone is its best trial."""
    # deferred: the client commands run without Django; only this command needs it
    from jobs.metrics.compare import Entry

    job = client.get(client.job_path(entry.job_id))
    trials = (job.get("trainingOutput") or {}).get("trials") or []
    spec = (job.get("trainingInput") or {}).get("hyperparameters") or {}
    if entry.trial_id:
        trial = next((t for t in trials if str(t.get("trialId")) == entry.trial_id), None)
        if trial is None:
            raise CliError(f"Job [{entry.job_id}] has no trial {entry.trial_id}.")
        return entry.label, job, trial
    if not spec:
        return entry.label, job, None
    scored = [t for t in trials if (t.get("finalMetric") or {}).get("objectiveValue") is not None]
    if not scored:
        raise CliError(
            f"Job [{entry.job_id}] is a tuning job with no trial result yet: name a trial, e.g. {entry.job_id}/1."
        )
    pick = min if spec.get("goal") == "MINIMIZE" else max
    best = pick(scored, key=lambda t: float(t["finalMetric"]["objectiveValue"]))
    return Entry(entry.job_id, str(best["trialId"])).label, job, best


@common.command("jobs.metrics.compare")
def cmd_compare(args) -> int:
    # deferred: the client commands run without Django; only this command needs it
    from jobs.metrics import compare

    entries, malformed = compare.parse_entries(args.jobs)
    if malformed:
        raise CliError(f"Not a job ID or JOB/TRIAL: {', '.join(malformed)}.")
    if len(entries) > compare.MAX_ENTRIES:
        raise CliError(f"At most {compare.MAX_ENTRIES} jobs can be compared; {len(entries)} were given.")
    client = common.client(args)
    labels, inputs, finals, tags, goals = [], [], [], {}, {}
    for entry in entries:
        label, job, trial = _compared(client, entry)
        training_input = job.get("trainingInput") or {}
        labels.append(label)
        inputs.append(
            compare.inputs(training_input, job.get("labels"), trial.get("hyperparameters") or {} if trial else None)
        )
        if trial is not None:
            goals = compare.study_goals(training_input.get("hyperparameters")) | goals
        points = fetch_metrics(client, entry.job_id, trial_id=str(trial["trialId"]) if trial else "")
        finals.append(
            compare.final_values((p["tag"], p.get("run", ""), int(p["step"]), float(p["value"])) for p in points)
        )
        tags |= {compare.metric_name(p["tag"], p.get("run", "")): p["tag"] for p in points}
    rows = [row for row in compare.input_rows(inputs) if row.differs or args.all_inputs]
    if rows:
        sys.stdout.write(output.table(["INPUT", *labels], [[row.name, *row.values] for row in rows]))
    else:
        output.status("The jobs' inputs are the same.")
    metric_rows = compare.metric_rows(finals, tags, goals, args.lower or [], args.higher or [])
    if metric_rows:
        sys.stdout.write(
            "\n"
            + output.table(
                ["METRIC", *labels, "BEST"],
                [
                    [row.name, *[_final_cell(cell) for cell in row.cells], "lower" if row.lower_is_better else "higher"]
                    for row in metric_rows
                ],
            )
        )
        output.status("* marks the best final value (the last report by step).")
    else:
        output.status("None of the jobs reported metrics.")
    return 0


def _final_cell(cell: dict | None) -> str:
    if cell is None:
        return "-"
    return f"{cell['value']}{' *' if cell['best'] else ''}"


# --- the parser --------------------------------------------------------------------------------


def _positive(text: str) -> int:
    if not text.isdigit() or int(text) < 1:
        raise argparse.ArgumentTypeError(f"expected a positive whole number, not {text!r}")
    return int(text)


def register(commands) -> None:
    jobs = common.add_group(commands, "jobs", "submit and manage training jobs (gcloud ai-platform jobs)")

    submit_parser = jobs.add_parser("submit", help="submit a job")
    submit = submit_parser.add_subparsers(
        dest="submit_command", required=True, metavar="KIND", parser_class=common.Parser
    )
    train = submit.add_parser(
        "training",
        help="submit a training job",
        usage="aiconsole jobs submit training JOB [flags] [-- USER_ARGS ...]",
        epilog="Everything after -- is passed to the trainer, before --job-dir.",
    )
    train.user_args_dest = "user_args"
    train.add_argument("job", metavar="JOB", help="the job id: letters, digits and underscores")
    training.add_flags(train)
    waiting = train.add_mutually_exclusive_group()
    waiting.add_argument(
        "--stream-logs", action="store_true", help="wait for the job, printing its log; exit 1 unless it succeeds"
    )
    waiting.add_argument(
        "--async", dest="async_", action="store_true", help="(the default) return as soon as the job is submitted"
    )
    common.connection_flags(train)
    train.set_defaults(func=cmd_submit_training)

    prediction = submit.add_parser("prediction", help="submit a batch prediction job")
    prediction.add_argument("job", metavar="JOB", help="the job id: letters, digits and underscores")
    source = prediction.add_mutually_exclusive_group(required=True)
    source.add_argument("--model-dir", metavar="PATH", help="a folder (local or gs://) holding a model file")
    source.add_argument("--model", help="a model of the project; its default version unless --version")
    prediction.add_argument("--version", help="a version of --model")
    prediction.add_argument(
        "--input-paths",
        type=training.comma_list,
        required=True,
        metavar="PATH,...",
        help="input files, wildcards allowed (gs://bucket/in/*.json)",
    )
    prediction.add_argument("--output-path", required=True, metavar="PATH", help="where the results go")
    prediction.add_argument("--region")
    prediction.add_argument("--data-format", required=True, choices=list(DATA_FORMATS))
    prediction.add_argument("--batch-size", type=_positive)
    prediction.add_argument("--max-worker-count", type=_positive)
    prediction.add_argument("--runtime-version")
    prediction.add_argument("--signature-name")
    prediction.add_argument("--labels", type=training.labels, action=training.MergeDict, metavar="KEY=VALUE,...")
    common.connection_flags(prediction)
    prediction.set_defaults(func=cmd_submit_prediction)

    describe = jobs.add_parser("describe", help="show a job")
    describe.add_argument("job", metavar="JOB")
    describe.add_argument("--summarize", action="store_true", help="tables of the job's input and output")
    common.connection_flags(describe)
    describe.set_defaults(func=cmd_describe)

    listing = jobs.add_parser("list", help="list jobs, newest first")
    listing.add_argument("--filter", help="e.g. 'jobId:census* AND state=FAILED', 'labels.team:ml'")
    listing.add_argument("--limit", type=_positive, help="list at most this many jobs")
    listing.add_argument("--page-size", type=_positive, help="jobs fetched per request (at most 100)")
    listing.add_argument(
        "--sort-by", type=training.comma_list, metavar="FIELD,...", help="sort by these fields; ~FIELD sorts descending"
    )
    common.connection_flags(listing)
    listing.set_defaults(func=cmd_list)

    cancel = jobs.add_parser("cancel", help="cancel a job")
    cancel.add_argument("job", metavar="JOB")
    common.connection_flags(cancel)
    cancel.set_defaults(func=cmd_cancel)

    update = jobs.add_parser("update", help="change a job's labels")
    update.add_argument("job", metavar="JOB")
    update.add_argument(
        "--update-labels",
        type=training.labels,
        action=training.MergeDict,
        metavar="KEY=VALUE,...",
        help="labels to add or change",
    )
    update.add_argument(
        "--remove-labels",
        type=training.label_keys,
        action=training.ExtendList,
        metavar="KEY,...",
        help="labels to remove (missing ones are ignored)",
    )
    update.add_argument("--clear-labels", action="store_true", help="remove every label first")
    common.connection_flags(update)
    update.set_defaults(func=cmd_update)

    stream = jobs.add_parser("stream-logs", help="print a job's log until it ends; exit 1 unless it succeeds")
    stream.add_argument("job", metavar="JOB")
    stream.add_argument("--task-name", help="only this replica, e.g. master-replica-0 or service")
    stream.add_argument("--allow-multiline-logs", action="store_true", help="print a multi-line message as one record")
    stream.add_argument(
        "--polling-interval",
        type=_positive,
        metavar="SECONDS",
        help="longest wait for new lines per request (default 20)",
    )
    common.connection_flags(stream, formats=False)
    stream.set_defaults(func=cmd_stream_logs)

    metrics = jobs.add_parser(
        "metrics", help="print a job's metrics (hypertune reports, TF summary scalars, its replicas' resource use)"
    )
    metrics.add_argument("job", metavar="JOB")
    metrics.add_argument("--tag", help="only this metric, e.g. accuracy or epoch_loss")
    metrics.add_argument("--trial-id", help="only this trial of a tuning job")
    metrics.add_argument(
        "--source",
        choices=["hypertune", "tfevents", "system"],
        help="only these points; system: each replica's CPU, memory, network and GPUs (run: the replica)",
    )
    metrics.add_argument(
        "--format",
        choices=["csv", "json"],
        default="csv",
        help="csv (the default; tag,step,value,time,trialId,source,run) or json",
    )
    common.connection_flags(metrics, formats=False)
    metrics.set_defaults(func=cmd_metrics)

    trials = jobs.add_parser("trials", help="print a tuning job's trials: parameters, objective, other metrics")
    trials.add_argument("job", metavar="JOB")
    trials.add_argument("--state", help="only trials in this state, e.g. SUCCEEDED")
    trials.add_argument("--sort", help="best (the default), trial, or a column such as objective or p.learning_rate")
    trials.add_argument("--format", choices=["csv", "json"], default="csv", help="csv (the default) or json")
    common.connection_flags(trials, formats=False)
    trials.set_defaults(func=cmd_trials)

    comparing = jobs.add_parser("compare", help="print how jobs' inputs differ and their final metrics")
    comparing.add_argument("jobs", metavar="JOB", nargs="+", help="job ids, or JOB/TRIAL for a tuning job's trial")
    comparing.add_argument("--all-inputs", action="store_true", help="print every input, not only those that differ")
    comparing.add_argument("--lower", action="append", metavar="TAG", help="count lower values of TAG as better")
    comparing.add_argument("--higher", action="append", metavar="TAG", help="count higher values of TAG as better")
    common.connection_flags(comparing, formats=False)
    comparing.set_defaults(func=cmd_compare)
