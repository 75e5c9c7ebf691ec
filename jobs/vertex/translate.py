"""Vertex AI job bodies as the engine's jobs: a CustomJob or HyperparameterTuningJob becomes a v1
TrainingInput (validated and run like any other), plus what the v1 body cannot say.

``custom_job`` and ``tuning_job`` read a create request (``jobs.vertex.schema``), apply Vertex's own
rules, and return a ``Translation``: the canonical request (to answer back), the v1
``trainingInput`` and the ``engine`` options the executor honours beyond it (each worker pool's
environment, conditional parameters, the measurement selection, notes for the job's log).
``Translation.vertex_violations`` maps the v1 validator's refusals back onto the Vertex fields the
user wrote, so an error names ``worker_pool_specs[0].machine_spec.machine_type``, never
``master_type``.

How the two map:

- ``workerPoolSpecs[0..3]`` → master, workers, parameter servers, evaluators (scale tier CUSTOM):
  ``machineSpec`` → the role's machine type and ``acceleratorConfig``, ``replicaCount`` → its count
  (the chief pool holds exactly one replica), ``diskSpec`` → ``diskConfig``.
- ``pythonPackageSpec`` → ``packageUris``, ``pythonModule``, ``args`` (one trainer package per job:
  every pool names the same), ``executorImageUri`` → ``runtimeVersion``/``pythonVersion``
  (``jobs.vertex.images``); ``containerSpec`` → each role's ``imageUri``, ``containerCommand``,
  ``containerArgs``; ``env`` → the engine's per-pool environment.
- ``baseOutputDirectory`` → ``jobDir`` (where metrics and TensorBoard look; the trainer gets no
  ``--job-dir``, but ``AIP_MODEL_DIR`` and the rest, as on Vertex), ``scheduling.timeout`` →
  ``maxRunningTime``, ``maxWaitDuration`` → ``maxWaitTime``, the location → ``region``.
- ``studySpec`` → ``hyperparameters``: the one metric's id and goal, every parameter (conditional
  ones after their parent, active only for the parent's listed values), the algorithm,
  ``medianAutomatedStoppingSpec`` → ``enableTrialEarlyStopping``; ``maxTrialCount``,
  ``parallelTrialCount``, ``maxFailedTrialCount`` → ``maxTrials``, ``maxParallelTrials``,
  ``maxFailedTrials``.

Pure functions: no database.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from aiconsole.errors import FieldViolation, Violations, bounded, describe
from aiconsole.protojson import snake
from jobs import catalogue
from jobs.runtimes import prebuilt
from jobs.validation.param_values import format_value
from jobs.vertex import images, schema

CUSTOM_JOB = "custom_job"
TUNING_JOB = "hyperparameter_tuning_job"
ROLES = (  # one per worker pool, in order: v1 task type, machine type field, count field, config field
    ("master", "masterType", None, "masterConfig"),
    ("worker", "workerType", "workerCount", "workerConfig"),
    ("ps", "parameterServerType", "parameterServerCount", "parameterServerConfig"),
    ("evaluator", "evaluatorType", "evaluatorCount", "evaluatorConfig"),
)
MAX_DISPLAY_NAME = 128
_ENV_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
# Set by the platform for every replica; a pool's env may not replace them.
RESERVED_ENV = frozenset(
    {
        "TF_CONFIG",
        "CLUSTER_SPEC",
        "CLOUD_ML_JOB_ID",
        "CLOUD_ML_TRIAL_ID",
        "CLOUD_ML_HP_METRIC_FILE",
        "CLOUD_ML_HP_METRIC_TAG",
        "AIP_MODEL_DIR",
        "AIP_CHECKPOINT_DIR",
        "AIP_TENSORBOARD_LOG_DIR",
        "TMPDIR",
        "HOME",
        "PATH",
        "VIRTUAL_ENV",
        "CUDA_VISIBLE_DEVICES",
    }
)
_SCALES = {"UNIT_LINEAR_SCALE", "UNIT_LOG_SCALE", "UNIT_REVERSE_LOG_SCALE"}
_VALUE_SPECS = {
    "doubleValueSpec": "DOUBLE",
    "integerValueSpec": "INTEGER",
    "categoricalValueSpec": "CATEGORICAL",
    "discreteValueSpec": "DISCRETE",
}
_CONDITIONS = {
    "INTEGER": "parentIntValues",
    "DISCRETE": "parentDiscreteValues",
    "CATEGORICAL": "parentCategoricalValues",
}


class VertexError(Exception):
    """A Vertex body was refused; ``violations`` lists every problem, by Vertex field path."""

    def __init__(self, violations: list[FieldViolation]):
        self.violations = bounded(violations)
        super().__init__("\n".join(describe(v) for v in self.violations))


@dataclass
class Translation:
    """A Vertex create request read, and the engine's job it becomes."""

    display_name: str
    labels: dict[str, str]
    request: dict  # the canonical resource as read (schema.parse), echoed back in answers
    training_input: dict  # the v1 TrainingInput the engine runs
    engine: dict  # what the executor honours beyond it (jobs.vertex.launch)
    # v1 field path (prefix) → the Vertex path it came from; for mapping the validator's refusals
    origins: dict[str, str] = field(default_factory=dict)
    words: dict[str, str] = field(default_factory=dict)  # v1 names in messages → the Vertex names
    prediction_input: dict | None = None  # a batch prediction's v1 PredictionInput, run in its place

    def vertex_violations(self, violations) -> list[FieldViolation]:
        """The v1 validator's violations, renamed onto the Vertex fields they came from."""
        return [FieldViolation(self._path(v.field), self._words(v.description)) for v in violations]

    def _path(self, path: str) -> str:
        best = max((p for p in self.origins if path == p or path.startswith((p + ".", p + "["))), key=len, default="")
        if not best:
            return path
        rest = path[len(best) :]
        for v1_name, vertex_name in _SUBFIELDS.items():
            if rest.startswith(v1_name):
                rest = vertex_name + rest[len(v1_name) :]
                break
        return self.origins[best] + rest

    def _words(self, text: str) -> str:
        if not self.words:
            return text
        pattern = re.compile(
            r"\b(" + "|".join(re.escape(w) for w in sorted(self.words, key=len, reverse=True)) + r")\b"
        )
        return pattern.sub(lambda m: self.words[m.group(1)], text)


