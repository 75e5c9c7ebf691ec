"""The console's job submission form: HTML fields in, a v1 Job body out.

The form only parses; the rules live in ``jobs.validation`` and are applied by ``submit_job``. Its
field violations (``job.training_input.worker_count``) are mapped back onto these fields so each
error shows next to the input that caused it.

A job runs a Python package or a custom container (``code``): the fields of the other kind are
ignored, so a browser without JavaScript, which sends both, submits only the chosen one.
"""

from __future__ import annotations

import json
import shlex
from datetime import UTC, datetime
from typing import cast

import yaml
from django import forms
from django.template.defaultfilters import filesizeformat

from aiconsole import yamlsafe
from jobs import catalogue, runtimes, services
from jobs.training import equivalent
from jobs.validation import roles

ROLES = (
    ("master", "Master", "masterType", "masterConfig", None),
    ("worker", "Workers", "workerType", "workerConfig", "workerCount"),
    ("parameter_server", "Parameter servers", "parameterServerType", "parameterServerConfig", "parameterServerCount"),
    ("evaluator", "Evaluators", "evaluatorType", "evaluatorConfig", "evaluatorCount"),
)

# Longest matching prefix of a violation's field path → the form field that shows it.
VIOLATION_FIELDS = {
    "job.job_id": "job_id",
    "job.labels": "labels",
    "job.training_input.package_uris": "package_uris",
    "job.training_input.python_module": "python_module",
    "job.training_input.args": "args",
    "job.training_input.region": "region",
    "job.training_input.runtime_version": "runtime_version",
    "job.training_input.python_version": "python_version",
    "job.training_input.scale_tier": "scale_tier",
    "job.training_input.job_dir": "job_dir",
    "job.training_input.scheduling.max_running_time": "max_running_time",
    "job.training_input.scheduling.max_wait_time": "max_wait_time",
    "job.training_input.scheduling.priority": "priority",
    "job.training_input.scheduling": "max_running_time",
    "job.training_input.hyperparameters": "hyperparameters",
    "job.training_input.use_chief_in_tf_config": "use_chief_in_tf_config",
}
# Form field names are the proto field prefixes (master, worker, parameter_server, evaluator).
for _role, *_ in ROLES:
    VIOLATION_FIELDS[f"job.training_input.{_role}_type"] = f"{_role}_type"
    VIOLATION_FIELDS[f"job.training_input.{_role}_count"] = f"{_role}_count"
    VIOLATION_FIELDS[f"job.training_input.{_role}_config.accelerator_config.count"] = f"{_role}_accelerator_count"
    VIOLATION_FIELDS[f"job.training_input.{_role}_config"] = f"{_role}_accelerator_type"
    VIOLATION_FIELDS[f"job.training_input.{_role}_config.image_uri"] = f"{_role}_image"
    VIOLATION_FIELDS[f"job.training_input.{_role}_config.container_command"] = "container_command"
    VIOLATION_FIELDS[f"job.training_input.{_role}_config.container_args"] = "container_args"

PACKAGE, CONTAINER = "package", "container"
CODE_CHOICES = [(PACKAGE, "Python package"), (CONTAINER, "Custom container")]
# What only a package job has: not asked of a container job, and not sent for one.
PACKAGE_ONLY = ("python_module", "runtime_version", "python_version")
# The runtime a new job is offered: the newest (the catalogue lists ``current``, the console's own,
# last), on its default Python. A job without runtimeVersion still runs the original's default.
NEWEST_RUNTIME = next(reversed(runtimes.RUNTIMES))
# Replica config fields the form fills in every replica of a container job, from one input each.
CONTAINER_FIELDS = (("containerCommand", "container_command"), ("containerArgs", "container_args"))


