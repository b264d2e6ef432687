"""Bash lexer: text -> words (made of literal, parameter, arithmetic and unknown parts) and
operators, each with its offset. Hand-rolled, linear, never raises on bad input: an
unterminated quote or heredoc ends at the end of the file and is reported as a problem."""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from generator.values import record

OPERATORS = ("&&", "||", ";;", ";&", "|&", ";", "&", "|", "(", ")", "\n")
REDIRECTS = ("<<<", "<<-", "<<", ">>", "&>>", "&>", ">&", "<&", ">|", "<>", ">", "<")
PARAM_OPS = (":-", ":=", ":+", ":?", "-", "=", "+", "?", "%%", "%", "##", "#", "//", "/", "^^",
             "^", ",,", ",", ":")
NAME_CHARS = set("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_")
_PLAIN = re.compile(r"[^ \t\r\n;&|()<>\\'\"$`]+")  # a run of unquoted literal characters
_QUOTED_PLAIN = re.compile(r'[^"\\$`]+')  # inside double quotes
_HEREDOC_PLAIN = re.compile(r"[^\\$`]+")  # inside an expanding heredoc body
_BLANKS = re.compile(r"[ \t\r]+")
SPECIAL_PARAMS = set("@*#?$!-0123456789")


@dataclass
class Lit:
    """Literal text in a shell word."""

    text: str
    offset: int
    quoted: bool = False


@record
class Param:
    """A parameter expansion (${NAME}, ${NAME:-default}, ...) in a shell word."""

    name: str
    offset: int
    quoted: bool = False
    op: str = ""
    arg: list | None = None  # parts of the operator's word
    index: str | None = None  # "@", "*", or an index text
    length: bool = False  # ${#X}
    indirect: bool = False  # ${!X}


@record
class Arith:
    """An arithmetic expansion $((...)) in a shell word."""

    parts: list
    offset: int
    quoted: bool = False


@record
class Unknown:
    """A command substitution, backtick or anything else only known at run time."""

    text: str
    offset: int
    quoted: bool = False


@dataclass
class Word:
    """A shell word: its parts, before expansion."""

    parts: list
    offset: int
    end: int = 0

    def literal(self) -> str | None:
        """The word's text if it is made of literals only (e.g. a keyword or a name)."""
        if all(isinstance(p, Lit) for p in self.parts):
            return "".join(p.text for p in self.parts)
        return None


@record
class ArrayAssign:
    """An array assignment NAME=(...) or NAME+=(...)."""

    name: str
    append: bool
    words: list[Word]
    offset: int


@dataclass
class Op:
    """A control operator (; && || | & newline)."""

    text: str
    offset: int


@record
class Redirect:
    """A redirection, with its here-document if it has one."""

    op: str
    target: Word | None
    offset: int
    heredoc: Heredoc | None = None


@record
class Heredoc:
    """A here-document's body and how it expands."""

    delimiter: str
    expand: bool
    strip_tabs: bool
    parts: list = field(default_factory=list)
    body_offset: int = 0
    terminated: bool = False


# <<EOF, <<-'EOF', <<\EOF (not <<< nor an arithmetic 1<<2)
_HEREDOC_START = re.compile(r"(?<!<)<<(?!<)(-?)[ \t]*(['\"]?)\\?([A-Za-z_][A-Za-z0-9_.-]*)\2")
_NEXT_OPTION = re.compile(r"[ \t]*-")
_BLANKS_TO_EOL = re.compile(r"[ \t]+\n")


