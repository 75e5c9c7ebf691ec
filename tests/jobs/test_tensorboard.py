"""TensorBoard behind the console: a real console (uvicorn, the ASGI application) proxies a real
TensorBoard started from its own environment over event files written without TensorFlow."""

from __future__ import annotations

import asyncio
import json
import os
import socket
import subprocess
import threading
import urllib.error
import urllib.parse
import urllib.request
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest
from django.conf import settings
from django.test import Client
from tensorboard.compat.proto import event_pb2, summary_pb2
from tensorboard.summary.writer.event_file_writer import EventFileWriter

from aiconsole import trainer_user
from aiconsole.models import TrainerAccount
from bench.support.waiting import wait_for
from jobs import services
from jobs.tensorboard import proxy
from jobs.tensorboard.boards import BOARDS, Board
from tests.helpers.jobs import body

pytestmark = [pytest.mark.slow, pytest.mark.django_db(transaction=True)]


def write_scalars(folder, tag: str, values: list[float]) -> None:
    """One event file of ``tag`` scalars, as a Keras TensorBoard callback writes them."""
    folder.mkdir(parents=True, exist_ok=True)
    writer = EventFileWriter(str(folder))
    for step, value in enumerate(values):
        summary = summary_pb2.Summary(value=[summary_pb2.Summary.Value(tag=tag, simple_value=value)])
        writer.add_event(event_pb2.Event(step=step, wall_time=1_700_000_000.0 + step, summary=summary))
    writer.close()


KERAS_RUNS = {"train": ("epoch_loss", [1.0, 0.5, 0.25]), "validation": ("epoch_loss", [1.1, 0.7, 0.4])}


def job_with_events(project, job_id: str, actor, runs: dict | None = KERAS_RUNS):
    """A submitted job whose job dir holds event files (``runs``: folder → tag and values), owned
    as a trainer's files are (its project's account's, when the console is root)."""
    job_dir = settings.STORAGE_DIR / "jobs" / project.project_id / job_id
    job = services.submit_job(project, body(job_id, jobDir=str(job_dir)), actor=actor)
    for folder, (tag, values) in (runs or {}).items():
        write_scalars(job_dir / folder, tag, values)
    job_dir.mkdir(parents=True, exist_ok=True)
    trainer_user.give_job_dir(str(job_dir), project)
    return job


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


@pytest.fixture
def console(transactional_db):
    """The console's ASGI application served by uvicorn on a free port, as ``aiconsole up`` does."""
    import uvicorn

    port = _free_port()
    server = uvicorn.Server(
        uvicorn.Config("console.asgi:application", host="127.0.0.1", port=port, lifespan="off", log_level="warning")
    )
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    wait_for(lambda: server.started, 30, message="the console to listen")
    yield f"http://127.0.0.1:{port}"
    server.should_exit = True
    thread.join(15)
    BOARDS.stop_all()


class Browser:
    """A signed-in user's requests: the session cookie, as a browser sends it."""

    def __init__(self, base: str, user=None):
        self.base = base
        self.cookie = ""
        if user is not None:
            client = Client()
            client.force_login(user)
            self.cookie = f"sessionid={client.cookies['sessionid'].value}"

    def request(self, path: str, *, data: bytes | None = None, headers: dict | None = None):
        request = urllib.request.Request(self.base + path, data=data, headers={**(headers or {})})
        if self.cookie:
            request.add_header("Cookie", self.cookie)
        opener = urllib.request.build_opener(_NoRedirect)
        try:
            with opener.open(request, timeout=120) as response:
                return response.status, _lower(response.headers), response.read()
        except urllib.error.HTTPError as error:
            return error.code, _lower(error.headers), error.read()


def _lower(headers) -> dict:
    return {name.lower(): value for name, value in headers.items()}


class _NoRedirect(urllib.request.HTTPRedirectHandler):
    def redirect_request(self, *args, **kwargs):
        return None


def loaded(browser: Browser, path: str):
    """TensorBoard's answer once it has read the event files: it reads them in the background
    after it starts listening, so its first answers may be empty."""

    def answer():
        status, _, content = browser.request(path)
        assert status == 200, content[:500]
        return json.loads(content)

    return wait_for(answer, 60, interval=0.2, message=f"TensorBoard to read the event files ({path})")


def _children(pid: int) -> list[Path]:
    """/proc entries of the processes whose parent is ``pid``."""
    found = []
    for entry in Path("/proc").glob("[0-9]*"):
        try:
            if int((entry / "stat").read_text().rsplit(")", 1)[1].split()[1]) == pid:
                found.append(entry)
        except (OSError, ValueError):
            continue
    return found


