"""The process that runs a replica opens a shell only for a token the console signed, once, in
time; the shell is a real one on a pty, and it ends when its replica does."""

from __future__ import annotations

import json
import os
import re
import socket
import threading
import time

import pytest
from django.core import signing

from jobs.webaccess import protocol
from jobs.webaccess.host import WATCH_SECONDS, Offer, ShellHost

pytestmark = pytest.mark.slow  # starts servers and processes: left out of the fast lane


@pytest.fixture
def replica(tmp_path):
    """A host offering shells into a stand-in replica (replica 7) that runs until told."""
    host = ShellHost("127.0.0.1")
    running = threading.Event()
    running.set()
    env = {"PATH": os.defpath, "PS1": "$ ", "HOME": str(tmp_path)}
    host.offer(Offer(7, "master-replica-0", lambda: (["/bin/sh", "-i"], tmp_path, env), running.is_set))
    yield host, running
    host.close()


def handshake(port: int, token: str) -> tuple[socket.socket, dict | None]:
    connection = socket.create_connection(("127.0.0.1", port), timeout=10)
    connection.sendall(json.dumps({"token": token, "rows": 24, "cols": 80}).encode() + b"\n")
    line = b""
    while not line.endswith(b"\n"):
        chunk = connection.recv(1)
        if not chunk:
            return connection, None  # closed without a word
        line += chunk
    return connection, json.loads(line)


def read_until(connection: socket.socket, predicate, timeout: float = 20) -> tuple[str, list[dict]]:
    """The shell's output and what the host said, until ``predicate(output, said)``."""
    output, said, deadline = b"", [], time.monotonic() + timeout
    buffer = b""
    while not predicate(output.decode("utf-8", "replace"), said):
        if time.monotonic() > deadline:
            raise AssertionError(f"Timed out; output {output[-500:]!r}, said {said}")
        connection.settimeout(max(0.1, deadline - time.monotonic()))
        chunk = connection.recv(65536)
        if not chunk:
            said.append({"closed": True})
            break
        buffer += chunk
        while len(buffer) >= protocol.HEADER.size:
            kind, length = protocol.HEADER.unpack(buffer[: protocol.HEADER.size])
            if len(buffer) < protocol.HEADER.size + length:
                break
            payload = buffer[protocol.HEADER.size : protocol.HEADER.size + length]
            buffer = buffer[protocol.HEADER.size + length :]
            if kind == protocol.OUTPUT:
                output += payload
            else:
                said.append(json.loads(payload))
    return output.decode("utf-8", "replace"), said


def test_a_token_of_another_key_gets_no_shell_and_not_a_word(replica):
    host, _ = replica
    forged = signing.dumps({"replica": 7, "session": 1}, salt=protocol.SALT, key="not the console's key")
    connection, answer = handshake(host.port, forged)
    assert answer is None
    connection.close()


def test_a_token_past_its_seconds_gets_no_shell(replica, monkeypatch):
    host, _ = replica
    token = protocol.token(7, 2)
    monkeypatch.setattr(protocol, "TOKEN_SECONDS", -1)
    connection, answer = handshake(host.port, token)
    assert answer is None
    connection.close()


def test_a_signed_token_opens_a_shell_once_and_the_shell_ends_with_its_replica(replica):
    host, running = replica
    token = protocol.token(7, 3)
    connection, answer = handshake(host.port, token)
    assert answer == {"ok": True}
    connection.sendall(protocol.frame(protocol.INPUT, b"echo $((2+3))-ok\n"))
    read_until(connection, lambda output, said: "5-ok" in output)

    again, answer = handshake(host.port, token)  # the same token, a second time
    assert "used already" in answer["error"]
    again.close()

    running.clear()  # the replica ends: its shell ends with it, and says why
    _, said = read_until(connection, lambda output, said: said)
    assert "master-replica-0 has ended" in said[0]["reason"]
    connection.close()


def test_a_replica_it_does_not_run_gets_no_shell(replica):
    host, _ = replica
    connection, answer = handshake(host.port, protocol.token(8, 4))
    assert "runs no more here" in answer["error"]
    connection.close()


