"""A scaled-mode installation on this host, for the tests and for bench/scaled.py.

``Cluster`` starts ``aiconsole web`` and ``aiconsole worker`` processes against one PostgreSQL
database and one Redis database, and talks to them as a user would: the REST API with a token,
the ``aiconsole`` command, and plain SQL to look at what the database holds.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import uuid
from pathlib import Path

import psycopg

from bench.support.waiting import wait_for

SERVER = "postgresql://postgres@127.0.0.1:5432/"
AICONSOLE = str(Path(sys.executable).with_name("aiconsole"))
ROOT = Path(__file__).resolve().parents[2]
TERMINAL = {"SUCCEEDED", "FAILED", "CANCELLED"}

# Every replica prints what it was given; workers serve one connection on their TF_CONFIG port
# and the master reads from each of them; "hold" trainers wait for a flag file, "count" trainers
# checkpoint a step counter into the job dir and resume from it.
TRAINER = """
import argparse, json, os, socket, sys, time
parser = argparse.ArgumentParser()
parser.add_argument("--mode", default="talk")
parser.add_argument("--steps", type=int, default=0)
parser.add_argument("--job-dir")
args = parser.parse_args()
tf = json.loads(os.environ["TF_CONFIG"])
task = tf["task"]
print("replica", task["type"], task["index"], "cuda=" + os.environ.get("CUDA_VISIBLE_DEVICES", "unset"),
      "host=" + socket.gethostname(), flush=True)
if args.mode == "talk":
    key = "chief" if task["type"] == "chief" else task["type"]
    me = tf["cluster"][key][task["index"]]
    if task["type"] == "worker":
        server = socket.socket()
        server.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        server.bind(("0.0.0.0", int(me.rsplit(":", 1)[1])))
        server.listen()
        peer, _ = server.accept()
        peer.sendall(f"hello from worker {task['index']}".encode())
        peer.close()
    else:
        for address in tf["cluster"].get("worker", []):
            host, port = address.rsplit(":", 1)
            deadline = time.time() + 60
            while True:
                try:
                    peer = socket.create_connection((host, int(port)), timeout=1)
                    break
                except OSError:
                    if time.time() > deadline:
                        raise
                    time.sleep(0.05)
            print("master heard:", peer.recv(100).decode(), flush=True)
elif args.mode == "gang":
    # Every replica serves its TF_CONFIG address and reaches every peer at the address TF_CONFIG
    # gives it; the master then waits for the release flag, the others until they are stopped.
    import threading
    me = tf["cluster"][task["type"]][task["index"]]
    server = socket.socket()
    server.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    server.bind(("0.0.0.0", int(me.rsplit(":", 1)[1])))
    server.listen(16)
    def serve():
        while True:
            peer, _ = server.accept()
            peer.sendall(f"{task['type']}-{task['index']}".encode())
            peer.close()
    threading.Thread(target=serve, daemon=True).start()
    heard = []
    for address in sorted(a for addresses in tf["cluster"].values() for a in addresses if a != me):
        host, port = address.rsplit(":", 1)
        deadline = time.time() + 60
        while True:
            try:
                peer = socket.create_connection((host, int(port)), timeout=1)
                heard.append(peer.recv(100).decode() + "@" + address)
                peer.close()
                break
            except OSError:
                if time.time() > deadline:
                    raise
                time.sleep(0.05)
    print(f"{task['type']}-{task['index']} reached " + " ".join(sorted(heard)), flush=True)
    if task["type"] in ("master", "chief"):
        flag = os.path.join(args.job_dir, "release")
        while not os.path.exists(flag):
            time.sleep(0.05)
        print("released", flush=True)
    else:
        time.sleep(600)
elif args.mode == "hold":
    flag = os.path.join(args.job_dir, "release")
    while not os.path.exists(flag):
        time.sleep(0.05)
    print("released", flush=True)
elif args.mode == "count":
    checkpoint = os.path.join(args.job_dir, "checkpoint")
    step = int(open(checkpoint).read()) if os.path.exists(checkpoint) else 0
    print(f"resuming from step {step}" if step else "starting from step 0", flush=True)
    while step < args.steps:
        time.sleep(0.1)
        step += 1
        # A temporary file of its own: a gang's replicas all checkpoint into the one job dir.
        scratch = f"{checkpoint}.{task['type']}{task['index']}.tmp"
        with open(scratch, "w") as out:
            out.write(str(step))
        os.replace(scratch, checkpoint)
        print(f"step {step}", flush=True)
