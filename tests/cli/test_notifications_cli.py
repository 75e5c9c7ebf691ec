"""``aiconsole notifications`` against a live ``aiconsole up`` (the CLI suite's shared console)."""

from __future__ import annotations

import json


def test_a_rule_is_created_listed_described_and_deleted_through_the_cli(cli):
    created = cli(
        "notifications",
        "create",
        "--events",
        "job_failed,STUDY_BEST_IMPROVED",
        "--email",
        "team@example.com",
        "--display-name",
        "cli-rule",
        "--format",
        "json",
    )
    assert created.code == 0, created.err
    assert "signing secret (shown this once" in created.err
    rule = json.loads(created.out)
    rule_id = rule["name"].rsplit("/", 1)[1]
    assert rule["events"] == ["JOB_FAILED", "STUDY_BEST_IMPROVED"]

    listed = cli("notifications", "list")
    assert listed.code == 0 and rule_id in listed.out and "team@example.com" in listed.out
    described = cli("notifications", "describe", rule_id)
    assert described.code == 0 and "deliveries: []" in described.out and "secret" not in described.out

    refused = cli("notifications", "create", "--events", "JOB_FAILED", "--webhook", "http://127.0.0.1:1/hook")
    assert refused.code != 0 and "not a public address" in refused.err
    assert cli("notifications", "create", "--events", "JOB_FAILED").code == 2  # nobody to tell

    assert cli("notifications", "delete", rule_id).code == 0
    assert rule_id not in cli("notifications", "list").out
