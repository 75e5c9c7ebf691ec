"""Job ids and labels: the names a job is known and filtered by, checked as the service does.

``validate_labels`` is shared with models and versions (``models_registry.spec``), whose labels
follow the same rules.
"""

from __future__ import annotations

import re

from aiconsole.errors import FieldViolation, Violations
from jobs.validation.schema import shown

_JOB_ID_RE = re.compile(r"^[A-Za-z][A-Za-z0-9_]{0,127}$")


def validate_job_id(job_id: object, field: str = "job.job_id") -> list[FieldViolation]:
    """Check a job id: a letter, then letters, digits or underscores, 128 characters at most."""
    if job_id is None or job_id == "":
        return [FieldViolation(field, "A job id is required.")]
    if not isinstance(job_id, str) or not _JOB_ID_RE.match(job_id):
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
