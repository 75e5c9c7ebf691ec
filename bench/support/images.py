"""Container images for the tests and the benchmarks, made on the spot from Debian's busybox-static
(no registry, no network).

An image is a busybox root with a shell script as its entrypoint: enough for a trainer that prints
its environment and arguments, writes to its job dir and a hypertune file, traps SIGTERM, or
fails with a code. ``podman import`` makes one in a fraction of a second; each is tagged by the
hash of its script, so a test session builds it once.
"""

from __future__ import annotations

import hashlib
import io
import os
import shutil
import tarfile
import textwrap

APPLETS = (
    "sh",
    "cat",
    "echo",
    "env",
    "sleep",
    "ls",
    "id",
    "printf",
    "mkdir",
    "date",
    "grep",
    "wc",
    "true",
    "false",
    "nc",
    "dirname",
)


def busybox() -> str | None:
    path = shutil.which("busybox") or ("/bin/busybox" if os.path.exists("/bin/busybox") else None)
    return path


def root_archive(script: str, applets: tuple[str, ...] = APPLETS) -> bytes:
    """A tar of a busybox root whose /trainer.sh is ``script``."""
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w") as archive:
        for folder in ("bin", "tmp", "etc"):
            info = tarfile.TarInfo(folder)
            info.type, info.mode = tarfile.DIRTYPE, 0o1777 if folder == "tmp" else 0o755
            archive.addfile(info)
        archive.add(busybox(), "bin/busybox")
        for applet in applets:
            info = tarfile.TarInfo(f"bin/{applet}")
            info.type, info.linkname = tarfile.SYMTYPE, "busybox"
            archive.addfile(info)
        body = ("#!/bin/sh\n" + textwrap.dedent(script).lstrip()).encode()
        info = tarfile.TarInfo("trainer.sh")
        info.size, info.mode = len(body), 0o755
        archive.addfile(info, io.BytesIO(body))
    return buffer.getvalue()


def make_image(engine, script: str, name: str | None = None) -> str:
    """An image whose entrypoint runs ``script`` with the container's arguments; its name."""
    digest = hashlib.sha256(script.encode()).hexdigest()[:12]
    name = name or f"localhost/aic-test/busybox:{digest}"
    if engine.inspect_image(name) is None:
        engine.call("import", "--change", 'ENTRYPOINT ["/trainer.sh"]', "-", name, input=root_archive(script))
    return name


def saved_archive(engine, image: str, path, *, format: str = "docker-archive") -> None:
    """``podman save`` of ``image`` to ``path`` (docker-archive or oci-archive)."""
    engine.call("save", "--format", format, "--output", str(path), image, timeout=120)


def make_root_image(engine, script: str) -> str:
    """An image laid out as public AI Platform samples are: its code under ``/root`` (mode 0700,
    root's), ``WORKDIR /root`` and ``ENTRYPOINT ["sh", "trainer/task.sh"]``; its name."""
    digest = hashlib.sha256(("root:" + script).encode()).hexdigest()[:12]
    name = f"localhost/aic-test/root-workdir:{digest}"
    if engine.inspect_image(name) is not None:
        return name
    buffer = io.BytesIO(root_archive("exit 0\n", applets=(*APPLETS, "touch", "stat", "cut", "head")))
    with tarfile.open(fileobj=buffer, mode="a") as archive:
        for folder, mode in (("root", 0o700), ("root/trainer", 0o755)):
            info = tarfile.TarInfo(folder)
            info.type, info.mode = tarfile.DIRTYPE, mode
            archive.addfile(info)
        body = textwrap.dedent(script).lstrip().encode()
        info = tarfile.TarInfo("root/trainer/task.sh")
        info.size, info.mode = len(body), 0o644
        archive.addfile(info, io.BytesIO(body))
    changes = ["--change", "WORKDIR /root", "--change", 'ENTRYPOINT ["sh", "trainer/task.sh"]']
    engine.call("import", *changes, "-", name, input=buffer.getvalue())
    return name
