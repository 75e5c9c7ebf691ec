"""describe, list, cancel, update and stream-logs against a real console."""

from __future__ import annotations

import json
import re
from datetime import datetime

import pytest
import yaml

from tests.helpers.cli import write_trainer
from tests.helpers.console import AICONSOLE

pytestmark = pytest.mark.executor

LOG_LINE = re.compile(
    r"^(?P<severity>[A-Z]+)\t(?P<time>\d{4}-\d\d-\d\d \d\d:\d\d:\d\d [+-]\d{4})\t"
    r"(?P<task>[\w-]+)\t(?P<trial>\d*)\t(?P<message>.*)$"
)


@pytest.fixture(scope="module")
def finished(console, tmp_path_factory):
    """Two jobs run to the end through the installed program: one succeeds, one fails."""
    import os
    import subprocess

    folder = write_trainer(tmp_path_factory.mktemp("finished-src"))
    env = {
        **os.environ,
        "AICONSOLE_URL": console.url,
        "AICONSOLE_TOKEN": console.token,
        "AICONSOLE_CONFIG": str(folder.parent / "none.json"),
    }
    for job_id, extra in (("done_ok", []), ("done_bad", ["--", "--fail"])):
        subprocess.run(
            [
                AICONSOLE,
                "jobs",
                "submit",
                "training",
                job_id,
                "--package-path",
                str(folder),
                "--module-name",
                "trainer.task",
                "--region",
                "us-central1",
                "--labels",
                "suite=cli",
                *extra,
            ],
            env=env,
            check=True,
            capture_output=True,
            timeout=300,
        )
    return {job_id: console.wait(job_id) for job_id in ("done_ok", "done_bad")}


def test_describe_prints_the_whole_job_as_yaml_by_default(cli, finished):
    result = cli("jobs", "describe", "done_ok")
    assert result.code == 0, result.err
    job = yaml.safe_load(result.out)
    assert job["jobId"] == "done_ok" and job["state"] == "SUCCEEDED"
    assert job["trainingInput"]["pythonModule"] == "trainer.task"
    assert "/projects/default-project/jobs/done_ok/" in result.err  # the follow-up link, on stderr


def test_describe_json_and_value_formats(cli, finished):
    as_json = json.loads(cli("jobs", "describe", "done_ok", "--format=json").out)
    assert as_json["state"] == "SUCCEEDED" and as_json["labels"] == {"suite": "cli"}
    assert (
        cli("jobs", "describe", "done_bad", "--format", "value(jobId,state,labels)").out
        == "done_bad\tFAILED\tsuite=cli\n"
    )
    bad = cli("jobs", "describe", "done_ok", "--format", "xml")
    assert bad.code == 2 and "unknown format 'xml'" in bad.err


def test_describe_summarize_prints_gclouds_tables(cli, finished):
    result = cli("jobs", "describe", "done_bad", "--summarize")
    assert result.code == 0
    for title in ("Job Overview", "Error", "Training Input Summary", "Training Output Summary"):
        assert re.search(rf"│ +{title} +│", result.out), result.out
    assert "ML_UNITS" in result.out and "FAILED" in result.out and "trainer.task" in result.out
    assert "The replica master 0 exited with a non-zero status of 1." in result.out


def test_describe_a_missing_job_is_not_found(cli, console):
    result = cli("jobs", "describe", "no_such_job")
    assert result.code == 1
    assert result.err.startswith("ERROR: (aiconsole.jobs.describe) NOT_FOUND:")


def test_list_shows_a_table_and_honours_limit_and_filter(cli, finished):
    table = cli("jobs", "list")
    assert table.code == 0
    assert table.out.splitlines()[0].split() == ["JOB_ID", "STATUS", "CREATED"]
    assert re.search(r"^done_ok +SUCCEEDED +\d{4}-", table.out, re.M)

    limited = cli("jobs", "list", "--limit", "1", "--format", "json")
    assert len(json.loads(limited.out)) == 1

    paged = cli("jobs", "list", "--page-size", "1", "--filter", "labels.suite:cli", "--format", "value(jobId)")
    assert sorted(paged.out.split()) == ["done_bad", "done_ok"]  # two pages of one, followed through

    failed = cli("jobs", "list", "--filter", "state=FAILED AND jobId:done*", "--format", "value(jobId)")
    assert failed.out.split() == ["done_bad"]

    sorted_ids = cli("jobs", "list", "--filter", "jobId:done*", "--sort-by", "~jobId", "--format", "value(jobId)")
    assert sorted_ids.out.split() == ["done_ok", "done_bad"]

    nothing = cli("jobs", "list", "--filter", "jobId:nothing_matches*")
    assert nothing.code == 0 and nothing.out == "" and "Listed 0 items." in nothing.err

    invalid = cli("jobs", "list", "--filter", "colour=red")
    assert invalid.code == 1 and "INVALID_ARGUMENT" in invalid.err


