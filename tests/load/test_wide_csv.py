"""The data analysis page asked for 10,000-column CSVs: the analyses run apart from the console
with bounded memory, and showing a finished one costs the web process little, so other users'
requests are still answered."""

from __future__ import annotations

import threading
import urllib.parse
import urllib.request
from pathlib import Path

import pytest

from bench.support.waiting import wait_for
from tests.helpers.memory import PeakRss, pss_mb

COLUMNS = 10_000


def wide_csv(path: Path, rows: int, salt: int) -> None:
    """A header and ``rows`` rows of ``COLUMNS`` distinct-looking numbers (no two cells one object)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("w") as handle:
        handle.write(",".join(f"c{i}" for i in range(COLUMNS)) + "\n")
        for row in range(rows):
            handle.write(",".join(str((row * 31 + i * 7 + salt) % 997 + 100) for i in range(COLUMNS)) + "\n")
    path.chmod(0o644)


def descendants(pid: int) -> list[int]:
    children: dict[int, list[int]] = {}
    for entry in Path("/proc").glob("[0-9]*"):
        try:
            parent = int((entry / "stat").read_text().rsplit(")", 1)[1].split()[1])
        except (OSError, ValueError, IndexError):
            continue
        children.setdefault(parent, []).append(int(entry.name))
    found, todo = [], [pid]
    while todo:
        below = children.get(todo.pop(), [])
        found += below
        todo += below
    return found


@pytest.mark.executor
def test_wide_csvs_are_analysed_in_bounded_memory_and_shown_without_holding_up_other_users(live_console):
    console = live_console(AICONSOLE_ANALYSIS_WAIT_SECONDS="0.5")
    folder = console.data_dir / "storage" / "data" / "default-project"
    paths = [folder / f"wide-{n}.csv" for n in range(2)]
    for salt, path in enumerate(paths):
        wide_csv(path, 1_200, salt)  # 48 MB each, under the page's 64 MB read
    web = console.processes()["web"]
    opener = urllib.request.build_opener()
    opener.addheaders = [("Cookie", f"sessionid={console.cookie}")]

    def page(path: Path) -> str:
        query = urllib.parse.urlencode({"path": str(path), "header": "on"})
        with opener.open(f"{console.url}/projects/default-project/data/analysis/?{query}", timeout=120) as answer:
            assert answer.status == 200
            return answer.read().decode()

    children_peak, stop = [0.0], threading.Event()

    def watch_children() -> None:
        while not stop.wait(0.05):
            children_peak[0] = max(children_peak[0], sum(pss_mb(pid) for pid in descendants(web)))

    watcher = threading.Thread(target=watch_children, daemon=True)
    watcher.start()
    try:
        for path in paths:
            page(path)  # both start; each page says it is being analysed
        for path in paths:
            wait_for(
                lambda path=path: "being analysed" not in page(path),
                120,
                interval=0.5,
                message=f"{path.name} to be analysed",
            )
    finally:
        stop.set()
        watcher.join()
    shown = page(paths[0])
    assert f"first 200 of {COLUMNS:,} columns" in shown

    # Each view of a finished analysis (200 charts) shows what the child drew: the web process
    # serves everyone (what the views cost its CPU is measured in bench/abuse.py's analysis case).
    with PeakRss(web) as web_rss:
        for _ in range(3):
            for path in paths:
                page(path)
    status, _ = console.server.api("GET", "/v1/projects/default-project/jobs", console.token)

    assert status == 200
    # Unbounded, each child held every cell of its file (2 GB for the two), and each view built
    # 200 Plotly figures in the web process (0.8 s of its CPU).
    assert children_peak[0] < 500, f"the analyses took {children_peak[0]:.0f} MB"
    assert web_rss.mb < 500, f"the web process reached {web_rss.mb:.0f} MB"
