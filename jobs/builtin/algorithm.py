"""Built-in algorithm jobs on the console side: packaging, submission checks, outputs, the job page.

A job whose ``masterConfig.imageUri`` names a built-in algorithm image runs the ``algorithms``
package shipped in this repository. ``runnable_input`` turns such a TrainingInput into what the
executor runs for any trainer (``packageUris`` with our wheel, ``pythonModule``), so logs,
cancel, tuning and scaled mode need nothing special. The argument rules live in
``algorithms.definitions`` and are applied by ``jobs.validation`` (``check_training_input`` below);
``check_submission`` adds what needs the filesystem: the data file itself.
"""

from __future__ import annotations

import base64
import hashlib
import json
import os
import zipfile
from pathlib import Path

from django.conf import settings

import algorithms
from aiconsole import storage
from algorithms import analysis
from algorithms import definitions as algos
from algorithms.table import DataError, check_target, decode, read_text
from jobs import runtimes
from jobs.catalogue import MACHINE_TYPES, SCALE_TIERS, TPU
from jobs.validation import FieldViolation

DIST_NAME = "aiconsole_algorithms"
SCAN_BYTES = 1 << 20  # the part of a data file checked at submission
MEMORY_SHARE = 5  # a CSV may take at most a fifth of the machine's memory


# --- the package the executor installs ---------------------------------------------------------


def _sources() -> list[Path]:
    root = Path(algorithms.__file__).parent
    return sorted(p for p in root.rglob("*.py") if "__pycache__" not in p.parts)


def _record_hash(data: bytes) -> str:
    return "sha256=" + base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()


def package_path() -> Path:
    """A wheel of the ``algorithms`` package, built once per content and kept in storage.

    The wheel is byte-for-byte the same for the same sources, so the job environment built from
    it is cached like any trainer package's.
    """
    root = Path(algorithms.__file__).parent
    sources = [(f"algorithms/{p.relative_to(root).as_posix()}", p.read_bytes()) for p in _sources()]
    digest = hashlib.sha256(json.dumps([[n, hashlib.sha256(d).hexdigest()] for n, d in sources]).encode())
    target = (
        settings.STORAGE_DIR
        / "builtin-algorithms"
        / digest.hexdigest()[:16]
        / f"{DIST_NAME}-{algorithms.__version__}-py3-none-any.whl"
    )
    if target.is_file():
        return target
    target.parent.mkdir(parents=True, exist_ok=True)
    dist_info = f"{DIST_NAME}-{algorithms.__version__}.dist-info"
    files = sources + [
        (
            f"{dist_info}/METADATA",
            (
                f"Metadata-Version: 2.1\nName: aiconsole-algorithms\n"
                f"Version: {algorithms.__version__}\nSummary: AI Console built-in algorithms\n"
            ).encode(),
        ),
        (f"{dist_info}/WHEEL", b"Wheel-Version: 1.0\nGenerator: aiconsole\nRoot-Is-Purelib: true\nTag: py3-none-any\n"),
    ]
    record = "".join(f"{name},{_record_hash(data)},{len(data)}\n" for name, data in files) + f"{dist_info}/RECORD,,\n"
    scratch = target.with_suffix(f".{os.getpid()}.tmp")
    with zipfile.ZipFile(scratch, "w", zipfile.ZIP_DEFLATED) as wheel:
        for name, data in [*files, (f"{dist_info}/RECORD", record.encode())]:
            info = zipfile.ZipInfo(name, date_time=(1980, 1, 1, 0, 0, 0))
            info.external_attr = 0o644 << 16
            wheel.writestr(info, data, zipfile.ZIP_DEFLATED)
    os.replace(scratch, target)
    return target


def runnable_input(training_input: dict) -> dict:
    """The TrainingInput the executor runs: a built-in algorithm becomes our package and module."""
    algorithm = algos.for_training_input(training_input)
    if algorithm is None:
        return training_input
    # Our algorithms are current code: they run on the extension runtime, on the console's Python.
    return {
        **training_input,
        "packageUris": [str(package_path())],
        "pythonModule": algorithm.module,
        "runtimeVersion": runtimes.CURRENT,
        "pythonVersion": runtimes.default_python(runtimes.RUNTIMES[runtimes.CURRENT]),
    }


# --- spec rules (pure; called by jobs.validation) ----------------------------------------------------------


