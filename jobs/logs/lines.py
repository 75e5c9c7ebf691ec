"""From replica output bytes to log lines, without a database: pure pieces the sink and the CLI's
local runs share.

``LineSplitter`` turns a byte stream into lines: carriage-return progress bars keep only their
latest state, very long lines are cut with a marker, undecodable bytes are replaced.
``detect_severity`` and ``TracebackTracker`` give a line the severity the original's Cloud Logging
would have shown (a stderr line is not an error by itself; a traceback is, to its last line).
"""

from __future__ import annotations

import re
from collections.abc import Callable

SERVICE_TASK = "service"
CUT_MARKER = " … [line cut: {} more bytes]"

_LEVELS = {
    "DEBUG": "DEBUG",
    "INFO": "INFO",
    "WARNING": "WARNING",
    "WARN": "WARNING",
    "ERROR": "ERROR",
    "CRITICAL": "CRITICAL",
    "FATAL": "CRITICAL",
    "EXCEPTION": "ERROR",
}
# "INFO:root:…", "[ERROR] …", "2024-01-01 12:00:00,123 - WARNING - …", "2024-… INFO …"
_LEVEL_WORD = re.compile(
    r"^(?:\S+\s+\S+\s*[-|]?\s*)?(?:\S+\s*[-|]\s*)?\[?(DEBUG|INFO|WARNING|WARN|ERROR|CRITICAL|FATAL)\]?[:\s]"
)
# absl / glog, as TensorFlow prints: "I1121 12:00:00.123456  1234 file.cc:12] …", and
# TensorFlow's native logging: "2023-01-18 10:04:41.123456: W tensorflow/…cc:128] …"
_GLOG = re.compile(r"^(?:([DIWEF])\d{4} \d\d:\d\d:\d\d|\d{4}-\d\d-\d\d \d\d:\d\d:\d\d\.\d+: ([DIWEF]) )")
_GLOG_LEVELS = {"D": "DEBUG", "I": "INFO", "W": "WARNING", "E": "ERROR", "F": "CRITICAL"}


_ANY_LEVEL = re.compile(r"DEBUG|INFO|WARN|ERROR|CRITICAL|FATAL")  # most lines have none: skip the rest
# Lines that say they are an error without a logging prefix: an exception's last line
# ("ValueError: bad", "tensorflow…NotFoundError: …"), "Error: …", argparse's "task.py: error: …",
# and the joints of a chained traceback.
_ERROR_LINE = re.compile(
    r"^(?:[A-Za-z_][\w.]*(?:Error|Exception)(?::|$)|[Ee]rror:|\S+: error: "
    r"|During handling of the above exception|The above exception was the direct cause)"
)
# Python's warnings ("/…/site-packages/x.py:12: UserWarning: …", found wherever the path ends; the
# line starts with its file name, not a space) and "Warning: …" lines.
_PYTHON_WARNING = re.compile(r":\d+: \w*Warning: ")
TRACEBACK_START = "Traceback (most recent call last)"
# A logging prefix (a level word, absl's "W1126 …") sits at the start: its first characters decide.
# What a line says about itself (a Python warning, an exception) may come after a long path: a
# runtime environment's site-packages alone is 100+ characters. Both reads are bounded, so a long
# line costs no more than a short one that says the same.
PREFIX_CHARS = 120
SAYS_CHARS = 4096


def detect_severity(text: str, stream: str, *, in_traceback: bool = False) -> str:
    """Severity from what the line says: a logging prefix, a traceback (``in_traceback``: an
    earlier line of the same stream opened one), an error or warning line; else INFO.

    The stream alone decides nothing: tqdm bars, warnings and most libraries' chatter go to
    stderr, and are not errors (the stored ``stream`` still says where a line came from).
    """
    head = text[:PREFIX_CHARS]
    if head and head[0] in "DIWEF0123456789":
        match = _GLOG.match(head)
        if match:
            return _GLOG_LEVELS[match.group(1) or match.group(2)]
    if _ANY_LEVEL.search(head):
        match = _LEVEL_WORD.match(head)
        if match:
            return _LEVELS[match.group(1)]
    if in_traceback or head.startswith(TRACEBACK_START):
        return "ERROR"
    says = text[:SAYS_CHARS]  # the same string, not a copy, for any line shorter than that
    if ("rror" in says or "xception" in says) and _ERROR_LINE.match(says):
        return "ERROR"
    if "arning: " in says and (
        says.startswith(("Warning: ", "warning: ")) or (not says[0].isspace() and _PYTHON_WARNING.search(says, 1))
    ):
        return "WARNING"
    return "INFO"


