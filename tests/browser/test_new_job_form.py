"""The New job form in Chromium: it starts on the newest runtime and its default Python, suggests a
job dir named after the job that follows the id until the user edits it, and picks a package
uploaded before instead of asking for it again."""

from __future__ import annotations

import json
import re
import urllib.request
from pathlib import Path

import pytest
from playwright.sync_api import expect

from bench.support import trainers
from jobs import runtimes
from tests.browser.test_jobs_list_phone_keyboard import OVERFLOW, PHONE
from tests.helpers.browser import JOBS, axe_violations

pytestmark = pytest.mark.browser
USER, PASSWORD = "pia", "pia-password-1"


@pytest.fixture(scope="module")
def developer(console):
    """A developer with no job yet: her job dirs start in the project's own folder."""
    console.add_user(USER, PASSWORD, role="roles/ml.developer")
    return USER


def sign_in(page) -> None:
    page.goto("/login/")
    page.get_by_label("Username").fill(USER)
    page.get_by_label("Password").fill(PASSWORD)
    page.get_by_role("button", name="Sign in").click()
    page.wait_for_url(re.compile(r"/projects/"))


def uploaded(console, folder: Path, name: str) -> dict:
    """A trainer package uploaded through the REST API, as `aiconsole jobs submit` uploads one."""
    package = trainers.package(folder, trainers.STREAMING_TASK, name=name)
    request = urllib.request.Request(
        f"{console.url}/upload/v1/projects/default-project/packages?name={package.name}",
        data=package.read_bytes(),
        method="POST",
        headers={"Authorization": f"Bearer {console.token}", "Content-Type": "application/octet-stream"},
    )
    with urllib.request.urlopen(request, timeout=30) as answer:
        return json.loads(answer.read())


def ref(package: dict) -> str:
    path = Path(package["uri"])
    return f"{path.parent.name}/{path.name}"


def test_a_new_job_on_the_newest_runtime_in_a_job_dir_of_its_own_with_a_package_uploaded_before(
    page, console, developer, tmp_path
):
    package = uploaded(console, tmp_path, "pickme")
    sign_in(page)
    page.goto(f"{JOBS}new/")

    runtime, python = page.get_by_label("Runtime version"), page.get_by_label("Python version")
    expect(runtime).to_have_value("current")
    expect(python).to_have_value("")
    default = runtimes.default_python(runtimes.RUNTIMES["current"])
    expect(python.locator("option").first).to_have_text(f"{default} (the runtime's default)")
    expect(page.locator("#form-cli")).to_contain_text("--runtime-version current")

    job_id, job_dir = page.get_by_label("Job ID"), page.get_by_label("Job directory")
    folder = str(console.storage / "job-dirs" / "default-project")
    expect(job_dir).to_have_value(f"{folder}/{job_id.input_value()}")
    page.get_by_label("Python module").fill("census.task")  # the suggested id follows the module…
    expect(job_id).to_have_value(re.compile(r"^census_\d{8}_\d{6}"))
    expect(job_dir).to_have_value(f"{folder}/{job_id.input_value()}")  # …and the job dir the id
    job_id.fill("picked_run")
    expect(job_dir).to_have_value(f"{folder}/picked_run")
    expect(page.locator("#form-cli")).to_contain_text(f"--job-dir {folder}/picked_run")
    job_dir.fill(f"{folder}/picked_by_hand")  # once the user writes it, it stays as written
    job_id.fill("picked_job")
    expect(job_dir).to_have_value(f"{folder}/picked_by_hand")
    page.get_by_label("Python module").fill("trainer.task")

    picker = page.get_by_label("Or a package uploaded before")
    expect(picker.locator(f'option[value="{ref(package)}"]')).to_contain_text("pickme-0.1.tar.gz (")
    picker.select_option(ref(package))
    expect(page.locator("#form-cli")).to_contain_text("--packages pickme-0.1.tar.gz")
    assert str(console.storage / "packages") not in page.content()  # named, never by its path
    for scheme in ("light", "dark"):
        page.emulate_media(color_scheme=scheme)
        assert axe_violations(page) == []
    page.set_viewport_size(PHONE)
    assert page.evaluate(OVERFLOW)["loose"] == []

    runtime.select_option("2.11")  # the stack the session builds (current's is large)
    page.get_by_role("button", name="Submit job").click()
    page.wait_for_url(f"**{JOBS}picked_job/", timeout=60_000)
    expect(page.locator("[data-packages]")).to_have_text(re.compile(r"^\s*pickme-0\.1\.tar\.gz \(uploaded\)\s*$"))
    job = console.wait("picked_job")
    assert job["state"] == "SUCCEEDED", job
    assert job["trainingInput"]["packageUris"] == [package["uri"]]  # the same file, not a new upload
    assert job["trainingInput"]["jobDir"] == f"{folder}/picked_by_hand"


def test_a_picked_package_gone_before_submit_is_refused_at_its_field(page, console, developer, tmp_path):
    package = uploaded(console, tmp_path, "vanishing")
    sign_in(page)
    page.goto(f"{JOBS}new/")
    page.get_by_label("Job ID").fill("never_runs")
    page.get_by_label("Or a package uploaded before").select_option(ref(package))
    Path(package["uri"]).unlink()  # removed meanwhile (by an admin tidying the storage)

    page.get_by_role("button", name="Submit job").click()

    summary = page.locator("[data-error-summary]")
    expect(summary).to_be_focused()
    link = summary.get_by_role("link", name=re.compile(r"^Or a package uploaded before: "))
    expect(link).to_contain_text("“vanishing-0.1.tar.gz” is no longer stored in this project")
    link.click()
    expect(page.get_by_label("Or a package uploaded before")).to_be_focused()
    expect(page.get_by_label("Job ID")).to_have_value("never_runs")  # nothing typed is lost
    assert axe_violations(page) == []
