"""In Chromium: choosing "Custom container" on the job form hides the package and runtime
fields (and does not send them), shows the image fields, follows the choice in the live command,
and the job it submits runs the image."""

from __future__ import annotations

import re

import pytest
from playwright.sync_api import expect

from bench.support.images import make_image
from tests.helpers.browser import axe_violations, login
from tests.helpers.images import require_engine

pytestmark = pytest.mark.browser
JOBS = "/projects/default-project/jobs/"


def test_a_custom_container_chosen_on_the_form_hides_the_package_and_runs_the_image(page, console):
    image = make_image(require_engine(), "echo hello from $0 $*\n")
    login(page)
    page.goto(f"{JOBS}new/")
    expect(page.get_by_label("Master image")).to_be_hidden()
    page.get_by_role("radio", name="Custom container").check()
    for hidden in ("Python module", "Package URIs", "Runtime version", "Python version"):
        expect(page.get_by_label(hidden)).to_be_hidden()
        expect(page.get_by_label(hidden)).to_be_disabled()
    expect(page.get_by_label("Workers: image")).to_be_visible()
    assert axe_violations(page) == []

    page.get_by_label("Job ID").fill("form_box")
    page.get_by_label("Master image").fill(image)
    page.get_by_label("Arguments").fill("--epochs 3")
    page.get_by_label(re.compile("useChiefInTfConfig")).check()
    command = page.locator("#form-cli")
    expect(command).to_contain_text(f"--master-image-uri {image}")
    expect(command).to_contain_text("--use-chief-in-tf-config true")
    expect(command).not_to_contain_text("--module-name")
    page.get_by_role("button", name="Submit job").click()
    page.wait_for_url(f"**{JOBS}form_box/", timeout=60_000)
    job = console.wait("form_box")
    assert job["state"] == "SUCCEEDED", job
    ti = job["trainingInput"]
    assert ti["masterConfig"] == {"imageUri": image} and ti["useChiefInTfConfig"] is True
    assert not {"packageUris", "pythonModule", "runtimeVersion", "pythonVersion"} & set(ti)
    expect(page.locator("[data-container-images]")).to_contain_text(image)

    page.goto(f"{JOBS}new/")
    page.get_by_role("radio", name="Custom container").check()
    page.get_by_role("radio", name="Python package").check()
    expect(page.get_by_label("Python module")).to_be_enabled()
    expect(page.get_by_label("Master image")).to_be_hidden()