def test_update_labels_and_no_update_to_perform(cli, finished):
    added = cli("jobs", "update", "done_ok", "--update-labels", "stage=test,owner=me", "--format", "json")
    assert added.code == 0, added.err
    assert json.loads(added.out)["labels"] == {"suite": "cli", "stage": "test", "owner": "me"}
    assert "Updated job [done_ok]." in added.err

    same = cli("jobs", "update", "done_ok", "--update-labels", "stage=test", "--remove-labels", "absent")
    assert same.code == 0 and same.err.strip() == "No update to perform."

    removed = cli("jobs", "update", "done_ok", "--remove-labels", "owner,stage")
    assert removed.code == 0
    assert json.loads(cli("jobs", "describe", "done_ok", "--format", "json").out)["labels"] == {"suite": "cli"}

    cleared = cli("jobs", "update", "done_ok", "--clear-labels", "--update-labels", "suite=cli")
    assert cleared.err.strip() == "No update to perform."

    bad = cli("jobs", "update", "done_ok", "--update-labels", "Bad Key=1")
    assert bad.code == 1 and "INVALID_ARGUMENT" in bad.err and "job.labels" in bad.err


def test_cancel_a_running_job_then_cancelling_again_fails(cli, console, tmp_path):
    folder = write_trainer(tmp_path / "src")
    submitted = cli(
        "jobs",
        "submit",
        "training",
        "to_cancel",
        "--package-path",
        str(folder),
        "--module-name",
        "trainer.task",
        "--region",
        "us-central1",
        "--",
        "--sleep",
        "600",
    )
    assert submitted.code == 0, submitted.err
    console.wait("to_cancel", {"RUNNING"})
    result = cli("jobs", "cancel", "to_cancel")
    assert result.code == 0 and "Cancelled job [to_cancel]." in result.err
    assert console.wait("to_cancel")["state"] == "CANCELLED"
    again = cli("jobs", "cancel", "to_cancel")
    assert again.code == 1 and "FAILED_PRECONDITION" in again.err


def test_stream_logs_of_a_succeeded_job_exits_0_in_gclouds_format(cli, finished):
    result = cli("jobs", "stream-logs", "done_ok")
    assert result.code == 0, result.err
    lines = [LOG_LINE.match(line) for line in result.out.splitlines()]
    assert all(lines), result.out
    trainer = [m for m in lines if m["task"] == "master-replica-0"]
    assert [m["message"] for m in trainer if m["message"].startswith("trainer")] == ["trainer started", "trainer done"]
    severities = {m["message"]: m["severity"] for m in trainer}
    assert severities["trainer started"] == "INFO"
    assert severities["warning: this goes to stderr"] in ("ERROR", "WARNING")
    offset = datetime.now().astimezone().strftime("%z")
    assert all(m["time"].endswith(offset) for m in lines)  # in local time, as gcloud prints it


def test_stream_logs_of_a_failed_job_exits_1(cli, finished):
    result = cli("jobs", "stream-logs", "done_bad")
    assert result.code == 1
    assert "SystemExit" in result.out or "asked to fail" in result.out
    assert "Job [done_bad] finished with state FAILED: The replica master 0 exited" in result.err


def test_stream_logs_task_name_filter(cli, finished):
    result = cli("jobs", "stream-logs", "done_ok", "--task-name", "service")
    assert result.code == 0
    tasks = {LOG_LINE.match(line)["task"] for line in result.out.splitlines()}
    assert tasks <= {"service"}


def test_stream_logs_follows_a_running_job_until_it_ends(cli, console, tmp_path):
    folder = write_trainer(tmp_path / "src")
    result = cli(
        "jobs",
        "submit",
        "training",
        "follow_me",
        "--package-path",
        str(folder),
        "--module-name",
        "trainer.task",
        "--region",
        "us-central1",
        "--stream-logs",
        "--",
        "--sleep",
        "2",
    )
    assert result.code == 0, result.err
    assert "Job [follow_me] submitted successfully." in result.err
    messages = [LOG_LINE.match(line)["message"] for line in result.out.splitlines()]
    assert messages.index("trainer started") < messages.index("trainer done")
    assert console.job("follow_me")["state"] == "SUCCEEDED"
