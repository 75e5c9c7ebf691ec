"""Downloads that stream under ASGI with bounded memory: a file, a log, the audit log, a CSV.

Django serves a ``StreamingHttpResponse`` built on a synchronous iterator, under ASGI, by
consuming the whole iterator in a thread first (``sync_to_async(list)``) and only then sending:
a viewer's download of a 50 GB file a trainer wrote held it all in the web process. A
:class:`StreamedResponse` hands ASGI the same iterator a batch at a time instead, each batch read
on the request's own thread (where its database connection is), so the web process holds one
batch per download and the first bytes leave at once; the server's flow control (uvicorn waits
for a slow client's socket to drain) keeps what is in flight bounded. Under WSGI and Django's test
client it is an ordinary streaming response.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from typing import cast

from asgiref.sync import sync_to_async
from django.http import StreamingHttpResponse

BATCH_BYTES = 256 * 1024  # a batch per thread hop: many small parts (log lines) go together


def _next_batch(parts: Iterator[bytes]) -> bytes | None:
    """Parts joined up to about ``BATCH_BYTES``; None when there are no more."""
    batch, size = [], 0
    for part in parts:
        batch.append(part)
        size += len(part)
        if size >= BATCH_BYTES:
            break
    return b"".join(batch) if batch else None


class StreamedResponse(StreamingHttpResponse):
    """A streaming response over a synchronous iterator that ASGI sends as it is read."""

    async def __aiter__(self) -> AsyncIterator[bytes]:
        if self.is_async:  # an async iterator is sent as it comes already
            async for part in super().__aiter__():
                yield part
            return
        parts = iter(cast(Iterator[bytes], self.streaming_content))  # not async: checked above
        # thread_sensitive: the request's own thread, where the view ran and its connection lives.
        next_batch = sync_to_async(_next_batch, thread_sensitive=True)
        while (batch := await next_batch(parts)) is not None:
            yield batch
