"""Service errors that carry the original API's status, so every adapter renders them alike."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class FieldViolation:
    """One google.rpc.BadRequest field violation: a proto field path and what is wrong with it."""

    field: str
    description: str


# Field violations one error lists; a body with more problems (a 10 MB body of unknown names has a
# million) lists the first ones and counts the rest, so its answer stays small.
MAX_VIOLATIONS = 100


def bounded(violations) -> list[FieldViolation]:
    """At most ``MAX_VIOLATIONS`` violations, the last of them saying how many more were found
    (a ``Violations`` counts those it did not keep)."""
    found = list(violations)
    total = len(found) + getattr(violations, "omitted", 0)
    if total <= MAX_VIOLATIONS:
        return found
    shown = MAX_VIOLATIONS - 1
    return [
        *found[:shown],
        FieldViolation("", f"… and {total - shown} more problems, not listed: the first {shown} are."),
    ]


def clipped(text: object, limit: int = 200) -> str:
    """A value a message repeats (an unknown name, a refused value), at most ``limit`` characters."""
    text = str(text)
    return text if len(text) <= limit else text[:limit] + "…"


def describe(violation: FieldViolation) -> str:
    """One line of an error's message: the field and what is wrong with it."""
    return f"Field: {violation.field} Error: {violation.description}" if violation.field else violation.description


class Violations(list):
    """The field violations found while checking a body: every rule adds, then one raise. Past
    ``MAX_VIOLATIONS`` it only counts them (``omitted``)."""

    omitted = 0

    def add(self, field: str, description: str) -> None:
        if len(self) >= MAX_VIOLATIONS:
            self.omitted += 1
            return
        self.append(FieldViolation(field, description))

    @property
    def violations(self) -> Violations:
        """The list itself, for callers that read ``problems.violations``."""
        return self

    def raise_if_any(self) -> None:
        if self:
            raise InvalidArgument.from_violations(self)


class ServiceError(Exception):
    """A refusal with an HTTP code and a google.rpc status name."""

    http_status = 500
    status = "INTERNAL"

    def __init__(self, message: str, violations: list | None = None):
        super().__init__(message)
        self.message = message
        self.violations: list = bounded(violations or [])

    def details(self) -> list[dict]:
        if not self.violations:
            return []
        return [
            {
                "@type": "type.googleapis.com/google.rpc.BadRequest",
                "fieldViolations": [{"field": v.field, "description": v.description} for v in self.violations],
            }
        ]


class InvalidArgument(ServiceError):
    http_status = 400
    status = "INVALID_ARGUMENT"

    @classmethod
    def from_violations(cls, violations) -> InvalidArgument:
        shown = bounded(violations)
        return cls("\n".join(describe(v) for v in shown), shown)


class AlreadyExists(ServiceError):
    http_status = 409
    status = "ALREADY_EXISTS"


class FailedPrecondition(ServiceError):
    http_status = 400
    status = "FAILED_PRECONDITION"


class ResourceExhausted(ServiceError):
    http_status = 429
    status = "RESOURCE_EXHAUSTED"


class Aborted(ServiceError):
    http_status = 409
    status = "ABORTED"


class Unimplemented(ServiceError):
    http_status = 501
    status = "UNIMPLEMENTED"


def log_internal_error(logger, what: str) -> str:
    """Log the exception being handled under a short new id, and return the id.

    What users see (a job's or a version's errorMessage) carries the id and never the traceback:
    console code and paths stay in the console's log, where an admin finds them by the id.
    """
    import secrets

    error_id = secrets.token_hex(4)
    logger.exception("%s [error id %s]", what, error_id)
    return error_id