# trainingInput fields the form has a place for (a cloned job's others are named on the page).
FORM_KEYS = {
    "scaleTier",
    "packageUris",
    "pythonModule",
    "args",
    "region",
    "runtimeVersion",
    "pythonVersion",
    "jobDir",
    "scheduling",
    "hyperparameters",
    "useChiefInTfConfig",
    "enableWebAccess",
    *(key for role in ROLES for key in role[2:] if key),
}
# Of the objects above, the parts the form holds: a replica config's accelerator, image and
# container command and args (not its diskConfig or tpuTfVersion), three scheduling fields.
FORM_NESTED_KEYS = {
    **{role[3]: {"acceleratorConfig", "imageUri", "containerCommand", "containerArgs"} for role in ROLES},
    "scheduling": {"maxRunningTime", "maxWaitTime", "priority"},
}


def not_carried(training_input: dict) -> list[str]:
    """The trainingInput fields (``masterConfig.diskConfig`` for nested ones) a form made from a job
    would leave out: a clone or a resumed study names them instead of dropping them unsaid.

    The form has one container command and one args list, for every replica: a role whose own
    differ from the master's is named too."""
    left = [key for key in training_input if key not in FORM_KEYS]
    for key, kept in FORM_NESTED_KEYS.items():
        value = training_input.get(key)
        if isinstance(value, dict):
            left += [f"{key}.{inner}" for inner in value if inner not in kept]
    master = training_input.get("masterConfig") or {}
    for _role, _title, _type_key, config_key, _count_key in ROLES[1:]:
        config = training_input.get(config_key)
        if isinstance(config, dict):
            left += [
                f"{config_key}.{name}"
                for name, _ in CONTAINER_FIELDS
                if config.get(name) and config.get(name) != master.get(name)
            ]
    return sorted(left)


def field_for_violation(path: str) -> str | None:
    best = None
    for prefix, name in VIOLATION_FIELDS.items():
        if (path == prefix or path.startswith(prefix + ".") or path.startswith(prefix + "[")) and (
            best is None or len(prefix) > len(best[0])
        ):
            best = (prefix, name)
    return best[1] if best else None


def _choices(values, blank: str | None = None):
    choices = [(v, v) for v in values]
    return [("", blank)] + choices if blank is not None else choices


def _machine_choices():
    """Each machine type with its vCPUs and memory (``standard: 4 vCPUs, 15 GB``)."""
    compute = [name for name, m in catalogue.MACHINE_TYPES.items() if m.category == "compute_engine"]
    legacy = [name for name, m in catalogue.MACHINE_TYPES.items() if m.category in {"legacy", "tpu"}]
    return [
        ("", "—"),
        ("Compute Engine", [(n, catalogue.machine_summary(n)) for n in compute]),
        ("Legacy", [(n, catalogue.machine_summary(n)) for n in legacy]),
    ]


def machine_help(machine_type: str | None) -> str:
    """The line under a machine type picker: vCPUs, memory and the accelerators it takes."""
    machine = catalogue.MACHINE_TYPES.get(machine_type or "")
    if machine is None:
        return "Choose a type to see its vCPUs, memory and the accelerators it takes."
    return (
        f"{catalogue.machine_summary(machine.name)}. Accelerators: {equivalent.accelerators_allowed(machine)}. "
        f"{machine.units_per_hour:g} ML units per hour."
    )


def _accelerator_choices():
    return [("", "None")] + [(n, n) for n in catalogue.ACCELERATORS if n != "ACCELERATOR_TYPE_UNSPECIFIED"]


def _image_field(label: str, help_text: str) -> forms.CharField:
    return forms.CharField(
        label=label,
        required=False,
        max_length=1024,
        help_text=help_text,
        widget=forms.TextInput(attrs={"list": "image-choices", "spellcheck": "false", "autocomplete": "off"}),
    )


