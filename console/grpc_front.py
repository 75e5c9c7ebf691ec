"""Vertex AI over gRPC: the transport the SDK and its low-level clients use unless told otherwise.

A notebook points ``aiplatform.init(api_endpoint="HOST:PORT")`` (or a ``JobServiceClient``'s
``client_options``) at this server and changes nothing else: the SDK opens a TLS channel, checked
against the certificate this console made (``GRPC_DEFAULT_SSL_ROOTS_FILE_PATH`` names it; the
console prints the line to export), and sends its bearer token as ``authorization`` metadata.

Each call is answered by the same code that answers the REST API, never a second implementation:
the method's HTTP rule (read from the SDK's own REST transport, so it is Google's) transcodes the
request message into its REST request, which this process sends to the console's web port on the
loopback (authentication, IAM, audit and errors as for any REST call there), and the JSON answer is
read back into the method's response message. An error's ``google.rpc`` status becomes the call's
status. This process holds no database connection and forks nothing: gRPC's threads must not be in
a process that forks (the web process forks serving processes), so it runs on its own
(``aiconsole up --process grpc``, started beside the web process).
Served: JobService, PipelineService, ModelService, EndpointService, PredictionService and the
operations, locations and IAM mixins, unary methods; a method the REST API does not serve answers
as it does there (UNIMPLEMENTED or NOT_FOUND). Streaming methods are UNIMPLEMENTED.

Needs ``grpcio`` and the SDK's message definitions (``google-cloud-aiplatform``), both the
console's own dependencies; where an install lacks them the console serves REST only and says so.
"""

from __future__ import annotations

import datetime
import http.client as http_client
import importlib
import inspect
import ipaddress
import json
import logging
import os
import socket
import threading
import typing
from concurrent import futures
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import urlencode

logger = logging.getLogger("aiconsole.grpc")

SERVICES = ("job_service", "pipeline_service", "model_service", "endpoint_service", "prediction_service")
# The mixins every service's transport carries, and the gRPC service each belongs to.
MIXINS = {
    "GetOperation": "google.longrunning.Operations",
    "ListOperations": "google.longrunning.Operations",
    "DeleteOperation": "google.longrunning.Operations",
    "CancelOperation": "google.longrunning.Operations",
    "WaitOperation": "google.longrunning.Operations",
    "GetLocation": "google.cloud.location.Locations",
    "ListLocations": "google.cloud.location.Locations",
    "GetIamPolicy": "google.iam.v1.IAMPolicy",
    "SetIamPolicy": "google.iam.v1.IAMPolicy",
    "TestIamPermissions": "google.iam.v1.IAMPolicy",
}
_HTTP_TO_GRPC = {400: "INVALID_ARGUMENT", 401: "UNAUTHENTICATED", 403: "PERMISSION_DENIED", 404: "NOT_FOUND"}
_WORKERS = 16
PROXY_TIMEOUT_SECONDS = 600  # a call waits as long as its REST request may (an upload's body, a prediction)


def available() -> str:
    """Why gRPC cannot be served here ("" when it can)."""
    for module in ("grpc", "google.cloud.aiplatform_v1"):
        try:
            importlib.import_module(module)
        except ImportError:
            return f"{module} is not installed (pip install 'aiconsole[vertex-grpc]')"
    return ""


# --- the methods -----------------------------------------------------------------------------------


@dataclass(frozen=True)
class Method:
    path: str  # /google.cloud.aiplatform.v1.JobService/CreateCustomJob
    request: type
    response: type
    http_options: tuple[dict, ...]


def _is_proto_plus(cls: type) -> bool:
    return hasattr(cls, "pb") and hasattr(cls, "deserialize")


def methods() -> dict[str, Method]:
    """Every unary method of the served services, from the SDK's REST transports."""
    table: dict[str, Method] = {}
    for service in SERVICES:
        rest = importlib.import_module(f"google.cloud.aiplatform_v1.services.{service}.transports.rest")
        base = importlib.import_module(f"google.cloud.aiplatform_v1.services.{service}.transports.rest_base")
        title = "".join(part.title() for part in service.split("_"))  # JobService
        transport = getattr(rest, f"{title}RestTransport")
        bases = getattr(base, f"_Base{title}RestTransport")
        for name, inner in inspect.getmembers(transport, inspect.isclass):
            if not name.startswith("_") or name.startswith(("__", "_Base")):
                continue
            verb = name[1:]
            rule = getattr(bases, f"_Base{verb}", None)
            try:
                hints = typing.get_type_hints(inner.__call__)
            except Exception:  # a transport class of the SDK's we cannot read is one method fewer
                continue
            request, response = hints.get("request"), hints.get("return")
            if rule is None or not inspect.isclass(request) or not inspect.isclass(response):
                continue  # a streaming method: its answer is an iterator, not a message
            if not all(hasattr(cls, "SerializeToString") or _is_proto_plus(cls) for cls in (request, response)):
                continue
            path = f"/{MIXINS.get(verb, f'google.cloud.aiplatform.v1.{title}')}/{verb}"
            options = [o for o in rule._get_http_options() if o["uri"].startswith("/v1/")]
            table.setdefault(path, Method(path, request, response, tuple(options or rule._get_http_options())))
    return table


