"""A framework's own argparse parser, read statically from its source (``ast`` only: the file
is never imported or executed, so a repository's Megatron ``arguments.py`` can be read without
its dependencies, its GPU checks or its side effects).

``read_parser_source`` walks every ``X.add_argument(...)`` call of a file and gives its options
in the catalogue format (``{flag: (dest, arity, choices, kind, default)}``, see
``generator.dialects.Catalogue``), with argparse's own rules for what the call leaves out (the
dest from the first long option, the default of a switch, ``--no-X`` of a
``BooleanOptionalAction``). What a static reading cannot know is said, never guessed: each
``gap`` is a located reason the option set may be incomplete (``complete`` is False then), and
each ``delegate`` a function from elsewhere that receives the parser and may add options of its
own, for the caller to resolve (``known_delegate``).
"""

from __future__ import annotations

import ast
import builtins
import re
from typing import Any, Literal

from generator.dialects import Catalogue
from generator.values import value

_MAX_CHARS = 5_000_000  # a parser module is ~100 kB; anything far larger is not one
_UNKNOWN = object()  # what _Reader.constant gives for an expression it does not evaluate

_ZERO_ARITY = {"store_true", "store_false", "store_const", "count", "append_const", "help",
               "version", "BooleanOptionalAction"}
# argparse's own action classes, named instead of by their registry string
_ACTION_CLASSES = {"_StoreTrueAction": "store_true", "_StoreFalseAction": "store_false",
                   "_StoreConstAction": "store_const", "_CountAction": "count",
                   "_AppendConstAction": "append_const", "_AppendAction": "append",
                   "_StoreAction": "store", "_HelpAction": "help", "_VersionAction": "version"}
_SWITCH_DEFAULT = {"store_true": False, "store_false": True}
_NARGS_CONSTANTS = {"OPTIONAL": "?", "ZERO_OR_MORE": "*", "ONE_OR_MORE": "+", "REMAINDER": "..."}
# calls that make an object that adds options from a dataclass's fields (Megatron-LM's
# megatron/training/argument_utils.py since core_v0.16; transformers' HfArgumentParser)
_GENERATORS = {"ArgumentGroupFactory", "HfArgumentParser"}
# receivers of these methods are parsers or groups (a name passed on from them is the parser)
_PARSER_METHODS = {"add_argument", "add_argument_group", "add_mutually_exclusive_group",
                   "parse_args", "parse_known_args", "set_defaults", "add_subparsers"}

_BUILTINS = frozenset(dir(builtins))  # print(parser), isinstance(parser, ...) add nothing

# DeepSpeed's deepspeed/__init__.py, add_config_arguments -> _add_core_arguments: the options
# every release since 0.3 adds (written here from that source; --deepscale* are deprecated
# spellings, hidden from --help)
_KNOWN_DELEGATES: dict[str, dict[str, tuple]] = {
    "deepspeed.add_config_arguments": {
        "--deepspeed": ("deepspeed", 0, None, None, False),
        "--deepspeed_config": ("deepspeed_config", 1, None, "str", None),
        "--deepscale": ("deepscale", 0, None, None, False),
        "--deepscale_config": ("deepscale_config", 1, None, "str", None),
    },
}


@value
class ParserSource:
    """What one Python file's argparse calls define. ``complete`` speaks for this file only: the
    options of ``delegates`` (functions from elsewhere given the parser) are not in ``options``.
    ``ignores_unknown``: True when the file parses with ``parse_known_args`` only (unknown flags
    are no error), "conditional" when it has both (behind a condition, as Megatron's
    ``ignore_unknown_args``), None when it parses nothing."""

    path: str
    options: dict[str, tuple]  # flag -> (dest, arity, choices, kind, default): Catalogue.defined
    lines: dict[str, int]  # flag -> line of its add_argument
    gaps: tuple[str, ...]  # "path:line: reason" the options may be incomplete or unread
    delegates: tuple[tuple[str, int], ...]  # (dotted callee, line), imports resolved
    unknown_choices: tuple[str, ...]  # flags whose choices are an expression (choices None)
    conditional: tuple[str, ...]  # flags added under an if or try (they may not exist at run time)
    allow_abbrev: bool | None  # None: no ArgumentParser made here, or not literally
    ignores_unknown: bool | Literal["conditional"] | None
    functions_adding: tuple[str, ...]  # functions of the file that call add_argument

    @property
    def complete(self) -> bool:
        return not self.gaps

    @property
    def unresolved_delegates(self) -> tuple[tuple[str, int], ...]:
        return tuple(d for d in self.delegates if known_delegate(d[0]) is None)

    def catalogue(self) -> Catalogue:
        """The options with those of the known delegates (the unresolved ones stay unknown)."""
        options = dict(self.options)
        for name, _ in self.delegates:
            options.update(known_delegate(name) or {})
        return Catalogue(self.path, options)


