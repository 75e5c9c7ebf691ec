"""Clients that hold connections without using them (a request's head sent a byte at a time, an
answer never read): the console hangs up on them after AICONSOLE_CLIENT_TIMEOUT_SECONDS, and while
they hang on it still accepts and answers everyone else, even started with systemd's small limit
on open files (issue 25)."""

from __future__ import annotations

import os
import socket
import threading

import pytest

from tests.helpers.waiting import wait_for

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
            client.sendall(f"GET /projects/default-project/jobs/big_log/logs/download/ HTTP/1.1\r\n"
                           f"Host: 127.0.0.1\r\nCookie: sessionid={console.cookie}\r\n\r\n".encode())
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
        wait_for(lambda: sockets_held(web) <= before + 5, 60, interval=0.2,
                 message="the console to hang up on the slow heads and the clients that read nothing")
        status, _ = console.server.api("GET", "/v1/projects/default-project/jobs", console.token)
        assert status == 200
    finally:
        stop.set()
        for client in slow + readers:
            client.close()
