"""Batch prediction jobs: a Job with predictionInput, run by the executor like a training job.

The controller admits the job and hands it to a ``BatchPredictionRunner`` (the same interface as
``jobs.executor.runner.JobRunner``: start, cancel, abandon, on_done). PREPARING resolves the
model (``versionName``, the default version of ``modelName``, or a model folder at ``uri``),
expands the input wildcards and checks the output path; RUNNING starts up to ``maxWorkerCount``
serving processes (capped by AICONSOLE_BATCH_MAX_WORKERS) forked from the runtime's zygote, one
``prediction-replica-N`` each, and sends them ``batchSize`` instances at a time.

Output, as the original's: ``prediction.results-NNNNN-of-NNNNN`` (one shard per worker; each
line ``{"instance": …, "prediction": …}``, or the prediction's values as CSV with
``outputDataFormat: CSV``) and ``prediction.errors_stats-00000-of-00001`` (one ``('message',
count)`` line per distinct error). A batch that fails is retried instance by instance, so one bad
instance costs only itself. ``predictionOutput`` carries predictionCount, errorCount (int64
strings) and nodeHours (serving-process time).

Input lines: JSON (one JSON instance per line) and TEXT (a line that parses as JSON is that
value; a line of comma-separated numbers is that list; any other line is the string itself).
"""

from __future__ import annotations

import json
import logging
import queue
import shutil
import threading
import time
from collections import Counter
from pathlib import Path

from django.conf import settings
from django.utils import timezone

from jobs import catalogue
from jobs.executor.runner import RunnerBase
from jobs.models import Job, Replica, ReplicaState, VertexJob
from models_registry import conf, files
from models_registry.models import Model, Version, VersionState
from models_registry.serving import supervisor
from models_registry.serving.processes import BATCH, FAILED, OK, ServingError

logger = logging.getLogger("aiconsole.models")

READABLE_FORMATS = ("JSON", "TEXT")
DEFAULT_BATCH_SIZE = 64
DEFAULT_MAX_WORKERS = 10


class PrepareError(Exception):
    """The job cannot run; the message becomes its errorMessage."""


def replicas_needed(prediction_input: dict) -> int:
    """Serving processes the job will run: what the controller counts against capacity."""
    wanted = int(prediction_input.get("maxWorkerCount") or DEFAULT_MAX_WORKERS)
    return max(1, min(wanted, conf.batch_max_workers()))


def parse_line(line: str, data_format: str):
    if data_format == "JSON":
        return json.loads(line)
    try:
        return json.loads(line)
    except ValueError:
        pass
    parts = line.split(",")
    try:
        return [float(part) for part in parts] if len(parts) > 1 else line
    except ValueError:
        return line


def _csv_value(prediction) -> str:
    values = prediction if isinstance(prediction, list) else [prediction]
    return ",".join(json.dumps(v) if isinstance(v, dict | list) else str(v) for v in values)


class _Shard:
    """One worker's results file and counters."""

    def __init__(self, handle, csv: bool):
        self.handle = handle
        self.csv = csv
        self.predictions = 0

    def write(self, instance, prediction) -> None:
        if self.csv:
            self.handle.write(_csv_value(prediction) + "\n")
        else:
            self.handle.write(json.dumps({"instance": instance, "prediction": prediction}) + "\n")
        self.predictions += 1