def known_delegate(name: str) -> dict[str, tuple] | None:
    """The options a well-known function given the parser adds (catalogue format), by its
    dotted name; None when it is not known. DeepSpeed's ``deepspeed.add_config_arguments``
    adds ``--deepspeed``, ``--deepspeed_config``, ``--deepscale``, ``--deepscale_config``
    (deepspeed/__init__.py, ``_add_core_arguments``)."""
    known = _KNOWN_DELEGATES.get(name)
    return dict(known) if known is not None else None


def read_parser_source(text: str, path: str) -> ParserSource:
    """The argparse options ``text`` (the source of ``path``) defines; a file that does not
    parse gives no options and a located gap, never an exception."""
    if len(text) > _MAX_CHARS:
        return _unread(path, 1, f"not read: {len(text)} characters (more than {_MAX_CHARS})")
    reader = _Reader(path)
    try:
        reader.visit(ast.parse(text, path))
    except SyntaxError as exc:
        return _unread(path, exc.lineno or 1, f"does not parse: {exc.msg}")
    except (ValueError, RecursionError, MemoryError) as exc:  # NUL bytes; nested too deeply
        return _unread(path, 1, f"not read: {exc or type(exc).__name__}")
    return reader.result()


def _unread(path: str, line: int, why: str) -> ParserSource:
    return ParserSource(path, {}, {}, (f"{path}:{line}: {why}",), (), (), (), None, None, ())


