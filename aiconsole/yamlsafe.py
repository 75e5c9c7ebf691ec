"""YAML that a user hands in (form fields, ``--config`` files), read with bounds.

``yaml.safe_load`` runs no code, but it has no limits: a 600-byte document of nested aliases
(the "billion laughs") loads as a small graph of shared lists, and the first thing that walks it
as a tree (the JSON encoder, a deep copy, the equivalent-command builder) expands it to billions
of values. Deep nesting overflows the composer's recursion. Here every document is refused before
anything expands it when it is

- longer than ``max_bytes`` (UTF-8),
- nested deeper than ``max_depth`` lists and mappings, or
- more than ``max_values`` values once every alias is written out (an alias counts every value
  it stands for, each time it is used), which also refuses an alias used inside its own anchor.

The counting happens while the document is composed, one node at a time, so a bomb is refused
after a few dozen nodes. Plain Python and PyYAML: the CLI's client commands use it without Django.
"""

from __future__ import annotations

from pathlib import Path

import yaml

# A config.yaml or hptuning_config.yaml is a few KB; these leave room for big categorical lists.
MAX_BYTES = 128 * 1024
MAX_VALUES = 20_000
MAX_DEPTH = 100  # as the REST API allows in a JSON body (aiconsole/parsers.py)


class YamlLimitError(yaml.YAMLError):
    """A document refused for its size, nesting or aliases. ``problem`` says which rule, in words
    a caller can put after the field's or file's name; ``problem_mark`` where, when known."""

    def __init__(self, problem: str, mark=None):
        super().__init__(problem)
        self.problem = problem
        self.problem_mark = mark

    def __str__(self) -> str:
        if self.problem_mark is None:
            return self.problem
        return f"{self.problem} (line {self.problem_mark.line + 1}, column {self.problem_mark.column + 1})"


class _BoundedLoader(yaml.SafeLoader):
    """SafeLoader that counts values and depth as it composes (aliases by the size of what they
    name), and stops at the first bound passed."""

    def __init__(self, stream, *, max_values: int, max_depth: int):
        super().__init__(stream)
        self.max_values, self.max_depth = max_values, max_depth
        self.values = 0
        self.depth = 0
        self.sizes: dict[yaml.Node, int] = {}  # a composed node → its values, aliases written out

    def _count(self, values: int, mark) -> None:
        self.values += values
        if self.values > self.max_values:
            raise YamlLimitError(
                f"the YAML expands to more than {self.max_values:,} values (an alias counts every value it repeats)",
                mark,
            )

    def compose_node(self, parent, index):
        if self.check_event(yaml.AliasEvent):
            event = self.peek_event()
            node = self.anchors.get(event.anchor)
            if node is not None:  # an undefined alias: the composer says so
                if node not in self.sizes:  # still being composed: it would contain itself
                    raise YamlLimitError(
                        f"the alias *{event.anchor} is used inside the value it names", event.start_mark
                    )
                self._count(self.sizes[node], event.start_mark)
            return super().compose_node(parent, index)
        nests = self.check_event(yaml.SequenceStartEvent, yaml.MappingStartEvent)
        self.depth += nests
        if self.depth > self.max_depth:
            raise YamlLimitError(f"the YAML nests more than {self.max_depth} levels deep", self.peek_event().start_mark)
        before = self.values
        node = super().compose_node(parent, index)
        self.depth -= nests
        self._count(1, node.start_mark)
        self.sizes[node] = self.values - before
        return node


def load(text: str | bytes, *, max_bytes: int = MAX_BYTES, max_values: int = MAX_VALUES, max_depth: int = MAX_DEPTH):
    """``yaml.safe_load`` within the bounds above; raises ``YamlLimitError`` for a bound passed
    and another ``yaml.YAMLError`` for YAML that does not parse."""
    size = len(text) if isinstance(text, bytes) else len(text.encode("utf-8", "surrogatepass"))
    if size > max_bytes:
        raise YamlLimitError(f"the YAML is longer than {max_bytes:,} bytes ({size:,})")
    loader = _BoundedLoader(text, max_values=max_values, max_depth=max_depth)
    try:
        return loader.get_single_data()
    finally:
        loader.dispose()


def read_file(path: str | Path, *, max_bytes: int = MAX_BYTES) -> bytes:
    """A YAML file's bytes for ``load`` (which reads UTF-8, or UTF-16 with a BOM, and says where
    a byte is wrong), refused without reading further when longer than ``max_bytes``.
    Raises ``OSError`` as opening and reading do, and ``YamlLimitError``."""
    with open(Path(path).expanduser(), "rb") as handle:
        data = handle.read(max_bytes + 1)
    if len(data) > max_bytes:
        raise YamlLimitError(f"the YAML is longer than {max_bytes:,} bytes")
    return data