class JobSubmitForm(forms.Form):
    job_id = forms.CharField(
        label="Job ID", max_length=200, help_text="Letters, digits and underscores; starts with a letter."
    )
    code = forms.ChoiceField(
        label="The job runs",
        choices=CODE_CHOICES,
        initial=PACKAGE,
        required=False,  # a form posted before there was a choice ran a package
        widget=forms.RadioSelect,
    )
    package_file = forms.FileField(
        label="Upload a trainer package", required=False, help_text="An sdist (.tar.gz) or a wheel (.whl)."
    )
    kept_package = forms.CharField(required=False, widget=forms.HiddenInput)  # upload_ref of an earlier try
    uploaded_package = forms.CharField(
        label="Or a package uploaded before",
        required=False,
        max_length=300,
        widget=forms.Select,
        help_text="This project's packages uploaded through the console, newest first: use one again "
        "instead of uploading it. A file chosen above replaces it.",
    )
    # The job a clone or a resumed study was filled from: the new job records it (services.submit_job).
    cloned_from = forms.CharField(required=False, max_length=128, widget=forms.HiddenInput)
    remove_kept_package = forms.BooleanField(label="Remove it", required=False)
    package_uris = forms.CharField(
        label="Package URIs",
        required=False,
        widget=forms.Textarea(attrs={"rows": 2}),
        help_text="One per line: gs://bucket/trainer-0.1.tar.gz or a path in this server's storage.",
    )
    python_module = forms.CharField(label="Python module", initial="trainer.task", max_length=200)
    master_image = _image_field(
        "Master image",
        "masterConfig.imageUri: an image uploaded to this project or in this server's container store "
        "(never pulled), e.g. gcr.io/my-project/trainer:v1.",
    )
    container_command = forms.CharField(
        label="Container command",
        required=False,
        widget=forms.Textarea(attrs={"rows": 1, "spellcheck": "false"}),
        help_text="containerCommand: replaces the image's ENTRYPOINT in every replica, shell-quoted, "
        "e.g. python -m trainer.task. Empty: the image's own.",
    )
    container_args = forms.CharField(
        label="Container args",
        required=False,
        widget=forms.Textarea(attrs={"rows": 2, "spellcheck": "false"}),
        help_text="containerArgs: replace the image's CMD in every replica, shell-quoted. "
        "They cannot be combined with Arguments below, which are passed to the image's ENTRYPOINT.",
    )
    use_chief_in_tf_config = forms.BooleanField(
        label='Call the master "chief" in TF_CONFIG (useChiefInTfConfig)',
        required=False,
        help_text="TensorFlow 2 expects chief; without this a container's TF_CONFIG says master.",
    )
    enable_web_access = forms.BooleanField(
        label="Web access: a shell in the browser into each replica while it runs (enableWebAccess)",
        required=False,
        help_text="For those who may change the job; each session is recorded and audited.",
    )
    args = forms.CharField(
        label="Arguments",
        required=False,
        widget=forms.Textarea(attrs={"rows": 2}),
        help_text="Passed to the trainer, shell-quoted, e.g. --epochs=5 --lr 0.01",
    )
    region = forms.ChoiceField(label="Region", initial="us-central1")
    runtime_version = forms.ChoiceField(label="Runtime version")
    python_version = forms.ChoiceField(
        label="Python version",
        required=False,
        help_text="The Pythons the chosen runtime version runs on; the default is the one a job "
        "without pythonVersion gets.",
    )
    scale_tier = forms.ChoiceField(label="Scale tier", initial="BASIC", widget=forms.RadioSelect)
    job_dir = forms.CharField(
        label="Job directory",
        required=False,
        max_length=1000,
        help_text="Passed as --job-dir; gs://… or a path in this server's storage. A folder named after the "
        "job is suggested: it follows the job ID until you edit it.",
    )
    labels = forms.CharField(
        label="Labels", required=False, widget=forms.Textarea(attrs={"rows": 2}), help_text="One key=value per line."
    )
    max_running_time = forms.CharField(
        label="Maximum running time", required=False, help_text="A duration such as 7200s (default 7 days)."
    )
    max_wait_time = forms.CharField(label="Maximum wait time", required=False, help_text="At least 1800s.")
    priority = forms.IntegerField(label="Priority", required=False, help_text="0–1000; higher runs first.")
    hyperparameters = forms.CharField(
        label="Hyperparameter tuning",
        required=False,
        widget=forms.Textarea(attrs={"rows": 8, "spellcheck": "false"}),
        help_text="A HyperparameterSpec in YAML or JSON (goal, params, maxTrials, …), or a whole "
        "hptuning_config.yaml. Leave empty for a job without tuning.",
    )

    def __init__(self, *args, project=None, uploads: list[dict] | None = None, **kwargs):
        """``project``: whose uploaded packages ``uploaded_package`` may name; ``uploads``: those the
        picker offers (``services.uploaded_packages``)."""
        super().__init__(*args, **kwargs)
        self.project = project
        self._offer_uploads(uploads or [])
        self.fields["region"].choices = _choices(catalogue.REGIONS)
        self.fields["runtime_version"].choices = _choices(catalogue.RUNTIME_VERSIONS)
        self.fields["runtime_version"].initial = NEWEST_RUNTIME
        self._offer_pythons()
        self.fields["scale_tier"].choices = [
            (tier, f"{tier}: {catalogue.tier_description(tier)}") for tier in catalogue.SCALE_TIERS
        ]
        if self.is_bound and self.data.get("code") == CONTAINER:
            for name in PACKAGE_ONLY:  # not sent by a browser that hides them
                self.fields[name].required = False
        for role, title, *_ in ROLES[1:]:
            self.fields[f"{role}_image"] = _image_field(
                f"{title}: image", f"{role_config(role)}.imageUri; empty: the master's image."
            )
        for role, title, *_ in ROLES:
            self.fields[f"{role}_type"] = forms.ChoiceField(
                label=f"{title}: machine type", required=False, choices=_machine_choices()
            )
            if role != "master":
                self.fields[f"{role}_count"] = forms.IntegerField(label=f"{title}: count", required=False, min_value=0)
            self.fields[f"{role}_accelerator_type"] = forms.ChoiceField(
                label=f"{title}: accelerator", required=False, choices=_accelerator_choices()
            )
            self.fields[f"{role}_accelerator_count"] = forms.IntegerField(
                label=f"{title}: accelerators per machine", required=False, min_value=0
            )
            chosen = self.data.get(f"{role}_type") if self.is_bound else self.initial.get(f"{role}_type")
            self.fields[f"{role}_type"].help_text = machine_help(chosen)

    def _offer_uploads(self, uploads: list[dict]) -> None:
        """The picker's options: none, then each upload by name, size and when (a posted one that is
        gone stays listed, so the form shows what was chosen beside its error)."""
        choices = [("", "None: upload one above, or name it in Package URIs")]
        choices += [
            (u["ref"], f"{u['name']} ({filesizeformat(u['size'])}, uploaded {_when(u['uploaded'])})") for u in uploads
        ]
        posted = self.data.get("uploaded_package", "") if self.is_bound else ""
        if posted and posted not in {ref for ref, _ in choices}:
            choices.append((posted, posted.rpartition("/")[2]))
        cast(forms.Select, self.fields["uploaded_package"].widget).choices = choices

    def _offer_pythons(self) -> None:
        """The Python choices follow the runtime version (the one posted, else the initial one): a
        pair the form offers is one submit accepts, and a Python of another runtime is refused here
        with the runtime's own list."""
        chosen = (
            self.data.get("runtime_version")
            if self.is_bound
            else self.get_initial_for_field(self.fields["runtime_version"], "runtime_version")
        )
        runtime = runtimes.RUNTIMES.get(chosen or catalogue.DEFAULT_RUNTIME_VERSION)
        field = cast(forms.ChoiceField, self.fields["python_version"])
        if runtime is None:  # a runtime the runtime field refuses: its error is the one to read
            field.choices = [("", "The runtime's default")] + _choices(
                sorted(
                    {p for r in runtimes.RUNTIMES.values() for p in runtimes.offered_pythons(r)},
                    key=runtimes.version_key,
                )
            )
            return
        offered = runtimes.offered_pythons(runtime)
        default = runtimes.default_python(runtime)
        field.choices = [("", f"{default} (the runtime's default)")] + _choices(offered)
        field.error_messages["invalid_choice"] = (
            f"Runtime version {runtime.name} runs on Python {', '.join(offered)}: Python %(value)s is not one "
            "of them. Choose one of those, or the runtime's default."
        )

    def role_fields(self):
        """Bound fields grouped per role, for the CUSTOM section of the template."""
        groups = []
        for role, title, *_ in ROLES:
            names = [f"{role}_type", f"{role}_count", f"{role}_accelerator_type", f"{role}_accelerator_count"]
            groups.append((title, [self[n] for n in names if n in self.fields]))
        return groups

    def role_images(self):
        """The image fields of the roles after the master, for the container section."""
        return [self[f"{role}_image"] for role, *_ in ROLES[1:]]

    def clean(self):
        """A container job names its master image. An empty accelerator count with no accelerator
        means none; with one, the count is asked for."""
        data = super().clean()
        if data.get("code") == CONTAINER and not data.get("master_image") and "master_image" not in self.errors:
            self.add_error(
                "master_image",
                "Name the image the master runs (masterConfig.imageUri): one uploaded to this project "
                "or in this server's container store.",
            )
        if data.get("scale_tier") != "CUSTOM":
            return data
        for role, title, *_ in ROLES:
            accelerator = data.get(f"{role}_accelerator_type")
            count = data.get(f"{role}_accelerator_count")
            if accelerator and not count and f"{role}_accelerator_count" not in self.errors:
                self.add_error(
                    f"{role}_accelerator_count",
                    f"{title}: say how many {accelerator} accelerators each machine gets (1 or more), "
                    "or choose None as the accelerator.",
                )
            elif count and not accelerator and f"{role}_accelerator_type" not in self.errors:
                self.add_error(
                    f"{role}_accelerator_type",
                    f"{title}: choose the accelerator type for the {count} per machine, "
                    "or leave the count empty for none.",
                )
        return data

    def clean_args(self):
        return _split(self.cleaned_data["args"], "Arguments")

    def clean_uploaded_package(self) -> dict | None:
        """The chosen upload as ``services.kept_upload`` describes it (its uri is what the job gets)."""
        ref = self.cleaned_data["uploaded_package"].strip()
        if not ref:
            return None
        package = services.kept_upload(self.project, ref) if self.project is not None else None
        if package is None:
            raise forms.ValidationError(
                f"“{ref.rpartition('/')[2]}” is no longer stored in this project: choose another package, "
                "or upload it again."
            )
        return package

    def clean_container_command(self):
        return _split(self.cleaned_data["container_command"], "The container command")

    def clean_container_args(self):
        return _split(self.cleaned_data["container_args"], "The container args")

    def clean_hyperparameters(self):
        text = self.cleaned_data["hyperparameters"].strip()
        if not text:
            return None
        try:
            spec = yamlsafe.load(text)
        except yamlsafe.YamlLimitError as error:
            raise forms.ValidationError(f"Hyperparameter tuning is refused: {error}.") from None
        except yaml.YAMLError as error:
            raise forms.ValidationError(f"The spec cannot be parsed: {error}.") from None
        if isinstance(spec, dict) and isinstance(spec.get("trainingInput"), dict):
            spec = spec["trainingInput"].get("hyperparameters")  # a whole hptuning_config.yaml
        if not isinstance(spec, dict):
            raise forms.ValidationError("Write the spec as a mapping, e.g. goal: MAXIMIZE and params: [...].")
        return spec

    def clean_labels(self):
        labels = {}
        for number, line in enumerate(self.cleaned_data["labels"].splitlines(), 1):
            if not line.strip():
                continue
            key, sep, value = line.partition("=")
            if not sep:
                raise forms.ValidationError(f"Line {number}: write labels as key=value.")
            labels[key.strip()] = value.strip()
        return labels

    def job_body(self, uploaded_uri: str | None = None) -> dict:
        """The v1 Job body these fields describe."""
        data = self.cleaned_data
        return self._body(data, uploaded_uri)

    def draft_body(self, uploaded_uri: str | None = None) -> dict:
        """The body as far as the fields can be read, for the form's live command and estimate:
        a field with an error counts as empty (the form is validated; call after ``is_valid``)."""
        blank = {
            name: (
                []
                if name in ("args", "container_command", "container_args")
                else {}
                if name == "labels"
                else None
                if isinstance(f, forms.IntegerField) or name == "hyperparameters"
                else ""
            )
            for name, f in self.fields.items()
        }
        blank["scale_tier"] = "BASIC"
        return self._body({**blank, **getattr(self, "cleaned_data", {})}, uploaded_uri)

    def _body(self, data: dict, uploaded_uri: str | None) -> dict:
        container = data.get("code") == CONTAINER
        training_input: dict = {"scaleTier": data["scale_tier"]}
        if not container:
            uris = [line.strip() for line in data["package_uris"].splitlines() if line.strip()]
            if uploaded_uri:
                uris.insert(0, uploaded_uri)
            training_input["packageUris"] = uris
            training_input["pythonModule"] = data["python_module"].strip()
        training_input["region"] = data["region"]
        if not container:
            training_input["runtimeVersion"] = data["runtime_version"]
            if data["python_version"]:  # empty: the runtime's default, as a job without pythonVersion
                training_input["pythonVersion"] = data["python_version"]
        if data["args"]:
            training_input["args"] = data["args"]
        if data["job_dir"].strip():
            training_input["jobDir"] = data["job_dir"].strip()
        if data["scale_tier"] == "CUSTOM":
            training_input.update(_custom_machines(data))
        if container:
            _add_container(training_input, data)
        if data.get("enable_web_access"):
            training_input["enableWebAccess"] = True
        scheduling = {}
        if data["max_running_time"].strip():
            scheduling["maxRunningTime"] = data["max_running_time"].strip()
        if data["max_wait_time"].strip():
            scheduling["maxWaitTime"] = data["max_wait_time"].strip()
        if data["priority"] is not None:
            scheduling["priority"] = data["priority"]
        if scheduling:
            training_input["scheduling"] = scheduling
        if data.get("hyperparameters"):
            training_input["hyperparameters"] = data["hyperparameters"]
        body = {"jobId": data["job_id"].strip(), "trainingInput": training_input}
        if data["labels"]:
            body["labels"] = data["labels"]
        return body

    def add_violations(self, violations) -> None:
        for violation in violations:
            name = field_for_violation(violation.field)
            self.add_error(name if name in self.fields else None, violation.description)