def tensorboard_path(job, rest: str = "") -> str:
    return f"/projects/{job.project.project_id}/jobs/{job.job_id}/tensorboard/{rest}"


def test_a_project_member_gets_the_jobs_scalars_through_the_console(console, project, admin, viewer):
    job = job_with_events(project, "keras_run", admin)
    browser = Browser(console, viewer)

    status, headers, page = browser.request(tensorboard_path(job))
    assert status == 200, page[:500]
    assert b"<tf-tensorboard" in page or b"tensorboard" in page.lower()
    assert headers["x-frame-options"] == "SAMEORIGIN"

    assert sorted(loaded(browser, tensorboard_path(job, "data/runs"))) == ["train", "validation"]
    tags = loaded(browser, tensorboard_path(job, "data/plugin/scalars/tags"))
    assert tags["train"]["epoch_loss"]["displayName"] == "epoch_loss"
    status, _, points = browser.request(
        tensorboard_path(job, "data/plugin/scalars/scalars?run=validation&tag=epoch_loss")
    )
    assert [round(p[2], 3) for p in json.loads(points)] == [1.1, 0.7, 0.4]
    board = BOARDS.running()[f"{project.project_id}/keras_run"]
    assert board.home.is_relative_to(settings.WORK_DIR / project.project_id)
    if os.geteuid() == 0:  # as the project's account, as its trainers run
        account = TrainerAccount.objects.get(project=project).uid
        assert {path.stat().st_uid for path in _children(board.popen.pid)} == {account}

    # TensorBoard fetches some data with POST, from the console's own pages only.
    form = urllib.parse.urlencode([("tag", "epoch_loss"), ("runs", "train")]).encode()
    form_headers = {"Content-Type": "application/x-www-form-urlencoded"}
    status, _, answer = browser.request(
        tensorboard_path(job, "data/plugin/scalars/scalars_multirun"),
        data=form,
        headers={**form_headers, "Origin": console},
    )
    assert status == 200 and len(json.loads(answer)["train"]) == 3
    status, _, _ = browser.request(
        tensorboard_path(job, "data/plugin/scalars/scalars_multirun"),
        data=form,
        headers={**form_headers, "Origin": "http://evil.example"},
    )
    assert status == 403


def _command_lines() -> list[bytes]:
    found = []
    for path in Path("/proc").glob("[0-9]*/cmdline"):
        try:
            found.append(path.read_bytes())
        except OSError:
            pass  # ended while listed
    return found


def test_a_board_answers_only_the_consoles_proxy_not_a_process_that_finds_its_port(console, project, admin):
    """Another project's trainer can find a board's port in /proc/net/tcp; asked directly, the board
    refuses it, and its token is on no command line."""
    job = job_with_events(project, "guarded_run", admin)
    assert Browser(console, admin).request(tensorboard_path(job, "data/runs"))[0] == 200
    board = BOARDS.running()[f"{project.project_id}/guarded_run"]
    direct = f"http://127.0.0.1:{board.port}{tensorboard_path(job, 'data/plugin/scalars/tags')}"

    with pytest.raises(urllib.error.HTTPError) as refused:
        urllib.request.urlopen(direct, timeout=10)
    forged = urllib.request.Request(direct, headers={"X-Board-Token": "a-guess-" + "x" * 40})
    with pytest.raises(urllib.error.HTTPError) as guessed:
        urllib.request.urlopen(forged, timeout=10)

    assert refused.value.code == 403 and guessed.value.code == 403
    assert not any(board.token.encode() in line for line in _command_lines())


def test_outsiders_get_404_and_anonymous_users_the_sign_in_page(console, project, admin, outsider):
    job = job_with_events(project, "private_run", admin)
    for path in (tensorboard_path(job), tensorboard_path(job, "data/plugin/scalars/tags")):
        status, _, _ = Browser(console, outsider).request(path)
        assert status == 404
        status, headers, _ = Browser(console).request(path)
        assert status == 302 and headers["location"].startswith("/login/")
    assert BOARDS.running() == {}  # nothing was started for them


