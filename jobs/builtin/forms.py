"""The console's form for a built-in algorithm job, and the data analysis page's form.

The job form builds the same v1 Job body the API takes (the algorithm's image in
``masterConfig.imageUri``, its arguments in ``args``); ``submit_job`` applies the rules, and an
error about ``--eta`` in ``args`` is shown next to the eta field.
"""

from __future__ import annotations

import re
import shlex

from django import forms

from algorithms import definitions as algos
from jobs import catalogue

# Form fields that become --name=value arguments, per algorithm (common ones for both).
COMMON_ARGS = (
    "training_data_path",
    "validation_data_path",
    "test_data_path",
    "model_type",
    "validation_split",
    "test_split",
    "seed",
)
ALGORITHM_ARGS = {
    "boosted_trees": ("objective", "eta", "max_depth", "num_boost_round"),
    "linear_learner": (
        "learning_rate",
        "max_steps",
        "batch_size",
        "l1_regularization_strength",
        "l2_regularization_strength",
    ),
}
_ARG_RE = re.compile(r"^--([A-Za-z_][\w-]*)")


def _argument_field(algorithm: algos.Algorithm, name: str, **kwargs) -> forms.Field:
    argument = algorithm.argument(name)
    label = name.replace("_", " ").capitalize()
    help_text = f"--{name}: {argument.help}" + (
        f" Default {argument.default}." if argument.default not in (None, False) else ""
    )
    if argument.kind == "choice":
        return forms.ChoiceField(
            label=label,
            required=False,
            help_text=help_text,
            choices=[("", "—")] + [(c, c) for c in argument.choices],
            **kwargs,
        )
    if argument.kind == "int":
        return forms.IntegerField(label=label, required=False, help_text=help_text, **kwargs)
    if argument.kind == "float":
        return forms.FloatField(label=label, required=False, help_text=help_text, **kwargs)
    return forms.CharField(label=label, required=False, help_text=help_text, max_length=1000, **kwargs)