# v1 sub-fields of a role config or a parameter, as the Vertex field they come from.
_SUBFIELDS = {
    ".accelerator_config.type": ".machine_spec.accelerator_type",
    ".accelerator_config.count": ".machine_spec.accelerator_count",
    ".accelerator_config": ".machine_spec",
    ".disk_config.boot_disk_size_gb": ".disk_spec.boot_disk_size_gb",
    ".disk_config.boot_disk_type": ".disk_spec.boot_disk_type",
    ".disk_config": ".disk_spec",
    ".image_uri": ".container_spec.image_uri",
    ".container_command": ".container_spec.command",
    ".container_args": ".container_spec.args",
}


# --- CustomJob --------------------------------------------------------------------------------------


def custom_job(body: object, *, location: str) -> Translation:
    """Read a CustomJob create body; raise VertexError with every problem found."""
    errors = Violations()
    request = schema.parse(body, "CustomJob", CUSTOM_JOB, errors)
    if errors:
        raise VertexError(errors)
    display_name = _display_name(request, CUSTOM_JOB, errors)
    translation = Translation(display_name, dict(request.get("labels") or {}), request, {}, {})
    spec = request.get("jobSpec")
    if spec is None:
        errors.add(f"{CUSTOM_JOB}.job_spec", "jobSpec is required: it names the worker pools to run.")
    else:
        _job_spec(spec, f"{CUSTOM_JOB}.job_spec", "jobSpec", location, translation, errors)
    _encryption(request, CUSTOM_JOB, translation)
    if errors:
        raise VertexError(errors)
    return translation


def _display_name(request: dict, path: str, errors: Violations) -> str:
    name = request.get("displayName", "")
    if not name.strip():
        errors.add(f"{path}.display_name", "displayName is required.")
    elif len(name) > MAX_DISPLAY_NAME:
        errors.add(
            f"{path}.display_name", f"displayName can be at most {MAX_DISPLAY_NAME} characters; got {len(name)}."
        )
    return name


def _encryption(request: dict, path: str, translation: Translation) -> None:
    key = (request.get("encryptionSpec") or {}).get("kmsKeyName")
    if key:
        translation.training_input["encryptionConfig"] = {"kmsKeyName": key}
        translation.origins["job.training_input.encryption_config"] = f"{path}.encryption_spec"


