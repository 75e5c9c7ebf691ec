"""What a shell in the browser (web access) costs a keystroke, against a real ``aiconsole up``.

A job submitted with ``enableWebAccess`` runs a trainer that waits; a client, signed in as a browser
is, opens the shell's WebSocket and types one character at a time, stopping the clock when the
character comes back on the screen (the terminal's echo). The same is measured on a terminal of
our own (a pty) running the same shell on the same machine, the rounds alternated, so the ratio
says what the console's path adds: the browser's socket, the web process, the worker's shell
host and back.

1. Keystroke → echo: p50 and p90 in ms, through the console and on a direct pty, and their ratio.
2. Socket opened → the shell's prompt shown: the time to a usable shell.

Run: ``.venv/bin/python bench/webshell.py [--keys N] [--rounds N]`` (about a minute once the
runtime is built; the first run on a machine builds it, minutes).
"""

from __future__ import annotations

import argparse
import contextlib
import http.cookiejar
import json
import os
import pty
import re
import select
import statistics
import subprocess
import sys
import time
import urllib.parse
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench.common import add_env_dir_flag, env_cache, say, scratch, wait_until  # noqa: E402
from bench.run import PROJECT, Console, percentile  # noqa: E402
from bench.support.packages import build_package  # noqa: E402

# Runs until its shell touches ``release`` in its working folder (ten minutes at most).
WAITING_TASK = """\
import os, time
deadline = time.time() + 600
while not os.path.exists("release") and time.time() < deadline:
    time.sleep(0.1)
"""
KEYS = "abcdefghijklmnopqrstuvwxyz"
PROMPT = re.compile(rb"[$#] $")  # bash's \$: # for root


def signed_in(console: Console) -> str:
    """The admin's session cookie, from the console's own sign-in form."""
    jar = http.cookiejar.CookieJar()
    opener = urllib.request.build_opener(urllib.request.HTTPCookieProcessor(jar))
    opener.open(console.url + "/login/", timeout=30).read()
    csrf = next(cookie.value for cookie in jar if cookie.name == "csrftoken")
    form = urllib.parse.urlencode(
        {"username": "admin", "password": console.env["AICONSOLE_ADMIN_PASSWORD"], "csrfmiddlewaretoken": csrf}
    ).encode()
    request = urllib.request.Request(console.url + "/login/", data=form, headers={"Referer": console.url + "/login/"})
    opener.open(request, timeout=30).read()
    return next(cookie.value for cookie in jar if cookie.name == "sessionid")


class ConsoleShell:
    """The shell's WebSocket, as the page's terminal uses it."""

    def __init__(self, console: Console, job_id: str, cookie: str):
        from websockets.sync.client import connect

        path = f"/ws/projects/{PROJECT}/jobs/{job_id}/shell/master-replica-0/?rows=24&cols=80"
        started = time.monotonic()
        self.opened = contextlib.ExitStack()
        self.socket = self.opened.enter_context(
            connect(
                console.url.replace("http://", "ws://") + path,
                origin=console.url,
                additional_headers={"Cookie": f"sessionid={cookie}"},
                open_timeout=30,
            )
        )
        self.screen = b""
        self.until(lambda: PROMPT.search(self.screen))
        self.to_prompt_ms = (time.monotonic() - started) * 1000

    def send(self, text: str) -> None:
        self.socket.send(json.dumps({"type": "input", "data": text}))

    def until(self, seen, timeout: float = 30) -> None:
        deadline = time.monotonic() + timeout
        while not seen():
            message = self.socket.recv(timeout=max(0.01, deadline - time.monotonic()))
            if isinstance(message, bytes):
                self.screen += message
            elif json.loads(message).get("type") in ("exit", "error"):
                raise SystemExit(f"the shell ended: {message}")

    def close(self) -> None:
        self.opened.close()