def check_training_input(ti: dict, path: str) -> list[FieldViolation]:
    """The rules for a TrainingInput that names a built-in algorithm image."""
    image = (ti.get("masterConfig") or {}).get("imageUri")
    algorithm = algos.by_image(image)
    if algorithm is None:
        if algos.is_builtin_image(image):
            shipped = ", ".join(a.image for a in algos.ALGORITHMS)
            return [
                FieldViolation(
                    f"{path}.master_config.image_uri",
                    f"masterConfig.imageUri {image} is a built-in "
                    f"algorithm this server does not provide. Built-in algorithms: {shipped}.",
                )
            ]
        return []
    violations = []

    def add(field: str, message: str) -> None:
        violations.append(FieldViolation(f"{path}.{field}", message))

    for key, field in (("packageUris", "package_uris"), ("pythonModule", "python_module")):
        if ti.get(key):
            add(field, f"{key} cannot be set with a built-in algorithm image: the algorithm is the trainer.")
    for key in ("containerCommand", "containerArgs"):
        if (ti.get("masterConfig") or {}).get(key):
            add(
                f"master_config.{'container_command' if key == 'containerCommand' else 'container_args'}",
                f"masterConfig.{key} cannot be used with a built-in algorithm; give its arguments in args.",
            )
    if not ti.get("jobDir"):
        add(
            "job_dir",
            "jobDir is required for a built-in algorithm: its model/, processed_data/ and artifacts/ "
            "are written there.",
        )
    _check_machines(ti, algorithm, add)
    values, problems = algos.parse_args(algorithm, list(ti.get("args", [])))
    for problem in problems:
        add("args", problem)
    if "hyperparameters" in ti:
        _check_tuning(ti["hyperparameters"], algorithm, algos.model_type_of(algorithm, values), add)
    return violations


def _check_machines(ti: dict, algorithm: algos.Algorithm, add) -> None:
    tier = ti.get("scaleTier", "BASIC")
    if tier not in ("BASIC", "BASIC_GPU", "CUSTOM"):
        add(
            "scale_tier",
            f"A built-in algorithm runs on a single replica: scaleTier must be BASIC, BASIC_GPU or CUSTOM, not {tier}.",
        )
        return
    for key, field in (
        ("workerCount", "worker_count"),
        ("parameterServerCount", "parameter_server_count"),
        ("evaluatorCount", "evaluator_count"),
    ):
        if int(ti.get(key) or 0) > 0:
            add(field, f"A built-in algorithm runs on a single replica: {key} must be 0.")
    gpus = _master_gpus(ti)
    if gpus is None:
        add("master_type", f"The built-in {algorithm.title} cannot use TPUs.")
    elif gpus > algorithm.max_gpus:
        allowed = "no GPU" if not algorithm.max_gpus else f"at most {algorithm.max_gpus} GPU"
        add(
            "master_config.accelerator_config",
            f"The built-in {algorithm.title} takes {allowed}; the master would have {gpus}.",
        )


def _master_gpus(ti: dict) -> int | None:
    """GPUs on the master (None for a TPU master)."""
    tier = ti.get("scaleTier", "BASIC")
    name = SCALE_TIERS[tier].roles[0].machine_type if tier != "CUSTOM" else ti.get("masterType")
    machine = MACHINE_TYPES.get(name or "")
    if machine is None:
        return 0  # an unknown machine type is reported by the cluster rules
    if machine.category == TPU:
        return None
    count = machine.builtin_accelerator[1] if machine.builtin_accelerator else 0
    if tier == "BASIC_GPU":
        count = max(count, SCALE_TIERS[tier].roles[0].accelerator_count or 1)
    config = (ti.get("masterConfig") or {}).get("acceleratorConfig") or {}
    if str(config.get("type", "")).startswith("TPU"):
        return None
    return count + int(config.get("count") or 0)


def _check_tuning(hp: dict, algorithm: algos.Algorithm, model_type: str | None, add) -> None:
    for index, param in enumerate(hp.get("params", [])):
        name = param.get("parameterName", "")
        argument = algorithm.argument(name)
        field = f"hyperparameters.params[{index}]"
        if argument is None or argument.kind in ("path", "str"):
            tunable = ", ".join(a.name for a in algorithm.arguments if a.tunable)
            add(
                f"{field}.parameter_name",
                f'parameterName "{name}" is not a tunable argument of the built-in '
                f"{algorithm.title}. Tunable: {tunable}.",
            )
            continue
        samples = [
            param.get("minValue"),
            param.get("maxValue"),
            *param.get("discreteValues", []),
            *param.get("categoricalValues", []),
        ]
        for value in (v for v in samples if v is not None):
            _, problem = algos.convert(argument, str(value))
            if problem:
                add(field, f"parameter {name}: {problem}")
                break
    tag = hp.get("hyperparameterMetricTag")
    known = algos.metrics_for(model_type)
    if tag and tag not in known:
        add(
            "hyperparameters.hyperparameter_metric_tag",
            f'hyperparameterMetricTag "{tag}" is not a metric the built-in {algorithm.title} reports; for '
            f"{model_type or 'its model types'} it reports {', '.join(known)}.",
        )
    elif tag and hp.get("goal") in ("MAXIMIZE", "MINIMIZE"):
        better = "MAXIMIZE" if tag in algos.MAXIMIZED_METRICS else "MINIMIZE"
        if hp["goal"] != better:
            add("hyperparameters.goal", f"goal {hp['goal']} would search for the worst {tag}; use {better}.")


