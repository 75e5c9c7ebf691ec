"""In Chromium: "Clone" from a job page, the machine descriptions, the live
ML-unit estimate, the tuning builder kept in sync with the YAML, the copyable command and REST
body, a 390 px phone, and axe in light and dark."""

from __future__ import annotations

import re

import pytest
import yaml
from playwright.sync_api import expect

from bench.support import trainers
from bench.support.packages import TASK_HEADER
from jobs import catalogue
from tests.browser.test_jobs_list_phone_keyboard import OVERFLOW, PHONE
from tests.helpers.browser import axe_violations, login

pytestmark = pytest.mark.browser
PROJECT = "/projects/default-project"
JOBS = f"{PROJECT}/jobs/"
QUICK_TASK = TASK_HEADER + "print('args', sys.argv[1:], flush=True)\n"


def units(page) -> float:
    return float(page.locator("[data-estimate-box] [data-units]").inner_text())


def choose_custom(page) -> None:
    page.get_by_role("radio", name=re.compile("^CUSTOM")).check()
    page.get_by_label("Master: machine type").select_option("n1-standard-4")
    page.get_by_label("Workers: machine type").select_option("n1-standard-4")
    page.get_by_label("Workers: count").fill("1")


def test_clone_a_finished_job_change_one_field_and_submit(page, console, tmp_path):
    sdist = trainers.package(tmp_path, QUICK_TASK, name="clonepkg")
    login(page)
    page.goto(f"{JOBS}new/")
    page.get_by_label("Job ID").fill("clone_source")
    page.get_by_label("Upload a trainer package").set_input_files(str(sdist))
    page.get_by_label("Runtime version").select_option("2.11")  # the stack the session builds (current's is large)
    page.get_by_label("Arguments").fill("--epochs 3 '--name=a b'")
    page.get_by_label("Labels").fill("team=ml")
    page.get_by_label("Job directory").fill(str(console.storage / "out" / "default-project" / "clone_source"))
    page.get_by_role("button", name="Submit job").click()
    page.wait_for_url(f"**{JOBS}clone_source/", timeout=60_000)
    source = console.wait("clone_source")
    assert source["state"] == "SUCCEEDED", source

    page.reload()
    page.get_by_role("link", name="Clone").click()
    page.wait_for_url(re.compile(r"/jobs/new/\?clone=clone_source$"))
    expect(page.locator("[data-cloned-from]")).to_contain_text("clone_source")
    job_id = page.get_by_label("Job ID").input_value()
    assert re.fullmatch(r"trainer_\d{8}_\d{6}(_\d+)?", job_id), job_id
    expect(page.locator("[data-kept-upload]")).to_contain_text(sdist.name)  # the package, by reference
    expect(page.get_by_label("Package URIs")).to_have_value("")
    expect(page.get_by_label("Arguments")).to_have_value("--epochs 3 '--name=a b'")
    expect(page.get_by_label("Labels")).to_have_value("team=ml")
    # A job dir of its own beside the original's: the clone's curves and checkpoints never mix with it.
    own_dir = str(console.storage / "out" / "default-project" / job_id)
    expect(page.get_by_label("Job directory")).to_have_value(own_dir)
    assert str(console.storage / "packages") not in page.content()  # no server path on the page

    page.get_by_label("Arguments").fill("--epochs 4 '--name=a b'")  # the one change
    page.get_by_role("button", name="Submit job").click()
    page.wait_for_url(f"**{JOBS}{job_id}/", timeout=60_000)
    clone = console.wait(job_id)
    assert clone["state"] == "SUCCEEDED", clone
    expected = {**source["trainingInput"], "args": ["--epochs", "4", "--name=a b"], "jobDir": own_dir}
    assert clone["trainingInput"] == expected
    assert clone["trainingInput"]["packageUris"] == source["trainingInput"]["packageUris"]
    assert clone["labels"] == {"team": "ml"}


def test_the_custom_pickers_describe_each_machine(page, console):
    login(page)
    page.goto(f"{JOBS}new/")
    page.get_by_role("radio", name=re.compile("^CUSTOM")).check()
    picker = page.get_by_label("Master: machine type")
    expect(picker.locator('option[value="n1-highmem-8"]')).to_have_text("n1-highmem-8: 8 vCPUs, 52 GB")
    picker.select_option("n1-standard-96")
    help_text = page.locator("#id_master_type_helptext")
    expect(help_text).to_contain_text("n1-standard-96: 96 vCPUs, 360 GB. Accelerators: ")
    expect(help_text).not_to_contain_text("NVIDIA_TESLA_K80")  # too many vCPUs for any K80 count
    picker.select_option("a2-highgpu-2g")
    expect(help_text).to_contain_text("NVIDIA_TESLA_A100 × 2 only")
    expect(picker).to_have_attribute("aria-describedby", re.compile("id_master_type_helptext"))


