"""A root console serves each model as its project's account: loading a model runs its code (a
pickle is code), which must reach none of the console's secrets, and no other project's code may
read, signal or debug the process that serves it (aiconsole.trainer_user)."""

from __future__ import annotations

import json
import os
import pickle
import pwd
import re
from pathlib import Path

import pytest
from django.conf import settings

from aiconsole.models import TrainerAccount
from bench.support.packages import build_package
from bench.support.waiting import wait_for
from jobs import services as jobs_services
from jobs.models import TERMINAL_STATES, Job
from models_registry import services
from tests.helpers.jobs import log_text
from tests.helpers.models import deploy

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="only a console running as root can switch users")


@pytest.fixture
def census(project, admin):
    return services.create_model(project, {"name": "census"}, actor=admin)


HOSTILE_MODEL = """
import os
report = ["uid=%d" % os.getuid()]
for name, path in (("environ", "/proc/CONSOLE_PID/environ"), ("secret", "SECRET_PATH")):
    try:
        open(path, "rb").read()
        report.append(name + "=READ")
    except OSError as error:
        report.append(name + "=refused-" + type(error).__name__)
raise RuntimeError(" ".join(report))
"""


class _Hostile:
    """Unpickling this runs HOSTILE_MODEL: a deployed model is code, as a pickle is."""

    def __init__(self, code: str):
        self.code = code

    def __reduce__(self):
        return (exec, (self.code,))


def test_a_deployed_model_loads_as_its_projects_account_and_reaches_no_secret(serving, census, admin, project):
    secret_key = settings.DATA_DIR / "secret_key"
    secret_key.write_text("a-key-only-the-console-may-read")
    folder = settings.STORAGE_DIR / "models" / "project-a" / "hostile"
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "model.pkl").write_bytes(
        pickle.dumps(
            _Hostile(HOSTILE_MODEL.replace("CONSOLE_PID", str(os.getpid())).replace("SECRET_PATH", str(secret_key)))
        )
    )

    version, _ = deploy(census, "hostile", str(folder), admin, framework="SCIKIT_LEARN")

    account = pwd.getpwuid(TrainerAccount.objects.get(project=project).uid)
    assert (
        f"uid={account.pw_uid} environ=refused-PermissionError secret=refused-PermissionError" in version.error_message
    )


# What the serving process imported from its environment (the preload: NumPy, SciPy, scikit-learn,
# XGBoost), each module said with whether its compiled bytecode is there for this account to read.
BYTECODE_MODEL = """
import os, sys
site = tuple(path for path in sys.path if path.endswith("site-packages"))
modules = compiled = 0
for module in list(sys.modules.values()):
    source = getattr(module, "__file__", None) or ""
    if source.startswith(site) and source.endswith(".py"):
        modules += 1
        compiled += os.access(getattr(module, "__cached__", None) or "", os.R_OK)
raise RuntimeError("modules=%d compiled=%d" % (modules, compiled))
"""


def test_a_serving_process_reads_its_libraries_bytecode_instead_of_compiling_them(serving, census, admin):
    """The project's account cannot write the shared environment: a module without bytecode built
    there was compiled from its source by every serving process, replica and TensorBoard."""
    folder = settings.STORAGE_DIR / "models" / "project-a" / "bytecode"
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "model.pkl").write_bytes(pickle.dumps(_Hostile(BYTECODE_MODEL)))

    version, _ = deploy(census, "bytecode", str(folder), admin, framework="SCIKIT_LEARN")

    modules, compiled = map(int, re.search(r"modules=(\d+) compiled=(\d+)", version.error_message).groups())
    assert modules > 500  # the preload's libraries, imported before the model loads
    assert compiled == modules


INTRUDER = """
import ctypes, json, os, sys
target = int(sys.argv[sys.argv.index("--pid") + 1])
report = {}
def attempt(name, action):
    try:
        action()
        report[name] = "done"
    except OSError as error:
        report[name] = "refused: %s" % type(error).__name__
def ptrace():
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.ptrace(16, target, 0, 0) != 0:  # PTRACE_ATTACH
        number = ctypes.get_errno()
        raise OSError(number, os.strerror(number))
    libc.ptrace(17, target, 0, 0)
attempt("environ", lambda: open("/proc/%d/environ" % target, "rb").read())
attempt("mem", lambda: open("/proc/%d/mem" % target, "rb").read(1))
attempt("signal", lambda: os.kill(target, 0))
attempt("ptrace", ptrace)
print("REPORT " + json.dumps(report))
"""


@pytest.mark.slow
def test_another_projects_trainer_cannot_read_signal_or_debug_a_serving_process(
    serving, executor, census, admin, project, trained, other_project, outsider, job_body
):
    version, _ = deploy(census, "v1", trained["sklearn"], admin)
    wait_for(lambda: serving.status(version.pk)["processes"] >= 1, 30, message="a serving process")
    target = serving.pools[version.pk].processes[0].pid
    assert Path(f"/proc/{target}").stat().st_uid == TrainerAccount.objects.get(project=project).uid

    package = build_package(
        settings.STORAGE_DIR / "test-packages" / "project-b" / "intruder", {"trainer/task.py": INTRUDER}
    )
    job = jobs_services.submit_job(
        other_project, job_body("intruder", package, args=["--pid", str(target)]), actor=outsider
    )
    wait_for(lambda: Job.objects.get(pk=job.pk).state in TERMINAL_STATES, 180, message="the intruder to finish")
    found = re.search(r"REPORT (.*)", log_text(job))
    assert found, log_text(job)
    refused = "refused: PermissionError"
    assert json.loads(found.group(1)) == {"environ": refused, "mem": refused, "signal": refused, "ptrace": refused}