class _Reader(ast.NodeVisitor):
    """One walk over a module. Which names are parsers, and which functions are the file's own,
    is only known at the end (a function is often called above its definition), so calls that
    pass a name on are kept and judged in ``result``."""

    def __init__(self, path: str) -> None:
        self.path = path
        self.options: dict[str, tuple] = {}
        self.lines: dict[str, int] = {}
        self.gaps: dict[str, None] = {}
        self.unknown_choices: dict[str, None] = {}
        self.functions: list[str] = []  # the enclosing defs and classes
        self.adding: dict[str, None] = {}
        self.defined: set[str] = set()  # names of the file's own functions and classes
        self.imports: dict[str, str] = {}  # local name -> dotted origin
        self.parsers: set[str] = set()
        self.generators: set[str] = set()  # names bound to an ArgumentGroupFactory(...)
        self.passed: list[tuple[str, int, set[str], ast.expr]] = []  # (callee, line, names, receiver)
        self.abbrev: list[bool | None] = []
        self.parse_calls: set[str] = set()
        self.env: dict[str, Any] = {}  # loop variables over literal sequences, while unrolled
        self.loops = 0  # enclosing loops over anything else
        self.conditions = 0  # enclosing ifs and trys
        self.conditional: dict[str, None] = {}

    def gap(self, line: int, why: str) -> None:
        self.gaps[f"{self.path}:{line}: {why}"] = None

    def result(self) -> ParserSource:
        delegates = []
        for callee, line, names, receiver in self.passed:
            if not names & self.parsers or _own(callee, self.defined) or callee in _BUILTINS:
                continue
            if _is_generator(receiver, self.generators):
                continue  # its factory's gap says it
            owner = callee.removesuffix("(...)").rpartition(".")[0].rpartition(".")[2]
            if owner[:1].isupper():  # SomeConfig.add_arguments(parser): a class, not a module
                self.gap(line, f"options generated from a config class ({callee}(...))")
            else:
                delegates.append((self._origin(callee), line))
        abbrev = set(self.abbrev)  # one answer when every ArgumentParser(...) of the file agrees
        return ParserSource(
            self.path, self.options, self.lines, tuple(self.gaps), tuple(dict.fromkeys(delegates)),
            tuple(self.unknown_choices), tuple(self.conditional), abbrev.pop() if len(abbrev) == 1 else None,
            _ignores_unknown(self.parse_calls), tuple(self.adding))

    def _origin(self, dotted: str) -> str:
        head, _, rest = dotted.partition(".")
        origin = self.imports.get(head, head)
        return f"{origin}.{rest}" if rest else origin

    # the walk: ast.NodeVisitor's, without its visits of leaves (names, constants, Load()),
    # which are most of a module's nodes and hold no call

    def visit(self, node: ast.AST) -> None:
        method = _VISITS.get(type(node))
        if method is not None:
            method(self, node)
        else:
            self.generic_visit(node)

    def generic_visit(self, node: ast.AST) -> None:
        for field in node._fields:
            child = getattr(node, field, None)
            if type(child) is list:
                for item in child:
                    if isinstance(item, ast.AST) and type(item) not in _LEAVES:
                        self.visit(item)
            elif isinstance(child, ast.AST) and type(child) not in _LEAVES:
                self.visit(child)

    def visit_Import(self, node: ast.Import) -> None:
        for alias in node.names:
            if alias.asname:
                self.imports[alias.asname] = alias.name
            else:
                head = alias.name.split(".")[0]
                self.imports[head] = head

    def visit_ImportFrom(self, node: ast.ImportFrom) -> None:
        base = "." * node.level + (node.module or "")
        for alias in node.names:
            origin = f"{base}.{alias.name}" if node.module else base + alias.name
            self.imports[alias.asname or alias.name] = origin

    def visit_FunctionDef(self, node: ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef) -> None:
        self.defined.add(node.name)
        if not isinstance(node, ast.ClassDef):
            for arg in (*node.args.posonlyargs, *node.args.args, *node.args.kwonlyargs):
                if arg.arg == "parser" or _last_name(arg.annotation) == "ArgumentParser":
                    self.parsers.add(arg.arg)
        self.functions.append(node.name)
        self.generic_visit(node)
        self.functions.pop()

    visit_AsyncFunctionDef = visit_ClassDef = visit_FunctionDef

    def visit_Assign(self, node: ast.Assign) -> None:
        if isinstance(node.value, ast.Call):
            called = _last_name(node.value.func)
            names = {t.id for t in node.targets if isinstance(t, ast.Name)}
            if called in _GENERATORS:
                self.generators |= names
            elif called in ("ArgumentParser", "add_argument_group", "add_mutually_exclusive_group",
                            "build_group", "add_parser"):
                self.parsers |= names
        self.generic_visit(node)

    def visit_For(self, node: ast.For | ast.AsyncFor) -> None:
        """A loop over a literal sequence is unrolled (its add_argument calls read once per
        value); over anything else, an option named from its variable is a gap."""
        values = self.constant(node.iter)
        literal = isinstance(values, tuple | list) and len(values) <= 100
        if not (literal and isinstance(node.target, ast.Name)):
            self.loops += 1
            self.generic_visit(node)
            self.loops -= 1
            return
        name, before = node.target.id, self.env.get(node.target.id, _UNKNOWN)
        for item in values:
            self.env[name] = item
            for statement in node.body:
                self.visit(statement)
        self.env.pop(name)
        if before is not _UNKNOWN:
            self.env[name] = before
        for statement in node.orelse:
            self.visit(statement)

    visit_AsyncFor = visit_For

    def visit_If(self, node: ast.If | ast.Try) -> None:
        """Options added under an if (``if HAVE_KITCHEN:``) or a try exist only when it holds at
        run time; a script's ``if __name__ == "__main__":`` is no such condition."""
        test = node.test if isinstance(node, ast.If) else None
        main = isinstance(test, ast.Compare) and _last_name(test.left) == "__name__"
        self.conditions += not main
        self.generic_visit(node)
        self.conditions -= not main

    visit_Try = visit_If

    def visit_Call(self, node: ast.Call) -> None:
        func = node.func
        called = _last_name(func)
        if isinstance(func, ast.Attribute) and isinstance(func.value, ast.Name) and called in _PARSER_METHODS:
            self.parsers.add(func.value.id)
        if called == "add_argument":
            self.add_argument(node)
        elif called in ("parse_args", "parse_known_args"):
            self.parse_calls.add(called)
        elif called == "ArgumentParser":
            keyword = next((k.value for k in node.keywords if k.arg == "allow_abbrev"), None)
            abbrev = True if keyword is None else self.constant(keyword)
            self.abbrev.append(abbrev if isinstance(abbrev, bool) else None)
        elif called in _GENERATORS:
            made = (_last_name(node.args[0]) or "...") if node.args else ""
            self.gap(node.lineno, f"options generated from dataclass fields ({called}({made}))")
        else:
            names = {a.id for a in (*node.args, *(k.value for k in node.keywords)) if isinstance(a, ast.Name)}
            if names:
                receiver = func.value if isinstance(func, ast.Attribute) else func
                self.passed.append((_callee(func), node.lineno, names, receiver))
        self.generic_visit(node)

    # one add_argument call

    def add_argument(self, call: ast.Call) -> None:
        line = call.lineno
        if any(isinstance(a, ast.Starred) for a in call.args) or any(k.arg is None for k in call.keywords):
            self.gap(line, "**kwargs / *args in add_argument")
        names = [self.constant(a) for a in call.args if not isinstance(a, ast.Starred)]
        if any(not isinstance(n, str) for n in names):
            where = " (add_argument in a loop over a computed list)" if self.loops else ""
            self.gap(line, f"option strings not literal{where}")
            return
        flags = [n for n in names if n.startswith("-")]
        if not flags:
            return  # a positional argument, or only *args (a gap above)
        if self.functions:
            self.adding[".".join(self.functions)] = None
        keywords = {k.arg: k.value for k in call.keywords if k.arg}
        action = self.action(keywords.get("action"), line)
        if action == "BooleanOptionalAction":
            flags += [f"--no-{f[2:]}" for f in flags if f.startswith("--")]
        choices = self.choices(keywords.get("choices"), line, flags)
        default = _SWITCH_DEFAULT.get(action)
        if "default" in keywords:
            default = self.literal(keywords["default"])
        arity = self.arity(action, keywords.get("nargs"), line)
        entry = (self.dest(keywords.get("dest"), flags, line), arity, choices, _kind(keywords.get("type")),
                 default)
        for flag in flags:
            self.options[flag] = entry
            self.lines[flag] = line
            if self.conditions:
                self.conditional[flag] = None

    def action(self, node: ast.expr | None, line: int) -> str:
        """The action's registry name ("store_true"), or the class's name for any other class
        (argparse.BooleanOptionalAction, a custom Action); "store" when not given."""
        if node is None:
            return "store"
        name = self.constant(node)
        if isinstance(name, str):
            return name
        name = _last_name(node)
        if name is None:
            self.gap(line, "action not literal")
            return "store"
        return _ACTION_CLASSES.get(name, name)

    def arity(self, action: str, nargs: ast.expr | None, line: int) -> int | str:
        if action in _ZERO_ARITY:
            return 0
        if nargs is None:
            return 1
        count = self.constant(nargs)
        if isinstance(count, int | str) and not isinstance(count, bool):
            return count
        if _last_name(nargs) in _NARGS_CONSTANTS:
            return _NARGS_CONSTANTS[_last_name(nargs)]
        self.gap(line, "nargs not literal")
        return "*"

    def dest(self, node: ast.expr | None, flags: list[str], line: int) -> str:
        """The explicit dest, else argparse's: the first long option (else the first), without
        its dashes, '-' made '_'."""
        if node is not None:
            dest = self.constant(node)
            if isinstance(dest, str):
                return dest
            self.gap(line, "dest not literal")
            return ""
        first = next((f for f in flags if len(f) > 1 and f[1] == "-"), flags[0])
        return first.lstrip("-").replace("-", "_")

    def choices(self, node: ast.expr | None, line: int, flags: list[str]) -> tuple[str, ...] | None:
        """A literal collection of constants, or range(...) of literal ints, as the command line
        spells them; anything else (list(SomeEnum), a name) is noted and left None."""
        if node is None:
            return None
        items = self.constant(node.elts if isinstance(node, ast.Set) else node)
        if isinstance(node, ast.Call) and _last_name(node.func) == "range" and not node.keywords:
            bounds = [self.constant(a) for a in node.args]
            valid = 1 <= len(bounds) <= 3 and all(type(b) is int for b in bounds) and bounds[2:] != [0]
            if valid and len(range(*bounds)) <= 1000:
                items = range(*bounds)
        if isinstance(items, tuple | list | range) and _UNKNOWN not in items:
            return tuple(str(c) for c in items)
        for flag in flags:
            self.unknown_choices[flag] = None
        return None

    def literal(self, node: ast.expr) -> Any:
        """A default: a literal (ast.literal_eval), a loop variable, else None (not known)."""
        found = self.constant(node)
        if found is not _UNKNOWN:
            return found
        try:
            return ast.literal_eval(node)
        except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError):
            return None

    def constant(self, node: ast.expr | list) -> Any:
        """A constant, tuple/list of constants, f-string or '+' of strings, with the variables of
        the loops being unrolled; _UNKNOWN for anything else."""
        if isinstance(node, ast.Constant):
            return node.value
        if isinstance(node, ast.Name):
            return self.env.get(node.id, _UNKNOWN)
        if isinstance(node, ast.List | ast.Tuple | list):
            items = [self.constant(e) for e in (node if isinstance(node, list) else node.elts)]
            return _UNKNOWN if _UNKNOWN in items else tuple(items) if isinstance(node, ast.Tuple) else items
        if isinstance(node, ast.JoinedStr):
            parts = [self.constant(v.value if isinstance(v, ast.FormattedValue) and v.conversion == -1
                                   and v.format_spec is None else v) for v in node.values]
            return "".join(map(str, parts)) if _UNKNOWN not in parts else _UNKNOWN
        if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add):
            left, right = self.constant(node.left), self.constant(node.right)
            return left + right if isinstance(left, str) and isinstance(right, str) else _UNKNOWN
        return _UNKNOWN