class BuiltinJobForm(forms.Form):
    job_id = forms.CharField(
        label="Job ID", max_length=200, help_text="Letters, digits and underscores; starts with a letter."
    )
    algorithm = forms.ChoiceField(
        label="Algorithm",
        widget=forms.RadioSelect,
        initial="boosted_trees",
        choices=[(a.name, f"{a.title} — {a.image}") for a in algos.ALGORITHMS],
    )
    data_file = forms.FileField(
        label="Upload a CSV", required=False, help_text="Stored in this server's storage and used as the training data."
    )
    preprocess = forms.BooleanField(label="Preprocess the data (--preprocess)", required=False, initial=True)
    header = forms.BooleanField(label="The CSV files have a header row (--header)", required=False)
    job_dir = forms.CharField(
        label="Job directory",
        required=False,
        max_length=1000,
        help_text="Where model/, processed_data/ and artifacts/ go; gs://… or a path in this "
        "server's storage. Empty: a folder for this job in the storage.",
    )
    region = forms.ChoiceField(label="Region", initial="us-central1")
    master_type = forms.ChoiceField(
        label="Machine type", required=False, help_text="Empty: BASIC (a single n1-standard-4)."
    )
    # The job a clone was filled from: the new job records it (services.submit_job).
    cloned_from = forms.CharField(required=False, max_length=128, widget=forms.HiddenInput)
    extra_args = forms.CharField(
        label="Other arguments",
        required=False,
        widget=forms.Textarea(attrs={"rows": 2}),
        help_text="Any other argument, shell-quoted, e.g. --subsample=0.8 --max_categories 50",
    )

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.fields["region"].choices = [(r, r) for r in catalogue.REGIONS]
        self.fields["master_type"].choices = [("", "BASIC")] + [
            (name, catalogue.machine_summary(name))
            for name, machine in catalogue.MACHINE_TYPES.items()
            if machine.category != "tpu"
        ]
        for name in COMMON_ARGS:
            self.fields[name] = _argument_field(algos.BOOSTED_TREES, name)
        self.fields["training_data_path"].help_text = (
            "--training_data_path: UTF-8 CSV without a header row, the "
            "target in the first column; gs://… or a path in this "
            "server's storage."
        )
        for algorithm in algos.ALGORITHMS:
            for name in ALGORITHM_ARGS[algorithm.name]:
                self.fields[name] = _argument_field(algorithm, name)

    @property
    def boosted_trees_fields(self):
        return [self[name] for name in ALGORITHM_ARGS["boosted_trees"]]

    @property
    def linear_learner_fields(self):
        return [self[name] for name in ALGORITHM_ARGS["linear_learner"]]

    def data_fields(self):
        return [self[name] for name in COMMON_ARGS]

    def clean_extra_args(self):
        try:
            return shlex.split(self.cleaned_data["extra_args"])
        except ValueError as error:
            raise forms.ValidationError(f"Arguments cannot be parsed: {error}.") from None

    def clean(self):
        data = super().clean()
        if not data.get("training_data_path") and not data.get("data_file"):
            self.add_error("training_data_path", "Give the training data: a path, or upload a CSV.")
        return data

    def job_body(self, *, training_data_path: str, default_job_dir: str) -> dict:
        data = self.cleaned_data
        algorithm = algos.by_name(data["algorithm"])
        values = {
            **{name: data.get(name) for name in COMMON_ARGS + ALGORITHM_ARGS[algorithm.name]},
            "training_data_path": training_data_path,
        }
        args = [f"--{name}={value}" for name, value in values.items() if value not in (None, "")]
        for flag in ("preprocess", "header"):
            if data.get(flag):
                args.append(f"--{flag}")
        args += data.get("extra_args") or []
        training_input: dict = {
            "scaleTier": "CUSTOM" if data.get("master_type") else "BASIC",
            "masterConfig": {"imageUri": algorithm.image},
            "region": data["region"],
            "args": args,
            "jobDir": data["job_dir"].strip() or default_job_dir,
        }
        if data.get("master_type"):
            training_input["masterType"] = data["master_type"]
        return {"jobId": data["job_id"].strip(), "trainingInput": training_input}

    def add_violations(self, violations) -> None:
        fields = {
            "job.job_id": "job_id",
            "job.training_input.job_dir": "job_dir",
            "job.training_input.region": "region",
            "job.training_input.master_type": "master_type",
            "job.training_input.master_config": "master_type",
            "job.training_input.scale_tier": "master_type",
        }
        for violation in violations:
            name = None
            if violation.field == "job.training_input.args":
                match = _ARG_RE.match(violation.description)
                argument = match.group(1) if match else ""
                name = argument if argument in self.fields else "extra_args"
            else:
                name = next((f for prefix, f in fields.items() if violation.field.startswith(prefix)), None)
            self.add_error(name, violation.description)


def initial_from_builtin_job(job, *, job_id: str, default_job_dir: str) -> dict:
    """The form's values for a built-in algorithm job again (its "Clone"), under a new ``job_id``.

    Arguments the form has a field for fill it; the rest go to "Other arguments". A job directory
    that was the old job's default is left empty, so the new job gets its own.
    """
    ti = job.training_input or {}
    algorithm = algos.for_training_input(ti)
    known = set(COMMON_ARGS) | set(ALGORITHM_ARGS.get(algorithm.name if algorithm else "", ()))
    initial: dict = {
        "job_id": job_id,
        "cloned_from": job.job_id,
        "algorithm": algorithm.name if algorithm else "boosted_trees",
        "region": ti.get("region", "us-central1"),
        "master_type": ti.get("masterType", ""),
        "job_dir": "" if ti.get("jobDir") == default_job_dir else ti.get("jobDir", ""),
        "preprocess": False,
        "header": False,
    }
    extra = []
    for arg in ti.get("args") or []:
        name, sep, value = arg.removeprefix("--").partition("=")
        if arg.startswith("--") and sep and name in known:
            initial[name] = value
        elif arg in ("--preprocess", "--header"):
            initial[arg[2:]] = True
        else:
            extra.append(arg)
    initial["extra_args"] = shlex.join(extra)
    return initial


class DataAnalysisForm(forms.Form):
    path = forms.CharField(label="CSV file", max_length=1000, help_text="gs://… or a path in this server's storage.")
    compare = forms.CharField(
        label="Compare with (optional)",
        required=False,
        max_length=1000,
        help_text="A second CSV of the same columns, e.g. the test split, to look for drift.",
    )
    header = forms.BooleanField(label="The first row is a header", required=False)
    model_type = forms.ChoiceField(
        label="Target",
        required=False,
        choices=[("", "Guess from the data"), ("classification", "Classes"), ("regression", "Numbers")],
    )