class TracebackTracker:
    """Which streams are inside a Python traceback: its indented frame lines say nothing by
    themselves. A traceback opens with "Traceback (most recent call last):" and ends with its
    first unindented line (the exception), which is an error too."""

    def __init__(self):
        self._open: set[tuple] = set()

    def severity(self, key: tuple, text: str, stream: str) -> str:
        if key in self._open:
            if not text[:1].isspace() and text:
                self._open.discard(key)
            return detect_severity(text, stream, in_traceback=True)
        if text.startswith(TRACEBACK_START):
            self._open.add(key)
        return detect_severity(text, stream)


def clean_text(raw: bytes) -> str:
    # NUL cannot be stored in PostgreSQL text; replace it like any other undecodable byte.
    return raw.decode("utf-8", errors="replace").replace("\x00", "\ufffd")


class LineSplitter:
    """Incremental bytes → lines, with progress-bar folding and a length cap.

    At most ``max_bytes`` of the current line are kept; the rest is counted and said in the cut
    marker when the line ends, however many reads it spans. ``on_progress`` hears the latest
    state of a line still being redrawn with carriage returns (a progress bar) after each read.
    """

    def __init__(self, max_bytes: int, on_progress: Callable[[str], None] | None = None):
        self.max_bytes = max_bytes
        self.on_progress = on_progress
        self.buffer = bytearray()
        self.dropped = 0  # bytes of the current line beyond what is kept
        self.redrawn = False  # the current line has been redrawn with \r

    def feed(self, data: bytes) -> list[str]:
        """The lines this read completes (the rest waits for its newline)."""
        pieces = data.split(b"\n")
        lines: list[str] = []
        if len(pieces) > 1:
            self._append(pieces[0])
            lines.append(self._finish())
            middle = pieces[1:-1]
            # The common case, whole plain lines, is decoded without the per-line bookkeeping.
            if middle and b"\r" not in data and max(map(len, middle)) <= self.max_bytes:
                lines += [clean_text(piece) for piece in middle]
            else:
                for piece in middle:
                    self._append(piece)
                    lines.append(self._finish())
        self._append(pieces[-1])
        if self.on_progress and (self.redrawn or self.buffer.endswith(b"\r")) and self.buffer.strip(b"\r"):
            self.on_progress(clean_text(bytes(self.buffer).rstrip(b"\r")))
        return lines

    def close(self) -> list[str]:
        return [self._finish()] if self.buffer or self.dropped else []

    def _append(self, chunk: bytes) -> None:
        if not chunk:
            return
        self.buffer += chunk
        # A progress bar redraws with \r: only its latest state matters. A trailing \r ends a
        # redraw (print(..., end="\r")), so look for the \r before it.
        carriage = self.buffer.rstrip(b"\r").rfind(b"\r")
        if carriage >= 0:
            del self.buffer[: carriage + 1]
            self.dropped = 0
            self.redrawn = True
        if len(self.buffer) > self.max_bytes:
            self.dropped += len(self.buffer) - self.max_bytes
            del self.buffer[self.max_bytes :]

    def _finish(self) -> str:
        text = clean_text(bytes(self.buffer).rstrip(b"\r"))
        if self.dropped:
            text += CUT_MARKER.format(self.dropped)
        self.buffer.clear()
        self.dropped = 0
        self.redrawn = False
        return text


def fitting(lines: list[str], chars: int) -> int:
    """How many of ``lines``, from the first, take ``chars`` characters or fewer."""
    total = 0
    for count, line in enumerate(lines):
        total += len(line)
        if total > chars:
            return count
    return len(lines)
