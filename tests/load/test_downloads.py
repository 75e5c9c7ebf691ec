"""Downloads stream with bounded memory in the web process: a viewer's download of a file of
several GB a trainer wrote (sparse, so the test costs no disk) starts at once and never holds more
than a few MB of it, where Django's ASGI handler read a whole synchronous stream before its first
byte (a 50 GB file took the web process to 19 GB before it was killed)."""

from __future__ import annotations

import asyncio
import socket
import time

import pytest

from aiconsole.streaming import BATCH_BYTES, StreamedResponse
from tests.helpers.memory import PeakRss

SPARSE_GB = 4
SPARSE = f"""
job_dir = sys.argv[sys.argv.index("--job-dir") + 1]
os.makedirs(job_dir, exist_ok=True)
with open(os.path.join(job_dir, "huge.bin"), "wb") as handle:
    handle.truncate({SPARSE_GB} * 1024 ** 3)
print("WROTE", flush=True)
"""


@pytest.mark.executor
def test_a_multi_gb_download_streams_with_bounded_memory_in_the_web_process(live_console):
    console = live_console()
    console.submit("sparse", SPARSE)
    assert console.wait_state("sparse", {"SUCCEEDED", "FAILED", "CANCELLED"}) == "SUCCEEDED"
    web = console.processes()["web"]
    client = socket.create_connection(("127.0.0.1", console.port), timeout=60)
    received, first_byte_after = 0, None
    with PeakRss(web) as peak:
        started = time.monotonic()
        client.sendall(
            b"GET /projects/default-project/jobs/sparse/outputs/download/?path=huge.bin HTTP/1.1\r\n"
            b"Host: 127.0.0.1\r\nConnection: close\r\nCookie: sessionid=" + console.cookie.encode() + b"\r\n\r\n"
        )
        head = b""
        while b"\r\n\r\n" not in head:
            chunk = client.recv(65536)
            assert chunk, head
            head += chunk
        first_byte_after = time.monotonic() - started
        headers, _, body = head.partition(b"\r\n\r\n")
        received = len(body)
        while chunk := client.recv(1024 * 1024):
            received += len(chunk)
    client.close()

    assert headers.startswith(b"HTTP/1.1 200"), headers
    assert f"content-length: {SPARSE_GB * 1024**3}".encode() in headers.lower()
    assert received == SPARSE_GB * 1024**3
    assert peak.growth_mb < 200, f"the web process grew by {peak.growth_mb:.0f} MB"
    print(f"first byte after {first_byte_after:.3f} s; web process grew {peak.growth_mb:.1f} MB")


def test_a_streamed_response_reads_its_source_a_batch_at_a_time_under_asgi():
    pulled = []

    def source():
        for number in range(10_000):
            pulled.append(number)
            yield b"x" * 1024

    response = StreamedResponse(source())

    async def first_two():
        parts = aiter(response)
        return [await anext(parts), await anext(parts)]

    batches = asyncio.run(first_two())

    assert [len(batch) for batch in batches] == [BATCH_BYTES, BATCH_BYTES]
    assert len(pulled) == 2 * BATCH_BYTES // 1024  # the rest is read only as it is sent
    rest = 10_000 - len(pulled)
    assert b"".join(response) == b"x" * 1024 * rest  # and WSGI still iterates it


def test_a_streamed_response_over_an_async_source_sends_it_as_it_comes():
    async def source():
        for number in range(3):
            yield f"page {number}\n".encode()

    async def everything():
        return [part async for part in StreamedResponse(source())]

    assert asyncio.run(everything()) == [b"page 0\n", b"page 1\n", b"page 2\n"]