def _kind(node: ast.expr | None) -> str | None:
    """The type's __name__, as the catalogues record it (a lambda's is "<lambda>"); None when
    it is not given or is made by a call (functools.partial(...) has no name)."""
    if isinstance(node, ast.Lambda):
        return "<lambda>"
    return _last_name(node) if isinstance(node, ast.Name | ast.Attribute) else None


_LEAVES = frozenset({ast.Constant, ast.Name, ast.Load, ast.Store, ast.Del, ast.Pass})
_VISITS = {getattr(ast, name[len("visit_"):]): method for name, method in vars(_Reader).items()
           if name.startswith("visit_")}


def _ignores_unknown(parse_calls: set[str]) -> bool | Literal["conditional"] | None:
    known, strict = "parse_known_args" in parse_calls, "parse_args" in parse_calls
    if known and strict:
        return "conditional"  # Megatron's `if ignore_unknown_args: parse_known_args() else: ...`
    return True if known else False if strict else None


def _callee(func: ast.expr) -> str:
    """A called function's dotted name; an instance made and called at once (``Action(...)(parser,
    ...)``) by its class's name with "(...)"."""
    if isinstance(func, ast.Call):
        return f"{_callee(func.func)}(...)"
    return _dotted(func) or ast.unparse(func)


def _own(callee: str, defined: set[str]) -> bool:
    """Whether a call is of the file's own function (``_add_x(parser)``, ``self._add_x(parser)``):
    its add_argument calls are read where they are."""
    head, _, last = callee.removesuffix("(...)").rpartition(".")
    return (head or last) in defined or (head in ("self", "cls") and last in defined)