def _job_spec(spec: dict, path: str, name: str, location: str, t: Translation, errors: Violations) -> None:
    """A CustomJobSpec (a CustomJob's ``jobSpec``, a tuning job's ``trialJobSpec``) onto ``t``."""
    ti = t.training_input
    ti.update({"scaleTier": "CUSTOM", "region": location})
    t.origins["job.training_input.region"] = "location"
    t.origins["job.labels"] = path.split(".")[0] + ".labels"
    t.words.update({"region": "location"})
    pools = spec.get("workerPoolSpecs") or []
    pools_path = f"{path}.worker_pool_specs"
    if not pools:
        errors.add(pools_path, f"{name}.workerPoolSpecs must list at least one worker pool (the chief's).")
        return
    if len(pools) > len(ROLES):
        errors.add(
            pools_path,
            f"{name}.workerPoolSpecs can list at most {len(ROLES)} worker pools (chief, workers, parameter "
            f"servers, evaluators); got {len(pools)}.",
        )
        return
    envs: list[dict[str, str]] = []
    kinds: set[str] = set()
    for index, pool in enumerate(pools):
        pool_path = f"{pools_path}[{index}]"
        pool_name = f"{name}.workerPoolSpecs[{index}]"
        envs.append(_pool(pool, index, pool_path, pool_name, t, errors))
        kinds.update(kind for kind in ("pythonPackageSpec", "containerSpec") if kind in pool)
    if len(kinds) > 1:
        errors.add(
            pools_path,
            f"{name}.workerPoolSpecs mix pythonPackageSpec and containerSpec: here a job runs either one "
            "trainer package or containers, in every pool.",
        )
    elif "pythonPackageSpec" in kinds:
        _package(pools, pools_path, name, t, errors)
    t.engine.setdefault("pools", envs)
    _outputs(spec, path, name, t, errors)


def _pool(pool: dict, index: int, path: str, name: str, t: Translation, errors: Violations) -> dict[str, str]:
    """One worker pool onto its role's fields; returns its environment variables."""
    task, type_key, count_key, config_key = ROLES[index]
    ti = t.training_input
    specs = [kind for kind in ("pythonPackageSpec", "containerSpec") if kind in pool]
    machine = pool.get("machineSpec") or {}
    count = int(pool.get("replicaCount") or 0)
    if not pool or (not specs and not machine and count == 0):
        if index == 0:
            errors.add(path, f"{name} is the chief's pool: it cannot be empty.")
        return {}  # an empty pool: none of this role, as Vertex takes it
    if len(specs) != 1:
        errors.add(path, f"{name} needs exactly one of pythonPackageSpec or containerSpec; got {len(specs)}.")
    if not machine.get("machineType"):
        errors.add(
            f"{path}.machine_spec.machine_type", f"{name}.machineSpec.machineType is required, e.g. n1-standard-4."
        )
    if index == 0 and count != 1:
        errors.add(
            f"{path}.replica_count", f"{name}.replicaCount must be 1: the chief's pool holds one replica; got {count}."
        )
    elif count < 1:
        errors.add(f"{path}.replica_count", f"{name}.replicaCount must be at least 1; got {count}.")
    config: dict = {}
    _machine(machine, path, name, config, errors)
    disk = pool.get("diskSpec") or {}
    if disk:
        config["diskConfig"] = {k: v for k, v in disk.items() if k in ("bootDiskType", "bootDiskSizeGb")}
    if "containerSpec" in pool:
        container = pool["containerSpec"]
        if not container.get("imageUri"):
            errors.add(f"{path}.container_spec.image_uri", f"{name}.containerSpec.imageUri is required.")
        config["imageUri"] = container.get("imageUri", "")
        if container.get("command"):
            config["containerCommand"] = list(container["command"])
        if container.get("args"):
            config["containerArgs"] = list(container["args"])
    ti[type_key] = machine.get("machineType", "")
    if count_key:
        ti[count_key] = str(count)
        t.origins[f"job.training_input.{snake(count_key)}"] = f"{path}.replica_count"
        t.words[count_key] = f"{name}.replicaCount"
    if config:
        ti[config_key] = config
    t.origins[f"job.training_input.{snake(type_key)}"] = f"{path}.machine_spec.machine_type"
    t.origins[f"job.training_input.{snake(config_key)}"] = path
    t.words[type_key] = f"{name}.machineSpec.machineType"
    t.words[config_key] = name
    spec_key = specs[0] if specs else "pythonPackageSpec"
    return _env((pool.get(spec_key) or {}).get("env") or [], f"{path}.{snake(spec_key)}.env", errors)


