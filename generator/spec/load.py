"""Safe YAML loading with the positions of every node.

Nothing in a spec is executed: only the plain YAML 1.2 scalar types are recognised (no
``!!python/...`` tags, no YAML 1.1 ``yes``/``on`` booleans or ``48:00:00`` base-60 integers),
duplicate keys are rejected (PyYAML would silently keep the last), and aliases are bounded so
that an alias bomb cannot expand into millions of nodes.
"""

from __future__ import annotations

import hashlib
import io
import re
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import yaml

from generator.errors import Location, UserError
from generator.readfile import Refused, read_capped
from generator.values import value

MAX_EXPANDED_NODES = 10_000
MAX_FILE_BYTES = 1 << 20
MAX_DIGITS = 1000  # of one integer
MAX_DEPTH = 64  # levels of nesting a spec may have (it needs 5)
_CONTROL_IN_PATH = re.compile(r"[\x00-\x1f\x7f]")


class _SpecRules:
    """What a spec loader adds to PyYAML's safe one: YAML 1.2 core-schema scalars (the
    resolvers below) and duplicate-key detection."""

    yaml_implicit_resolvers: dict = {}

    def construct_mapping(self, node: yaml.MappingNode, deep: bool = False) -> dict:
        seen: dict[Any, yaml.Node] = {}
        for key_node, _ in node.value:
            key = self.construct_object(key_node, deep=True)
            if not isinstance(key, str | int | float | bool | type(None)):
                raise _located(key_node, "mapping keys must be plain scalars")
            if key in seen:
                first = seen[key].start_mark.line + 1
                raise _located(key_node, f"duplicate key {key!r} (first defined on line {first})")
            seen[key] = key_node
        return super().construct_mapping(node, deep=deep)


_IMPLICIT = [
    ("tag:yaml.org,2002:null", r"^(?:~|null|Null|NULL|)$", ["~", "n", "N", ""]),
    ("tag:yaml.org,2002:bool", r"^(?:true|True|TRUE|false|False|FALSE)$", list("tTfF")),
    ("tag:yaml.org,2002:int", r"^(?:[-+]?[0-9][0-9_]*|0x[0-9a-fA-F]+|0o[0-7]+)$", list("-+0123456789")),
    (
        "tag:yaml.org,2002:float",
        r"^(?:[-+]?(?:\.[0-9]+|[0-9][0-9_]*(?:\.[0-9_]*)?)(?:[eE][-+]?[0-9]+)?"
        r"|[-+]?\.(?:inf|Inf|INF)|\.(?:nan|NaN|NAN))$",
        list("-+.0123456789"),
    ),
    ("tag:yaml.org,2002:merge", r"^(?:<<)$", ["<"]),
]


class _SpecLoader(_SpecRules, yaml.SafeLoader):
    """The pure-Python loader: its messages and positions are the ones a bad spec is told."""


# libyaml's parser (where PyYAML was built with it) with the same constructor and resolvers:
# the same nodes and positions as the pure-Python one, several times faster; a document it
# refuses is read again by _SpecLoader, whose message is the one reported
_FastSpecLoader = None
if getattr(yaml, "__with_libyaml__", False):
    from yaml.cyaml import CParser

    class _FastSpecLoader(_SpecRules, CParser, yaml.constructor.SafeConstructor, yaml.resolver.Resolver):
        def __init__(self, stream) -> None:
            CParser.__init__(self, stream)
            yaml.constructor.SafeConstructor.__init__(self)
            yaml.resolver.Resolver.__init__(self)


for _loader in filter(None, (_SpecLoader, _FastSpecLoader)):
    for _tag, _regexp, _first in _IMPLICIT:
        _loader.add_implicit_resolver(_tag, re.compile(_regexp), _first)
    _loader.add_constructor("tag:yaml.org,2002:int", lambda loader, node: _bounded_int(loader, node))


