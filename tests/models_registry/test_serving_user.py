"""A root console serves models as the trainer user: loading a model runs its code (a pickle is
code), which must reach none of the console's secrets (aiconsole.trainer_user)."""

from __future__ import annotations

import os
import pickle
import pwd

import pytest
from django.conf import settings

from models_registry import services
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


def test_a_deployed_model_loads_as_the_trainer_user_and_reaches_no_secret(serving, census, admin):
    secret_key = settings.DATA_DIR / "secret_key"
    secret_key.write_text("a-key-only-the-console-may-read")
    folder = settings.STORAGE_DIR / "models" / "project-a" / "hostile"
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "model.pkl").write_bytes(pickle.dumps(_Hostile(
        HOSTILE_MODEL.replace("CONSOLE_PID", str(os.getpid())).replace("SECRET_PATH", str(secret_key)))))

    version, _ = deploy(census, "hostile", str(folder), admin, framework="SCIKIT_LEARN")

    account = pwd.getpwnam(settings.TRAINER_USER)
    assert f"uid={account.pw_uid} environ=refused-PermissionError secret=refused-PermissionError" in \
        version.error_message