def _machine(machine: dict, path: str, name: str, config: dict, errors: Violations) -> None:
    kind = machine.get("acceleratorType")
    count = int(machine.get("acceleratorCount") or 0)
    if kind is None and count:
        errors.add(
            f"{path}.machine_spec.accelerator_type",
            f"{name}.machineSpec.acceleratorType is required with acceleratorCount {count}.",
        )
    if kind is None:
        return
    if kind not in catalogue.ACCELERATORS:
        errors.add(
            f"{path}.machine_spec.accelerator_type",
            f"{name}.machineSpec.acceleratorType {kind} is not offered here; accelerators: "
            f"{', '.join(catalogue.ACCELERATORS)}.",
        )
        return
    if count < 1:
        errors.add(
            f"{path}.machine_spec.accelerator_count",
            f"{name}.machineSpec.acceleratorCount must be at least 1 with acceleratorType {kind}; got {count}.",
        )
        return
    config["acceleratorConfig"] = {"type": kind, "count": str(count)}


def _env(variables: list[dict], path: str, errors: Violations) -> dict[str, str]:
    env: dict[str, str] = {}
    for i, variable in enumerate(variables):
        key = variable.get("name", "")
        if not _ENV_NAME.match(key):
            errors.add(
                f"{path}[{i}].name",
                f"Environment variable name {key!r} is invalid: letters, digits "
                "and underscores, not starting with a digit.",
            )
        elif key in RESERVED_ENV or key.startswith("AICONSOLE_"):
            errors.add(f"{path}[{i}].name", f"{key} is set by the platform for every replica; choose another name.")
        else:
            env[key] = variable.get("value", "")
    return env


def _package(pools: list[dict], path: str, name: str, t: Translation, errors: Violations) -> None:
    """Every pool's pythonPackageSpec must run the same package: one trainer package per job here."""
    specs = [(i, pool["pythonPackageSpec"]) for i, pool in enumerate(pools) if "pythonPackageSpec" in pool]
    first_index, first = specs[0]
    first_path = f"{path}[{first_index}].python_package_spec"
    for index, spec in specs[1:]:
        for key in ("executorImageUri", "packageUris", "pythonModule", "args"):
            if spec.get(key) != first.get(key):
                errors.add(
                    f"{path}[{index}].python_package_spec.{snake(key)}",
                    f"{name}.workerPoolSpecs[{index}].pythonPackageSpec.{key} differs from workerPoolSpecs"
                    f"[{first_index}]'s: here every replica of a job runs the same trainer package and arguments.",
                )
    image = first.get("executorImageUri", "")
    ti = t.training_input
    if not image:
        errors.add(f"{first_path}.executor_image_uri", "pythonPackageSpec.executorImageUri is required.")
    else:
        executor = images.resolve(image)
        if executor is not None:
            ti["runtimeVersion"], ti["pythonVersion"] = executor.runtime, executor.python
            t.engine.setdefault("notes", []).append(executor.note)
            t.engine["executor"] = {"image": image, "runtime": executor.runtime, "python": executor.python}
        elif prebuilt.recipe_for(image) is not None:
            # The package runs in the image itself, built here (jobs/runtimes/prebuilt.py), as on Vertex.
            ti["masterConfig"] = {**ti.get("masterConfig", {}), "imageUri": image}
            t.origins["job.training_input.master_config.image_uri"] = f"{first_path}.executor_image_uri"
            t.words["imageUri"] = "executorImageUri"
            t.engine["executor"] = {"image": image}
        else:
            errors.add(f"{first_path}.executor_image_uri", images.refusal(image))
    for key in ("packageUris", "pythonModule"):
        if not first.get(key):
            errors.add(f"{first_path}.{snake(key)}", f"pythonPackageSpec.{key} is required.")
        else:
            ti[key] = first[key]
        t.origins[f"job.training_input.{snake(key)}"] = f"{first_path}.{snake(key)}"
        t.words[key] = f"pythonPackageSpec.{key}"
    if first.get("args"):
        ti["args"] = list(first["args"])
    for key in ("runtime_version", "python_version"):
        t.origins[f"job.training_input.{key}"] = f"{first_path}.executor_image_uri"
    t.words.update({"runtimeVersion": "executorImageUri", "pythonVersion": "executorImageUri"})


