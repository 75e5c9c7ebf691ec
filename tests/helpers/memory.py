"""How much memory a process took: its peak resident size while something ran, sampled."""

from __future__ import annotations

import os
import threading
from pathlib import Path


def rss_mb(pid: int | None = None) -> float:
    """The resident size of ``pid`` (this process by default) in MB; 0 once it is gone."""
    try:
        for line in Path(f"/proc/{pid or os.getpid()}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    except OSError:
        pass
    return 0.0


def pss_mb(pid: int) -> float:
    """Its proportional set size in MB: pages shared with other processes (a forkserver's
    children) counted in shares, so a sum over processes is what they take together."""
    try:
        for line in Path(f"/proc/{pid}/smaps_rollup").read_text().splitlines():
            if line.startswith("Pss:"):
                return int(line.split()[1]) / 1024
    except OSError:
        pass
    return 0.0


class PeakRss:
    """``with PeakRss(pid) as peak: ...``: ``peak.mb``, the largest resident size seen while the
    block ran (sampled every 20 ms), and ``peak.growth_mb``, that above the size at the start."""

    def __init__(self, pid: int | None = None, interval: float = 0.02):
        self.pid, self.interval = pid, interval
        self.start_mb = self.mb = 0.0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._sample, daemon=True, name="peak-rss")

    @property
    def growth_mb(self) -> float:
        return self.mb - self.start_mb

    def __enter__(self) -> PeakRss:
        self.start_mb = self.mb = rss_mb(self.pid)
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()
        self._thread.join()
        self.mb = max(self.mb, rss_mb(self.pid))

    def _sample(self) -> None:
        while not self._stop.wait(self.interval):
            self.mb = max(self.mb, rss_mb(self.pid))
