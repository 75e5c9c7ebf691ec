"""What the web process and a replica's host say to each other about one shell.

The web process connects, sends one line of JSON (``{"token": …, "rows": …, "cols": …}``) and
reads one back (``{"ok": true}`` or ``{"error": "…"}``). The token is signed with the console's
secret key (which no trainer sees), names the replica and the session, and is good for
``TOKEN_SECONDS`` and once. Frames follow, each a kind byte and a 4-byte length: ``i`` input and
``r`` a new size (``rows,cols``) from the web process; ``o`` output and ``x`` the end (JSON with its
``reason``) from the host.
"""

from __future__ import annotations

import json
import struct

from django.core import signing

SALT = "aiconsole.webaccess"
TOKEN_SECONDS = 30
HANDSHAKE_BYTES = 8192
FRAME_BYTES = 65536  # the most one frame carries
HEADER = struct.Struct("!cI")
INPUT, RESIZE, OUTPUT, EXIT = b"i", b"r", b"o", b"x"


def token(replica_pk: int, session_pk: int) -> str:
    return signing.dumps({"replica": replica_pk, "session": session_pk}, salt=SALT)


def admit(text: str) -> dict:
    """The token's content; ``signing.BadSignature`` (or its ``SignatureExpired``) when it is not
    the console's or too old."""
    content = signing.loads(text, salt=SALT, max_age=TOKEN_SECONDS)
    if not isinstance(content, dict) or not {"replica", "session"} <= content.keys():
        raise signing.BadSignature("not a web access token")
    return content


def frame(kind: bytes, payload: bytes) -> bytes:
    return HEADER.pack(kind, len(payload)) + payload


def exit_frame(reason: str) -> bytes:
    return frame(EXIT, json.dumps({"reason": reason}).encode())


def size(rows, cols) -> tuple[int, int]:
    """A terminal size within reason (1–500 rows, 1–1000 columns), 24×80 for what is not a number."""

    def bounded(value, default: int, most: int) -> int:
        try:
            return max(1, min(int(value), most))
        except (TypeError, ValueError):
            return default

    return bounded(rows, 24, 500), bounded(cols, 80, 1000)
