"""Bash arithmetic ($(( ... ))) on 64-bit integers, without eval: a small precedence parser.
Returns None for anything only known at run time or not supported (assignments, ++, --)."""

from __future__ import annotations

import re
from collections.abc import Callable

_TOKEN = re.compile(r"\s*(?:(0[xX][0-9a-fA-F]+|[0-9]+#[0-9a-zA-Z@_]+|[0-9]+)|([A-Za-z_][A-Za-z0-9_]*)|"
                    r"(\*\*|<<|>>|<=|>=|==|!=|&&|\|\||[-+*/%<>&|^!~?:(),]))")
_BINARY = [  # lowest to highest precedence
    ("||",), ("&&",), ("|",), ("^",), ("&",), ("==", "!="), ("<", ">", "<=", ">="), ("<<", ">>"),
    ("+", "-"), ("*", "/", "%"),
]
MASK = (1 << 64) - 1


def _wrap(value: int) -> int:
    value &= MASK
    return value - (1 << 64) if value >> 63 else value


class _Unknown(Exception):
    pass


class _Parser:
    def __init__(self, text: str, lookup: Callable[[str], int | None]) -> None:
        self.tokens: list[tuple[str, str]] = []
        pos = 0
        text = text.strip()
        while pos < len(text):
            m = _TOKEN.match(text, pos)
            if not m or m.end() == pos:
                raise _Unknown
            kind = "num" if m.group(1) else "name" if m.group(2) else "op"
            self.tokens.append((kind, m.group(m.lastindex)))
            pos = m.end()
            while pos < len(text) and text[pos].isspace():
                pos += 1
        self.k = 0
        self.lookup = lookup

    def peek(self) -> str | None:
        return self.tokens[self.k][1] if self.k < len(self.tokens) else None

    def take(self) -> tuple[str, str]:
        if self.k >= len(self.tokens):
            raise _Unknown
        self.k += 1
        return self.tokens[self.k - 1]

    def parse(self) -> int:
        value = self.ternary()
        while self.peek() == ",":
            self.take()
            value = self.ternary()
        if self.k != len(self.tokens):
            raise _Unknown
        return value

    def ternary(self) -> int:
        cond = self.binary(0)
        if self.peek() != "?":
            return cond
        self.take()
        yes = self.ternary()
        if self.take()[1] != ":":
            raise _Unknown
        no = self.ternary()
        return yes if cond else no

    def binary(self, level: int) -> int:
        if level == len(_BINARY):
            return self.power()
        left = self.binary(level + 1)
        while self.peek() in _BINARY[level]:
            op = self.take()[1]
            right = self.binary(level + 1)
            left = _apply(op, left, right)
        return left

    def power(self) -> int:
        base = self.unary()
        if self.peek() == "**":
            self.take()
            exponent = self.power()
            if exponent < 0:
                raise _Unknown
            return _wrap(pow(base, exponent, 1 << 64))
        return base

    def unary(self) -> int:
        op = self.peek()
        if op in ("-", "+", "!", "~"):
            self.take()
            value = self.unary()
            return {"-": _wrap(-value), "+": value, "!": int(not value), "~": _wrap(~value)}[op]
        return self.primary()

    def primary(self) -> int:
        kind, text = self.take()
        if text == "(":
            value = self.ternary()
            if self.take()[1] != ")":
                raise _Unknown
            return value
        if kind == "num":
            return _number(text)
        if kind == "name":
            value = self.lookup(text)
            if value is None:
                raise _Unknown
            return value
        raise _Unknown


def _number(text: str) -> int:
    if "#" in text:
        base, digits = text.split("#", 1)
        try:
            return _wrap(int(digits, int(base)))
        except ValueError:
            raise _Unknown from None
    if text.lower().startswith("0x"):
        return _wrap(int(text, 16))
    if len(text) > 1 and text.startswith("0"):
        try:
            return _wrap(int(text, 8))
        except ValueError:
            raise _Unknown from None
    return _wrap(int(text))


def _apply(op: str, a: int, b: int) -> int:
    if op in ("/", "%"):
        if b == 0:
            raise _Unknown
        quotient = abs(a) // abs(b) * (1 if (a >= 0) == (b >= 0) else -1)  # C truncation
        return _wrap(quotient if op == "/" else a - quotient * b)
    if op in ("<<", ">>"):
        return _wrap(a << (b & 63)) if op == "<<" else a >> (b & 63)
    return _wrap({
        "+": lambda: a + b, "-": lambda: a - b, "*": lambda: a * b, "&": lambda: a & b,
        "|": lambda: a | b, "^": lambda: a ^ b, "==": lambda: int(a == b), "!=": lambda: int(a != b),
        "<": lambda: int(a < b), ">": lambda: int(a > b), "<=": lambda: int(a <= b),
        ">=": lambda: int(a >= b), "&&": lambda: int(bool(a) and bool(b)),
        "||": lambda: int(bool(a) or bool(b)),
    }[op]())


def evaluate(text: str, lookup: Callable[[str], int | None]) -> int | None:
    """The value of an arithmetic expression, or None when it is not statically known."""
    try:
        return _Parser(text, lookup).parse()
    except (_Unknown, RecursionError, ValueError, OverflowError):
        return None