def _outputs(spec: dict, path: str, name: str, t: Translation, errors: Violations) -> None:
    """Output directory, scheduling, identity and what is accepted but not served here."""
    ti = t.training_input
    base = (spec.get("baseOutputDirectory") or {}).get("outputUriPrefix")
    if base:
        ti["jobDir"] = base
        t.origins["job.training_input.job_dir"] = f"{path}.base_output_directory.output_uri_prefix"
        t.words["jobDir"] = "baseOutputDirectory.outputUriPrefix"
    scheduling = spec.get("scheduling") or {}
    v1_scheduling = {}
    if scheduling.get("timeout") and name == "trialJobSpec":
        # A study's trial job spec limits each trial (its own CustomJob on Vertex), not the study.
        seconds = float(scheduling["timeout"].removesuffix("s"))
        if seconds <= 0:
            errors.add(f"{path}.scheduling.timeout", "scheduling.timeout must be longer than 0s.")
        t.engine["trialTimeoutSeconds"] = seconds
    elif scheduling.get("timeout"):
        v1_scheduling["maxRunningTime"] = scheduling["timeout"]
        t.origins["job.training_input.scheduling.max_running_time"] = f"{path}.scheduling.timeout"
        t.words["maxRunningTime"] = "scheduling.timeout"
    if scheduling.get("maxWaitDuration"):
        v1_scheduling["maxWaitTime"] = scheduling["maxWaitDuration"]
        t.origins["job.training_input.scheduling.max_wait_time"] = f"{path}.scheduling.max_wait_duration"
        t.words["maxWaitTime"] = "scheduling.maxWaitDuration"
    if v1_scheduling:
        ti["scheduling"] = v1_scheduling
    for key in ("serviceAccount", "network"):
        if spec.get(key):
            ti[key] = spec[key]
            t.origins[f"job.training_input.{snake(key)}"] = f"{path}.{snake(key)}"
    notes = t.engine.setdefault("notes", [])
    if spec.get("enableWebAccess"):  # a shell into each replica, listed in webAccessUris (jobs.webaccess)
        ti["enableWebAccess"] = True
        t.origins["job.training_input.enable_web_access"] = f"{path}.enable_web_access"
    if spec.get("enableDashboardAccess"):
        notes.append(
            f"{name}.enableDashboardAccess: this console serves no dashboard from inside a replica; the job "
            "answers without webAccessUris for it. enableWebAccess opens a shell into each replica instead."
        )
    if spec.get("tensorboard"):
        errors.add(
            f"{path}.tensorboard",
            f"Tensorboard {spec['tensorboard']} does not exist: Vertex AI TensorBoard instances are not served "
            "here. Leave tensorboard unset: the console's own TensorBoard, on the job's page, shows what the "
            "trainer writes to AIP_TENSORBOARD_LOG_DIR.",
        )
    if scheduling.get("strategy") not in (None, "ON_DEMAND", "STANDARD"):
        notes.append(
            f"{name}.scheduling.strategy {scheduling['strategy']}: replicas run on this console's machines, "
            "which are neither spot nor flex-start capacity."
        )
    if scheduling.get("restartJobOnWorkerRestart") or scheduling.get("disableRetries"):
        notes.append(
            f"{name}.scheduling.restartJobOnWorkerRestart/disableRetries are kept as given; here a replica whose "
            "worker is lost starts again on its own (scaled mode), as for every job."
        )


# --- HyperparameterTuningJob ----------------------------------------------------------------------


def tuning_job(body: object, *, location: str) -> Translation:
    """Read a HyperparameterTuningJob create body; raise VertexError with every problem found."""
    errors = Violations()
    request = schema.parse(body, "HyperparameterTuningJob", TUNING_JOB, errors)
    if errors:
        raise VertexError(errors)
    display_name = _display_name(request, TUNING_JOB, errors)
    t = Translation(display_name, dict(request.get("labels") or {}), request, {}, {})
    spec = request.get("trialJobSpec")
    if spec is None:
        errors.add(f"{TUNING_JOB}.trial_job_spec", "trialJobSpec is required: it is what each trial runs.")
    else:
        _job_spec(spec, f"{TUNING_JOB}.trial_job_spec", "trialJobSpec", location, t, errors)
    study = request.get("studySpec")
    if study is None:
        errors.add(f"{TUNING_JOB}.study_spec", "studySpec is required: the metric and the parameters to tune.")
    else:
        t.training_input["hyperparameters"] = _study(request, study, t, errors)
    _encryption(request, TUNING_JOB, t)
    if errors:
        raise VertexError(errors)
    return t