def test_the_estimate_follows_the_worker_count(page, console):
    login(page)
    page.goto(f"{JOBS}new/")
    basic = catalogue.MACHINE_TYPES["standard"].units_per_hour
    expect(page.locator("[data-estimate-box] [data-units]")).to_have_text(f"{basic:.2f}".rstrip("0").rstrip("."))
    choose_custom(page)
    rate = catalogue.MACHINE_TYPES["n1-standard-4"].units_per_hour
    expect(page.locator("[data-estimate-box] [data-units]")).to_have_text(f"{2 * rate:.2f}")
    page.get_by_label("Workers: count").fill("3")
    expect(page.locator("[data-estimate-box] [data-units]")).to_have_text(f"{4 * rate:.2f}")


def test_the_builder_writes_the_yaml_and_the_yaml_fills_the_builder(page, console):
    login(page)
    page.goto(f"{JOBS}new/")
    builder = page.locator("[data-tuning-builder]")
    yaml_box = page.locator("#id_hyperparameters")
    builder.get_by_label("Goal").select_option("MAXIMIZE")
    builder.get_by_label("Metric tag").fill("accuracy")
    builder.get_by_label("Maximum trials").fill("6")
    builder.get_by_role("button", name="Add a parameter").click()
    builder.get_by_label("Name").fill("learning_rate")
    builder.get_by_label("Minimum").fill("0.001")
    builder.get_by_label("Maximum", exact=True).fill("0.1")
    builder.get_by_label("Scale").select_option("UNIT_LOG_SCALE")
    expect(yaml_box).to_have_value(re.compile("learning_rate"))
    assert yaml.safe_load(yaml_box.input_value()) == {
        "goal": "MAXIMIZE",
        "hyperparameterMetricTag": "accuracy",
        "maxTrials": 6,
        "params": [
            {
                "parameterName": "learning_rate",
                "type": "DOUBLE",
                "minValue": 0.001,
                "maxValue": 0.1,
                "scaleType": "UNIT_LOG_SCALE",
            }
        ],
    }
    # The command follows: tuning goes in config.yaml.
    expect(page.locator("#form-config")).to_contain_text("parameterName: learning_rate")

    yaml_box.fill(
        "goal: MINIMIZE\nmaxTrials: 3\nparams:\n  - parameterName: layers\n    type: INTEGER\n"
        "    minValue: 1\n    maxValue: 4\n  - parameterName: opt\n    type: CATEGORICAL\n"
        "    categoricalValues: [adam, sgd]\n"
    )
    expect(builder.locator("[data-param]")).to_have_count(2)
    expect(builder.get_by_label("Goal")).to_have_value("MINIMIZE")
    expect(builder.locator("[data-param]").nth(0).get_by_label("Name")).to_have_value("layers")
    expect(builder.locator("[data-param]").nth(1).get_by_label("Values (comma-separated)")).to_have_value("adam, sgd")

    yaml_box.fill("params: 5\n")  # valid YAML the builder cannot show: the YAML stays the source
    expect(builder.locator("[data-builder-status]")).to_contain_text("cannot show this spec")
    expect(builder.get_by_role("button", name="Add a parameter")).to_be_disabled()
    expect(yaml_box).to_have_value("params: 5\n")


def test_the_copy_buttons_copy_the_command_and_the_body(page, console):
    page.context.grant_permissions(["clipboard-read", "clipboard-write"])
    console.wait(console.background["model"], timeout=240)
    login(page)
    for path, prefix in ((f"{JOBS}new/", "form"), (f"{JOBS}train_model/", "job")):
        page.goto(path)
        if prefix == "job":
            page.get_by_role("tab", name="Training input").click()
            page.get_by_text("Submit it again from the command line or the API").click()
        for button, target in (("Copy command", f"#{prefix}-cli"), ("Copy REST body", f"#{prefix}-rest")):
            page.get_by_role("button", name=button).click()
            expect(page.locator("[data-copy-status]").first).to_contain_text(button.replace("Copy", "Copied"))
            copied = page.evaluate("() => navigator.clipboard.readText()")
            assert copied == page.locator(target).inner_text()
            assert (
                copied.startswith("aiconsole jobs submit training") if "cli" in target else '"trainingInput"' in copied
            )


def test_the_form_and_job_page_fit_a_phone_and_pass_axe_in_light_and_dark(page, console):
    console.wait(console.background["tuning"], timeout=240)
    login(page)
    page.set_viewport_size(PHONE)
    found, loose = {}, {}
    for path in (f"{JOBS}new/", f"{JOBS}study_1/", f"{JOBS}new/?clone=study_1"):
        page.goto(path)
        if "/new/" in path:
            choose_custom(page)
            page.locator("[data-tuning-builder]").get_by_role("button", name="Add a parameter").click()
            expect(page.locator("#form-config")).to_contain_text("scaleTier: CUSTOM")
        else:
            page.get_by_role("tab", name="Training input").click()
            page.get_by_text("Submit it again from the command line or the API").click()
            expect(page.locator("#job-cli")).to_be_visible()
        for scheme in ("light", "dark"):
            page.emulate_media(color_scheme=scheme)
            width = page.evaluate(OVERFLOW)
            if width["document"] > width["viewport"] or width["loose"]:
                loose[f"{path} ({scheme})"] = width
            if violations := axe_violations(page):
                found[f"{path} ({scheme})"] = violations
    assert not loose, loose
    assert not found, found