class BatchPredictionRunner(RunnerBase):
    """Runs one batch prediction job in a thread of the executor."""

    label = "Batch prediction runner"
    thread_prefix = "batch"

    def __init__(self, job_pk: int, runner_id: str, on_done=None):
        super().__init__(job_pk, runner_id, on_done)
        self.replica_count = 1
        self.processes: list = []
        self.errors: Counter[str] = Counter()
        self.errors_lock = threading.Lock()
        self.node_seconds = 0.0

    # --- the job's life ----------------------------------------------------------------------------

    def _release(self) -> None:
        self._stop_processes()

    def _run(self, job: Job) -> None:
        work = settings.WORK_DIR / job.project.project_id / job.job_id
        shutil.rmtree(work, ignore_errors=True)
        work.mkdir(parents=True)
        pi = job.prediction_input or {}
        self.sink.service(f"Batch prediction job {job.job_id} is preparing.")

        def prepare():
            spec, machine = self._model(job, pi, work)
            inputs = self._inputs(pi, job.project)
            output = files.OutputDir(pi["outputPath"], work, project=job.project)
            self._check_cancel()
            return spec, machine, inputs, output

        prepared = self._prepared(job, prepare, PrepareError, files.DeployError)
        if prepared is None:
            return
        spec, machine, inputs, output = prepared
        try:
            self._start_workers(job, spec, machine, len(inputs))
            counts = self._predict(pi, inputs, output, work)
        except ServingError as error:
            self._fail(job, f"The model could not be served: {error}", self._output(pi, 0))
            return
        except files.DeployError as error:
            self._fail(job, str(error), self._output(pi, 0))
            return
        self._finish_batch(job, pi, counts)

    def _model(self, job: Job, pi: dict, work: Path) -> tuple[supervisor.ModelSpec, str]:
        runtime = pi.get("runtimeVersion")
        if pi.get("uri"):
            folder = work / "model"
            files.fetch_deployment(pi["uri"], folder, self._check_cancel, project=job.project)
            detected = files.detect_model(folder, "FRAMEWORK_UNSPECIFIED", pi["uri"])
            runtime = runtime or catalogue.DEFAULT_RUNTIME_VERSION
            self.sink.service(f"Using the {detected.framework} model {detected.model_file} from {pi['uri']}.")
            return self._spec(
                pi["uri"], runtime, str(detected.model_dir), detected.model_file, detected.framework, job.project
            ), "n1-standard-4"
        version = self._version(pi)
        self.sink.service(f"Using {version.resource_name} ({version.framework}, runtime {version.runtime_version}).")
        return self._spec(
            version.resource_name,
            runtime or version.runtime_version,
            version.local_dir,
            version.model_file,
            version.framework,
            version.model.project,
        ), version.machine_type

    @staticmethod
    def _spec(label, runtime, model_dir, model_file, framework, project) -> supervisor.ModelSpec:
        """Served as the account of the project the model's files belong to."""
        return supervisor.ModelSpec(
            0, label, runtime, model_dir, model_file, framework, 1, 1, True, False, project=project
        )

    def _version(self, pi: dict) -> Version:
        name = pi.get("versionName") or pi.get("modelName") or ""
        parts = name.split("/")
        project_id, model_name = parts[1], parts[3]
        model = (
            Model.objects.select_related("project", "default_version")
            .filter(project__project_id=project_id, name=model_name)
            .first()
        )
        if model is None:
            raise PrepareError(f"The model {'/'.join(parts[:4])} does not exist.")
        if pi.get("versionName"):
            version = Version.objects.filter(model=model, name=parts[5]).first()
            if version is None:
                raise PrepareError(f"The version {name} does not exist.")
        else:
            version = model.default_version
            if version is None:
                raise PrepareError(f"The model {name} has no default version.")
        version.model = model
        if version.state != VersionState.READY:
            raise PrepareError(
                f"The version {version.resource_name} is {version.state}, not READY"
                + (f": {version.error_message}" if version.error_message else ".")
            )
        return version

    def _inputs(self, pi: dict, project) -> list[str]:
        data_format = pi.get("dataFormat")
        if data_format not in READABLE_FORMATS:
            raise PrepareError(
                f"dataFormat {data_format} is not readable on this server: TFRecord input needs "
                "TensorFlow's reader; give JSON or TEXT files (one instance per line)."
            )
        inputs = files.expand_inputs(pi["inputPaths"], self._check_cancel, project=project)
        self.sink.service(f"Reading {len(inputs)} input file{'s' if len(inputs) != 1 else ''}.")
        return inputs

    # --- workers -----------------------------------------------------------------------------------------

    def _on_log(self, label: str, line: str) -> None:
        self.sink.emit(label, "stderr", line)

    def _start_workers(self, job: Job, spec: supervisor.ModelSpec, machine: str, input_count: int) -> None:
        count = replicas_needed(job.prediction_input)
        self.replica_count = count
        for index in range(count):
            label = catalogue.replica_label("prediction", index)
            replica = Replica.objects.create(
                job=job, task_type="prediction", task_index=index, label=label, machine_type=machine, host="127.0.0.1"
            )
            process, load_ms = supervisor.get().spawn(spec, label, self._on_log)
            process.replica_pk = replica.pk
            self.processes.append(process)
            Replica.objects.filter(pk=replica.pk).update(
                state=ReplicaState.RUNNING, pid=process.pid, start_time=timezone.now()
            )
            self.sink.service(f"Started {label} (pid {process.pid}); the model loaded in {load_ms:.0f} ms.")

    def _stop_processes(self) -> None:
        for process in self.processes:
            if getattr(process, "stopped", False):
                continue
            process.stop()
            process.stopped = True
            seconds = time.monotonic() - process.started
            self.node_seconds += seconds
            state = ReplicaState.STOPPED if self.cancel_requested.is_set() else ReplicaState.SUCCEEDED
            Replica.objects.filter(pk=process.replica_pk).update(state=state, exit_code=0, end_time=timezone.now())

    # --- predicting ----------------------------------------------------------------------------------------

    def _predict(self, pi: dict, inputs: list[str], output: files.OutputDir, work: Path) -> dict:
        batch_size = int(pi.get("batchSize") or DEFAULT_BATCH_SIZE)
        csv = pi.get("outputDataFormat") == "CSV"
        count = len(self.processes)
        if VertexJob.objects.filter(job_id=self.job_pk).exists():  # Vertex AI's names for its shards
            names = [f"predictions_{i + 1:05d}.jsonl" for i in range(count)]
        else:
            names = [f"prediction.results-{i:05d}-of-{count:05d}" for i in range(count)]
        shards = [_Shard(output.create(name), csv) for name in names]
        batches: queue.Queue = queue.Queue(maxsize=count * 4)
        failures: list[BaseException] = []
        threads = [
            threading.Thread(
                target=self._work,
                args=(process, shard, batches, failures),
                daemon=True,
                name=f"batch-{self.job_pk}-{process.label}",
            )
            for process, shard in zip(self.processes, shards, strict=True)
        ]
        for thread in threads:
            thread.start()
        try:
            self._produce(pi, inputs, batches, batch_size, work, failures)
        finally:
            for _ in threads:
                batches.put(None)
            for thread in threads:
                thread.join()
            for shard in shards:
                shard.handle.close()
        if failures and not self.cancel_requested.is_set():
            raise failures[0]
        stats = "prediction.errors_stats-00000-of-00001"
        with output.create(stats) as handle:
            for message, number in self.errors.most_common():
                handle.write(f"({message!r}, {number})\n")
        if not self.cancel_requested.is_set():
            output.publish([*names, stats])
        return {"predictions": sum(s.predictions for s in shards), "errors": sum(self.errors.values())}

    def _produce(
        self, pi: dict, inputs: list[str], batches: queue.Queue, size: int, work: Path, failures: list
    ) -> None:
        data_format = pi["dataFormat"]
        batch: list = []
        for uri in inputs:
            self.sink.service(f"Predicting the instances in {uri}.")
            for line in files.read_lines(uri, work / "inputs"):
                if self.cancel_requested.is_set() or failures:
                    return
                try:
                    batch.append(parse_line(line, data_format))
                except ValueError as error:
                    self._error(f"Failed to parse the input line as JSON: {error}")
                    continue
                if len(batch) >= size:
                    batches.put(batch)
                    batch = []
        if batch:
            batches.put(batch)

    def _work(self, process, shard: _Shard, batches: queue.Queue, failures: list) -> None:
        timeout = conf.predict_timeout()
        while (batch := batches.get()) is not None:
            if self.cancel_requested.is_set() or failures:
                continue
            try:
                self._send(process, shard, batch, timeout)
            except BaseException as error:
                failures.append(error)

    def _send(self, process, shard: _Shard, batch: list, timeout: float) -> None:
        code, body = process.request(BATCH, json.dumps(batch).encode(), timeout)
        if code == OK:
            for instance, prediction in zip(batch, json.loads(body), strict=True):
                shard.write(instance, prediction)
            return
        if len(batch) > 1 and code == FAILED:
            for instance in batch:  # find the instances that fail, keep the rest
                self._send(process, shard, [instance], timeout)
            return
        self._error(body.decode("utf-8", errors="replace"))

    def _error(self, message: str) -> None:
        with self.errors_lock:
            self.errors[message] += 1

    # --- the outcome ----------------------------------------------------------------------------------------

    def _output(self, pi: dict, predictions: int) -> dict:
        return {
            "outputPath": pi.get("outputPath", ""),
            "predictionCount": str(predictions),
            "errorCount": str(sum(self.errors.values())),
            "nodeHours": round(self.node_seconds / 3600, 6),
        }

    def _finish_batch(self, job: Job, pi: dict, counts: dict) -> None:
        self._stop_processes()
        output = self._output(pi, counts["predictions"])
        if self.cancel_requested.is_set():
            self._finish_cancel(job, output)
            return
        self.sink.service(f"{counts['predictions']} predictions, {counts['errors']} errors.")
        if counts["errors"] and not counts["predictions"]:
            first = self.errors.most_common(1)[0][0]
            self._fail(job, f"Every instance failed ({counts['errors']}); the first error: {first}", output)
            return
        self._succeed(job, output)