class Lexer:
    def __init__(self, text: str, base: int = 0) -> None:
        self.s = text
        self.i = 0
        self.base = base  # offset of text[0] in the file (for re-lexed strings)
        self.items: list = []
        self.pending: list[Heredoc] = []
        self.problems: list[tuple[int, str]] = []
        # (offset, kind) of what cuts a command short: a comment inside a backslash-continued
        # command whose next line goes on with options; a backslash followed by blanks at a line's end
        self.cuts: list[tuple[int, str]] = []
        self.continued = False  # the last thing read was a backslash-newline

    # -- helpers -----------------------------------------------------------------------------
    def peek(self, k: int = 0) -> str:
        j = self.i + k
        return self.s[j] if j < len(self.s) else ""

    def at(self, token: str) -> bool:
        return self.s.startswith(token, self.i)

    def off(self, i: int | None = None) -> int:
        return self.base + (self.i if i is None else i)

    # -- top level ---------------------------------------------------------------------------
    def run(self) -> list:
        s = self.s
        while self.i < len(s):
            c = s[self.i]
            if c in " \t\r":
                self.i = _BLANKS.match(s, self.i).end()
                continue
            if c == "\\" and self.peek(1) == "\n":
                self.i += 2
                self.continued = True
                continue
            if c == "#":
                end = s.find("\n", self.i)
                if self.continued and end >= 0 and _NEXT_OPTION.match(s, end + 1):
                    self.cuts.append((self.off(), "comment"))  # bash ends the command here
                self.i = len(s) if end < 0 else end
                continue
            self.continued = False
            if c == "\n":
                self.items.append(Op("\n", self.off()))
                self.i += 1
                self.read_heredocs()
            elif (redirect := self.match(REDIRECTS)) is not None or (c.isdigit() and self._fd_redirect()):
                self.read_redirect(redirect)
            elif (op := self.match(OPERATORS)) is not None:
                self.items.append(Op(op, self.off()))
                self.i += len(op)
            else:
                self.read_word_or_array()
        if self.pending:
            for doc in self.pending:
                self.problems.append((doc.body_offset, f"heredoc <<{doc.delimiter} has no body"))
        return self.items

    def match(self, options: tuple[str, ...]) -> str | None:
        m = _ALTERNATIVES[options].match(self.s, self.i)
        return m.group() if m else None

    def _fd_redirect(self) -> bool:
        j = self.i
        while j < len(self.s) and self.s[j].isdigit():
            j += 1
        return j < len(self.s) and self.s[j] in "<>"

    def read_redirect(self, op: str | None) -> None:
        start = self.i
        while self.s[self.i].isdigit():
            self.i += 1
        op = self.match(REDIRECTS) or ">"
        self.i += len(op)
        if op in (">&", "<&") and self.peek() and (self.peek().isdigit() or self.peek() == "-"):
            self.i += 1
            self.items.append(Redirect(op, None, self.off(start)))
            return
        while self.peek() in (" ", "\t"):
            self.i += 1
        target = self.read_word() if self.peek() and self.peek() not in "\n;&|()<>" else None
        redirect = Redirect(op, target, self.off(start))
        if op in ("<<", "<<-") and target is not None:
            quoted = any(getattr(p, "quoted", False) for p in target.parts) or \
                "\\" in self.s[target.offset - self.base:target.end - self.base]
            delimiter = "".join(p.text for p in target.parts if isinstance(p, Lit))
            redirect.heredoc = Heredoc(delimiter, not quoted, op == "<<-")
            self.pending.append(redirect.heredoc)
        self.items.append(redirect)

    def read_heredocs(self) -> None:
        for doc in self.pending:
            doc.body_offset = self.off()
            lines_start = self.i
            while self.i < len(self.s):
                end = self.s.find("\n", self.i)
                end = len(self.s) if end < 0 else end
                line = self.s[self.i:end]
                check = line.lstrip("\t") if doc.strip_tabs else line
                if check.rstrip("\r") == doc.delimiter:
                    body = self.s[lines_start:self.i]
                    self.i = min(end + 1, len(self.s))
                    doc.terminated = True
                    break
                self.i = end + 1
            else:
                body = self.s[lines_start:]
                self.i = len(self.s)
                self.problems.append((doc.body_offset, f"heredoc <<{doc.delimiter} is not terminated"))
            base = self.base + lines_start
            if doc.expand:
                sub = Lexer(body, base)
                doc.parts = sub.read_quoted_text(until=None)
                self.problems += sub.problems
            else:
                doc.parts = [Lit(body, base, True)]
        self.pending = []

    # -- words -------------------------------------------------------------------------------
    def read_word_or_array(self) -> None:
        start = self.i
        j = self.i
        while j < len(self.s) and self.s[j] in NAME_CHARS:
            j += 1
        if j > start and not self.s[start].isdigit() and self.s.startswith(("=(", "+=("), j):
            append = self.s[j] == "+"
            name = self.s[start:j]
            self.i = j + (3 if append else 2)
            self.items.append(ArrayAssign(name, append, self.read_array_words(), self.off(start)))
            return
        word = self.read_word()
        if word.parts:
            self.items.append(word)
        elif self.i == start:  # cannot make progress on this character: take it literally
            self.items.append(Word([Lit(self.s[self.i], self.off())], self.off(), self.off() + 1))
            self.i += 1

    def read_array_words(self) -> list[Word]:
        words: list[Word] = []
        while self.i < len(self.s):
            c = self.s[self.i]
            if c in " \t\r\n":
                self.i += 1
            elif c == "\\" and self.peek(1) == "\n":
                self.i += 2
            elif c == "#":
                while self.i < len(self.s) and self.s[self.i] != "\n":
                    self.i += 1
            elif c == ")":
                self.i += 1
                return words
            else:
                before = self.i
                word = self.read_word()
                if word.parts:
                    words.append(word)
                if self.i == before:
                    self.i += 1
        self.problems.append((self.off(), "array is not closed with )"))
        return words

    def read_word(self) -> Word:
        start = self.i
        parts: list = []
        s = self.s
        while self.i < len(s):
            c = s[self.i]
            if c in " \t\r\n;&|()<>":
                break
            if c == "\\":
                if self.peek(1) == "\n":
                    self.i += 2
                    continue
                if _BLANKS_TO_EOL.match(s, self.i + 1):
                    self.cuts.append((self.off(), "backslash"))
                parts.append(Lit(self.peek(1), self.off(), True))
                self.i += 2
            elif c == "'":
                end = s.find("'", self.i + 1)
                if end < 0:
                    self.problems.append((self.off(), "unterminated single quote"))
                    end = len(s)
                parts.append(Lit(s[self.i + 1:end], self.off(self.i + 1), True))
                self.i = end + 1
            elif c == '"':
                self.i += 1
                parts += self.read_quoted_text(until='"')
            elif c == "$":
                parts.append(self.read_dollar(quoted=False))
            elif c == "`":
                parts.append(self.read_backtick(quoted=False))
            else:
                j = _PLAIN.match(s, self.i).end()
                parts.append(Lit(s[self.i:j], self.off()))
                self.i = j
        return Word(parts, self.off(start), self.off())

    def read_quoted_text(self, until: str | None) -> list:
        """Double-quoted text (or an expanding heredoc body when ``until`` is None)."""
        parts: list = []
        s = self.s
        buffer_start, buffer = self.i, []
        while self.i < len(s):
            c = s[self.i]
            if until is not None and c == until:
                self.i += 1
                break
            if c == "\\" and self.peek(1) in ('$', '`', '"', "\\", "\n") and (until or self.peek(1) != '"'):
                if buffer:
                    parts.append(Lit("".join(buffer), self.off(buffer_start), True))
                    buffer = []
                if self.peek(1) != "\n":
                    parts.append(Lit(self.peek(1), self.off(), True))
                self.i += 2
                buffer_start = self.i
            elif c in "$`":
                if buffer:
                    parts.append(Lit("".join(buffer), self.off(buffer_start), True))
                    buffer = []
                parts.append(self.read_dollar(quoted=True) if c == "$" else self.read_backtick(True))
                buffer_start = self.i
            else:
                if not buffer:
                    buffer_start = self.i
                if c == "\\" and until and _BLANKS_TO_EOL.match(s, self.i + 1):
                    self.cuts.append((self.off(), "backslash"))  # a word "\" once split
                plain = (_QUOTED_PLAIN if until else _HEREDOC_PLAIN).match(s, self.i)
                end = plain.end() if plain else self.i + 1
                buffer.append(s[self.i:end])
                self.i = end
        else:
            if until is not None:
                self.problems.append((self.off(), "unterminated double quote"))
        if buffer:
            parts.append(Lit("".join(buffer), self.off(buffer_start), True))
        return parts

    def read_backtick(self, quoted: bool) -> Unknown:
        start = self.i
        end = self.s.find("`", self.i + 1)
        while end > 0 and self.s[end - 1] == "\\":
            end = self.s.find("`", end + 1)
        if end < 0:
            self.problems.append((self.off(), "unterminated backtick"))
            end = len(self.s) - 1
        self.i = end + 1
        return Unknown(self.s[start:self.i], self.off(start), quoted)

    def skip_balanced(self, open_: str, close: str, command: bool = False) -> int:
        """From just after an opening bracket, the index just after its match. In a ``command``
        substitution, comments and heredoc bodies are skipped as bash does (a ``don't`` or a
        ``)`` in them does not count)."""
        depth, s = 1, self.s
        pending: list[tuple[bool, str]] = []  # heredocs whose bodies start at the next newline
        while self.i < len(s):
            c = s[self.i]
            if command and c == "#" and (self.i == 0 or s[self.i - 1] in " \t\n;&|("):
                end = s.find("\n", self.i)
                self.i = len(s) if end < 0 else end
                continue
            if command and c == "<" and (m := _HEREDOC_START.match(s, self.i)):
                pending.append((m.group(1) == "-", m.group(3)))
                self.i = m.end()
                continue
            if c == "\n" and pending:
                self.i += 1
                for strip, delimiter in pending:
                    while self.i < len(s):
                        end = s.find("\n", self.i)
                        end = len(s) if end < 0 else end
                        line = s[self.i:end]
                        self.i = end + 1
                        if (line.lstrip("\t") if strip else line).rstrip("\r") == delimiter:
                            break
                pending = []
                continue
            if c == "\\":
                self.i += 2
                continue
            if c == "'":
                end = s.find("'", self.i + 1)
                self.i = len(s) if end < 0 else end + 1
                continue
            if c == '"':
                self.i += 1
                self.read_quoted_text('"')
                continue
            if c == open_:
                depth += 1
            elif c == close:
                depth -= 1
                if depth == 0:
                    self.i += 1
                    return self.i
            self.i += 1
        self.problems.append((self.off(), f"unterminated {open_}"))
        return self.i

    def read_dollar(self, quoted: bool) -> object:
        start = self.i
        s = self.s
        if self.at("$(("):
            self.i += 3
            inner_start = self.i
            self.skip_balanced("(", ")")
            end = self.i
            if end <= len(s) and s[end - 1:end] == ")" and self.peek() == ")":
                self.i += 1
                sub = Lexer(s[inner_start:end - 1], self.off(inner_start))
                return Arith(sub.read_quoted_text(None), self.off(start), quoted)
            return Unknown(s[start:self.i], self.off(start), quoted)  # $( (...) ) subshell
        if self.at("$("):
            self.i += 2
            self.skip_balanced("(", ")", command=True)
            return Unknown(s[start:self.i], self.off(start), quoted)
        if self.at("${"):
            self.i += 2
            inner_start = self.i
            self.skip_balanced("{", "}")
            inner = s[inner_start:self.i - 1]
            return self.parse_braced(inner, self.off(start), self.off(inner_start), quoted)
        if self.at("$'"):
            end = s.find("'", self.i + 2)
            end = len(s) if end < 0 else end
            text = s[self.i + 2:end].encode("utf-8", "backslashreplace").decode("unicode_escape", "replace")
            self.i = end + 1
            return Lit(text, self.off(start), True)
        j = self.i + 1
        if j < len(s) and s[j] in SPECIAL_PARAMS:
            self.i = j + 1
            return Param(s[j], self.off(start), quoted)
        while j < len(s) and s[j] in NAME_CHARS:
            j += 1
        if j == self.i + 1:
            self.i += 1
            return Lit("$", self.off(start), quoted)
        name = s[self.i + 1:j]
        self.i = j
        return Param(name, self.off(start), quoted)

    def parse_braced(self, inner: str, offset: int, inner_offset: int, quoted: bool) -> object:
        param = Param("", offset, quoted)
        k = 0
        if inner.startswith("#") and len(inner) > 1:
            param.length, k = True, 1
        elif inner.startswith("!"):
            param.indirect, k = True, 1
        j = k
        if j < len(inner) and inner[j].isdigit():  # ${10}: the tenth argument
            while j < len(inner) and inner[j].isdigit():
                j += 1
        elif j < len(inner) and inner[j] in SPECIAL_PARAMS and not param.length:
            j += 1
        else:
            while j < len(inner) and inner[j] in NAME_CHARS:
                j += 1
        param.name = inner[k:j]
        if j < len(inner) and inner[j] == "[":
            close = inner.find("]", j)
            close = len(inner) if close < 0 else close
            param.index = inner[j + 1:close]
            j = close + 1
        rest = inner[j:]
        for op in PARAM_OPS:
            if rest.startswith(op):
                param.op = op
                sub = Lexer(rest[len(op):], inner_offset + j + len(op))
                word = sub.read_quoted_text(None) if quoted else sub.read_word_text()
                param.arg = word
                break
        else:
            if rest:
                return Unknown("${" + inner + "}", offset, quoted)
        if not param.name:
            return Unknown("${" + inner + "}", offset, quoted)
        return param

    def read_word_text(self) -> list:
        """An operator argument inside ${...}: quotes and expansions, spaces kept."""
        parts: list = []
        while self.i < len(self.s):
            before = self.i
            word = self.read_word()
            parts += word.parts
            if self.i < len(self.s) and self.s[self.i] in " \t\n;&|()<>":
                parts.append(Lit(self.s[self.i], self.off()))
                self.i += 1
            elif self.i == before:
                self.i += 1
        return parts


_ALTERNATIVES = {options: re.compile("|".join(re.escape(o) for o in options))
                 for options in (OPERATORS, REDIRECTS)}  # each tuple lists longer tokens first


STOPPED = "reading stopped"  # a problem that ends the reading of a file (lint: GL902, an error)


def lex(text: str, base: int = 0) -> tuple[list, list[tuple[int, str]], list[tuple[int, str]]]:
    """(items, problems, what cuts a command short: (offset, "comment" or "backslash"))."""
    lexer = Lexer(text, base)
    try:
        items = lexer.run()
    except RecursionError:  # nesting ("$( or ${A:- a thousand deep) beyond what is followed
        items = lexer.items
        lexer.problems.append((lexer.off(), f"{STOPPED}: nesting too deep to follow; the rest of the file is "
                                            "not read"))
    return items, lexer.problems, lexer.cuts
