"""``aiconsole local train``: run a trainer on this machine, without the console, as
``gcloud ai-platform local train`` does.

The trainer runs as ``python -m MODULE ARGS --job-dir DIR`` in the current environment, from the
parent folder of ``--package-path`` (or the current folder), with TF_CONFIG set:

- alone: ``{"job": {"job_name": MODULE, "args": [...]}, "task": {}, "cluster": {},
  "environment": "cloud"}`` (gcloud runs it as the master of an empty cluster);
- ``--distributed``: one process per task on localhost ports counting up from ``--start-port``
  (27182), each with the cluster and its own task, built by the executor's own
  ``cluster_configs`` so the rules (``chief`` or ``master``, evaluators outside the cluster)
  are the console's. The master's exit status is the command's; when it ends the other tasks
  (parameter servers never exit by themselves) are stopped. Their output is prefixed with the
  task's replica name.

The interpreter is ``$AICONSOLE_LOCAL_PYTHON``, else ``python`` on PATH, as gcloud picks it. The
primary is called ``chief`` when the local TensorFlow is 2.x or absent (the console's default
runtime is 2.x), ``master`` for TensorFlow 1.x; ``--runtime-version`` or
``--use-chief-in-tf-config`` decide instead when given.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import threading
import time
from pathlib import Path

from console.cli import common, models, output, training
from console.cli.client import CliError
from jobs import catalogue
from jobs.executor import replicas

DEFAULT_START_PORT = 27182
STOP_GRACE_SECONDS = 5.0
MAX_LINE_BYTES = 32768
_TF_PROBE = """
from importlib.metadata import PackageNotFoundError, version
for name in ("tensorflow", "tensorflow-cpu", "tensorflow-gpu", "tf-nightly"):
    try:
        print(version(name))
        break
    except PackageNotFoundError:
        pass