def _last_name(node: ast.expr | None) -> str | None:
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        return node.attr
    return None


def _dotted(node: ast.expr) -> str | None:
    parts = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    if not isinstance(node, ast.Name):
        return None
    return ".".join([node.id, *reversed(parts)])


def _is_generator(receiver: ast.expr, generators: set[str]) -> bool:
    """Whether a method's receiver is an ArgumentGroupFactory: a name bound to one, or the call."""
    if isinstance(receiver, ast.Name):
        return receiver.id in generators
    return isinstance(receiver, ast.Call) and _last_name(receiver.func) in _GENERATORS


# each begins with a literal, which lets the regular expression engine skip to it (a leading \b
# or alternation makes it try every position: ~30 times slower); the word boundary before
# "args" is checked on each match instead
_READS = re.compile(r"""args(\(\))?\.(\w+)\b(?!\s*=[^=])""")
_GETATTR = re.compile(r"""attr\(\s*(?:self\.)?args\s*,\s*['"](\w+)['"]""")


def attribute_reads(text: str) -> frozenset[str]:
    """The attribute names a Python file reads as ``args.NAME`` (``self.args.NAME`` included),
    ``get_args().NAME`` or ``getattr(args, "NAME", ...)`` (``hasattr`` too). Regular
    expressions, not a parse: this runs over every file of a tree. It errs toward "read" (a
    mention in a comment or a string counts, as does a target of a tuple assignment), never
    toward "unread": a plain assignment ``args.NAME = ...`` is the only use it leaves out."""
    if "args" not in text:
        return frozenset()
    names = {m[2] for m in _READS.finditer(text) if _whole(text, m)}
    return frozenset(names.union(_GETATTR.findall(text)))


def _whole(text: str, match: re.Match) -> bool:
    """``args.NAME`` at the start of a word (not ``margs.NAME``), or ``get_args().NAME``."""
    before = text[max(0, match.start() - 4):match.start()]
    if match[1]:
        return before == "get_"
    return not before or not (before[-1].isalnum() or before[-1] == "_")