class DirectShell:
    """The same shell on a pty of our own: what typing costs without the console in between."""

    def __init__(self, folder: Path):
        started = time.monotonic()
        self.master, slave = pty.openpty()
        env = {"PATH": os.defpath, "HOME": str(folder), "TERM": "xterm-256color", "PS1": r"\u@direct:\w\$ "}
        self.process = subprocess.Popen(
            ["/bin/bash", "--norc", "-i"], stdin=slave, stdout=slave, stderr=slave, cwd=folder, env=env,
            start_new_session=True,
        )  # fmt: skip
        os.close(slave)
        self.screen = b""
        self.until(lambda: PROMPT.search(self.screen))
        self.to_prompt_ms = (time.monotonic() - started) * 1000

    def send(self, text: str) -> None:
        os.write(self.master, text.encode())

    def until(self, seen, timeout: float = 30) -> None:
        deadline = time.monotonic() + timeout
        while not seen():
            if not select.select([self.master], [], [], max(0.01, deadline - time.monotonic()))[0]:
                raise SystemExit("the direct shell did not answer")
            self.screen += os.read(self.master, 65536)

    def close(self) -> None:
        self.process.kill()
        self.process.wait()
        os.close(self.master)


def keystrokes(shell, count: int) -> list[float]:
    """Milliseconds from each key sent to its echo on the screen; the line is cleared after."""
    times = []
    for index in range(count):
        key = KEYS[index % len(KEYS)]
        before = len(shell.screen)
        started = time.monotonic()
        shell.send(key)
        shell.until(lambda key=key, before=before: key.encode() in shell.screen[before:])
        times.append((time.monotonic() - started) * 1000)
    shell.send("\x15")  # Ctrl+U: the typed line goes
    return times


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--keys", type=int, default=200, help="keystrokes per round (default 200)")
    parser.add_argument("--rounds", type=int, default=5, help="alternated rounds of each (default 5)")
    add_env_dir_flag(parser)
    args = parser.parse_args()

    with scratch("aiconsole-bench-") as folder:
        console = Console(folder / "data", env_cache(args.env_dir))
        try:
            storage = folder / "data" / "storage"
            package = build_package(storage / "packages" / PROJECT / "webshell", {"trainer/task.py": WAITING_TASK})
            console.call(
                "POST",
                f"/v1/projects/{PROJECT}/jobs",
                {
                    "jobId": "webshell",
                    "trainingInput": {
                        "scaleTier": "BASIC",
                        "packageUris": [str(package)],
                        "pythonModule": "trainer.task",
                        "region": "us-central1",
                        "runtimeVersion": "2.11",
                        "enableWebAccess": True,
                    },
                },
            )
            say("waiting for the replica's shell (a first run builds the runtime: minutes)")
            wait_until(
                lambda: (
                    console.call("GET", f"/v1/projects/{PROJECT}/jobs/webshell")
                    .get("trainingOutput", {})
                    .get("webAccessUris")
                ),
                900,
                "the job's webAccessUris",
                0.2,
            )
            cookie = signed_in(console)
            home = folder / "direct"
            home.mkdir()
            measured: dict[str, list[float]] = {"console": [], "direct": []}
            to_prompt: dict[str, list[float]] = {"console": [], "direct": []}
            for index in range(args.rounds):
                order = ("console", "direct") if index % 2 == 0 else ("direct", "console")
                for kind in order:
                    shell = ConsoleShell(console, "webshell", cookie) if kind == "console" else DirectShell(home)
                    try:
                        to_prompt[kind].append(shell.to_prompt_ms)
                        measured[kind] += keystrokes(shell, args.keys)
                    finally:
                        shell.close()
                say(f"round {index + 1} of {args.rounds} done")
            last = ConsoleShell(console, "webshell", cookie)
            last.send("touch release\n")  # the trainer ends; its shell with it
            last.close()
            console.wait("webshell")
        finally:
            console.stop()

    print(f"Keystroke → echo, {len(measured['console'])} keys each, {args.rounds} alternated rounds:")
    for kind in ("console", "direct"):
        values = measured[kind]
        print(f"  {kind:8s} p50 {statistics.median(values):7.2f} ms   p90 {percentile(values, 0.9):7.2f} ms")
    p50 = statistics.median(measured["console"]) / statistics.median(measured["direct"])
    p90 = percentile(measured["console"], 0.9) / percentile(measured["direct"], 0.9)
    print(
        f"Socket opened → prompt: console {statistics.median(to_prompt['console']):.0f} ms, "
        f"direct pty {statistics.median(to_prompt['direct']):.0f} ms (medians)"
    )
    print(f"ratio console / direct pty: p50 {p50:.2f}, p90 {p90:.2f}")


if __name__ == "__main__":
    main()
