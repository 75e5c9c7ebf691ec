"""List paging as the original API does it: pageSize (default 20, max 100) and opaque tokens.

Querysets are paged by keyset on the primary key, newest first: no OFFSET and no COUNT, so the
hundredth page costs what the first does.
"""

from __future__ import annotations

import base64
import hashlib
import hmac

from django.conf import settings

from aiconsole.errors import FieldViolation, InvalidArgument

DEFAULT_PAGE_SIZE = 20
MAX_PAGE_SIZE = 100


def page_size(raw: str | None) -> int:
    if raw in (None, ""):
        return DEFAULT_PAGE_SIZE
    try:
        size = int(raw)
    except ValueError:
        raise InvalidArgument(
            f"Invalid value at 'page_size' (TYPE_INT32), \"{raw}\"",
            [FieldViolation("page_size", f'Invalid value "{raw}"')],
        ) from None
    if size < 0:
        raise InvalidArgument("page_size must not be negative.", [FieldViolation("page_size", "must be ≥ 0")])
    return min(size, MAX_PAGE_SIZE) or DEFAULT_PAGE_SIZE


def _signature(kind: str, position: str) -> str:
    digest = hmac.new(settings.SECRET_KEY.encode(), f"{kind}:{position}".encode(), hashlib.sha256)
    return digest.hexdigest()[:16]


def encode_token(kind: str, position: int | str) -> str:
    """An opaque token: the position, tied to the kind of list and signed against tampering."""
    raw = f"{kind}:{position}:{_signature(kind, str(position))}"
    return base64.urlsafe_b64encode(raw.encode()).decode().rstrip("=")


def decode_token(kind: str, token: str | None) -> str | None:
    if not token:
        return None
    try:
        raw = base64.urlsafe_b64decode(token.encode() + b"=" * (-len(token) % 4)).decode()
        token_kind, position, signature = raw.rsplit(":", 2)
    except (ValueError, UnicodeDecodeError):
        token_kind = position = signature = ""
    if token_kind != kind or not hmac.compare_digest(signature, _signature(kind, position)):
        raise InvalidArgument("The page token is not valid.", [FieldViolation("page_token", "not valid")])
    return position


def keyset_page(queryset, request, kind: str) -> tuple[list, str | None]:
    """One page of a queryset ordered by descending primary key, and the next page's token."""
    size = page_size(request.query_params.get("pageSize"))
    after = decode_token(kind, request.query_params.get("pageToken"))
    rows = queryset.order_by("-pk")
    if after is not None:
        if not after.isdigit():
            raise InvalidArgument("The page token is not valid.", [FieldViolation("page_token", "not valid")])
        rows = rows.filter(pk__lt=int(after))
    page = list(rows[: size + 1])
    next_token = encode_token(kind, page[size - 1].pk) if len(page) > size else None
    return page[:size], next_token


def list_page(items: list, request, kind: str) -> tuple[list, str | None]:
    """One page of a fixed list (locations), by index."""
    size = page_size(request.query_params.get("pageSize"))
    start = decode_token(kind, request.query_params.get("pageToken"))
    offset = int(start) if start and start.isdigit() else 0
    page = items[offset : offset + size]
    next_token = encode_token(kind, offset + size) if offset + size < len(items) else None
    return page, next_token
