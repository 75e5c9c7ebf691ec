"""Running the aiconsole CLI against a console, and the trainers it submits."""

from __future__ import annotations

import json
import textwrap
from dataclasses import dataclass
from pathlib import Path

from bench.support.waiting import wait_for
from tests.helpers.console import Server

TERMINAL = {"SUCCEEDED", "FAILED", "CANCELLED"}


@dataclass
class Console:
    server: Server
    token: str

    @property
    def url(self) -> str:
        return self.server.url

    @property
    def storage(self) -> Path:
        return self.server.data_dir / "storage"

    def job(self, job_id: str) -> dict:
        status, body = self.server.api("GET", f"/v1/projects/default-project/jobs/{job_id}", self.token)
        return body if status == 200 else {"status": status, **body}

    def wait(self, job_id: str, states=TERMINAL, timeout: float = 240) -> dict:
        wait_for(
            lambda: self.job(job_id).get("state") in states,
            timeout,
            interval=0.2,
            message=f"job {job_id} to reach {sorted(states)}",
        )
        return self.job(job_id)

    def uploaded(self) -> list[Path]:
        return sorted((self.storage / "packages").rglob("*.*")) if (self.storage / "packages").exists() else []


@dataclass
class Result:
    code: int
    out: str
    err: str


TRAINER = """\
import json, os, sys
job_dir = sys.argv[sys.argv.index("--job-dir") + 1] if "--job-dir" in sys.argv else None
print("trainer started", flush=True)
print("warning: this goes to stderr", file=sys.stderr, flush=True)
if job_dir:
    os.makedirs(job_dir, exist_ok=True)
    with open(os.path.join(job_dir, "seen.json"), "w") as handle:
        json.dump({"argv": sys.argv[1:], "tf_config": json.loads(os.environ.get("TF_CONFIG", "{}"))}, handle)
if "--fail" in sys.argv:
    raise SystemExit("asked to fail")
if "--sleep" in sys.argv:
    import time
    time.sleep(float(sys.argv[sys.argv.index("--sleep") + 1]))
print("trainer done", flush=True)
"""


def write_trainer(root: Path, source: str = TRAINER, *, package: str = "trainer") -> Path:
    """A plain package folder ``root/package`` with ``task.py``; returns the folder."""
    folder = root / package
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "__init__.py").write_text("")
    (folder / "task.py").write_text(textwrap.dedent(source))
    return folder


def read_seen(job_dir: Path) -> dict:
    return json.loads((job_dir / "seen.json").read_text())
