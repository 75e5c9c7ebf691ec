"""Web access (enableWebAccess): a shell into a running replica, for those who may change the job.

Real parts: the embedded executor runs a real trainer as its project's account; the shell is a
real bash on a real pty in the replica's folder, reached through the console's own ASGI app.
"""

from __future__ import annotations

import json
import time

import pytest
from asgiref.sync import sync_to_async
from channels.testing import WebsocketCommunicator
from django.test import Client

from aiconsole import trainer_user
from aiconsole.models import AuditEntry
from aiconsole.tokens import create_token
from bench.support.waiting import wait_for
from console.asgi import application
from jobs import services
from jobs.models import Job, JobState, Replica, ReplicaState, WebAccessSession
from jobs.webaccess import sessions
from tests.helpers.logs import session_cookie

pytestmark = pytest.mark.slow  # starts servers and processes: left out of the fast lane

# Runs until someone touches ``release`` in its working folder (its shell can), two minutes at most.
WAITING_TASK = """
deadline = time.time() + 120
print("waiting for release in", os.getcwd(), flush=True)
while not os.path.exists("release") and time.time() < deadline:
    time.sleep(0.1)
sys.exit(0 if os.path.exists("release") else 3)
"""


def submit(project, admin, body: dict, **labels):
    """The suite's job body (``job_body``) with web access, and ``labels``."""
    body["trainingInput"]["enableWebAccess"] = True
    return services.submit_job(project, {**body, "labels": labels} if labels else body, actor=admin)


def running_replica(job, timeout: float = 180) -> Replica:
    return wait_for(
        lambda: Replica.objects.filter(job=job, state=ReplicaState.RUNNING, shell_port__isnull=False).first(),
        timeout,
        message=f"{job.job_id}'s master to run with a shell",
    )


class Shell(WebsocketCommunicator):
    """A browser tab's terminal: what it shows, and what it is told."""

    def __init__(self, user_cookie: str, path: str):
        super().__init__(
            application,
            path,
            headers=[
                (b"cookie", f"sessionid={user_cookie}".encode()),
                (b"origin", b"http://testserver"),
                (b"host", b"testserver"),
            ],
        )
        self.screen = ""
        self.said: list[dict] = []

    async def type(self, text: str) -> None:
        await self.send_to(text_data=json.dumps({"type": "input", "data": text}))

    async def until(self, predicate, timeout: float = 30) -> None:
        deadline = time.monotonic() + timeout
        while not predicate(self):
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise AssertionError(f"Timed out after {timeout}s; screen: {self.screen[-2000:]!r}, said {self.said}")
            try:
                message = await self.receive_output(remaining)
            except TimeoutError:
                continue  # said below, with what it showed
            if message["type"] == "websocket.close":
                self.said.append({"type": "closed", "code": message.get("code")})
            elif message.get("bytes") is not None:
                self.screen += message["bytes"].decode("utf-8", "replace")
            elif message.get("text") is not None:
                self.said.append(json.loads(message["text"]))

    def told(self, kind: str) -> list[dict]:
        return [m for m in self.said if m.get("type") == kind]


def shell_path(job, label: str = "master-replica-0") -> str:
    return f"/ws/projects/{job.project.project_id}/jobs/{job.job_id}/shell/{label}/?rows=30&cols=120"


