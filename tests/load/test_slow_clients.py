"""Clients that hold connections without using them (a request's head sent a byte at a time, an
answer never read): the console hangs up on them after AICONSOLE_CLIENT_TIMEOUT_SECONDS, and while
they hang on it still accepts and answers everyone else, even started with systemd's small limit
on open files."""

from __future__ import annotations

import contextlib
import fcntl
import os
import socket
import sqlite3
import struct
import termios
import threading

import pytest

from bench.support.waiting import wait_for
from tests.helpers.memory import PeakRss

SLOW_HEADS = 400  # more than the console's 256 open files at start
NON_READERS = 5

# A log of 10 MB: its download is an answer that outlasts every buffer between the two ends.
BIG_LOG = """
line = "x" * 100
for number in range(100_000):
    print(number, line)
"""


def sockets_held(pid: int) -> int:
    """The connections (and listening sockets) the process holds open."""
    folder = f"/proc/{pid}/fd"
    held = 0
    for fd in os.listdir(folder):
        try:
            held += os.readlink(f"{folder}/{fd}").startswith("socket:")
        except OSError:
            continue  # closed while listed
    return held


@pytest.mark.executor
def test_slow_clients_are_hung_up_on_and_never_keep_other_users_out(live_console):
    console = live_console(nofile=256, AICONSOLE_CLIENT_TIMEOUT_SECONDS="3")
    console.submit("big_log", BIG_LOG)
    assert console.wait_state("big_log", {"SUCCEEDED", "FAILED", "CANCELLED"}) == "SUCCEEDED"
    web = console.processes()["web"]
    before = sockets_held(web)
    slow, readers, stop = [], [], threading.Event()
    try:
        for _ in range(SLOW_HEADS):
            client = socket.create_connection(("127.0.0.1", console.port), timeout=10)
            client.sendall(b"GET /v1/projects/default-project/jobs HTTP/1.1\r\nHost: 127.0.0.1\r\n")
            slow.append(client)
        for _ in range(NON_READERS):  # the big log's download each, read by no one
            client = socket.socket()
            client.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
            client.connect(("127.0.0.1", console.port))
            client.sendall(
                f"GET /projects/default-project/jobs/big_log/logs/download/ HTTP/1.1\r\n"
                f"Host: 127.0.0.1\r\nCookie: sessionid={console.cookie}\r\n\r\n".encode()
            )
            readers.append(client)

        def drip() -> None:  # a byte of head every half second: never finished, never idle
            while not stop.wait(0.5):
                for client in slow:
                    try:
                        client.send(b"X")
                    except OSError:
                        pass

        dripping = threading.Thread(target=drip, daemon=True)
        dripping.start()

        status, jobs = console.server.api("GET", "/v1/projects/default-project/jobs", console.token)
        assert status == 200, jobs  # answered while all of them hang on

        assert sockets_held(web) >= before + SLOW_HEADS  # all of them were let in
        wait_for(
            lambda: sockets_held(web) <= before + 5,
            60,
            interval=0.2,
            message="the console to hang up on the slow heads and the clients that read nothing",
        )
        status, _ = console.server.api("GET", "/v1/projects/default-project/jobs", console.token)
        assert status == 200
    finally:
        stop.set()
        for client in slow + readers:
            client.close()


def waiting(client: socket.socket) -> int:
    """Bytes of the answer that arrived and are not read yet."""
    return struct.unpack("i", fcntl.ioctl(client, termios.FIONREAD, b"\0\0\0\0"))[0]


def store_lines(console, job_id: str, count: int) -> None:
    """``count`` stored log lines for the job, written into the console's database as its log
    writer writes them (quicker than a trainer printing them)."""
    pk = console.job_pk(job_id)
    with contextlib.closing(sqlite3.connect(console.data_dir / "aiconsole.sqlite3", timeout=30)) as db, db:
        db.executemany(
            "INSERT INTO jobs_logline (job_id, task_name, trial_id, seq, stream, severity, message, time) "
            "VALUES (?, 'master-replica-0', '', ?, 'stdout', 'INFO', ?, '2026-01-01 00:00:00')",
            ((pk, seq, f"line {seq} " + "x" * 100) for seq in range(1000, 1000 + count)),
        )


@pytest.mark.executor
def test_a_big_log_downloaded_by_clients_that_read_slowly_costs_the_web_process_a_page_each(live_console):
    console = live_console(AICONSOLE_CLIENT_TIMEOUT_SECONDS="60")
    console.submit("huge_log", 'print("started")\n')
    assert console.wait_state("huge_log", {"SUCCEEDED", "FAILED", "CANCELLED"}) == "SUCCEEDED"
    store_lines(console, "huge_log", 1_000_000)  # 120 MB as text
    web = console.processes()["web"]
    readers = []
    try:
        with PeakRss(web) as peak:
            for _ in range(3):
                client = socket.socket()
                client.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
                client.connect(("127.0.0.1", console.port))
                client.sendall(
                    f"GET /projects/default-project/jobs/huge_log/logs/download/ HTTP/1.1\r\n"
                    f"Host: 127.0.0.1\r\nCookie: sessionid={console.cookie}\r\n\r\n".encode()
                )
                readers.append(client)
            # Each answer's body has begun. Unbounded, each download read the whole log into the web
            # process before its first byte: three had not begun after a minute.
            wait_for(
                lambda: all(waiting(client) > 2048 for client in readers),
                60,
                interval=0.1,
                message="the downloads to be sending",
            )
            status, _ = console.server.api("GET", "/v1/projects/default-project/jobs/huge_log", console.token)
    finally:
        for client in readers:
            client.close()

    assert status == 200
    assert peak.mb < 400, f"the web process reached {peak.mb:.0f} MB"
