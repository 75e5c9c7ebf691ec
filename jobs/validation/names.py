"""Job ids and labels: the names a job is known and filtered by, checked as the service does.

``validate_labels`` is shared with models and versions (``models_registry.spec``), whose labels
follow the same rules.
"""

from __future__ import annotations

from django.conf import settings

from aiconsole.errors import FieldViolation, Violations
from aiconsole.protojson import shown
from jobs.job_ids import is_job_id


def validate_job_id(job_id: object, field: str = "job.job_id") -> list[FieldViolation]:
    """Check a job id: a letter, then letters, digits or underscores, 128 characters at most."""
    if job_id is None or job_id == "":
        return [FieldViolation(field, "A job id is required.")]
    if not isinstance(job_id, str) or not is_job_id(job_id):
        return [
            FieldViolation(
                field,
                f"Job id {shown(job_id)} is invalid: it must start with a letter "
                "and contain only letters, numbers and underscores, at most 128 characters.",
            )
        ]
    return []


_MAX_LABELS = 64
_LABEL_RULE = "lowercase letters (international letters allowed), digits, underscores and dashes, at most 63 characters"


def _label_char_ok(char: str) -> bool:
    # Letters without case (e.g. CJK) count as lowercase; only uppercase letters are refused.
    return char in "_-" or char.isdigit() or (char.isalpha() and not char.isupper())


def _label_key_ok(key: str) -> bool:
    return 0 < len(key) <= 63 and key[0].isalpha() and not key[0].isupper() and all(_label_char_ok(c) for c in key)


def _label_value_ok(value: str) -> bool:
    return len(value) <= 63 and all(_label_char_ok(c) for c in value)


def validate_labels(labels: object, field: str = "job.labels") -> list[FieldViolation]:
    """Check Google's label rules: at most 64 labels, keys and values of a limited alphabet."""
    if not isinstance(labels, dict):
        return [FieldViolation(field, "labels must be a map of strings to strings.")]
    errors = Violations()
    if len(labels) > _MAX_LABELS:
        errors.add(field, f"A resource can have at most {_MAX_LABELS} labels; got {len(labels)}.")
    for key, value in labels.items():
        if not isinstance(key, str) or not _label_key_ok(key):
            errors.add(
                field,
                f"Label key {shown(key)} is invalid: keys must "
                f"start with a lowercase letter and use only {_LABEL_RULE}.",
            )
        if not isinstance(value, str) or not _label_value_ok(value):
            errors.add(
                field,
                f"Label value {shown(value)} of key "
                f"{shown(key)} is invalid: values may be empty "
                f"and use only {_LABEL_RULE}.",
            )
    return errors


# The console's one label with a meaning (not Google's): hold a failed replica this many minutes so
# its shell (``enableWebAccess``) can look at what went wrong.
HOLD_LABEL = "aiconsole-hold-failed-replica"


def hold_minutes(labels: dict | None) -> int:
    """The minutes a job asked to hold a failed replica for its shell; 0 when it did not."""
    value = (labels or {}).get(HOLD_LABEL, "")
    return int(value) if isinstance(value, str) and value.isdigit() else 0


def validate_hold(labels: object, training_input: object, field: str = "job.labels") -> list[FieldViolation]:
    """The hold label: whole minutes within ``AICONSOLE_WEB_ACCESS_HOLD_MAX_MINUTES``, on a job with
    web access (there is no shell to hold a replica for otherwise)."""
    if not isinstance(labels, dict) or HOLD_LABEL not in labels:
        return []
    value, most = labels[HOLD_LABEL], settings.WEB_ACCESS_HOLD_MAX_MINUTES
    if not (isinstance(value, str) and value.isdigit() and 1 <= int(value) <= most):
        return [
            FieldViolation(
                field,
                f"Label {HOLD_LABEL} holds a failed replica for its shell that many minutes: a whole number "
                f"from 1 to {most}; got {shown(value)}.",
            )
        ]
    if not (isinstance(training_input, dict) and training_input.get("enableWebAccess")):
        return [
            FieldViolation(
                field,
                f"Label {HOLD_LABEL} holds a failed replica for its shell: submit the job with "
                "trainingInput.enableWebAccess too.",
            )
        ]
    return []
