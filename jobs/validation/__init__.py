"""Validation of a v1 Job body (`projects.jobs.create`), following the original service.

Validation runs in two phases, like the original: first the JSON is read against the proto
schema (unknown names, wrong JSON types, bad enum values), and if that fails nothing else is
checked, because the real front end rejects such a payload before the service sees it. Then the
service rules run and every violation is collected, not just the first.

The schema itself (field names, types, enum values, length limits) is `aiconsole.v1schema`,
the one source the OpenAPI document and the Model/Version checks are derived from too.

Field paths are proto snake_case paths prefixed with `job.`, as in real error details;
descriptions name fields by their JSON (camelCase) names, as users write them.

The result is a normalised copy in wire format: camelCase keys, int64 values as strings, int32
values as ints, whole doubles as ints, output-only fields dropped. Defaults are not filled in;
the catalogue and executor apply them.

The rules live beside this module, one concern each: ``schema`` reads the JSON, ``names`` checks
the job id and labels, ``training`` runs the TrainingInput rules (the cluster there; ``roles``,
``accelerators``, ``code`` and ``placement`` beside it), ``hyperparameters`` the
HyperparameterSpec rules and ``prediction`` the PredictionInput ones. What other modules use is
exported here.
"""

from __future__ import annotations

from aiconsole.errors import FieldViolation, Violations, bounded, describe
from jobs.validation.hyperparameters import check_hyperparameters
from jobs.validation.names import validate_hold, validate_job_id, validate_labels
from jobs.validation.prediction import check_prediction_input
from jobs.validation.schema import parse_message
from jobs.validation.training import DEFAULT_MAX_REPLICA_COUNT, check_training_input, max_replica_count

__all__ = [
    "DEFAULT_MAX_REPLICA_COUNT",
    "FieldViolation",
    "SpecError",
    "max_replica_count",
    "validate_hyperparameters",
    "validate_job",
    "validate_job_id",
    "validate_labels",
    "validate_training_input",
]

# Parse errors come from the JSON front end, which reports the description alone.
_VERBATIM_PREFIXES = ("Invalid JSON payload received.", "Invalid value at ")


class SpecError(Exception):
    """A Job body was rejected; `violations` lists every problem found."""

    def __init__(self, violations: list[FieldViolation]):
        self.violations = bounded(violations)
        super().__init__(self.message)

    @property
    def message(self) -> str:
        """The error message of the API response, one line per violation."""
        return "\n".join(_render(v) for v in self.violations)


def _render(violation: FieldViolation) -> str:
    if violation.description.startswith(_VERBATIM_PREFIXES):
        return violation.description
    return describe(violation)


# ---------------------------------------------------------------------------------------------
# Public entry points
# ---------------------------------------------------------------------------------------------


def validate_job(body: dict) -> dict:
    """Validate a whole Job body and return its normalised copy; raise SpecError otherwise."""
    errors = Violations()
    job = parse_message(body, "Job", "job", errors)
    if errors:
        raise SpecError(errors)
    errors.extend(validate_job_id(job.get("jobId")))
    if "labels" in job:
        errors.extend(validate_labels(job["labels"]))
        errors.extend(validate_hold(job["labels"], job.get("trainingInput")))
    if "trainingInput" in job and "predictionInput" in job:
        errors.add("job.prediction_input", "A job takes exactly one of trainingInput or predictionInput, not both.")
    elif "trainingInput" not in job and "predictionInput" not in job:
        errors.add(
            "job.training_input",
            "A job needs trainingInput (a training job) or predictionInput (a batch prediction job).",
        )
    if "trainingInput" in job:
        check_training_input(job["trainingInput"], "job.training_input", errors)
    if "predictionInput" in job:
        check_prediction_input(job["predictionInput"], "job.prediction_input", errors)
    if errors:
        raise SpecError(errors)
    return job


def validate_training_input(data: dict, field: str = "job.training_input") -> dict:
    """Validate a TrainingInput on its own and return its normalised copy."""
    return _validate(data, "TrainingInput", field, check_training_input)


def validate_hyperparameters(data: dict, field: str = "job.training_input.hyperparameters") -> dict:
    """Validate a HyperparameterSpec on its own and return its normalised copy."""
    return _validate(data, "HyperparameterSpec", field, check_hyperparameters)


def _validate(data: object, message: str, field: str, check) -> dict:
    errors = Violations()
    parsed = parse_message(data, message, field, errors)
    if not errors:
        check(parsed, field, errors)
    if errors:
        raise SpecError(errors)
    return parsed