def _decode(cls: Any, data: bytes):
    return cls.deserialize(data) if _is_proto_plus(cls) else cls.FromString(data)


def _encode(cls: Any, message) -> bytes:
    return cls.serialize(message) if _is_proto_plus(cls) else message.SerializeToString()


def _from_json(cls: Any, text: str):
    from google.protobuf import json_format

    if _is_proto_plus(cls):
        return cls.from_json(text, ignore_unknown_fields=True)
    return json_format.Parse(text, cls(), ignore_unknown_fields=True)


# --- one call ----------------------------------------------------------------------------------------


@dataclass(frozen=True)
class HttpRequest:
    method: str
    path: str
    query: list[tuple[str, str]]
    body: bytes


def transcode(method: Method, request) -> HttpRequest:
    """The REST request a gRPC request is, by its method's HTTP rule."""
    from google.api_core import path_template, rest_helpers
    from google.protobuf import json_format

    message = type(request).pb(request) if _is_proto_plus(type(request)) else request
    transcoded = path_template.transcode(list(method.http_options), message)
    body = b""
    if transcoded.get("body") is not None:
        body = json_format.MessageToJson(transcoded["body"], use_integers_for_enums=True).encode()
    query: list[tuple[str, str]] = []
    if transcoded.get("query_params") is not None:
        params = json_format.MessageToDict(transcoded["query_params"], use_integers_for_enums=True)
        query = [(str(k), str(v)) for k, v in rest_helpers.flatten_query_params(params, strict=True)]
    return HttpRequest(transcoded["method"].upper(), transcoded["uri"], query, body)


class Front:
    """The gRPC handler: each call transcoded and answered by the web port at ``web_url``."""

    def __init__(self, table: dict[str, Method], web_url: str):
        self.table = table
        scheme, _, address = web_url.partition("://")
        self.secure = scheme == "https"
        self.address = address.rstrip("/")
        self._local = threading.local()  # one keep-alive connection per server thread

    def handler(self):
        import grpc

        front = self

        class Handler(grpc.GenericRpcHandler):
            def service(self, handler_call_details):
                method = front.table.get(handler_call_details.method)
                if method is None:
                    return None  # grpc answers UNIMPLEMENTED
                return grpc.unary_unary_rpc_method_handler(
                    lambda request, context: front.call(method, request, context),
                    request_deserializer=lambda data: _decode(method.request, data),
                    response_serializer=lambda message: _encode(method.response, message),
                )

        return Handler()

    def call(self, method: Method, request, context):
        import grpc

        try:
            http = transcode(method, request)
        except ValueError as error:  # the request's names match none of the method's paths
            context.abort(grpc.StatusCode.INVALID_ARGUMENT, str(error))
        metadata = {key: value for key, value in context.invocation_metadata()}
        try:
            status, body = self.answer(http, metadata)
        except OSError as error:
            context.abort(grpc.StatusCode.UNAVAILABLE, f"The console's web port did not answer: {error}")
        if status == 200:
            return _from_json(method.response, body.decode() or "{}")
        code, message = _status_of(status, body)
        context.abort(getattr(grpc.StatusCode, code, grpc.StatusCode.UNKNOWN), message)

    def answer(self, http: HttpRequest, metadata: dict) -> tuple[int, bytes]:
        """The web port's answer to the REST request (sent again once on a connection it closed)."""
        headers = {"Content-Type": "application/json", "User-Agent": metadata.get("user-agent", "grpc")}
        if metadata.get("authorization"):
            headers["Authorization"] = metadata["authorization"]
        target = http.path + (f"?{urlencode(http.query)}" if http.query else "")
        for attempt in range(2):
            connection = self._connection(fresh=attempt > 0)
            try:
                connection.request(http.method, target, body=http.body or None, headers=headers)
                response = connection.getresponse()
                return response.status, response.read()
            except (ConnectionError, http_client.HTTPException):
                connection.close()
                if attempt:
                    raise
        raise AssertionError("unreachable")

    def _connection(self, *, fresh: bool):
        connection = getattr(self._local, "connection", None)
        if connection is None or fresh:
            kind = http_client.HTTPSConnection if self.secure else http_client.HTTPConnection
            connection = kind(self.address, timeout=PROXY_TIMEOUT_SECONDS)
            self._local.connection = connection
        return connection


def _status_of(status: int, body: bytes) -> tuple[str, str]:
    """The google.rpc status name and message of an error answer."""
    try:
        error = json.loads(body).get("error") or {}
    except (ValueError, AttributeError):
        error = {}
    if isinstance(error, str):
        return "FAILED_PRECONDITION", error
    name = error.get("status") or _HTTP_TO_GRPC.get(status, "UNKNOWN" if status >= 500 else "FAILED_PRECONDITION")
    return name, error.get("message") or f"HTTP {status}"


# --- the certificate ---------------------------------------------------------------------------------


def certificate_paths(data_dir: Path) -> tuple[Path, Path, Path]:
    folder = data_dir / "grpc"
    return folder / "ca.pem", folder / "server.pem", folder / "server.key"