def _bounded_int(loader, node: yaml.ScalarNode) -> int:
    """An integer of at most MAX_DIGITS digits (Python converts at most 4,300: a longer one
    was a ValueError, an internal error)."""
    digits = len(node.value.lstrip("+-").replace("_", ""))
    if digits > MAX_DIGITS:
        raise _located(node, f"a number of {digits:,} digits; at most {MAX_DIGITS:,} are read")
    return yaml.constructor.SafeConstructor.construct_yaml_int(loader, node)


class _LocatedYAMLError(Exception):
    def __init__(self, mark: yaml.Mark | None, message: str) -> None:
        super().__init__(message)
        self.mark = mark
        self.message = message


def _located(node: yaml.Node, message: str) -> _LocatedYAMLError:
    return _LocatedYAMLError(node.start_mark, message)


@value
class Document:
    """A loaded YAML document: its data and the node tree that knows where each value is."""

    file: str
    data: Any
    root: yaml.Node
    digest: str = ""  # sha256 of the file's text: generated files name the spec they came from

    def locate(self, path: Sequence[str | int], key: bool = False) -> Location:
        """Where ``path`` is (the deepest existing part of it); ``key=True`` points at the key."""
        node, key_node = self.root, None
        for part in path:
            child = _child(node, part)
            if child is None:
                break
            key_node, node = child
        target = key_node if key and key_node is not None else node
        mark = target.start_mark  # marks carry the file they came from (overlays merge files)
        return Location(mark.name or self.file, mark.line + 1, mark.column + 1)


def _child(node: yaml.Node, part: str | int) -> tuple[yaml.Node | None, yaml.Node] | None:
    if isinstance(node, yaml.MappingNode):
        for key_node, value_node in node.value:
            if key_node.value == str(part):
                return key_node, value_node
    elif isinstance(node, yaml.SequenceNode) and isinstance(part, int) and part < len(node.value):
        return None, node.value[part]
    return None


def _count_expanded(root: yaml.Node) -> None:
    """Reject documents whose aliases expand to more than MAX_EXPANDED_NODES nodes."""
    count, stack = 0, [root]
    while stack:
        node = stack.pop()
        count += 1
        if count > MAX_EXPANDED_NODES:
            raise _LocatedYAMLError(
                root.start_mark,
                f"document expands to more than {MAX_EXPANDED_NODES:,} nodes through aliases "
                "(an alias bomb?); write the values out instead of nesting aliases",
            )
        if isinstance(node, yaml.MappingNode):
            for key_node, value_node in node.value:
                stack.extend((key_node, value_node))
        elif isinstance(node, yaml.SequenceNode):
            stack.extend(node.value)


def _position(text: str, offset: int) -> tuple[int, int]:
    line = text.count("\n", 0, offset) + 1
    return line, offset - (text.rfind("\n", 0, offset) + 1) + 1


def read_text(path: Path, display: str) -> str:
    """The file's text; a missing, unreadable, oversized or non-UTF-8 file is a UserError."""
    if _CONTROL_IN_PATH.search(display):
        raise UserError("the path holds a control character (a newline?); rename the file",
                        Location(repr(display)))
    try:
        raw = read_capped(path, MAX_FILE_BYTES)
    except Refused as exc:
        why = str(exc)
        if why == "is a directory":
            why = "is a directory, expected a YAML spec file"
        elif why.startswith("more than"):
            why = f"a spec is at most {MAX_FILE_BYTES:,} bytes"
        raise UserError(why, Location(display)) from None
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        head = raw[: exc.start].decode("utf-8", errors="replace")
        line, col = _position(head, len(head))
        raise UserError(
            f"not valid UTF-8 (byte 0x{raw[exc.start]:02x}); save the file as UTF-8",
            Location(display, line, col),
        ) from None