"""


def service_up(host: str, port: int) -> str | None:
    """None when something listens there, else why not."""
    try:
        socket.create_connection((host, port), timeout=3).close()
        return None
    except OSError as error:
        return str(error)


def scratch_database() -> tuple[str, object]:
    """A new, empty PostgreSQL database: its URL and an admin connection to drop it with."""
    import psycopg

    admin = psycopg.connect(SERVER + "postgres", autocommit=True, connect_timeout=5)
    name = f"aiconsole_scaled_{uuid.uuid4().hex[:12]}"
    admin.execute(f'CREATE DATABASE "{name}"')
    return SERVER + name, admin


def drop_database(url: str, admin) -> None:
    admin.execute(f'DROP DATABASE IF EXISTS "{url.rsplit("/", 1)[1]}" WITH (FORCE)')
    admin.close()


def cluster_env(data_dir: Path, database_url: str, redis_url: str, **extra: str) -> dict:
    env = {k: v for k, v in os.environ.items() if not k.startswith("AICONSOLE_") and k != "DJANGO_SETTINGS_MODULE"}
    env.update(
        {
            "AICONSOLE_DATA_DIR": str(data_dir),
            "AICONSOLE_DATABASE_URL": database_url,
            "AICONSOLE_REDIS_URL": redis_url,
            "AICONSOLE_ADMIN_PASSWORD": "scaled-admin-password",
            "AICONSOLE_SECRET_KEY": "scaled-test-secret",
            "AICONSOLE_ENV_DIR": os.environ.get("AICONSOLE_ENV_DIR")
            or str(Path.home() / ".cache" / "aiconsole" / "test-envs"),
            "AICONSOLE_STOP_GRACE_SECONDS": "3",
            "AICONSOLE_LOG_LEVEL": "INFO",
            **extra,
        }
    )
    return env


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


class Cluster:
    """The processes of one scaled-mode installation on this host, and an API client for it."""

    def __init__(self, env: dict, data_dir: Path, database_url: str):
        self.env = env
        self.data_dir = data_dir
        self.database_url = database_url
        self.processes: list[subprocess.Popen] = []
        self.workers: dict[str, subprocess.Popen] = {}
        self.port = free_port()
        self.base = f"http://127.0.0.1:{self.port}"
        self.token = ""

    def spawn(self, argv: list[str], log_name: str) -> subprocess.Popen:
        log = open(self.data_dir / f"{log_name}.log", "w")
        process = subprocess.Popen(
            [AICONSOLE, *argv], env=self.env, stdout=log, stderr=subprocess.STDOUT, cwd=self.data_dir
        )
        self.processes.append(process)
        return process

    def start_web(self) -> subprocess.Popen:
        process = self.spawn(["web", "--port", str(self.port)], "web")
        wait_for(lambda: service_up("127.0.0.1", self.port) is None, 60, 0.1, "aiconsole web to listen")
        return process

    def start_worker(self, name: str, *args: str) -> subprocess.Popen:
        process = self.spawn(["worker", "--address", "127.0.0.1", *args], name)
        self.workers[name] = process
        wait_for(
            lambda: self.sql("SELECT count(*) FROM jobs_worker WHERE pid = %s", process.pid)[0][0],
            60,
            0.1,
            f"worker {name} to register",
        )
        return process

    def worker_row(self, name: str) -> int:
        return self.sql("SELECT id FROM jobs_worker WHERE pid = %s", self.workers[name].pid)[0][0]

    def sql(self, query: str, *params):
        with psycopg.connect(self.database_url, autocommit=True) as connection:
            cursor = connection.execute(query, params)
            return cursor.fetchall() if cursor.description else []

    def cli(self, *argv: str) -> subprocess.CompletedProcess:
        return subprocess.run([AICONSOLE, *argv], capture_output=True, text=True, env=self.env, timeout=120)

    # --- the REST API, as a script would use it ---------------------------------------------------

    def api(self, method: str, path: str, body: dict | None = None) -> dict:
        import requests

        response = requests.request(
            method, self.base + path, json=body, timeout=30, headers={"Authorization": f"Bearer {self.token}"}
        )
        assert response.status_code < 300, (response.status_code, response.text)
        return response.json()

    def submit(self, job_id: str, package: Path, *, args=(), region="us-central1", **training_input) -> dict:
        body = {
            "jobId": job_id,
            "trainingInput": {
                "scaleTier": "BASIC",
                "packageUris": [str(package)],
                "pythonModule": "trainer.task",
                "region": region,
                "runtimeVersion": "2.11",
                "pythonVersion": "3.7",
                "args": list(args),
                "jobDir": str(self.data_dir / "storage" / "job-dirs" / "default-project" / job_id),
                **training_input,
            },
        }
        return self.api("POST", "/v1/projects/default-project/jobs", body)

    def job(self, job_id: str) -> dict:
        return self.api("GET", f"/v1/projects/default-project/jobs/{job_id}")

    def wait_state(self, job_id: str, states, timeout: float = 120) -> dict:
        states = {states} if isinstance(states, str) else set(states)
        return wait_for(
            lambda: (job := self.job(job_id))["state"] in states and job, timeout, 0.1, f"{job_id} to reach {states}"
        )

    def job_pk(self, job_id: str) -> int:
        return self.sql("SELECT id FROM jobs_job WHERE job_id = %s", job_id)[0][0]

    def log(self, job_id: str) -> list[tuple[str, int, str]]:
        return self.sql(
            "SELECT task_name, seq, message FROM jobs_logline WHERE job_id = %s ORDER BY id", self.job_pk(job_id)
        )

    def log_text(self, job_id: str) -> str:
        return "\n".join(f"{task}: {message}" for task, _, message in self.log(job_id))

    def replicas(self, job_id: str) -> list[dict]:
        rows = self.sql(
            "SELECT r.label, r.state, r.restarts, r.attempt, r.port, r.devices, r.pid, w.pid, r.host "
            "FROM jobs_replica r LEFT JOIN jobs_worker w ON w.id = r.worker_id "
            "WHERE r.job_id = %s ORDER BY r.id",
            self.job_pk(job_id),
        )
        keys = ("label", "state", "restarts", "attempt", "port", "devices", "pid", "worker_pid", "host")
        return [dict(zip(keys, row, strict=True)) for row in rows]

    def release(self, job_id: str) -> None:
        job_dir = self.data_dir / "storage" / "job-dirs" / "default-project" / job_id
        job_dir.mkdir(parents=True, exist_ok=True)
        (job_dir / "release").write_text("go")

    def stop(self) -> None:
        for process in self.processes:
            if process.poll() is None:
                process.send_signal(signal.SIGTERM)
        for process in self.processes:
            try:
                process.wait(30)
            except subprocess.TimeoutExpired:
                process.kill()


def alive(pid: int | None) -> bool:
    if not pid:
        return False
    try:
        state = Path(f"/proc/{pid}/stat").read_text().split(") ")[1].split()[0]
    except (OSError, IndexError):
        return False
    return state != "Z"
