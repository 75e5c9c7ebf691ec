"""The list-filter grammar of the v1 API's ``filter`` parameters, parsed into a Django ``Q``.

The grammar is the Google list-filter subset the original documented and gcloud sends:
``jobId:census*``, ``state=FAILED``, ``labels.team:ml``, ``createTime>"2026-01-01T00:00:00Z"``,
combined with AND, OR, NOT (or ``-``), parentheses, and juxtaposition (an implicit AND). As in
Google's filters, OR binds tighter than AND: ``a AND b OR c`` is ``a AND (b OR c)``.

``:`` and ``=`` compare for equality; a trailing ``*`` makes a prefix match; ``labels.key:*``
asks whether the label is present. What a field means is the caller's: :func:`parse` takes a
function that turns one ``field op value`` term into a ``Q`` (``jobs.filters`` for jobs,
``models_registry`` for models and versions), built from :func:`text_match`, :func:`time_match`
and :func:`label_match`. Unknown fields and malformed expressions raise FilterError with a
message that says where.

The parser descends one call per parenthesis and per NOT, so nesting is bounded
(``MAX_FILTER_DEPTH``): 300 parentheses fit in the length limit and would otherwise overflow
Python's stack, an HTML 500 instead of the 400 a bad filter gets.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime

from django.db.models import F, Q
from django.db.models.fields.json import KeyTextTransform
from django.db.models.lookups import Exact, StartsWith

from aiconsole.errors import FieldViolation, InvalidArgument

_TOKEN = re.compile(
    r"""\s*(?:
        (?P<lparen>\() | (?P<rparen>\)) |
        (?P<op><=|>=|!=|=|:|<|>) |
        (?P<string>"(?:[^"\\]|\\.)*") |
        (?P<minus>-(?=[\w(]))|
        (?P<word>[^\s()<>=!:"]+)
    )""",
    re.VERBOSE,
)
MAX_FILTER_LENGTH = 2000
# Levels of nesting: the filter itself, then each parenthesis or NOT inside another; real
# filters use two or three.
MAX_FILTER_DEPTH = 32

Term = Callable[[str, str, str], Q]  # field, operator, value -> the rows it matches


class FilterError(ValueError):
    pass


def parse(text: str, term: Term) -> Q:
    """The Q for a filter expression whose terms ``term`` resolves; an empty one matches everything."""
    if not text or not text.strip():
        return Q()
    if len(text) > MAX_FILTER_LENGTH:
        raise FilterError(f"Invalid filter: longer than {MAX_FILTER_LENGTH} characters.")
    return _Parser(text, term).parse()


def narrow(queryset, text: str, term: Term):
    """``queryset`` narrowed by the filter expression, or the API's INVALID_ARGUMENT on ``filter``."""
    try:
        return queryset.filter(parse(text, term))
    except FilterError as error:
        raise InvalidArgument(str(error), [FieldViolation("filter", str(error))]) from None


def text_match(column: str | KeyTextTransform, operator: str, value: str) -> Q:
    """Equality, or a prefix match with a trailing ``*``; JSON keys come as KeyTextTransform so
    any key is compared safely (never spliced into a lookup path)."""
    if operator in {"<", ">", "<=", ">="}:
        raise FilterError(f"Invalid filter: {operator} does not apply to text fields.")
    target = F(column) if isinstance(column, str) else column
    if value.endswith("*") and operator != "!=":
        query = Q(StartsWith(target, value[:-1]))
    else:
        query = Q(Exact(target, value))
    return ~query if operator == "!=" else query


def time_match(column: str, operator: str, value: str) -> Q:
    """An RFC 3339 timestamp compared with a date-time column."""
    try:
        moment = datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError:
        raise FilterError(f"Invalid filter: {value!r} is not an RFC 3339 timestamp.") from None
    if moment.tzinfo is None:
        raise FilterError(f"Invalid filter: {value!r} needs a timezone (e.g. a trailing Z).")
    lookup = {"=": "", ":": "", "<": "__lt", ">": "__gt", "<=": "__lte", ">=": "__gte", "!=": ""}[operator]
    query = Q(**{f"{column}{lookup}": moment})
    return ~query if operator == "!=" else query


def label_match(field: str, operator: str, value: str, column: str = "labels") -> Q | None:
    """``labels.key:value`` (``labels.key:*``: the label is present) on a JSON column; None when
    ``field`` names no label."""
    if not field.startswith("labels.") or len(field) == len("labels."):
        return None
    key = field[len("labels.") :]
    if value == "*" and operator == ":":
        return Q(**{f"{column}__has_key": key})
    return text_match(KeyTextTransform(key, column), operator, value)


@dataclass
class _Token:
    kind: str
    text: str
    position: int


def _tokens(text: str) -> list[_Token]:
    tokens, position = [], 0
    while position < len(text):
        if text[position:].strip() == "":
            break
        match = _TOKEN.match(text, position)
        if not match or match.end() == position:
            raise FilterError(
                f"Invalid filter: unexpected character at position {position + 1}: {text[position:][:20]!r}"
            )
        group = match.lastgroup
        value = match.group(group)
        kind = value if group == "word" and value in {"AND", "OR", "NOT"} else group
        tokens.append(_Token(kind, value, match.start(group)))
        position = match.end()
    return tokens


class _Parser:
    def __init__(self, text: str, term: Term):
        self.text = text
        self.term = term
        self.tokens = _tokens(text)
        self.index = 0
        self.depth = 0

    def peek(self) -> _Token | None:
        return self.tokens[self.index] if self.index < len(self.tokens) else None

    def take(self, kind: str | None = None) -> _Token:
        token = self.peek()
        if token is None:
            raise FilterError("Invalid filter: the expression ends too early.")
        if kind and token.kind != kind:
            raise FilterError(
                f"Invalid filter: expected {kind} at position {token.position + 1}, found {token.text!r}."
            )
        self.index += 1
        return token

    def descend(self) -> None:
        """One level deeper (a parenthesis or a NOT); ``ascend`` when it is parsed."""
        self.depth += 1
        if self.depth > MAX_FILTER_DEPTH:
            token = self.peek()
            where = f" at position {token.position + 1}" if token else ""
            raise FilterError(
                f"Invalid filter: parentheses and NOT nest more than {MAX_FILTER_DEPTH} levels deep{where}."
            )

    def ascend(self) -> None:
        self.depth -= 1

    def parse(self) -> Q:
        query = self.conjunction()
        token = self.peek()
        if token is not None:
            raise FilterError(f"Invalid filter: unexpected {token.text!r} at position {token.position + 1}.")
        return query

    def conjunction(self) -> Q:
        """The whole filter, or what a parenthesis holds."""
        self.descend()
        query = self.disjunction()
        while (token := self.peek()) is not None and token.kind not in {"rparen"}:
            if token.kind == "AND":
                self.take()
            query &= self.disjunction()
        self.ascend()
        return query

    def disjunction(self) -> Q:
        query = self.negation()
        while (token := self.peek()) is not None and token.kind == "OR":
            self.take()
            query |= self.negation()
        return query

    def negation(self) -> Q:
        token = self.peek()
        if token is not None and token.kind in {"NOT", "minus"}:
            self.take()
            self.descend()
            query = ~self.negation()
            self.ascend()
            return query
        return self.primary()

    def primary(self) -> Q:
        token = self.peek()
        if token is not None and token.kind == "lparen":
            self.take()
            query = self.conjunction()
            self.take("rparen")
            return query
        field = self.take("word")
        operator = self.take("op")
        value = self.take()
        if value.kind not in {"word", "string"}:
            raise FilterError(f"Invalid filter: expected a value after {field.text}{operator.text}.")
        text = value.text if value.kind == "string" else self._glue(value)
        return self.term(field.text, operator.text, _unquote(text))

    def _glue(self, value: _Token) -> str:
        """An unquoted value may contain colons (2026-01-01T00:00:00Z): join adjacent pieces."""
        text, end = value.text, value.position + len(value.text)
        while (
            (token := self.peek()) is not None
            and token.position == end
            and token.kind in {"op", "word"}
            and (token.kind == "word" or token.text == ":")
        ):
            self.take()
            text += token.text
            end = token.position + len(token.text)
        return text


def _unquote(text: str) -> str:
    if text.startswith('"'):
        return re.sub(r"\\(.)", r"\1", text[1:-1])
    return text
