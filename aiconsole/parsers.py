"""The REST API's one JSON body parser: DRF's, with a bound on how deeply a body may nest, and
no NUL character in any string.

Python's decoder raises RecursionError (not ValueError) on a body nested a few hundred levels
deep, and a body that still decodes can make later recursive code (validation, audit redaction,
the database's JSON encoder) overflow the stack. Both would be an HTML 500; here they are a
ParseError, which ``api_errors`` renders as the 400 INVALID_ARGUMENT envelope.
"""

from __future__ import annotations

from rest_framework import parsers
from rest_framework.exceptions import ParseError

# As protobuf's JSON parser (and so the original API) allows; no request of the API nests
# anywhere near this deep.
MAX_DEPTH = 100
TOO_DEEP = f"JSON parse error - the body nests more than {MAX_DEPTH} levels deep."


def nesting_depth(value) -> int:
    """How deeply lists and objects nest in ``value`` (0 for a scalar), without recursion."""
    deepest, pending = 0, [(value, 1)]
    while pending:
        item, depth = pending.pop()
        if isinstance(item, dict):
            children = item.values()
        elif isinstance(item, list):
            children = item
        else:
            continue
        deepest = max(deepest, depth)
        if depth > MAX_DEPTH:
            break
        pending.extend((child, depth + 1) for child in children if isinstance(child, dict | list))
    return deepest


NUL_IN_BODY = (
    "JSON parse error - a string in the body holds a NUL character (\\u0000), which no name, id or text "
    "the console stores may hold."
)


def holds_nul(value) -> bool:
    """Whether a string anywhere in ``value`` (a key included) holds a NUL character, without
    recursion. PostgreSQL stores no NUL in text or JSON: one that reached a row failed there."""
    pending = [value]
    while pending:
        item = pending.pop()
        if isinstance(item, str):
            if "\x00" in item:
                return True
        elif isinstance(item, dict):
            pending.extend(item.keys())
            pending.extend(item.values())
        elif isinstance(item, list):
            pending.extend(item)
    return False


class JSONParser(parsers.JSONParser):
    def parse(self, stream, media_type=None, parser_context=None):
        try:
            data = super().parse(stream, media_type, parser_context)
        except RecursionError:
            raise ParseError(TOO_DEEP) from None
        if nesting_depth(data) > MAX_DEPTH:
            raise ParseError(TOO_DEEP)
        if holds_nul(data):
            raise ParseError(NUL_IN_BODY)
        return data