@pytest.mark.asyncio
async def test_an_editor_gets_a_shell_in_the_running_replica_and_a_viewer_is_refused(
    executor, project, admin, viewer, package_factory, job_body
):
    package = await sync_to_async(package_factory)(WAITING_TASK)
    job = await sync_to_async(submit)(project, admin, job_body("shell_job", package))
    replica = await sync_to_async(running_replica)(job)

    # The API lists the shell once the replica runs, as trainingOutput.webAccessUris.
    _, raw = await sync_to_async(create_token)(admin)
    answer = await sync_to_async(Client().get)(
        "/v1/projects/project-a/jobs/shell_job", HTTP_AUTHORIZATION=f"Bearer {raw}"
    )
    uris = answer.json()["trainingOutput"]["webAccessUris"]
    assert list(uris) == ["master-replica-0"]
    assert uris["master-replica-0"] == "http://testserver/projects/project-a/jobs/shell_job/shell/master-replica-0/"

    # A viewer may see the job, not open a shell into it: refused, and the refusal audited.
    refused = Shell(await sync_to_async(session_cookie)(viewer), shell_path(job))
    await refused.connect()
    await refused.until(lambda s: s.told("closed"))
    assert refused.told("closed")[0]["code"] == 4403
    assert "ml.jobs.update" in refused.told("error")[0]["message"]
    assert await sync_to_async(
        AuditEntry.objects.filter(method_name=sessions.CONNECT, granted=False, principal__contains="vera").exists
    )()

    # The editor's shell: bash as the replica's account, in its folder, with its environment.
    shell = Shell(await sync_to_async(session_cookie)(admin), shell_path(job))
    await shell.connect()
    await shell.until(lambda s: s.told("open"))
    await shell.type("echo answer-$((6*7)); pwd; echo job-$(echo $TF_CONFIG | grep -o shell_job | head -1); id -un\n")
    await shell.until(lambda s: "answer-42" in s.screen and "job-shell_job" in s.screen)
    assert f"replicas/{replica.label}" in shell.screen  # its working folder
    account = await sync_to_async(trainer_user.for_project)(project)
    if account is not None:  # the console runs as root: the shell runs as the project's account
        await shell.until(lambda s: f"\n{account.name}\r" in s.screen)
    assert "@master-replica-0:" in shell.screen  # its prompt names the replica
    # Touching the file ends the trainer; the shell ends with its replica and says so.
    await shell.type("touch release\n")
    await shell.until(lambda s: s.told("exit"), timeout=60)
    assert "master-replica-0 has ended" in shell.told("exit")[0]["reason"]
    await shell.disconnect()

    await sync_to_async(wait_for)(
        lambda: Job.objects.get(pk=job.pk).state == JobState.SUCCEEDED, 60, message="the job to succeed"
    )
    session = await sync_to_async(
        lambda: wait_for(lambda: WebAccessSession.objects.filter(job=job, ended__isnull=False).first(), 10)
    )()
    assert session.principal == "alice_admin@example.com" and session.input_bytes > 0 and session.output_bytes > 0
    methods = await sync_to_async(
        lambda: list(
            AuditEntry.objects.filter(method_name__startswith="aiconsole.WebAccessService", granted=True)
            .order_by("seq")
            .values_list("method_name", flat=True)
        )
    )()
    assert methods == [sessions.CONNECT, sessions.DISCONNECT]

    # The recording holds both ways, and only those who may open the shell may download it.
    recording = (await sync_to_async(sessions.recording_path)(session)).read_text()
    events = [json.loads(line) for line in recording.splitlines()]
    assert events[0]["version"] == 2 and events[0]["width"] == 120
    assert any(kind == "i" and "touch release" in text for _, kind, text in events[1:])
    assert any(kind == "o" and "answer-42" in text for _, kind, text in events[1:])
    url = f"/projects/project-a/jobs/shell_job/shell-sessions/{session.pk}/recording/"
    project.data_access_logs = True
    await sync_to_async(project.save)(update_fields=["data_access_logs"])
    for user, status in ((admin, 200), (viewer, 403)):
        client = Client()
        await sync_to_async(client.force_login)(user)
        response = await sync_to_async(client.get)(url)
        assert response.status_code == status
    downloads = await sync_to_async(
        lambda: list(AuditEntry.objects.filter(method_name=sessions.GET_RECORDING).values_list("granted", flat=True))
    )()
    assert sorted(downloads) == [False, True]  # the download read, and the viewer's refusal


def test_the_hold_label_is_whole_minutes_within_the_bound_and_needs_web_access(settings):
    from aiconsole.errors import InvalidArgument
    from jobs.validation import SpecError, validate_job

    settings.WEB_ACCESS_HOLD_MAX_MINUTES = 30
    image = {"masterConfig": {"imageUri": "localhost/trainer:1"}}
    body = {
        "jobId": "held",
        "trainingInput": {"scaleTier": "BASIC", "region": "us-central1", "enableWebAccess": True, **image},
    }
    for value, said in (("90", "a whole number from 1 to 30"), ("soon", "soon")):
        with pytest.raises((SpecError, InvalidArgument)) as refused:
            validate_job({**body, "labels": {"aiconsole-hold-failed-replica": value}})
        assert "aiconsole-hold-failed-replica" in str(refused.value) and said in str(refused.value)
    without = {**body, "trainingInput": {**body["trainingInput"], "enableWebAccess": False}}
    with pytest.raises((SpecError, InvalidArgument)) as refused:
        validate_job({**without, "labels": {"aiconsole-hold-failed-replica": "5"}})
    assert "trainingInput.enableWebAccess" in str(refused.value)
    assert validate_job({**body, "labels": {"aiconsole-hold-failed-replica": "5"}})["labels"]


