"""Small generated CSVs in the server's storage, and built-in algorithm job bodies."""

from __future__ import annotations

from pathlib import Path

import pytest
from django.conf import settings


@pytest.fixture
def csv_file(tmp_path):
    """Write rows (or raw text) as a CSV in the storage root; returns its path."""
    counter = iter(range(1_000_000))

    def write(rows: list[str] | str, name: str = "data.csv") -> Path:
        folder = settings.STORAGE_DIR / "datasets" / "project-a" / f"{tmp_path.name}-{next(counter)}"
        folder.mkdir(parents=True, exist_ok=True)
        path = folder / name
        path.write_text(rows if isinstance(rows, str) else "\n".join(rows) + "\n")
        return path

    return write