def _study(request: dict, study: dict, t: Translation, errors: Violations) -> dict:
    path = f"{TUNING_JOB}.study_spec"
    hp: dict = {}
    t.origins["job.training_input.hyperparameters"] = path
    t.origins["job.training_input.hyperparameters.hyperparameter_metric_tag"] = f"{path}.metrics[0].metric_id"
    t.origins["job.training_input.hyperparameters.goal"] = f"{path}.metrics[0].goal"
    metrics = study.get("metrics") or []
    if len(metrics) != 1:
        errors.add(
            f"{path}.metrics",
            f"studySpec.metrics must name exactly one metric for a tuning job; got {len(metrics)}.",
        )
    for i, metric in enumerate(metrics[:1]):
        if not metric.get("metricId"):
            errors.add(f"{path}.metrics[{i}].metric_id", "metricId is required: the tag the trainer reports.")
        else:
            hp["hyperparameterMetricTag"] = metric["metricId"]
        if metric.get("goal") is None:
            errors.add(f"{path}.metrics[{i}].goal", "goal is required: MAXIMIZE (1) or MINIMIZE (2).")
        else:
            hp["goal"] = metric["goal"]
    params: list[dict] = []
    conditions: dict[str, dict] = {}
    for i, parameter in enumerate(study.get("parameters") or []):
        _parameter(parameter, f"{path}.parameters[{i}]", None, params, conditions, t, errors)
    if not params:
        errors.add(f"{path}.parameters", "studySpec.parameters must list at least one parameter to tune.")
    hp["params"] = params
    for key, v1_key in (
        ("maxTrialCount", "maxTrials"),
        ("parallelTrialCount", "maxParallelTrials"),
        ("maxFailedTrialCount", "maxFailedTrials"),
    ):
        value = request.get(key, 0)
        if key != "maxFailedTrialCount" and value < 1:
            errors.add(f"{TUNING_JOB}.{snake(key)}", f"{key} must be at least 1; got {value}.")
        if value:
            hp[v1_key] = value
        t.origins[f"job.training_input.hyperparameters.{snake(v1_key)}"] = f"{TUNING_JOB}.{snake(key)}"
        t.words[v1_key] = key
    if study.get("algorithm") in ("GRID_SEARCH", "RANDOM_SEARCH"):
        hp["algorithm"] = study["algorithm"]
    t.origins["job.training_input.hyperparameters.algorithm"] = f"{path}.algorithm"
    if "medianAutomatedStoppingSpec" in study:
        hp["enableTrialEarlyStopping"] = True
        if study["medianAutomatedStoppingSpec"].get("useElapsedDuration"):
            t.engine.setdefault("notes", []).append(
                "studySpec.medianAutomatedStoppingSpec.useElapsedDuration: trials are compared at the same "
                "reported step, not at the same elapsed time."
            )
    t.engine["measurementSelection"] = study.get("measurementSelectionType") or "LAST_MEASUREMENT"
    if conditions:
        t.engine["conditions"] = conditions
    t.words.update({"parameterName": "parameterId", "params": "parameters"})
    return hp


def _parameter(
    parameter: dict,
    path: str,
    parent: dict | None,
    params: list[dict],
    conditions: dict[str, dict],
    t: Translation,
    errors: Violations,
) -> None:
    """A ParameterSpec as a v1 param (its conditional children follow it, depth first)."""
    kinds = [key for key in _VALUE_SPECS if key in parameter]
    name = parameter.get("parameterId", "")
    if len(kinds) != 1:
        errors.add(
            path,
            f"Parameter {name!r} needs exactly one of doubleValueSpec, integerValueSpec, categoricalValueSpec "
            f"or discreteValueSpec; got {len(kinds)}.",
        )
        return
    value_key = kinds[0]
    kind = _VALUE_SPECS[value_key]
    values = parameter[value_key]
    v1: dict = {"parameterName": name, "type": kind}
    if kind in ("DOUBLE", "INTEGER"):
        # Proto3 drops zeros: an absent bound is 0.
        cast = float if kind == "DOUBLE" else int
        v1["minValue"] = cast(values.get("minValue", 0))
        v1["maxValue"] = cast(values.get("maxValue", 0))
    elif kind == "CATEGORICAL":
        v1["categoricalValues"] = list(values.get("values") or [])
    else:
        v1["discreteValues"] = list(values.get("values") or [])
    if parameter.get("scaleType") in _SCALES:
        v1["scaleType"] = parameter["scaleType"]
    index = len(params)
    params.append(v1)
    v1_path = f"job.training_input.hyperparameters.params[{index}]"
    t.origins[v1_path] = path
    for v1_field, vertex_field in (
        ("min_value", f"{snake(value_key)}.min_value"),
        ("max_value", f"{snake(value_key)}.max_value"),
        ("categorical_values", "categorical_value_spec.values"),
        ("discrete_values", "discrete_value_spec.values"),
        ("parameter_name", "parameter_id"),
        ("type", snake(value_key)),
    ):
        t.origins[f"{v1_path}.{v1_field}"] = f"{path}.{vertex_field}"
    t.words.update({"categoricalValues": "categoricalValueSpec.values", "discreteValues": "discreteValueSpec.values"})
    if parent is not None:
        conditions[name] = parent
    children = parameter.get("conditionalParameterSpecs") or []
    for i, child in enumerate(children):
        child_path = f"{path}.conditional_parameter_specs[{i}]"
        condition = _condition(v1, child, child_path, errors)
        if condition is not None and "parameterSpec" in child:
            _parameter(child["parameterSpec"], f"{child_path}.parameter_spec", condition, params, conditions, t, errors)
        elif "parameterSpec" not in child:
            errors.add(f"{child_path}.parameter_spec", "conditionalParameterSpecs[].parameterSpec is required.")


