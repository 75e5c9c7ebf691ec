"""Every AICONSOLE_* variable the code reads is in the README, so no setting is a secret."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PACKAGES = ("aiconsole", "console", "jobs", "models_registry", "algorithms")


def test_every_aiconsole_variable_the_code_reads_is_documented():
    used = set()
    for package in PACKAGES:
        for source in (ROOT / package).rglob("*.py"):
            # A family written ``AICONSOLE_MODEL_*`` is not a variable of its own.
            used |= set(re.findall(r"AICONSOLE_[A-Z0-9_]*[A-Z0-9](?![A-Z0-9_]*\*)", source.read_text()))
    readme = ROOT.joinpath("README.md").read_text()
    documented = set(re.findall(r"AICONSOLE_[A-Z0-9_]*[A-Z0-9]", readme))
    assert sorted(used - documented) == []