def runtime_pythons() -> dict[str, dict]:
    """Each runtime version's offered Pythons and its default, for the form's script to follow the
    runtime the user picks (``{"current": {"pythons": ["3.11", …], "default": "3.11"}}``)."""
    return {
        name: {"pythons": runtimes.offered_pythons(runtime), "default": runtimes.default_python(runtime)}
        for name, runtime in runtimes.RUNTIMES.items()
    }


def _when(seconds: float) -> str:
    return datetime.fromtimestamp(seconds, tz=UTC).strftime("%Y-%m-%d %H:%M UTC")


def role_config(role: str) -> str:
    """``worker`` → ``workerConfig``: a form role's replica config field."""
    return next(config_key for name, _title, _type_key, config_key, _count_key in ROLES if name == role)


def _split(text: str, what: str) -> list[str]:
    try:
        return shlex.split(text)
    except ValueError as error:
        raise forms.ValidationError(f"{what} cannot be parsed: {error}.") from None


def _add_container(training_input: dict, data: dict) -> None:
    """The images per role, and the container command and args in every replica that runs."""
    try:
        machines = roles.role_machines(training_input)
    except KeyError:  # a tier the form refused: its error is shown, the draft names the master only
        machines = {}
    running = {config_key for task, _, _, config_key, _ in roles.ROLES if machines.get(task, (None, 0))[1]}
    for role, _title, _type_key, config_key, _count_key in ROLES:
        config = dict(training_input.get(config_key) or {})
        image = (data.get(f"{role}_image") or "").strip()
        if image:
            config["imageUri"] = image
        if config_key in running or config_key == "masterConfig":
            for name, field in CONTAINER_FIELDS:
                if data.get(field):
                    config[name] = data[field]
        if config:
            training_input[config_key] = config
    if data.get("use_chief_in_tf_config"):
        training_input["useChiefInTfConfig"] = True