def _too_deep(text: str) -> tuple[int, int] | None:
    """Where flow collections ([ {) first nest deeper than MAX_DEPTH, or a line is indented
    deeper than MAX_DEPTH levels of two spaces: the parser recurses per level, so such a
    document is refused before it is parsed."""
    depth, quote = 0, None
    for offset, char in enumerate(text):
        if quote:
            quote = None if char == quote else quote
        elif char in "'\"":
            quote = char
        elif char in "[{":
            depth += 1
            if depth > MAX_DEPTH:
                return _position(text, offset)
        elif char in "]}":
            depth = max(depth - 1, 0)
        elif char == "#" and depth == 0:
            quote = "\n"  # a comment runs to the end of its line
    for number, line in enumerate(text.splitlines(), 1):
        indent = len(line) - len(line.lstrip(" -"))
        if indent > 2 * MAX_DEPTH:
            return number, indent + 1
    return None


def load_yaml(text: str, display: str) -> Document:
    """Parse one YAML document safely; every problem is a located UserError."""
    deep = _too_deep(text)
    if deep:
        raise UserError(f"nested more than {MAX_DEPTH} levels deep; a spec is a few levels of "
                        "sections and values", Location(display, *deep))
    root, data = _load_fast(text, display) or _load_pure(text, display)
    return Document(display, data, root, hashlib.sha256(text.encode("utf-8")).hexdigest())


def _read(loader) -> tuple[yaml.Node | None, Any]:
    """(root node, data) of the loader's one document (root None: the document is empty), its
    aliases bounded; the loader is disposed of."""
    try:
        root = loader.get_single_node()
        if root is None:
            return None, None
        _count_expanded(root)
        return root, loader.construct_document(root)
    finally:
        loader.dispose()


def _load_fast(text: str, display: str) -> tuple[yaml.Node, Any] | None:
    """The document as libyaml's parser reads it, or None where PyYAML has no libyaml, the
    document is empty or has any problem (the pure-Python loader then reads it and says what is
    wrong) or holds a ``!``, a ``?`` or a tab, where the two parsers differ: libyaml reads
    ``key: !`` as '' where PyYAML reads null, and accepts ``[0?]`` and a tab in a flow list,
    which PyYAML refuses."""
    if _FastSpecLoader is None or "!" in text or "?" in text or "\t" in text:
        return None
    stream = io.StringIO(text)
    stream.name = display  # every mark names its file
    try:
        root, data = _read(_FastSpecLoader(stream))
    except (yaml.YAMLError, _LocatedYAMLError):
        return None
    return None if root is None else (root, data)


def _load_pure(text: str, display: str) -> tuple[yaml.Node, Any]:
    """The document as the pure-Python loader reads it; every problem is a located UserError."""
    try:
        loader = _SpecLoader(text)
    except yaml.reader.ReaderError as exc:  # a control character or another unprintable one
        raise UserError(f"the character {chr(exc.character)!r} (U+{exc.character:04X}) is not allowed in "
                        "YAML; remove it", Location(display, *_position(text, exc.position))) from None
    loader.name = display  # every mark names its file
    try:
        root, data = _read(loader)
    except _LocatedYAMLError as exc:
        line, col = (exc.mark.line + 1, exc.mark.column + 1) if exc.mark else (None, None)
        raise UserError(exc.message, Location(display, line, col)) from None
    except yaml.constructor.ConstructorError as exc:
        mark = exc.problem_mark
        tag = re.search(r"'(tag:[^']*)'", str(exc.problem))
        what = f"tag {tag.group(1).replace('tag:yaml.org,2002:', '!!')}" if tag else exc.problem
        raise UserError(
            f"{what} is not allowed: a spec holds plain data (mappings, lists, strings, numbers)",
            Location(display, mark.line + 1, mark.column + 1) if mark else Location(display),
        ) from None
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        problem = exc.problem or exc.context or "invalid YAML"
        raise UserError(
            f"invalid YAML: {problem}",
            Location(display, mark.line + 1, mark.column + 1) if mark else Location(display),
        ) from None
    except yaml.YAMLError as exc:
        raise UserError(f"invalid YAML: {exc}", Location(display)) from None
    if root is None:
        raise UserError("the file is empty; a spec needs at least name, framework, cluster, "
                        "model, parallelism and batch", Location(display, 1, 1))
    return root, data
