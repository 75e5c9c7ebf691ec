"""A small streaming HTTP/1.1 forwarder to a TensorBoard on 127.0.0.1, on asyncio streams.

One connection per request (``Connection: close``). What the browser sent for the console stays
with the console: its cookies, ``Authorization``, CSRF token and the hop-by-hop headers are not
forwarded, and TensorBoard's ``Set-Cookie`` and hop-by-hop headers are not returned. The answer's
body is streamed as it arrives (``Content-Length``, chunked, or until the connection closes).
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Iterable
from dataclasses import dataclass

HOP_BY_HOP = frozenset(
    {
        "connection",
        "keep-alive",
        "proxy-authenticate",
        "proxy-authorization",
        "proxy-connection",
        "te",
        "trailer",
        "trailers",
        "transfer-encoding",
        "upgrade",
    }
)
TOKEN_HEADER = "X-Board-Token"  # the board's token (guarded.py): the proxy's alone to send
NOT_FORWARDED = HOP_BY_HOP | {
    TOKEN_HEADER.lower(),
    "host",
    "cookie",
    "authorization",
    "content-length",
    "x-csrftoken",
    "forwarded",
    "x-forwarded-for",
    "x-forwarded-host",
    "x-forwarded-proto",
}
NOT_RETURNED = HOP_BY_HOP | {"set-cookie", "server", "date"}
CHUNK = 64 * 1024
MAX_HEAD = 64 * 1024


class ProxyError(Exception):
    """TensorBoard did not give a well-formed answer."""


@dataclass
class Answer:
    status: int
    headers: list[tuple[str, str]]
    body: AsyncIterator[bytes]


def _connection_tokens(headers: Iterable[tuple[str, str]]) -> set[str]:
    """Headers named in ``Connection`` are hop-by-hop too."""
    return {
        token.strip().lower()
        for name, value in headers
        if name.lower() == "connection"
        for token in value.split(",")
        if token.strip()
    }


async def forward(
    port: int,
    method: str,
    target: str,
    headers: Iterable[tuple[str, str]],
    body: bytes = b"",
    *,
    token: str,
    timeout: float = 60.0,
) -> Answer:
    """Send one request to ``127.0.0.1:port`` with the board's ``token`` and return its answer,
    the body still to be read."""
    headers = list(headers)
    dropped = NOT_FORWARDED | _connection_tokens(headers)
    lines = [f"{method} {target} HTTP/1.1", f"Host: 127.0.0.1:{port}", "Connection: close", f"{TOKEN_HEADER}: {token}"]
    lines += [f"{name}: {value}" for name, value in headers if name.lower() not in dropped and "\n" not in value]
    if body or method not in ("GET", "HEAD"):
        lines.append(f"Content-Length: {len(body)}")
    reader, writer = await asyncio.wait_for(asyncio.open_connection("127.0.0.1", port, limit=MAX_HEAD), timeout)
    try:
        writer.write(("\r\n".join(lines) + "\r\n\r\n").encode("latin-1") + body)
        await writer.drain()
        head = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), timeout)
        status, answer_headers = _parse_head(head)
    except (asyncio.IncompleteReadError, asyncio.LimitOverrunError, ValueError) as error:
        writer.close()
        raise ProxyError(f"TensorBoard's answer could not be read: {error}") from None
    except BaseException:
        writer.close()
        raise
    fields = {name.lower(): value for name, value in answer_headers}
    if method == "HEAD" or status in (204, 304) or 100 <= status < 200:
        length: int | None = 0
    elif "chunked" in fields.get("transfer-encoding", "").lower():
        length = None
    else:
        length = int(fields["content-length"]) if fields.get("content-length", "").isdigit() else -1
    kept = [
        (name, value)
        for name, value in answer_headers
        if name.lower() not in NOT_RETURNED | _connection_tokens(answer_headers)
    ]
    return Answer(status=status, headers=kept, body=_body(reader, writer, length))


def _parse_head(head: bytes) -> tuple[int, list[tuple[str, str]]]:
    status_line, *header_lines = head.decode("latin-1").split("\r\n")
    version, _, rest = status_line.partition(" ")
    if not version.startswith("HTTP/1."):
        raise ValueError(f"not an HTTP answer: {status_line[:80]!r}")
    status = int(rest.split(" ", 1)[0])
    headers = []
    for line in header_lines:
        if line:
            name, _, value = line.partition(":")
            headers.append((name.strip(), value.strip()))
    return status, headers


async def _body(reader: asyncio.StreamReader, writer: asyncio.StreamWriter, length: int | None) -> AsyncIterator[bytes]:
    """``length``: a Content-Length; None: chunked; -1: until the connection closes."""
    try:
        if length is None:
            while True:
                size = int((await reader.readline()).split(b";")[0].strip() or b"0", 16)
                if size == 0:
                    while (await reader.readline()).strip():  # trailers, up to the blank line
                        pass
                    return
                yield await reader.readexactly(size)
                await reader.readexactly(2)
        else:
            remaining = length
            while remaining != 0:
                chunk = await reader.read(CHUNK if remaining < 0 else min(CHUNK, remaining))
                if not chunk:
                    return
                remaining = -1 if remaining < 0 else remaining - len(chunk)
                yield chunk
    finally:
        writer.close()
