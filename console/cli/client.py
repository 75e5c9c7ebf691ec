"""A small client for the console's REST API, and the errors every client command reports.

Errors arrive in Google's envelope ``{"error": {"code", "message", "status", "details"}}``;
``ApiError`` keeps its parts so that commands print the status, the message and each
``google.rpc.BadRequest`` field violation on its own line.
"""

from __future__ import annotations

from dataclasses import dataclass
from urllib.parse import quote

import requests

from console.cli.config import Resolved

USER_AGENT = "aiconsole-cli/0.1"
CONNECT_TIMEOUT = 10.0


class CliError(Exception):
    """A problem the user can fix, reported as one readable message and an exit status."""

    def __init__(self, message: str, exit_code: int = 1):
        super().__init__(message)
        self.message = message
        self.exit_code = exit_code


@dataclass(frozen=True)
class Violation:
    field: str
    description: str


class ApiError(CliError):
    """The console refused a request."""

    def __init__(self, code: int, status: str, message: str, violations: list[Violation] | None = None):
        self.code = code
        self.status = status
        self.violations = list(violations or [])
        self.api_message = message
        super().__init__(self.render())

    def render(self) -> str:
        if not self.violations:
            return f"{self.status}: {self.api_message}"
        lines = [
            f"{self.status}: the request has {len(self.violations)} invalid field"
            f"{'s' if len(self.violations) != 1 else ''}:"
        ]
        lines += [f"  - {v.field}: {v.description}" if v.field else f"  - {v.description}" for v in self.violations]
        return "\n".join(lines)


def _violations(details: object) -> list[Violation]:
    found = []
    for detail in details if isinstance(details, list) else []:
        if not isinstance(detail, dict):
            continue
        for item in detail.get("fieldViolations") or []:
            if isinstance(item, dict):
                found.append(Violation(str(item.get("field") or ""), str(item.get("description") or "")))
    return found


def error_from_response(response: requests.Response) -> ApiError:
    try:
        envelope = response.json().get("error")
    except (ValueError, AttributeError):
        envelope = None
    if not isinstance(envelope, dict):
        text = " ".join(response.text.split())[:200]
        return ApiError(
            response.status_code,
            f"HTTP {response.status_code}",
            f"{response.reason or 'error'} from {response.url}" + (f": {text}" if text else ""),
        )
    code = int(envelope.get("code") or response.status_code)
    message = str(envelope.get("message") or response.reason or "")
    if code == 401:
        message += (
            "\nGive a token with --token, $AICONSOLE_TOKEN or 'aiconsole auth login' "
            "('aiconsole token create USER' on the console's machine makes one)."
        )
    return ApiError(code, str(envelope.get("status") or f"HTTP {code}"), message, _violations(envelope.get("details")))


class Client:
    """Calls the API at ``settings.url`` with the bearer token; answers are decoded JSON."""

    def __init__(self, settings: Resolved, *, session: requests.Session | None = None):
        self.settings = settings
        self.base = settings.url.rstrip("/")
        self.session = session or requests.Session()
        self.session.headers["User-Agent"] = USER_AGENT
        if settings.token:
            self.session.headers["Authorization"] = f"Bearer {settings.token}"

    @property
    def project(self) -> str:
        return self.settings.project

    def project_path(self, *parts: str) -> str:
        """``/v1/projects/{project}/…`` with each part quoted."""
        return "/v1/projects/" + "/".join(quote(p, safe=":") for p in (self.project, *parts))

    def upload_path(self, *parts: str) -> str:
        """``/upload/v1/projects/{project}/…``: where raw bodies (packages) are sent."""
        return "/upload" + self.project_path(*parts)

    def job_path(self, job_id: str, suffix: str = "") -> str:
        return self.project_path("jobs", job_id + suffix)

    def call(
        self,
        method: str,
        path: str,
        *,
        params: dict | None = None,
        body: object = None,
        data: object = None,
        headers: dict | None = None,
        timeout: float = 60.0,
    ) -> dict:
        url = self.base + path
        try:
            response = self.session.request(
                method,
                url,
                params={k: v for k, v in (params or {}).items() if v not in (None, "")},
                json=body,
                data=data,
                headers=headers,
                timeout=(CONNECT_TIMEOUT, timeout),
            )
        except requests.ConnectionError as error:
            raise CliError(
                f"cannot reach the console at {self.base} ({_reason(error)}). Is it running? "
                "Set its address with --url, $AICONSOLE_URL or 'aiconsole auth login'."
            ) from None
        except requests.Timeout:
            raise CliError(f"the console at {self.base} did not answer {method} {path} within {timeout:.0f}s") from None
        if response.status_code >= 400:
            raise error_from_response(response)
        if not response.content:
            return {}
        try:
            answer = response.json()
        except ValueError:
            raise CliError(
                f"the console at {self.base} answered {method} {path} with something that is "
                "not JSON; is --url the console's address?"
            ) from None
        if not isinstance(answer, dict):
            raise CliError(f"unexpected answer to {method} {path}: {answer!r:.200}")
        return answer

    def get(self, path: str, **kwargs) -> dict:
        return self.call("GET", path, **kwargs)

    def post(self, path: str, body: object = None, **kwargs) -> dict:
        return self.call("POST", path, body=body, **kwargs)


def _reason(error: Exception) -> str:
    text = str(error)
    for marker in (
        "Connection refused",
        "Name or service not known",
        "No route to host",
        "Temporary failure in name resolution",
        "timed out",
    ):
        if marker in text:
            return marker.lower()
    return text[:200]