def _condition(parent: dict, child: dict, path: str, errors: Violations) -> dict | None:
    """Which values of ``parent`` make the child active, as the trainer strings trials carry."""
    kind = parent["type"]
    expected = _CONDITIONS.get(kind)
    given = [key for key in _CONDITIONS.values() if key in child]
    if expected is None:
        errors.add(
            path,
            f"Parameter {parent['parameterName']!r} is DOUBLE: only INTEGER, DISCRETE and "
            "CATEGORICAL parameters can have conditional parameters.",
        )
        return None
    if given != [expected]:
        errors.add(
            path,
            f"A conditional parameter of the {kind} parameter {parent['parameterName']!r} needs "
            f"{expected}, and only it.",
        )
        return None
    values = child[expected].get("values") or []
    if not values:
        errors.add(f"{path}.{snake(expected)}.values", f"{expected}.values must list at least one value.")
        return None
    domain = _domain(parent)
    texts = []
    for i, value in enumerate(values):
        text = format_value(parent, value if kind == "CATEGORICAL" else float(value))
        if domain is not None and text not in domain:
            errors.add(
                f"{path}.{snake(expected)}.values[{i}]",
                f"{value} is not a value of the parameter {parent['parameterName']!r}.",
            )
        texts.append(text)
    return {"parent": parent["parameterName"], "values": texts}


def _domain(param: dict) -> set[str] | None:
    """Every value a parameter can take, as trainer strings; None when too many to list."""
    kind = param["type"]
    if kind == "CATEGORICAL":
        return {str(v) for v in param.get("categoricalValues", [])}
    if kind == "DISCRETE":
        return {format_value(param, float(v)) for v in param.get("discreteValues", [])}
    low, high = int(param.get("minValue", 0)), int(param.get("maxValue", 0))
    if high - low > 100_000:
        return None
    return {str(v) for v in range(low, high + 1)}


# --- TrainingPipeline -------------------------------------------------------------------------------

PIPELINE = "training_pipeline"
SCHEMAS = "gs://google-cloud-aiplatform/schema/trainingjob/definition/"
CUSTOM_TASK = SCHEMAS + "custom_task_1.0.0.yaml"
TUNING_TASK = SCHEMAS + "hyperparameter_tuning_task_1.0.0.yaml"
_TASK_INPUTS = f"{PIPELINE}.training_task_inputs"