# --- submission checks (the filesystem) ---------------------------------------------------------------


def check_submission(training_input: dict, *, project=None) -> list[FieldViolation]:
    """A built-in algorithm's local data files are checked now (with ``project``, they must lie in
    its storage area or a shared root). Other images are custom containers (jobs.containers)."""

    image = (training_input.get("masterConfig") or {}).get("imageUri")
    algorithm = algos.by_image(image)
    if algorithm is None:
        return []
    values, problems = algos.parse_args(algorithm, list(training_input.get("args", [])))
    if problems:
        return []  # already reported by the spec rules
    violations = []
    memory = _memory_gb(training_input)
    width = None
    for key in ("training_data_path", "validation_data_path", "test_data_path"):
        uri = values.get(key)
        if not uri or storage.is_gcs_uri(uri):
            continue  # gs:// data is checked by the algorithm's first step
        try:
            with storage.open_local(uri, project=project) as handle:
                width = check_data_file(handle, uri, values, algos.model_type_of(algorithm, values), memory, width)
        except (storage.StorageError, DataError) as error:
            violations.append(FieldViolation("job.training_input.args", f"--{key}: {error}"))
    return violations


def _memory_gb(training_input: dict) -> float | None:
    tier = training_input.get("scaleTier", "BASIC")
    name = training_input.get("masterType") if tier == "CUSTOM" else SCALE_TIERS[tier].roles[0].machine_type
    machine = MACHINE_TYPES.get(name or "")
    return machine.memory_gb if machine else None


def check_data_file(
    handle, path: str, values: dict, model_type: str | None, memory_gb: float | None, width: int | None = None
) -> int:
    """Check a local CSV's size and its first megabyte (``handle``, opened for ``path``); return its
    column count."""
    size = os.fstat(handle.fileno()).st_size
    if size == 0:
        raise DataError(f"{path} is empty: a CSV with at least one row is required.")
    if memory_gb and size * MEMORY_SHARE > memory_gb * 1e9:
        raise DataError(
            f"{path} is {size / 1e9:.2f} GB, too large for the master's {memory_gb:g} GB of memory: a "
            f"built-in algorithm takes CSV files of at most {memory_gb / MEMORY_SHARE:.2f} GB (a fifth of "
            "the machine's memory). Choose a machine type with more memory."
        )
    data = handle.read(SCAN_BYTES)
    if len(data) == SCAN_BYTES and b"\n" in data:
        data = data[: data.rindex(b"\n") + 1]  # whole lines only
    table = read_text(decode(data, path), source=path, header=bool(values.get("header")), width=width)

    check_target(table, model_type)
    return table.width


# --- outputs ------------------------------------------------------------------------------------------


def is_builtin_input(training_input: dict) -> bool:
    return algos.for_training_input(training_input) is not None


def is_builtin_job(job) -> bool:
    return is_builtin_input(job.training_input)


def model_dir(job) -> str | None:
    """Where a finished built-in job's model is (a tuning job's is per trial)."""
    job_dir = (job.training_input or {}).get("jobDir")
    if not job_dir:
        return None
    return job_dir.rstrip("/") + "/model/"


def training_output(job) -> dict:
    """trainingOutput with isBuiltInAlgorithmJob and builtInAlgorithmOutput for a built-in job."""
    output = dict(job.training_output or {})
    algorithm = algos.for_training_input(job.training_input)
    if algorithm is None:
        return output
    info = {
        "framework": algorithm.framework,
        "runtimeVersion": runtimes.CURRENT,
        "pythonVersion": runtimes.default_python(runtimes.RUNTIMES[runtimes.CURRENT]),
    }
    output["isBuiltInAlgorithmJob"] = True
    job_info = dict(info)
    if job.state == "SUCCEEDED" and not job.is_hyperparameter_job and model_dir(job):
        job_info["modelPath"] = model_dir(job)
    output["builtInAlgorithmOutput"] = job_info
    if output.get("trials"):
        base = ((job.training_input or {}).get("jobDir") or "").rstrip("/")
        trials = []
        for trial in output["trials"]:
            trial_info = dict(info)
            if trial.get("state") == "SUCCEEDED" and base:
                trial_info["modelPath"] = f"{base}/{trial['trialId']}/model/"
            trials.append({**trial, "builtInAlgorithmOutput": trial_info})
        output["trials"] = trials
    return output


