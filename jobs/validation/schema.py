"""Reading a JSON body against the proto schema (`aiconsole.v1schema`): the first phase.

Unknown names, wrong JSON types, bad enum values and values over their length limits are
violations; if any is found the service rules do not run, as in the original front end. What
comes back is the normalised copy in wire format the package docstring describes. The reading
itself is ``aiconsole.protojson``'s, the one reader Vertex AI's bodies go through too.

It also holds small helpers the rule modules use to write their messages: ``seconds`` (a parsed
Duration) and ``one_of`` ("a, b or c"); ``shown`` (a value cut short) is the reader's.
"""

from __future__ import annotations

from aiconsole import protojson, v1schema
from aiconsole.errors import Violations


def parse_message(value: object, message: str, path: str, errors: Violations) -> dict:
    """Read one JSON object against a v1 proto message; unknown names and bad values are errors."""
    return protojson.read(value, v1schema.READER, message, path, errors)


def seconds(duration: str) -> float:
    return float(duration[:-1])


def one_of(values) -> str:
    values = [str(v) for v in values]
    return values[0] if len(values) == 1 else ", ".join(values[:-1]) + " or " + values[-1]