def ensure_certificate(data_dir: Path, names: list[str]) -> tuple[bytes, bytes, Path]:
    """(server key, server certificate chain, the CA file clients trust): a CA and a server
    certificate for ``names``, made once in the data dir (remade when a name is missing)."""
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import NameOID

    ca_path, cert_path, key_path = certificate_paths(data_dir)
    if cert_path.is_file() and key_path.is_file() and ca_path.is_file():
        current = x509.load_pem_x509_certificate(cert_path.read_bytes())
        san = current.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
        covered = {str(n) for n in san.get_values_for_type(x509.DNSName)} | {
            str(n) for n in san.get_values_for_type(x509.IPAddress)
        }
        fresh = current.not_valid_after_utc > datetime.datetime.now(datetime.UTC) + datetime.timedelta(days=30)
        if fresh and set(names) <= covered:
            return key_path.read_bytes(), cert_path.read_bytes() + ca_path.read_bytes(), ca_path
    ca_path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)  # private, as all of the data dir
    now = datetime.datetime.now(datetime.UTC)
    ca_key = ec.generate_private_key(ec.SECP256R1())
    ca_name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "AI Console gRPC CA")])
    ca = (
        x509.CertificateBuilder()
        .subject_name(ca_name)
        .issuer_name(ca_name)
        .public_key(ca_key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(days=3650))
        .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
        .add_extension(x509.KeyUsage(False, False, False, False, False, True, True, False, False), critical=True)
        .sign(ca_key, hashes.SHA256())
    )
    key = ec.generate_private_key(ec.SECP256R1())
    alternatives: list[x509.GeneralName] = []
    for name in names:
        try:
            alternatives.append(x509.IPAddress(ipaddress.ip_address(name)))
        except ValueError:
            alternatives.append(x509.DNSName(name))
    cert = (
        x509.CertificateBuilder()
        .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, names[0])]))
        .issuer_name(ca_name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(days=825))
        .add_extension(x509.SubjectAlternativeName(alternatives), critical=False)
        .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
        .add_extension(x509.ExtendedKeyUsage([x509.oid.ExtendedKeyUsageOID.SERVER_AUTH]), critical=False)
        .sign(ca_key, hashes.SHA256())
    )
    key_pem = key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
    )
    descriptor = os.open(key_path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(descriptor, "wb") as handle:
        handle.write(key_pem)
    cert_path.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    ca_path.write_bytes(ca.public_bytes(serialization.Encoding.PEM))
    for written in (cert_path, ca_path):
        written.chmod(0o600)  # a notebook of another user is given a copy of ca.pem
    return key_pem, cert_path.read_bytes() + ca_path.read_bytes(), ca_path


def server_names(host: str, extra: list[str]) -> list[str]:
    """The names the certificate covers: this machine's, the address served on, any asked for."""
    names = ["localhost", "127.0.0.1", "::1", socket.gethostname(), *extra]
    if host not in ("0.0.0.0", "::", ""):
        names.append(host)
    return list(dict.fromkeys(n for n in names if n))


# --- the server ----------------------------------------------------------------------------------------


@dataclass
class Running:
    server: object
    port: int
    ca_file: Path

    def stop(self, grace: float = 1.0) -> None:
        self.server.stop(grace)  # type: ignore[attr-defined]

    def banner(self, host: str) -> str:
        shown = "localhost" if host in ("0.0.0.0", "::", "127.0.0.1", "") else host
        return (
            f'Vertex AI over gRPC at {shown}:{self.port}: aiplatform.init(api_endpoint="{shown}:{self.port}") '
            f"with export GRPC_DEFAULT_SSL_ROOTS_FILE_PATH={self.ca_file}"
        )


def web_address(host: str, port: int) -> str:
    """Where this machine's web port answers: the loopback when it listens on every address."""
    shown = "127.0.0.1" if host in ("0.0.0.0", "") else "[::1]" if host == "::" else host
    return f"http://{shown}:{port}"


def start(host: str, port: int, data_dir: Path, *, web_url: str, extra_names: list[str] | None = None) -> Running:
    """Serve on ``host:port`` (0: a free port) over TLS, answering through the web port at
    ``web_url``; returns once the port is bound."""
    import grpc

    key, chain, ca_file = ensure_certificate(data_dir, server_names(host, extra_names or []))
    server = grpc.server(
        futures.ThreadPoolExecutor(max_workers=_WORKERS, thread_name_prefix="grpc"),
        # Never share the port: gRPC's default SO_REUSEPORT lets a second console bind it too, and
        # the kernel then hands each connection to either (with the other's certificate).
        options=[("grpc.max_receive_message_length", 32 * 1024 * 1024), ("grpc.so_reuseport", 0)],
    )
    server.add_generic_rpc_handlers((Front(methods(), web_url).handler(),))
    bound = server.add_secure_port(f"{host or '0.0.0.0'}:{port}", grpc.ssl_server_credentials([(key, chain)]))
    if not bound:  # older grpc answers 0 instead of raising
        raise RuntimeError(f"cannot bind {host}:{port}")
    server.start()
    return Running(server, bound, ca_file)
