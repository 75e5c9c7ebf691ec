"""Bounded walks over local folders that users name: batch inputs, model folders, job dirs.

Whoever names such a folder also controls what lies in it, so a walk never follows a symbolic
link (a link loop would make it endless), stops after ``AICONSOLE_WALK_MAX_ENTRIES`` directory
entries or ``AICONSOLE_WALK_MAX_SECONDS`` seconds, and calls the caller's cancel check as it
goes, so a cancelled job stops walking at once. A walk that hits a bound raises WalkLimitError,
whose message names the folder and the limit.
"""

from __future__ import annotations

import os
import time
from collections import deque
from collections.abc import Callable, Iterator
from pathlib import Path

# How often (seconds) a walk calls its cancel check; it may query the database.
CANCEL_CHECK_SECONDS = 0.1


class WalkLimitError(Exception):
    """A walk went past its entry or time bound; the message names the folder and the limit."""


def _limits(max_entries: int | None, max_seconds: float | None) -> tuple[int, float]:
    if max_entries is None or max_seconds is None:
        from django.conf import settings

        max_entries = settings.WALK_MAX_ENTRIES if max_entries is None else max_entries
        max_seconds = settings.WALK_MAX_SECONDS if max_seconds is None else max_seconds
    return max_entries, max_seconds


def walk_files(
    root: Path | str,
    *,
    check_cancel: Callable[[], None] | None = None,
    max_depth: int | None = None,
    max_entries: int | None = None,
    max_seconds: float | None = None,
    file_links: bool = False,
) -> Iterator[Path]:
    """Regular files under ``root``, breadth first, never through a symbolic link.

    ``max_depth`` 1 lists ``root`` alone; None walks the whole tree. With ``file_links`` the
    symbolic links are yielded too, unresolved (the caller checks where they lead); a walk never
    descends through one. Folders that cannot be read are skipped. Raises WalkLimitError past
    ``max_entries`` entries seen or ``max_seconds`` (defaults: ``settings.WALK_MAX_ENTRIES`` and
    ``settings.WALK_MAX_SECONDS``), and whatever ``check_cancel`` raises.
    """
    entry_limit, second_limit = _limits(max_entries, max_seconds)
    started = time.monotonic()
    next_check = started
    seen = 0
    folders: deque[tuple[str, int]] = deque([(str(root), 1)])
    while folders:
        folder, depth = folders.popleft()
        try:
            with os.scandir(folder) as entries:
                for entry in entries:
                    seen += 1
                    if seen > entry_limit:
                        raise WalkLimitError(
                            f"{root} holds more than {entry_limit} files and folders, the most a "
                            "walk looks at (AICONSOLE_WALK_MAX_ENTRIES); name a narrower path."
                        )
                    now = time.monotonic()
                    if now >= next_check:
                        if now - started > second_limit:
                            raise WalkLimitError(
                                f"Listing {root} took longer than {second_limit:g} seconds, the "
                                "most a walk may take (AICONSOLE_WALK_MAX_SECONDS); name a "
                                "narrower path."
                            )
                        if check_cancel is not None:
                            check_cancel()
                        next_check = now + CANCEL_CHECK_SECONDS
                    if entry.is_symlink():
                        if file_links:
                            yield Path(entry.path)
                        continue
                    if entry.is_dir(follow_symlinks=False):
                        if max_depth is None or depth < max_depth:
                            folders.append((entry.path, depth + 1))
                    elif entry.is_file(follow_symlinks=False):
                        yield Path(entry.path)
        except OSError:
            continue  # unreadable or vanished: nothing to list there