def test_an_idle_tensorboard_is_stopped_and_starts_again_on_the_next_request(console, project, admin, settings):
    settings.TENSORBOARD_IDLE_SECONDS = 1.0
    job = job_with_events(project, "idle_run", admin)
    browser = Browser(console, admin)
    assert browser.request(tensorboard_path(job, "data/runs"))[0] == 200
    board = BOARDS.running()[f"{project.project_id}/idle_run"]

    wait_for(
        lambda: board.popen.poll() is not None and not BOARDS.running(),
        30,
        message="the idle TensorBoard to be stopped",
    )
    assert "train" in loaded(browser, tensorboard_path(job, "data/runs"))


def test_a_board_stopping_in_the_background_leaves_the_folder_of_the_next_board_for_its_job(project, settings):
    # An idle or replaced board is stopped in another thread while a request starts its job's next
    # board; the old one's cleanup removed the folder the new one was about to run in (seen: the
    # next request after an idle stop answered 503, "No such file or directory").
    old, new = (Board(key=f"{project.project_id}/job", logdir="/x", prefix="/p", project=project) for _ in "ab")
    old.home.mkdir(parents=True)
    new.home.mkdir(parents=True)
    old.popen = subprocess.Popen(["true"])
    old.popen.wait()

    old.stop()

    assert not old.home.exists()
    assert new.home.is_dir()


def test_at_most_the_configured_number_run_the_oldest_idle_one_stopped_first(console, project, admin, settings):
    settings.TENSORBOARD_MAX = 1
    first, second = (job_with_events(project, name, admin) for name in ("first_run", "second_run"))
    browser = Browser(console, admin)
    assert browser.request(tensorboard_path(first, "data/runs"))[0] == 200
    old = BOARDS.running()[f"{project.project_id}/first_run"]

    assert browser.request(tensorboard_path(second, "data/runs"))[0] == 200
    assert list(BOARDS.running()) == [f"{project.project_id}/second_run"]
    wait_for(lambda: old.popen.poll() is not None, 30, message="the oldest idle TensorBoard to be stopped")

    busy = BOARDS.acquire(*_board_args(second))  # a request in flight: nothing idle to stop
    try:
        status, _, page = browser.request(tensorboard_path(first, "data/runs"))
    finally:
        BOARDS.release(busy)
    assert status == 503 and b"AICONSOLE_TENSORBOARD_MAX" in page


def _board_args(job):
    from jobs.metrics.logdirs import logdir_for

    return (f"{job.project.project_id}/{job.job_id}", logdir_for(job), tensorboard_path(job).rstrip("/"))


def test_a_trials_tensorboard_reads_its_own_dir(console, project, admin):
    from jobs.models import Trial

    job = job_with_events(project, "tuned_run", admin, runs={"3/train": ("accuracy", [0.5, 0.8])})
    Trial.objects.create(job=job, trial_id="3", number=3)
    browser = Browser(console, admin)

    status, headers, _ = browser.request(tensorboard_path(job) + "?trial=3")
    assert status == 302 and headers["location"].endswith("/tensorboard/trials/3/")
    tags = loaded(browser, tensorboard_path(job, "trials/3/data/plugin/scalars/tags"))
    assert tags == {"train": {"accuracy": {"displayName": "accuracy", "description": ""}}}
    assert browser.request(tensorboard_path(job, "trials/4/data/runs"))[0] == 404


def test_a_gs_job_dir_is_read_with_the_trainers_storage_settings(console, project, admin, gcs_emulator, tmp_path):
    """TensorBoard gets the trainers' STORAGE_EMULATOR_HOST (TRAINER_ENV_PASSTHROUGH) and reads
    gs:// through gcsfs, as it would with their GOOGLE_APPLICATION_CREDENTIALS."""
    write_scalars(tmp_path / "train", "epoch_loss", [0.9, 0.3])
    [event_file] = (tmp_path / "train").iterdir()
    gcs_emulator.upload("tb-bucket", f"jobs/gcs_run/train/{event_file.name}", event_file.read_bytes())
    job = services.submit_job(project, body("gcs_run", jobDir="gs://tb-bucket/jobs/gcs_run"), actor=admin)
    browser = Browser(console, admin)

    tags = loaded(browser, tensorboard_path(job, "data/plugin/scalars/tags"))
    assert list(tags["train"]) == ["epoch_loss"]


def test_the_job_page_links_to_tensorboard_only_when_the_job_has_event_files(client, project, admin):
    with_events = job_with_events(project, "with_events", admin)
    without = job_with_events(project, "without_events", admin, runs=None)
    client.force_login(admin)
    link = b"Open in TensorBoard"
    assert link in client.get(f"/projects/{project.project_id}/jobs/{with_events.job_id}/").content
    assert (
        tensorboard_path(with_events).encode()
        in client.get(f"/projects/{project.project_id}/jobs/{with_events.job_id}/").content
    )
    assert link not in client.get(f"/projects/{project.project_id}/jobs/{without.job_id}/").content


