"""``aiconsole images list|load|delete`` against a live ``aiconsole up`` (the CLI suite's shared
console), and ``aiconsole containers status`` on this machine."""

from __future__ import annotations

import contextlib
import gzip
import json
import uuid

import pytest

from bench.support.images import make_image, saved_archive
from jobs.containers import engine as engines
from tests.helpers.images import require_engine


@pytest.fixture
def engine():
    return require_engine()


@pytest.fixture
def made(engine):
    """Names this test put in the engine's store (the console shares it): all removed after."""
    names: list[str] = []
    yield names
    for name in names:
        with contextlib.suppress(engines.EngineError):  # deleted through the CLI already
            engine.call("rmi", "--force", name)


def test_an_image_is_loaded_listed_and_deleted_through_the_cli(cli, engine, made, tmp_path):
    image = make_image(engine, f"echo {uuid.uuid4().hex}\n")
    made.append(image)
    saved = tmp_path / "image.tar"
    saved_archive(engine, image, saved)
    archive = tmp_path / "image.tar.gz"
    archive.write_bytes(gzip.compress(saved.read_bytes()))
    name = f"gcr.io/default-project/cli-trainer-{uuid.uuid4().hex[:12]}:v1"
    made.append(name)

    loaded = cli("images", "load", str(archive), "--name", name)
    assert loaded.code == 0, loaded.err
    assert f"Loaded image [{name}]: jobs of default-project can run it." in loaded.err
    image_id = engine.inspect_image(name)["Id"]

    listing = cli("images", "list")
    assert listing.code == 0, listing.err
    header, row = listing.out.splitlines()
    assert header.split() == ["NAME", "IMAGE_ID", "SIZE", "LOADED_BY", "CREATED"]
    assert row.split()[:3] == [name, image_id[:12], row.split()[2]] and "MiB" in row and "admin" in row
    [described] = json.loads(cli("images", "list", "--format", "json").out)
    assert described["name"] == name and described["imageId"] == f"sha256:{image_id}"
    assert int(described["sizeBytes"]) == engine.inspect_image(name)["Size"]

    deleted = cli("images", "delete", name)
    assert deleted.code == 0 and f"Deleted image [{name}]." in deleted.err
    assert engine.inspect_image(name) is None
    assert "Listed 0 items." in cli("images", "list").err
    again = cli("images", "delete", name)
    assert again.code == 1 and "NOT_FOUND" in again.err


def test_the_cli_reports_what_is_wrong_with_a_load(cli, engine, tmp_path):
    not_archive = tmp_path / "notes.txt"
    not_archive.write_text("no image in here\n")
    refused = cli("images", "load", str(not_archive), "--name", "gcr.io/default-project/trainer:v1")
    assert refused.code == 1
    assert "INVALID_ARGUMENT" in refused.err and "  - file: The file is not an image archive" in refused.err

    missing = cli("images", "load", str(tmp_path / "absent.tar"), "--name", "gcr.io/default-project/trainer:v1")
    assert missing.code == 2 and "no such file" in missing.err


@pytest.mark.slow
def test_containers_status_says_which_engine_runs_containers(run_aiconsole, engine, tmp_path):
    status = run_aiconsole("--data-dir", str(tmp_path / "data"), "containers", "status")
    assert status.code == 0, status.err
    assert f"engine:           {engine.name} {engine.version}" in status.out
    assert "resource limits:  " in status.out and "GPUs:             " in status.out

    described = json.loads(run_aiconsole("--data-dir", str(tmp_path / "data"), "containers", "status", "--json").out)
    assert described["engine"] == engine.name and described["limitsEnforced"] is engine.limits
