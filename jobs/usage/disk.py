"""The disk space a project holds: its storage area, the job dirs the console made for its jobs
(under the work dir), and its log lines and metric points counted. Sizes are read without
following a link (``aiconsole.walks``), and a folder too large to walk is reported as "at least"."""

from __future__ import annotations

import os
from pathlib import Path

from django.conf import settings

from aiconsole import walks
from aiconsole.models import Project
from jobs.models import LogLine, MetricPoint


def folder_size(path: Path) -> tuple[int, bool]:
    """(bytes of the regular files under ``path``, whether the walk saw all of them)."""
    total = 0
    try:
        for file in walks.walk_files(path):
            try:
                total += os.lstat(file).st_size
            except OSError:
                pass
    except walks.WalkLimitError:
        return total, False
    return total, True


def _storage_areas(project: Project) -> list[Path]:
    """``<storage dir>/<folder>/<project>/`` for each folder, real folders only."""
    storage_dir = Path(settings.STORAGE_DIR)
    try:
        folders = [entry for entry in os.scandir(storage_dir) if entry.is_dir(follow_symlinks=False)]
    except OSError:
        return []
    areas = [Path(entry.path) / project.project_id for entry in folders]
    return [area for area in areas if area.is_dir() and not area.is_symlink()]


def project_disk(project: Project) -> dict:
    """The space ``project`` holds, in bytes, and its rows."""
    storage, storage_whole = 0, True
    for area in _storage_areas(project):
        size, whole = folder_size(area)
        storage, storage_whole = storage + size, storage_whole and whole
    work = Path(settings.WORK_DIR) / project.project_id
    job_dirs, jobs_whole = folder_size(work) if work.is_dir() and not work.is_symlink() else (0, True)
    return {
        "storageBytes": storage,
        "jobDirBytes": job_dirs,
        "complete": storage_whole and jobs_whole,
        "logLines": LogLine.objects.filter(job__project=project).count(),
        "metricPoints": MetricPoint.objects.filter(job__project=project).count(),
    }