def training_pipeline(body: object, *, location: str) -> Translation:
    """Read a TrainingPipeline create body: a custom task runs as a CustomJob (its inputs are a
    CustomJobSpec), a hyperparameter tuning task as a HyperparameterTuningJob (its inputs are the
    study, the trial job and the counts), exactly as the SDK's CustomTrainingJob,
    CustomPythonPackageTrainingJob and CustomContainerTrainingJob make them. The translation's
    ``engine["pipeline"]`` keeps the pipeline's own fields, echoed back in answers."""
    errors = Violations()
    request = schema.parse(body, "TrainingPipeline", PIPELINE, errors)
    if errors:
        raise VertexError(errors)
    display_name = _display_name(request, PIPELINE, errors)
    definition = request.get("trainingTaskDefinition", "")
    inputs = request.get("trainingTaskInputs")
    if definition not in (CUSTOM_TASK, TUNING_TASK):
        kind = "an AutoML task" if "/automl_" in definition else "not a training task this server knows"
        errors.add(
            f"{PIPELINE}.training_task_definition",
            f"trainingTaskDefinition must be {CUSTOM_TASK} or {TUNING_TASK}: this server runs custom training "
            f"pipelines only; {definition or 'none was given'} is {kind}.",
        )
    if inputs is None:
        errors.add(_TASK_INPUTS, "trainingTaskInputs is required: the worker pools the pipeline's job runs.")
    if errors:
        raise VertexError(errors)
    labels = request.get("labels") or {}
    inner = {"displayName": display_name, **({"labels": labels} if labels else {})}
    if "encryptionSpec" in request:
        inner["encryptionSpec"] = request["encryptionSpec"]
    try:
        if definition == CUSTOM_TASK:
            translation = custom_job({**inner, "jobSpec": inputs}, location=location)
            runs_as = "customJobs"
        else:
            translation = tuning_job({**inner, **(inputs or {})}, location=location)
            runs_as = "hyperparameterTuningJobs"
    except VertexError as error:
        raise VertexError([FieldViolation(_pipeline_path(v.field), v.description) for v in error.violations]) from None
    translation.origins = {v1: _pipeline_path(vertex) for v1, vertex in translation.origins.items()}
    translation.engine["pipeline"] = {
        "runsAs": runs_as,
        "trainingTaskDefinition": definition,
        "trainingTaskInputs": inputs,
    }
    upload = _model_to_upload(request, definition, translation)
    if upload:
        translation.engine["pipeline"]["upload"] = upload
    return translation


def _model_to_upload(request: dict, definition: str, translation: Translation) -> dict:
    """What a pipeline with ``modelToUpload`` uploads once its job succeeds: a models:upload body
    whose artifacts are the job's ``<baseOutputDirectory>/model`` (``AIP_MODEL_DIR``), as Vertex
    does; checked now, so a pipeline that could not upload its model is refused before it trains."""
    model = request.get("modelToUpload")
    if model is None:
        for key in ("modelId", "parentModel"):
            if request.get(key):
                raise VertexError([FieldViolation(f"{PIPELINE}.{snake(key)}", f"{key} needs modelToUpload.")])
        return {}
    errors = Violations()
    path = f"{PIPELINE}.model_to_upload"
    if definition != CUSTOM_TASK:
        errors.add(
            path,
            "a tuning pipeline uploads no model here: upload the best trial's model with Model.upload "
            "(its artifacts are in baseOutputDirectory/<trial id>/model).",
        )
    base = (translation.request.get("jobSpec") or {}).get("baseOutputDirectory", {}).get("outputUriPrefix", "")
    if not model.get("artifactUri") and not base:
        errors.add(
            f"{_TASK_INPUTS}.base_output_directory",
            "a pipeline that uploads its model needs baseOutputDirectory: the model is read from its model/ folder.",
        )
    if not model.get("displayName", "").strip():
        errors.add(f"{path}.display_name", "displayName is required.")
    image = (model.get("containerSpec") or {}).get("imageUri", "")
    if not image:  # a custom serving container is checked when the model is uploaded, against the engine
        errors.add(f"{path}.container_spec.image_uri", images.prediction_refusal(image))
    if errors:
        raise VertexError(errors)
    upload: dict = {"model": {"artifactUri": base.rstrip("/") + "/model", **model}}
    for key in ("modelId", "parentModel"):
        if request.get(key):
            upload[key] = request[key]
    return upload


def _pipeline_path(path: str) -> str:
    """A path in the CustomJob or HyperparameterTuningJob read from a pipeline's task inputs, as
    the pipeline's field it came from."""
    for own in ("display_name", "labels", "encryption_spec"):  # the pipeline's own fields, given to its job
        for prefix in (CUSTOM_JOB, TUNING_JOB):
            if path == f"{prefix}.{own}" or path.startswith(f"{prefix}.{own}."):
                return PIPELINE + path[len(prefix) :]
    for prefix in (f"{CUSTOM_JOB}.job_spec", TUNING_JOB, CUSTOM_JOB):
        if path == prefix or path.startswith((prefix + ".", prefix + "[")):
            target = _TASK_INPUTS if prefix != CUSTOM_JOB else PIPELINE
            return target + path[len(prefix) :]
    return path
