"""``aiconsole quotas`` against a live ``aiconsole up`` (the CLI suite's shared console, whose
token is its first admin's, a platform admin)."""

from __future__ import annotations

import json


def test_a_quota_is_set_described_and_lifted_through_the_cli(cli):
    changed = cli("quotas", "set", "--metric", "cpus", "--limit", "64", "--region", "us-central1", "--weight", "2")
    assert changed.code == 0, changed.err
    described = cli("quotas", "describe")
    assert described.code == 0 and "CPUS" in described.out and "64" in described.out
    assert "weight in the fair queue: 2" in described.out
    as_json = json.loads(cli("quotas", "describe", "--format", "json").out)
    assert as_json["limits"] == [{"metric": "CPUS", "region": "us-central1", "limit": 64, "held": 0}]
    refused = cli("quotas", "set", "--metric", "GPUS", "--limit", "1")
    assert refused.code != 0 and "limits[0].metric" in refused.err
    assert cli("quotas", "set", "--metric", "CPUS", "--region", "us-central1", "--remove").code == 0
    assert cli("quotas", "set", "--weight", "1").code == 0
    assert "No quotas" in cli("quotas", "describe").out