def test_vertex_custom_jobs_ask_for_web_access_the_same_way():
    from jobs.vertex import resources, translate
    from tests.helpers.vertex import custom_job

    translation = translate.custom_job(custom_job(job_spec={"enableWebAccess": True}), location="us-central1")
    assert translation.training_input["enableWebAccess"] is True
    assert not any("enableWebAccess" in note for note in translation.engine.get("notes", []))
    assert resources.vertex_node("master-replica-0") == "workerpool0-0"
    assert resources.vertex_node("worker-replica-2") == "workerpool1-2"


# Writes what went wrong beside it, then fails.
FAILING_TASK = """
with open("clue.txt", "w") as handle:
    handle.write("the-clue-is-here")
sys.exit(5)
"""


@pytest.mark.asyncio
async def test_a_failed_replica_is_held_for_its_shell_until_the_job_is_cancelled(
    executor, project, admin, package_factory, job_body
):
    package = await sync_to_async(package_factory)(FAILING_TASK)
    hold = {"aiconsole-hold-failed-replica": "10"}
    job = await sync_to_async(submit)(project, admin, job_body("held_job", package), **hold)
    held = await sync_to_async(wait_for)(
        lambda: Replica.objects.filter(job=job, state=ReplicaState.FAILED, shell_until__isnull=False).first(),
        180,
        message="the failed master to be held",
    )
    assert held.exit_code == 5
    assert await sync_to_async(lambda: Job.objects.get(pk=job.pk).state)() == JobState.RUNNING  # held, not over

    shell = Shell(await sync_to_async(session_cookie)(admin), shell_path(job))
    await shell.connect()
    await shell.until(lambda s: s.told("open"))
    await shell.type("cat clue.txt; echo\n")
    await shell.until(lambda s: "the-clue-is-here" in s.screen.split("cat clue.txt", 1)[-1].split("\n", 1)[-1])

    await sync_to_async(services.cancel_job)(job, actor=admin)  # ends the hold: the shell ends with it
    await shell.until(lambda s: s.told("exit"), timeout=60)
    await shell.disconnect()
    await sync_to_async(wait_for)(
        lambda: Job.objects.get(pk=job.pk).state in (JobState.CANCELLED, JobState.FAILED), 60, message="the job's end"
    )
    assert await sync_to_async(lambda: Replica.objects.get(pk=held.pk).shell_until)() is None


@pytest.mark.asyncio
async def test_a_container_replicas_shell_runs_inside_its_container(executor, project, admin):
    from bench.support.images import make_image
    from tests.helpers.images import require_engine

    engine = await sync_to_async(require_engine)()
    script = (
        "echo boxed-$$ > /tmp/inside-the-box\n"
        "i=0\nwhile [ ! -e /tmp/release ] && [ $i -lt 600 ]; do sleep 0.2; i=$((i+1)); done\n"
    )
    image = await sync_to_async(make_image)(engine, script)
    body = {
        "jobId": "boxed_shell",
        "trainingInput": {
            "scaleTier": "BASIC",
            "region": "us-central1",
            "masterConfig": {"imageUri": image},
            "enableWebAccess": True,
        },
    }
    job = await sync_to_async(services.submit_job)(project, body, actor=admin)
    await sync_to_async(running_replica)(job)

    shell = Shell(await sync_to_async(session_cookie)(admin), shell_path(job))
    await shell.connect()
    await shell.until(lambda s: s.told("open"), timeout=60)
    await shell.type("cat /tmp/inside-the-box; touch /tmp/release\n")  # a file only the container has
    await shell.until(lambda s: "boxed-" in s.screen.split("inside-the-box", 1)[-1], timeout=30)
    await shell.until(lambda s: s.told("exit"), timeout=60)
    await shell.disconnect()
    await sync_to_async(wait_for)(
        lambda: Job.objects.get(pk=job.pk).state == JobState.SUCCEEDED, 60, message="the job to succeed"
    )