"""


def interpreter() -> str:
    return (
        os.environ.get("AICONSOLE_LOCAL_PYTHON") or shutil.which("python") or shutil.which("python3") or sys.executable
    )


def local_tensorflow(python: str) -> str | None:
    try:
        result = subprocess.run([python, "-c", _TF_PROBE], capture_output=True, text=True, timeout=60)
    except (OSError, subprocess.TimeoutExpired):
        return None
    return result.stdout.strip() or None


def use_chief(args, python: str) -> bool:
    if args.use_chief_in_tf_config is not None:
        return args.use_chief_in_tf_config
    if args.runtime_version:
        return catalogue.uses_chief(args.runtime_version)
    version = local_tensorflow(python)
    if version and version.split(".")[0].isdigit():
        return int(version.split(".")[0]) >= 2
    return catalogue.uses_chief(None)


def _exit_status(code: int) -> int:
    return 128 - code if code < 0 else code


class _PrefixedOutput:
    """Stands in for the executor's log sink: prints each line with its task's name."""

    def __init__(self):
        self._lock = threading.Lock()

    def emit(self, label: str, stream: str, line: str, trial_id: str = "") -> None:
        target = sys.stderr if stream == "stderr" else sys.stdout
        with self._lock:
            print(f"[{label}] {line}", file=target, flush=True)


def run_single(command: list[str], cwd: Path, module: str, user_args: list[str]) -> int:
    tf_config = {"job": {"job_name": module, "args": user_args}, "task": {}, "cluster": {}, "environment": "cloud"}
    process = subprocess.Popen(command, cwd=cwd, env={**os.environ, "TF_CONFIG": json.dumps(tf_config)})
    try:
        return _exit_status(process.wait())
    except KeyboardInterrupt:
        # The trainer shares our terminal, so it got the Ctrl+C too; give it a moment to stop.
        try:
            process.wait(timeout=STOP_GRACE_SECONDS)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
        raise


def task_plans(args) -> list[catalogue.ReplicaPlan]:
    counts = (
        ("master", 1),
        ("worker", args.worker_count if args.worker_count is not None else 2),
        ("ps", args.parameter_server_count if args.parameter_server_count is not None else 2),
        ("evaluator", args.evaluator_count or 0),
    )
    return [
        catalogue.ReplicaPlan(task_type, index, "local", None, 0)
        for task_type, number in counts
        for index in range(number)
    ]


def run_distributed(args, command: list[str], cwd: Path, module: str, user_args: list[str], chief: bool) -> int:
    placements = [
        replicas.Placement(plan, "localhost", args.start_port + number) for number, plan in enumerate(task_plans(args))
    ]
    configs = replicas.cluster_configs(placements, job_id=module, training_input={"args": user_args}, use_chief=chief)
    sink = _PrefixedOutput()
    processes = []
    for number, placement in enumerate(placements):
        tf_config, _ = configs[placement.label]
        env = {**os.environ, "TF_CONFIG": json.dumps(tf_config), "PYTHONUNBUFFERED": "1"}
        process = replicas.ReplicaProcess(
            replica_id=number,
            label=placement.label,
            task_type=placement.plan.task_type,
            command=command,
            env=env,
            cwd=cwd,
            sink=sink,
            max_line_bytes=MAX_LINE_BYTES,
            stop_grace=STOP_GRACE_SECONDS,
        )
        process.start()
        processes.append(process)
    tasks = ", ".join(p.label for p in processes)
    output.status(
        f"Started {len(processes)} tasks on localhost ports {args.start_port}-"
        f"{args.start_port + len(processes) - 1}: {tasks}"
    )
    primary, others = processes[0], processes[1:]
    try:
        reported: set[str] = set()
        while primary.poll() is None:
            for process in others:
                code = process.poll()
                if code is not None and process.label not in reported:
                    reported.add(process.label)
                    output.status(f"{process.label} exited with status {_exit_status(code)}.")
            time.sleep(0.1)
    finally:
        still_running = [p for p in processes if p.poll() is None]
        for process in still_running:
            process.stop(STOP_GRACE_SECONDS)
        for process in processes:
            process.wait_output()
    code = _exit_status(primary.poll())
    stopped = f"; stopped {', '.join(p.label for p in still_running)}" if still_running else ""
    output.status(f"{primary.label} exited with status {code}{stopped}.")
    return code


@common.command("local.train")
def cmd_train(args) -> int:
    distributed_only = [
        flag
        for flag, value in (
            ("--worker-count", args.worker_count),
            ("--parameter-server-count", args.parameter_server_count),
            ("--evaluator-count", args.evaluator_count),
        )
        if value is not None
    ]
    if distributed_only and not args.distributed:
        raise CliError(f"{', '.join(distributed_only)}: only used with --distributed", exit_code=2)
    cwd = Path.cwd()
    if args.package_path:
        package = Path(args.package_path).expanduser().resolve()
        if not package.is_dir():
            raise CliError(f"--package-path {args.package_path}: no such directory", exit_code=2)
        cwd = package.parent
    job_dir = args.job_dir
    if job_dir and "://" not in job_dir:
        job_dir = os.path.abspath(os.path.expanduser(job_dir))
        Path(job_dir).mkdir(parents=True, exist_ok=True)  # trainers expect it to exist
    python = interpreter()
    command = replicas.trainer_command(Path(python), args.module_name, args.user_args, job_dir)
    if not args.distributed:
        return run_single(command, cwd, args.module_name, args.user_args)
    return run_distributed(args, command, cwd, args.module_name, args.user_args, use_chief(args, python))


# --- local predict ---------------------------------------------------------------------------------

PREDICTOR = Path(__file__).with_name("local_predictor.py")
# The console's serving code, standalone (no console imports): a model predicts here as deployed.
SERVING_WORKER = Path(__file__).resolve().parents[2] / "models_registry" / "serving" / "worker.py"


@common.command("local.predict")
def cmd_predict(args) -> int:
    """Predict with a model folder in this machine's Python, as gcloud's local predict did."""
    body = models.request_body(args)
    request = {
        "modelDir": str(Path(args.model_dir).expanduser().resolve()),
        "framework": args.framework,
        "signature": args.signature_name,
        "instances": body["instances"],
    }
    python = interpreter()
    try:
        done = subprocess.run(
            [python, str(PREDICTOR), str(SERVING_WORKER)],
            input=json.dumps(request),
            capture_output=True,
            text=True,
            timeout=600,
        )
    except (OSError, subprocess.TimeoutExpired) as error:
        raise CliError(f"{python} could not run the prediction: {error}") from None
    try:
        answer = json.loads(done.stdout.strip().splitlines()[-1])
    except (ValueError, IndexError):
        raise CliError(
            f"{python} could not run the prediction (exit status {done.returncode}):\n{done.stderr.strip()[-2000:]}"
        ) from None
    if "error" in answer:
        raise CliError(answer["error"])
    output.emit(answer, args.format, models.predictions_text(answer["predictions"]))
    return 0


def register(commands) -> None:
    local = common.add_group(commands, "local", "run trainers on this machine (gcloud ai-platform local)")
    train = local.add_parser(
        "train",
        help="run a trainer here, as the console would, without the console",
        usage="aiconsole local train --module-name MODULE [flags] [-- USER_ARGS ...]",
        epilog="Everything after -- is passed to the trainer, before --job-dir.",
    )
    train.user_args_dest = "user_args"
    train.add_argument("--module-name", required=True, metavar="MODULE", help="e.g. trainer.task")
    train.add_argument(
        "--package-path",
        metavar="DIR",
        help="the package folder; the trainer runs from its parent (default: run from here)",
    )
    train.add_argument("--job-dir", metavar="PATH", help="passed to the trainer as --job-dir (created if local)")
    train.add_argument("--distributed", action="store_true", help="one process per task, on localhost")
    train.add_argument("--worker-count", type=training.count, metavar="N", help="workers (default 2)")
    train.add_argument(
        "--parameter-server-count", type=training.count, metavar="N", help="parameter servers (default 2)"
    )
    train.add_argument("--evaluator-count", type=training.count, metavar="N", help="evaluators (default 0)")
    train.add_argument(
        "--start-port",
        type=int,
        default=DEFAULT_START_PORT,
        metavar="PORT",
        help=f"first port of the local cluster (default {DEFAULT_START_PORT})",
    )
    train.add_argument("--runtime-version", help="choose chief or master in TF_CONFIG as this runtime would")
    train.add_argument(
        "--use-chief-in-tf-config",
        type=training.boolean,
        metavar="BOOL",
        help="call the primary task chief (true) or master (false)",
    )
    train.set_defaults(func=cmd_train)

    predict = local.add_parser(
        "predict",
        help="predict with a model folder in this machine's Python "
        "($AICONSOLE_LOCAL_PYTHON or python), without the console",
    )
    predict.add_argument(
        "--model-dir",
        required=True,
        metavar="DIR",
        help="the folder with saved_model.pb, model.bst or model.joblib/model.pkl",
    )
    inputs = predict.add_mutually_exclusive_group(required=True)
    inputs.add_argument("--json-instances", metavar="FILE", help="one JSON instance per line ('-' for stdin)")
    inputs.add_argument("--json-request", metavar="FILE", help='a whole request: {"instances": [...]}')
    inputs.add_argument("--text-instances", metavar="FILE", help="one text instance per line")
    predict.add_argument(
        "--framework",
        type=models.framework,
        metavar="FRAMEWORK",
        help="tensorflow, scikit-learn or xgboost (default: found from the model file)",
    )
    predict.add_argument("--signature-name", help="the SavedModel signature (TensorFlow)")
    predict.add_argument(
        "--format",
        type=output.parse_format,
        default=None,
        help="output format: json, yaml or value(FIELD,...) (default: readable text)",
    )
    predict.set_defaults(func=cmd_predict)