def _read_json(uri: str, project=None) -> dict | None:
    try:
        return json.loads(storage.read_bytes(uri, max_bytes=16 << 20, project=project))
    except (storage.StorageError, ValueError):
        return None


def results(job, trial_id: str = "") -> dict | None:
    """What the job page shows for a built-in job: its algorithm, evaluation and data summary."""
    algorithm = algos.for_training_input(job.training_input)
    if algorithm is None:
        return None
    job_dir = ((job.training_input or {}).get("jobDir") or "").rstrip("/")
    values, _ = algos.parse_args(algorithm, list((job.training_input or {}).get("args", [])))
    base = f"{job_dir}/{trial_id}" if trial_id else job_dir
    evaluation = _read_json(f"{base}/artifacts/evaluation.json", job.project) if job_dir else None
    metadata = _read_json(f"{base}/artifacts/metadata.json", job.project) if job_dir else None
    return {
        "algorithm": algorithm,
        "values": values,
        "output": training_output(job).get("builtInAlgorithmOutput"),
        "evaluation": evaluation,
        "metadata": metadata,
        "base": base,
        "trial": trial_id,
        "model_dir": f"{base}/model/" if evaluation else None,
        "metric_rows": _metric_rows(evaluation),
        "confusion": _confusion_rows(evaluation),
    }


def _confusion_rows(evaluation: dict | None) -> list:
    if not evaluation or not evaluation.get("confusion_matrix"):
        return []
    return list(zip(evaluation.get("classes", []), evaluation["confusion_matrix"], strict=False))


def _metric_rows(evaluation: dict | None) -> list[list]:
    if not evaluation:
        return []
    names = algos.metrics_for(evaluation.get("model_type"))
    return [
        [name, *(evaluation.get(split, {}).get(name) for split in ("test", "validation", "training"))]
        for name in names
        if any(name in evaluation.get(s, {}) for s in ("test", "validation", "training"))
    ]


def best_trial(job) -> str:
    """The succeeded trial with the best objective, for the page of a tuning job."""
    trials = [
        t
        for t in (job.training_output or {}).get("trials", [])
        if t.get("finalMetric") and t.get("state") == "SUCCEEDED"
    ]
    if not trials:
        return ""
    maximize = ((job.training_input or {}).get("hyperparameters") or {}).get("goal") != "MINIMIZE"
    best = (max if maximize else min)(trials, key=lambda t: float(t["finalMetric"]["objectiveValue"]))
    return str(best["trialId"])


# --- the data analysis page ------------------------------------------------------------------------------

ANALYSIS_MAX_BYTES = 64 << 20  # the part of a file the page reads; the rest is left out, and it says so


def read_table(uri: str, *, header: bool, width: int | None = None, project=None):
    """Read up to ANALYSIS_MAX_BYTES of a CSV in storage (local or gs://) as a Table."""
    data, cut = read_csv_bytes(uri, project=project)
    table = read_text(decode(data, uri), source=uri, header=header, width=width)
    table.truncated = table.truncated or cut
    return table


def read_csv_bytes(uri: str, *, project=None) -> tuple[bytes, bool]:
    """Up to ANALYSIS_MAX_BYTES of a CSV in storage (with ``project``, in its area), cut at a line
    end, and whether it was cut. A local file is opened from its storage root down, never through
    a link, so what was checked is what is read."""

    if storage.is_gcs_uri(uri):
        data = storage.read_bytes(uri, max_bytes=ANALYSIS_MAX_BYTES)
        cut = False
    else:
        try:
            with storage.open_local(uri, project=project) as handle:
                data = handle.read(ANALYSIS_MAX_BYTES + 1)
        except storage.StorageError as error:
            raise DataError(f"{uri} is not a file." if str(error).endswith("is not a file") else str(error)) from None
        cut = len(data) > ANALYSIS_MAX_BYTES
        if cut:
            data = data[: data.rindex(b"\n", 0, ANALYSIS_MAX_BYTES) + 1] if b"\n" in data else data
    return data, cut


def analyse(uri: str, *, header: bool = False, model_type: str | None = None, compare: str | None = None) -> dict:
    """The data analysis page's report of a CSV (and drift against a second one, if given)."""

    table = read_table(uri, header=header)
    other = read_table(compare, header=header, width=table.width) if compare else None
    if other is not None and header:
        other.names = table.names
    return analysis.report(table, model_type=model_type or None, compare=other)
