"""The shell's WebSocket: ``/ws/projects/<project>/jobs/<job>/shell/<replica>/?trial=&rows=&cols=``.

It admits a user who may change the job (``sessions.authorized_job``), connects to the process
that runs the replica (``host``), and relays: text frames from the browser (``{"type": "input",
"data": …}``, ``{"type": "resize", "rows": …, "cols": …}``) go to the shell's terminal, its output
comes back as binary frames, and JSON text frames say what happens (``open``, ``exit`` with its
``reason``, ``error`` with a ``message`` before the socket closes with its code: 4401 signed out,
4403 not allowed, 4404 no such job or no web access, 4410 the replica does not run). Both ways are
recorded (``sessions.Recording``). Every ``AICONSOLE_STREAM_RECHECK_SECONDS`` the user is admitted
again, as the live log's socket is, and the shell ends once the answer is no.
"""

from __future__ import annotations

import asyncio
import json
import logging

from channels.db import database_sync_to_async
from channels.generic.websocket import AsyncWebsocketConsumer
from django.conf import settings
from django.http import QueryDict

from aiconsole import iam
from aiconsole.middleware import holds_nul
from jobs.webaccess import protocol, sessions

logger = logging.getLogger(__name__)

CONNECT_SECONDS = 10.0
NOT_ALLOWED = (
    "You may see this job but not open a shell into it: that takes permission ml.jobs.update "
    "(an editor of the project, or the job's owner)."
)


def _admit(user, project_id: str, job_id: str, label: str, trial_id: str):
    job = sessions.authorized_job(user, project_id, job_id)
    replica = sessions.replica_to_open(job, label, trial_id)
    return job, replica, sessions.start(job, replica, user)


class ShellConsumer(AsyncWebsocketConsumer):
    """One browser tab's shell into one replica."""

    session_pk: int | None = None
    writer: asyncio.StreamWriter | None = None
    recording: sessions.Recording | None = None
    pump: asyncio.Task | None = None
    guard: asyncio.Task | None = None
    reason = ""
    input_bytes = output_bytes = 0

    async def connect(self):
        await self.accept()
        try:
            await self._open()
        except sessions.Refused as refusal:
            await self._refuse(str(refusal), refusal.code)

    async def _refuse(self, message: str, code: int) -> None:
        await self.send(text_data=json.dumps({"type": "error", "message": message}))
        await self.close(code=code)

    async def _open(self) -> None:
        user = self.scope.get("user")
        if user is None or not user.is_authenticated:
            raise sessions.Refused("Your session has ended: sign in again to open a shell.", 4401)
        query = QueryDict(self.scope.get("query_string", b""))
        if holds_nul(self.scope["path"], self.scope.get("query_string", b"").decode("latin-1")):
            raise sessions.Refused("The address holds a NUL character.", 4400)
        route = self.scope["url_route"]["kwargs"]
        rows, cols = protocol.size(query.get("rows"), query.get("cols"))
        try:
            self.job, replica, session = await database_sync_to_async(_admit)(
                user, route["project_id"], route["job_id"], route["label"], query.get("trial", "")
            )
        except iam.NotFound:
            raise sessions.Refused("There is no such job, or you may not see it.", 4404) from None
        except iam.PermissionDenied:
            raise sessions.Refused(NOT_ALLOWED, 4403) from None
        self.session_pk = session.pk
        address = replica.worker.address if replica.worker_id else replica.host
        try:
            reader, writer = await asyncio.wait_for(
                asyncio.open_connection(address, replica.shell_port), CONNECT_SECONDS
            )
            self.writer = writer
            request = {"token": protocol.token(replica.pk, session.pk), "rows": rows, "cols": cols}
            writer.write(json.dumps(request).encode() + b"\n")
            answer = json.loads(await asyncio.wait_for(reader.readline(), CONNECT_SECONDS) or b"{}")
        except (OSError, TimeoutError, ValueError):
            answer = {"error": f"The process that runs {replica.label} did not answer; it may have just ended."}
        if not answer.get("ok"):
            self.reason = str(answer.get("error") or "The shell could not be opened.")
            raise sessions.Refused(self.reason, 4410)
        title = f"{self.job.job_id} {replica.label}" + (f" (trial {replica.trial_id})" if replica.trial_id else "")
        self.recording = sessions.Recording(
            sessions.recording_path(session), rows=rows, cols=cols, title=f"{title}, opened by {session.principal}"
        )
        await self.send(text_data=json.dumps({"type": "open", "replica": replica.label, "session": session.pk}))
        self.pump = asyncio.create_task(self._from_host(reader))
        self.guard = asyncio.create_task(self._recheck())

    async def _from_host(self, reader: asyncio.StreamReader) -> None:
        """The terminal's output to the browser, until the host says the shell ended."""
        reason = "The connection to the replica's host was lost."
        try:
            while True:
                kind, length = protocol.HEADER.unpack(await reader.readexactly(protocol.HEADER.size))
                payload = await reader.readexactly(length)
                if kind == protocol.OUTPUT:
                    self.output_bytes += len(payload)
                    if self.recording is not None:
                        self.recording.add("o", payload)
                    await self.send(bytes_data=payload)
                elif kind == protocol.EXIT:
                    reason = str(json.loads(payload).get("reason") or "The shell ended.")
                    break
        except (asyncio.IncompleteReadError, OSError, ValueError):
            pass
        await self._end(reason, code=1000)

    async def _recheck(self) -> None:
        session = self.scope.get("session")
        session_key = session.session_key if session is not None else None
        while True:
            await asyncio.sleep(settings.STREAM_RECHECK_SECONDS)
            refusal = await database_sync_to_async(sessions.still_admitted)(
                session_key, self.scope["user"].pk, self.job.pk
            )
            if refusal:
                said = "Your session has ended." if refusal == 4401 else NOT_ALLOWED
                await self._end(f"The shell was closed: {said}", code=refusal)
                return

    async def _end(self, reason: str, *, code: int) -> None:
        if self.reason:
            return
        self.reason = reason
        if self.pump is not None and self.pump is not asyncio.current_task():
            self.pump.cancel()
        await self.send(text_data=json.dumps({"type": "exit", "reason": reason}))
        await self.close(code=code)

    async def receive(self, text_data=None, bytes_data=None):
        if self.writer is None or self.reason:
            return
        try:
            message = json.loads(text_data or "{}")
        except ValueError:
            return
        if not isinstance(message, dict):
            return
        if message.get("type") == "input" and isinstance(message.get("data"), str):
            data = message["data"].encode("utf-8", "replace")
            self.input_bytes += len(data)
            if self.recording is not None:
                self.recording.add("i", data)
            for start in range(0, len(data), protocol.FRAME_BYTES):
                self.writer.write(protocol.frame(protocol.INPUT, data[start : start + protocol.FRAME_BYTES]))
            await self.writer.drain()
        elif message.get("type") == "resize":
            rows, cols = protocol.size(message.get("rows"), message.get("cols"))
            self.writer.write(protocol.frame(protocol.RESIZE, f"{rows},{cols}".encode()))
            await self.writer.drain()

    async def disconnect(self, code):
        for task in (self.pump, self.guard):
            if task is not None and task is not asyncio.current_task():
                task.cancel()
        if self.writer is not None:
            self.writer.close()
        if self.recording is not None:
            self.recording.close()
        if self.session_pk is not None:
            await database_sync_to_async(sessions.finish)(
                self.session_pk,
                reason=self.reason or "The browser closed the shell.",
                input_bytes=self.input_bytes,
                output_bytes=self.output_bytes,
            )
            self.session_pk = None