def test_a_shell_whose_browser_went_away_leaves_no_process_behind(tmp_path):
    """The package path: the shell under a reaper of its own (``--tty``); closing the connection
    stops the reaper, the shell and what the shell started."""
    from jobs.executor.replicas import SHELL_STOP_GRACE, reaped

    host = ShellHost("127.0.0.1")
    env = {"PATH": os.defpath, "PS1": "$ ", "HOME": str(tmp_path)}
    argv = reaped(["/bin/sh", "-i"], SHELL_STOP_GRACE, ["--tty"])
    host.offer(Offer(9, "worker-replica-0", lambda: (argv, tmp_path, env), lambda: True))
    try:
        connection, answer = handshake(host.port, protocol.token(9, 5))
        assert answer == {"ok": True}
        connection.sendall(protocol.frame(protocol.INPUT, b"sleep 300 & echo pids-$$-$!-end\n"))
        said = re.compile(r"pids-(\d+)-(\d+)-end")
        output, _ = read_until(connection, lambda output, _: said.search(output))
        shell, child = (int(n) for n in said.search(output).groups())
        connection.close()  # the browser went away

        def gone(pid: int) -> bool:
            try:
                os.kill(pid, 0)
            except ProcessLookupError:
                return True
            try:
                return open(f"/proc/{pid}/stat").read().split()[2] == "Z"  # ended, not yet reaped
            except FileNotFoundError:
                return True  # reaped in between

        deadline = time.monotonic() + 15
        while not (gone(shell) and gone(child)):
            assert time.monotonic() < deadline, "the shell or what it started outlived its connection"
            time.sleep(0.05)
    finally:
        host.close()


def test_a_replica_that_may_be_held_keeps_its_shell_until_its_owner_says_whether_it_is(tmp_path):
    """Its end is seen here before the process running it has decided the hold: the shell open
    meanwhile goes on, and a new one still opens; a hold keeps both, and its release ends them."""
    host = ShellHost("127.0.0.1")
    running = threading.Event()
    running.set()
    env = {"PATH": os.defpath, "PS1": "$ ", "HOME": str(tmp_path)}
    host.offer(Offer(11, "master-replica-0", lambda: (["/bin/sh", "-i"], tmp_path, env), running.is_set, True))
    try:
        first, answer = handshake(host.port, protocol.token(11, 21))
        assert answer == {"ok": True}
        running.clear()  # it failed; nobody has said yet whether it is held
        deadline = time.monotonic() + 10
        while host.offers[11].ended_at is None:  # until the host's watch has seen the end
            assert time.monotonic() < deadline, "the watch never saw the replica end"
            time.sleep(WATCH_SECONDS / 5)
        first.sendall(protocol.frame(protocol.INPUT, b"echo $((4+4))-still\n"))
        read_until(first, lambda output, said: "8-still" in output)
        second, answer = handshake(host.port, protocol.token(11, 22))
        assert answer == {"ok": True}
        second.close()

        assert host.hold(11, 60)
        first.sendall(protocol.frame(protocol.INPUT, b"echo $((5+5))-held\n"))
        read_until(first, lambda output, said: "10-held" in output)

        host.release(11)  # the hold is over
        _, said = read_until(first, lambda output, said: said)
        assert "master-replica-0 has ended" in said[0]["reason"]
        first.close()
        third, answer = handshake(host.port, protocol.token(11, 23))
        assert "runs no more here" in answer["error"]
        third.close()
    finally:
        host.close()


def test_a_replica_that_is_not_held_ends_its_shell_as_soon_as_that_is_said(tmp_path):
    host = ShellHost("127.0.0.1")
    env = {"PATH": os.defpath, "PS1": "$ ", "HOME": str(tmp_path)}
    host.offer(Offer(12, "worker-replica-0", lambda: (["/bin/sh", "-i"], tmp_path, env), lambda: False, True))
    try:
        connection, answer = handshake(host.port, protocol.token(12, 24))
        assert answer == {"ok": True}
        host.release(12)
        _, said = read_until(connection, lambda output, said: said)
        assert "worker-replica-0 has ended" in said[0]["reason"]
        connection.close()
    finally:
        host.close()