def _custom_machines(data: dict) -> dict:
    machines: dict = {}
    for role, _title, type_key, config_key, count_key in ROLES:
        machine = data.get(f"{role}_type")
        count = data.get(f"{role}_count")
        if machine:
            machines[type_key] = machine
        if count_key and count:
            machines[count_key] = str(count)
        accelerator = data.get(f"{role}_accelerator_type")
        accelerator_count = data.get(f"{role}_accelerator_count")
        if accelerator and accelerator_count:  # clean() refused one without the other
            config = {"type": accelerator, "count": str(accelerator_count)}
            machines[config_key] = {"acceleratorConfig": config}
    return machines


def sibling_job_dir(job_dir: str, job_id: str) -> str:
    """A job dir of its own for a copy of a job: ``<parent>/<new job id>``, as the original's samples
    name theirs (``gs://bucket/jobs/$JOB_NAME``), so the copy's checkpoints and event files never mix
    with the original's."""
    if not job_dir:
        return ""
    parent = job_dir.rstrip("/").rpartition("/")[0]
    return f"{parent}/{job_id}" if parent and not parent.endswith(":/") else job_dir


def initial_from_job(job, *, resume: bool = False, job_id: str | None = None, kept_uris: tuple[str, ...] = ()) -> dict:
    """Form values that describe ``job`` again, to edit before submitting a new job.

    With ``resume`` (a tuning job's "Resume as new job"), its HyperparameterSpec names the job
    in resumePreviousJobId, so the new study starts from that job's trials. ``job_id`` is the
    id to suggest; ``kept_uris`` are packages the form shows as its kept upload instead of
    listing them in Package URIs (the console's own uploads, whose paths are not shown).
    """
    ti = job.training_input or {}
    scheduling = ti.get("scheduling") or {}
    new_id = job_id or (f"{job.job_id}_resumed" if resume else f"{job.job_id}_copy")
    initial = {
        "job_id": new_id,
        "cloned_from": job.job_id,
        "labels": "\n".join(f"{k}={v}" for k, v in (job.labels or {}).items()),
        "package_uris": "\n".join(u for u in ti.get("packageUris") or [] if u not in kept_uris),
        "python_module": ti.get("pythonModule", ""),
        "args": shlex.join(ti.get("args") or []),
        "job_dir": sibling_job_dir(ti.get("jobDir", ""), new_id),
        "region": ti.get("region", ""),
        # A job without one ran the original's default, not the newest the form offers a new job.
        "runtime_version": ti.get("runtimeVersion") or catalogue.DEFAULT_RUNTIME_VERSION,
        "python_version": ti.get("pythonVersion", ""),
        "scale_tier": ti.get("scaleTier", "BASIC"),
        "max_running_time": scheduling.get("maxRunningTime", ""),
        "max_wait_time": scheduling.get("maxWaitTime", ""),
        "priority": scheduling.get("priority"),
        "enable_web_access": bool(ti.get("enableWebAccess")) or None,
    }
    for role, _title, type_key, config_key, count_key in ROLES:
        initial[f"{role}_type"] = ti.get(type_key, "")
        if count_key:
            initial[f"{role}_count"] = ti.get(count_key)
        accelerator = (ti.get(config_key) or {}).get("acceleratorConfig") or {}
        initial[f"{role}_accelerator_type"] = accelerator.get("type", "")
        initial[f"{role}_accelerator_count"] = accelerator.get("count")
    master = ti.get("masterConfig") or {}
    if master.get("imageUri"):
        initial["code"] = CONTAINER
        for role, _title, _type_key, config_key, _count_key in ROLES:
            initial[f"{role}_image"] = (ti.get(config_key) or {}).get("imageUri", "")
        initial["container_command"] = shlex.join(master.get("containerCommand") or [])
        initial["container_args"] = shlex.join(master.get("containerArgs") or [])
        initial["use_chief_in_tf_config"] = bool(ti.get("useChiefInTfConfig")) or None
    spec = dict(ti.get("hyperparameters") or {})
    if spec:
        if resume:
            spec["resumePreviousJobId"] = job.job_id
        initial["hyperparameters"] = json.dumps(spec, indent=2)
    return {name: value for name, value in initial.items() if value not in (None, "")}
