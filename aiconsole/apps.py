import os
import stat

from django.apps import AppConfig
from django.db.backends.signals import connection_created


def keep_sqlite_private(sender, connection, **kwargs):
    """A SQLite database file holds every session: only the console's user may read it, whatever
    the umask of the process that created it (SQLite gives its -wal and -shm files the same mode)."""
    if connection.vendor != "sqlite":
        return
    name = str(connection.settings_dict["NAME"])
    if name == ":memory:" or name.startswith("file:"):
        return
    try:
        info = os.stat(name)
    except OSError:
        return
    if info.st_uid == os.geteuid() and stat.S_IMODE(info.st_mode) & 0o077:
        os.chmod(name, 0o600)


class AiconsoleConfig(AppConfig):
    name = "aiconsole"
    verbose_name = "AI Console core"

    def ready(self):
        from aiconsole import cloud_logging, signin  # noqa: F401 (its system check; the failed sign-in audit)

        connection_created.connect(keep_sqlite_private, dispatch_uid="aiconsole-private-sqlite")