# --- the forwarder ------------------------------------------------------------------------------


class _Echo(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def do_GET(self):
        payload = json.dumps(dict(self.headers.items())).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Set-Cookie", "sessionid=stolen")
        self.send_header("Transfer-Encoding", "chunked")
        self.end_headers()
        for start in range(0, len(payload), 7):
            part = payload[start : start + 7]
            self.wfile.write(f"{len(part):x}\r\n".encode() + part + b"\r\n")
        self.wfile.write(b"0\r\n\r\n")

    def log_message(self, *args):
        pass


def test_the_forwarder_keeps_the_consoles_credentials_and_tensorboards_cookies_to_themselves():
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Echo)
    threading.Thread(target=server.serve_forever, daemon=True).start()

    async def call():
        answer = await proxy.forward(
            server.server_address[1],
            "GET",
            "/x?y=1",
            [
                ("Cookie", "sessionid=secret"),
                ("Authorization", "Bearer secret"),
                ("X-CSRFToken", "secret"),
                ("Accept", "application/json"),
                ("Connection", "X-Private"),
                ("X-Private", "secret"),
                ("X-Board-Token", "forged-by-the-browser"),
            ],
            token="the-boards-own-token",
        )
        return answer, b"".join([chunk async for chunk in answer.body])

    try:
        answer, payload = asyncio.run(call())
    finally:
        server.shutdown()
    sent = {name.lower(): value for name, value in json.loads(payload).items()}
    assert sent["accept"] == "application/json" and "secret" not in json.dumps(sent)
    assert sent["x-board-token"] == "the-boards-own-token"  # the proxy's, never the browser's
    returned = {name.lower() for name, _ in answer.headers}
    assert answer.status == 200 and "set-cookie" not in returned and "transfer-encoding" not in returned


DIES_WITH_CONSOLE = """
import os, sys, threading, time
from pathlib import Path
import django
django.setup()
from jobs.tensorboard.boards import Board
from jobs.tensorboard.environment import tensorboard_environment

board = Board(key="orphan-check", logdir=sys.argv[1], prefix="/tb/orphan-check")
# Started from a thread that ends at once, as a request's thread may: the board must outlive it.
starter = threading.Thread(target=board.start, args=(tensorboard_environment().python,))
starter.start()
starter.join()
assert board.alive, list(board.output)
children = Path(f"/proc/{board.popen.pid}/task/{board.popen.pid}/children").read_text().split()
print(board.popen.pid, *children, flush=True)
time.sleep(600)
"""


def test_a_console_killed_with_sigkill_leaves_no_tensorboard_behind(tmp_path):
    import os
    import signal
    import subprocess
    import sys

    env = {k: v for k, v in os.environ.items() if not k.startswith("AICONSOLE_")}
    env.update(
        {
            "DJANGO_SETTINGS_MODULE": "console.settings",
            "AICONSOLE_DATA_DIR": str(tmp_path / "data"),
            "AICONSOLE_ENV_DIR": str(settings.ENV_DIR),
            "AICONSOLE_SECRET_KEY": "orphan-check-key-orphan-check-key",
            "AICONSOLE_TENSORBOARD_START_SECONDS": "120",
        }
    )
    (tmp_path / "logs").mkdir()
    os.chmod(tmp_path, 0o755)
    console = subprocess.Popen(
        [sys.executable, "-c", DIES_WITH_CONSOLE, str(tmp_path / "logs")],
        env=env,
        stdout=subprocess.PIPE,
        text=True,
        cwd=settings.BASE_DIR,
    )
    try:
        pids = [int(pid) for pid in console.stdout.readline().split()]
        assert len(pids) == 2, "the reaper and TensorBoard under it"
        assert all(os.path.exists(f"/proc/{pid}") for pid in pids)  # the starting thread ended; they run on
    finally:
        console.send_signal(signal.SIGKILL)
        console.wait()

    def gone(pid: int) -> bool:
        try:
            return Path(f"/proc/{pid}/stat").read_text().split(") ")[1][0] == "Z"  # a zombie is gone too
        except OSError:
            return True

    wait_for(lambda: all(gone(pid) for pid in pids), 30, message="the reaper and TensorBoard to die with the console")
