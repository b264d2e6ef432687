"""JSON as DeepSpeed reads a config file (hjson): comments (#, //, /* */) and trailing commas
allowed, duplicate keys an error. Every value keeps its offset so findings can name a line."""

from __future__ import annotations

import re
from typing import Any

from generator.values import record

_NUMBER = re.compile(r"-?(?:0|[1-9][0-9]*)(?:\.[0-9]+)?(?:[eE][-+]?[0-9]+)?")
_STRING = re.compile(r'"((?:[^"\\\n]|\\.)*)"')
MAX_DEPTH = 64
MAX_DIGITS = 1000


class JsonError(ValueError):
    def __init__(self, message: str, offset: int) -> None:
        super().__init__(message)
        self.offset = offset


@record
class Node:
    """A JSON value with where it (and its key) starts in the text."""

    value: Any  # dict[str, Node] | list[Node] | scalar
    offset: int
    key_offset: int | None = None

    def plain(self) -> Any:
        if isinstance(self.value, dict):
            return {k: v.plain() for k, v in self.value.items()}
        if isinstance(self.value, list):
            return [v.plain() for v in self.value]
        return self.value

    def get(self, *path: str) -> Node | None:
        node: Node | None = self
        for key in path:
            if node is None or not isinstance(node.value, dict):
                return None
            node = node.value.get(key)
        return node


class _Parser:
    def __init__(self, text: str) -> None:
        self.s, self.i = text, 0

    def skip(self) -> None:
        s = self.s
        while self.i < len(s):
            c = s[self.i]
            if c in " \t\r\n":
                self.i += 1
            elif c == "#" or s.startswith("//", self.i):
                end = s.find("\n", self.i)
                self.i = len(s) if end < 0 else end + 1
            elif s.startswith("/*", self.i):
                end = s.find("*/", self.i + 2)
                if end < 0:
                    raise JsonError("unterminated /* comment", self.i)
                self.i = end + 2
            else:
                return

    def value(self, depth: int) -> Node:
        if depth > MAX_DEPTH:
            raise JsonError("nested too deeply", self.i)
        self.skip()
        if self.i >= len(self.s):
            raise JsonError("unexpected end of file", self.i)
        c, start = self.s[self.i], self.i
        if c == "{":
            return self.obj(depth)
        if c == "[":
            return self.arr(depth)
        if c == '"':
            return Node(self.string(), start)
        for word, val in (("true", True), ("false", False), ("null", None)):
            if self.s.startswith(word, self.i):
                self.i += len(word)
                return Node(val, start)
        m = _NUMBER.match(self.s, self.i)
        if m:
            self.i = m.end()
            text = m.group()
            if len(text) > MAX_DIGITS:  # Python converts at most 4,300 digits to an int
                raise JsonError(f"a number of {len(text):,} digits; at most {MAX_DIGITS:,} are read", start)
            return Node(float(text) if any(ch in text for ch in ".eE") else int(text), start)
        raise JsonError(f"unexpected {c!r}", self.i)

    def string(self) -> str:
        m = _STRING.match(self.s, self.i)
        if not m:
            raise JsonError("unterminated string", self.i)
        self.i = m.end()
        try:
            return re.sub(r"\\(u[0-9a-fA-F]{4}|.)", _unescape, m.group(1))
        except ValueError:
            raise JsonError("bad escape in string", m.start()) from None

    def obj(self, depth: int) -> Node:
        start = self.i
        self.i += 1
        items: dict[str, Node] = {}
        while True:
            self.skip()
            if self.i < len(self.s) and self.s[self.i] == "}":
                self.i += 1
                return Node(items, start)
            if self.i >= len(self.s) or self.s[self.i] != '"':
                raise JsonError("expected a quoted key", self.i)
            key_offset = self.i
            key = self.string()
            if key in items:
                raise JsonError(f"Duplicate keys in DeepSpeed config: [{key!r}]", key_offset)
            self.skip()
            if self.i >= len(self.s) or self.s[self.i] != ":":
                raise JsonError("expected ':'", self.i)
            self.i += 1
            node = self.value(depth + 1)
            node.key_offset = key_offset
            items[key] = node
            self.skip()
            if self.i < len(self.s) and self.s[self.i] == ",":
                self.i += 1
            elif self.i < len(self.s) and self.s[self.i] == "}":
                continue
            else:
                raise JsonError("expected ',' or '}'", self.i)

    def arr(self, depth: int) -> Node:
        start = self.i
        self.i += 1
        items: list[Node] = []
        while True:
            self.skip()
            if self.i < len(self.s) and self.s[self.i] == "]":
                self.i += 1
                return Node(items, start)
            items.append(self.value(depth + 1))
            self.skip()
            if self.i < len(self.s) and self.s[self.i] == ",":
                self.i += 1
            elif self.i < len(self.s) and self.s[self.i] == "]":
                continue
            else:
                raise JsonError("expected ',' or ']'", self.i)


def _unescape(m: re.Match) -> str:
    esc = m.group(1)
    if esc.startswith("u"):
        return chr(int(esc[1:], 16))
    return {"n": "\n", "t": "\t", "r": "\r", "b": "\b", "f": "\f"}.get(esc, esc)


def parse(text: str) -> Node:
    """Parse ``text``; JsonError (with the offset) when it is not readable."""
    parser = _Parser(text)
    node = parser.value(0)
    parser.skip()
    if parser.i != len(text):
        raise JsonError("extra text after the JSON value", parser.i)
    return node
