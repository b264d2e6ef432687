"""Static evaluation of a bash script: variables, arrays, defaults, arithmetic, exports,
heredocs, `bash -c`/`eval` strings, in source order. ``if``/``elif``/``else`` and ``case`` are
decided where their test or subject is known from the script (only the branch bash would take
runs); an undecided branch may or may not run, so what it assigns leaves a variable's earlier
value in place, or unknown ("depends on a branch") where it had none: an argument loop over
``$@`` keeps its defaults instead of its last ``case`` arm. Each undecided branch is recorded
with its alternatives (``Script.undecided``; an arm that exits is none), and
``read_script(decide=...)`` reads one of them, so the linter can read every alternative
(``readings``: all combinations, or each branch on its own). A test decided by the default of
one of the script's arguments (``${1:-7B}``) is read as the default says, and its arms are
alternatives all the same. The job an ``sbatch`` submits (its heredoc, a ``cat <<EOF | sbatch``,
a file a heredoc wrote, ``$(sbatch ...)``) is read as a new shell, like ``bash -c``: it sees
only exported variables. Loop bodies run once. Command substitutions and values from the
environment stay unknown. Nothing is executed. Budgets bound hostile input (commands, nesting,
value sizes)."""

from __future__ import annotations

import bisect
import fnmatch
import math
import posixpath
import re
from contextlib import contextmanager
from dataclasses import dataclass, field

from generator.readers.bash import arith
from generator.readers.bash.lexer import (
    STOPPED,
    Arith,
    ArrayAssign,
    Lit,
    Op,
    Param,
    Redirect,
    Unknown,
    Word,
    lex,
)
from generator.values import record

UNKNOWN = "\x00"  # stands for a run-time value inside a field's text
MAX_COMMANDS = 20_000
MAX_DEPTH = 8
MAX_VALUE = 1 << 20
MAX_WORDS = 10_000  # elements of one array (A=("${A[@]}" "${A[@]}") doubles it per line)
# readings of a script's branches decided only at run time (Script.undecided): every combination
# when there are at most MAX_COMBINATIONS; else each branch's arms one at a time, the other
# branches left open, when they have at most MAX_ARMS; else none (a note says so)
MAX_COMBINATIONS = 16
MAX_ARMS = 64
_ASSIGN = re.compile(r"^([A-Za-z_][A-Za-z0-9_]*)(\[[^\]]*\])?(\+?=)")
KEYWORDS = {"if", "then", "elif", "else", "fi", "esac", "while", "until", "do", "done", "!", "{", "}",
            "time", "coproc"}
_ARM_END = (";;", ";&", ";;&")
_JOB_SUFFIXES = (".sh", ".sbatch", ".slurm", ".bash")  # the job script an sbatch command names
# commands whose running or not changes nothing the readers take from a script
INERT = {"echo", "printf", "exit", "return", "true", "false", ":", "set", "shift", "sleep", "cd",
         "mkdir", "rm", "cp", "mv", "ln", "touch", "date", "hostname", "nvidia-smi", "module", "ulimit",
         "[", "test", "wait", "trap", "umask", "pwd", "ls"}
_INT_TESTS = {"-eq": int.__eq__, "-ne": int.__ne__, "-gt": int.__gt__, "-ge": int.__ge__,
              "-lt": int.__lt__, "-le": int.__le__}
DECLARE = {"export", "declare", "typeset", "local", "readonly"}


@dataclass(frozen=True)
class Field:
    """One word after expansion: its text (UNKNOWN marks run-time pieces), where it starts in
    the file (for a word that came from a variable, where that text was written), and a note
    such as "default of ${NNODES:-2}"."""

    text: str | None
    offset: int
    note: str | None = None
    # where the pieces of a joined field were written: (position in text, offset in the file)
    pieces: tuple[tuple[int, int], ...] = field(default=(), compare=False, repr=False)


Seg = Field  # a piece of a value: same shape, joined into fields by expansion


@record
class Var:
    """A shell variable as the evaluator tracks it (scalar or array, exported or not)."""

    values: list[list[Seg]]  # one entry for a scalar, one per element for an array
    array: bool
    exported: bool
    offset: int

    def scalar(self) -> Field:
        return join(self.values[0]) if self.values else Field("", self.offset)


def _size(segs: list[Seg]) -> int:
    """A value's size for the MAX_VALUE budget: an unknown piece counts as one character (it is one
    in the joined text), so values built from unknown variables ($x$x$x$x) are bounded too."""
    return sum(1 if s.text is None else len(s.text) for s in segs)


def join(segs: list[Seg]) -> Field:
    """Segments -> one field; unknown pieces become UNKNOWN inside the text."""
    if len(segs) == 1:  # most fields (every element of an array): no joining to do
        seg = segs[0]
        return Field(UNKNOWN if seg.text is None else seg.text, seg.offset, seg.note or None,
                     ((0, seg.offset),))
    text = "".join(UNKNOWN if s.text is None else s.text for s in segs)
    notes = "; ".join(dict.fromkeys(s.note for s in segs if s.note)) or None
    pieces, position = [], 0
    for seg in segs:
        pieces.append((position, seg.offset))
        position += 1 if seg.text is None else len(seg.text)
    return Field(text, segs[0].offset if segs else 0, notes, tuple(pieces))


@record
class Command:
    """One simple command the script runs, its words evaluated."""

    argv: list[Field]
    env: dict[str, Field]
    offset: int
    redirects: list[tuple[str, Field | None]]
    heredoc: tuple[str, int] | None  # (expanded body, offset of the body)
    depth: int
    piped: bool = False  # its input is the previous command's output (`a | b`)


@record
class Script:
    """A shell script read statically: its commands and variables."""

    text: str
    name: str = "-"
    commands: list[Command] = field(default_factory=list)
    variables: dict[str, Var] = field(default_factory=dict)
    problems: list[tuple[int, str]] = field(default_factory=list)
    cuts: list[tuple[int, str]] = field(default_factory=list)  # what cuts a command short (lexer)
    # branches not decided statically: offset of the if/case -> its alternatives as (arm index,
    # how to name it: "the branch at line 7"), (-1, "no branch of the if at line 3") where no
    # arm must run; read_script(decide={offset: index}) reads one of them
    undecided: dict[int, list[tuple[int, str]]] = field(default_factory=dict)
    first_command_offset: int | None = None
    # every file read (the script and what it sources): (base offset, name, text, line starts)
    files: list[tuple[int, str, str, list[int]]] = field(default_factory=list)

    def add_file(self, name: str, text: str) -> int:
        base = 0 if not self.files else self.files[-1][0] + len(self.files[-1][2]) + 1
        starts = [0] + [i + 1 for i, c in enumerate(text) if c == "\n"]
        self.files.append((base, name, text, starts))
        return base

    def location(self, offset: int) -> tuple[str, int, int]:
        """(file, line, column) of an offset in the script or a file it sources."""
        if not self.files:
            self.add_file(self.name, self.text)
        index = max(0, bisect.bisect_right([f[0] for f in self.files], offset) - 1)
        base, name, _, starts = self.files[index]
        line = bisect.bisect_right(starts, offset - base)
        return name, line, offset - base - starts[line - 1] + 1

    def position(self, offset: int) -> tuple[int, int]:
        _, line, col = self.location(offset)
        return line, col


class _Budget(Exception):
    pass


@record
class _Branch:
    """An open ``if`` or ``case``: whether the current arm runs ("run"), cannot ("skip") or is
    not decided statically ("maybe"), whether an earlier arm surely ran (``taken``) or may have
    (``uncertain``); for ``case`` its subject (None: not known) and the patterns being read."""

    kind: str
    offset: int
    mode: str = "run"
    taken: bool = False
    uncertain: bool = False
    in_condition: bool = False
    negate: bool = False
    parts: list[tuple[bool | None, str]] = field(default_factory=list)
    subject: str | None = None
    expect_pattern: bool = False
    patterns: list[str | None] = field(default_factory=list)
    arms: list[int] = field(default_factory=list)  # where each arm started
    open_arms: list[int] = field(default_factory=list)  # the arms that may run, if not decided
    default: bool = False  # an else or a * pattern: some arm always runs
    effective: bool = False  # an undecided arm assigns or runs something the readers use
    # the variable an undecided condition tests and the values it is tested for: (name,
    # "is" / "is not" / "matches", [values]) for the condition being read and for each arm
    tests: list[tuple[str, str, list[str]] | None] = field(default_factory=list)
    said: list[tuple[str, str, list[str]] | None] = field(default_factory=list)
    variable: str | None = None  # a case's subject, when it is one variable
    # the condition being read (a case: its subject) is decided by the default of an argument of
    # the script (``${1:-7B}``), which it may be given; ``soft``: some arm's condition is; ``sure``:
    # an earlier arm ran whatever the arguments
    soft_condition: bool = False
    soft: bool = False
    sure: bool = False
    exits: set[int] = field(default_factory=set)  # arms that end the script (`exit` in the arm itself)
    touched: bool = False  # an arm, taken or not, assigns or runs something besides INERT commands

    def condition(self) -> bool | None:
        """The exit status of the condition's commands joined by && and || (left to right, as
        bash does; after ``;`` only the last counts), in three values."""
        result: bool | None = None
        for k, (value, _) in enumerate(self.parts):
            joiner = self.parts[k - 1][1] if k else ";"
            if joiner == "&&":
                result = False if False in (result, value) else None if None in (result, value) else True
            elif joiner == "||":
                result = True if True in (result, value) else None if None in (result, value) else False
            elif joiner in (";", "\n"):
                result = value
            else:  # a pipe: the last command's status, not read here
                result = None
        return result

    def arm(self, holds: bool | None) -> None:
        """Start an arm whose condition is ``holds`` (True, False or not known)."""
        if self.taken or holds is False:
            self.mode = "skip"
        elif holds is None:
            self.mode, self.uncertain = "maybe", True
        else:
            self.mode, self.taken = ("maybe" if self.uncertain else "run"), True


class Evaluator:
    def __init__(self, script: Script, resolve_source=None, decide: dict[int, int] | None = None) -> None:
        self.script = script
        self.decide = decide or {}  # undecided branch -> the index of the arm to take
        self.resolve_source = resolve_source  # path text -> (name, text) of a file to follow
        self.vars = script.variables
        self.count = 0
        self.branches: list[_Branch] = []
        self.piped = False  # the command being read takes the previous one's output
        self.conditional = False  # it runs after && or || (an `|| exit 1` may not exit)
        self.positional: list[Field] | None = None  # $1... inside a `bash -c CODE NAME ARGS` string
        self.branch_names: dict[int, str] = {}  # undecided branches, as a note names them
        # heredocs read so far: (the file they are written to, or None; (body, offset); pieces)
        self.heredocs: list[tuple[Field | None, tuple[str, int], tuple[tuple[int, int], ...]]] = []

    # -- values ------------------------------------------------------------------------------
    def lookup(self, name: str) -> Var | None:
        return self.vars.get(name)

    def expand_param(self, p: Param, depth: int) -> tuple[list[list[Seg]], bool]:
        """Values of a parameter expansion and whether it is an array expansion (hard breaks)."""
        unknown = ([[Seg(None, p.offset)]], False)
        if self.positional is not None and not p.op and not p.length and \
                (p.name in ("@", "*") or p.name.isdigit() and p.name != "0"):
            args = [[Seg(f.text, f.offset, f.note)] for f in self.positional]
            if p.name in ("@", "*"):
                return args, True
            index = int(p.name) - 1
            return ([args[index]] if index < len(args) else [[Seg("", p.offset)]]), False
        if self.positional is None and p.name.isdigit() and p.name != "0" and p.op in (":-", "-"):
            var = None  # the script's own argument, read as unset: "${1:-MOCK}" is its default
        elif p.indirect or (p.name[0] in "@*#?$!-0123456789" and not p.length):
            return unknown
        else:
            var = self.vars.get(p.name)
        is_array = False
        values: list[list[Seg]] | None
        if var is None:
            values = None  # unset in the script: from the environment
        elif p.index in ("@", "*"):
            values, is_array = list(var.values), True
        elif p.index is not None:
            index = arith.evaluate(p.index, lambda n: self.arith_lookup(n, depth))
            if index is None:
                return unknown
            values = [var.values[index]] if 0 <= index < len(var.values) else [[Seg("", p.offset)]]
        else:
            values = var.values[:1] or [[Seg("", var.offset)]]
        joined = None if values is None else [join(v) for v in values]
        known = joined is not None and all(UNKNOWN not in j.text for j in joined)
        if p.length:
            if not known:
                return unknown
            n = len(joined) if p.index in ("@", "*") else len(joined[0].text or "") if joined else 0
            return [[Seg(str(n), p.offset)]], False
        if not p.op:
            if values is None:
                return [[Seg(None, p.offset, f"${p.name} from the environment")]], False
            return values, is_array
        empty = known and all(j.text == "" for j in joined)
        if p.op in (":-", "-", ":=", "="):
            if values is not None and not known:
                return unknown
            if not (values is None or (p.op.startswith(":") and empty)):
                return values, is_array
            default = self.expand_text(p.arg or [], depth)
            shown = join(default).text
            note = f"default of ${{{p.name}{p.op}{shown}}}"
            default = [Seg(s.text, s.offset, note) for s in default] or [Seg("", p.offset, note)]
            if p.op in (":=", "="):
                self.assign(p.name, [default], exported=False, offset=p.offset)
            return [default], False
        if p.op in (":+", "+"):
            if values is not None and not known:
                return unknown
            if values is None or (p.op == ":+" and empty):
                return [[Seg("", p.offset)]], False
            return [self.expand_text(p.arg or [], depth)], False
        if p.op in (":?", "?"):
            return (values, is_array) if known else unknown
        if p.op in ("%", "%%", "#", "##") and known and joined:
            pattern = join(self.expand_text(p.arg or [], depth)).text
            if UNKNOWN not in pattern and not any(c in pattern for c in "*?["):
                text = joined[0].text or ""
                if p.op.startswith("%") and pattern and text.endswith(pattern):
                    text = text[: -len(pattern)]
                elif p.op.startswith("#") and text.startswith(pattern):
                    text = text[len(pattern):]
                return [[Seg(text, joined[0].offset)]], False
        return unknown

    def arith_lookup(self, name: str, depth: int) -> int | None:
        var = self.vars.get(name)
        if var is None or not var.values:
            return None  # runtime value (bash would read it from the environment)
        text = var.scalar().text
        if UNKNOWN in text or depth > MAX_DEPTH:
            return None
        return arith.evaluate(text.strip() or "0", lambda n: self.arith_lookup(n, depth + 1))

    def part_values(self, part: object, depth: int) -> tuple[list[list[Seg]], bool]:
        if isinstance(part, Lit):
            return [[Seg(part.text, part.offset)]], False
        if isinstance(part, Param):
            return self.expand_param(part, depth)
        if isinstance(part, Arith):
            text = join(self.expand_text(part.parts, depth)).text
            value = None if UNKNOWN in text else \
                arith.evaluate(text, lambda n: self.arith_lookup(n, depth + 1))
            return [[Seg(None if value is None else str(value), part.offset)]], False
        return [[Seg(None, getattr(part, "offset", 0))]], False

    def expand_text(self, parts: list, depth: int) -> list[Seg]:
        """Expand without field splitting (assignments, heredocs, quoted contexts); array
        elements are joined with spaces."""
        segs: list[Seg] = []
        for part in parts:
            values, _ = self.part_values(part, depth)
            for k, value in enumerate(values):
                if k:
                    segs.append(Seg(" ", value[0].offset if value else 0))
                segs += value
            if _size(segs) > MAX_VALUE:
                raise _Budget
        return segs

    def expand_word(self, word: Word, depth: int) -> list[Field]:
        """Expand with field splitting of unquoted expansions; "${X[@]}" keeps elements apart.
        Each field starts where its first character was written."""
        if len(word.parts) == 1 and getattr(word.parts[0], "quoted", False):
            values, is_array = self.part_values(word.parts[0], depth)
            if is_array:  # "${A[@]}" alone: one field an element, as the general path below gives
                return [join(value) for value in values if value]
        fields: list[list[Seg]] = [[]]
        content = [False]

        def new_field() -> None:
            if content[-1]:
                fields.append([])
                content.append(False)

        for part in word.parts:
            values, is_array = self.part_values(part, depth)
            quoted = isinstance(part, Lit) or getattr(part, "quoted", False)
            for k, value in enumerate(values):
                if k and is_array:
                    new_field()
                for seg in value:
                    if seg.text is None or quoted:
                        fields[-1].append(seg)
                        content[-1] = True
                        continue
                    for m in re.finditer(r"\s+|\S+", seg.text):
                        if m.group().isspace():
                            new_field()
                        else:
                            fields[-1].append(Seg(m.group(), seg.offset + m.start(), seg.note))
                            content[-1] = True
        return [join(f) for f, c in zip(fields, content, strict=True) if c]

    # -- state -------------------------------------------------------------------------------
    def assign(self, name: str, values: list[list[Seg]], exported: bool, offset: int,
               append: bool = False, array: bool = False) -> None:
        old = self.vars.get(name)
        mode = self.mode()
        if mode == "skip":  # (a ${X:=default} in the test of a branch that cannot run)
            return
        if mode == "maybe":  # a branch that may not run: the earlier value may stand
            self.mark_effective()
            if old is None:
                line = self.script.position(offset)[0]
                self.vars[name] = Var([[Seg(None, offset, f"${name} depends on a branch (line {line})")]],
                                      array, exported, offset)
            else:
                old.exported = old.exported or exported
            return
        if append and old is not None:
            if array or old.array:
                values, array = old.values + values, True
            else:
                values = [(old.values[0] if old.values else []) + (values[0] if values else [])]
        if len(values) > MAX_WORDS or sum(_size(v) for v in values) > MAX_VALUE:
            raise _Budget
        self.vars[name] = Var(values, array, exported or bool(old and old.exported), offset)

    # -- branches ----------------------------------------------------------------------------
    def mark_effective(self) -> None:
        for branch in self.branches:
            if branch.mode == "maybe":
                branch.effective = True

    def mode(self) -> str:
        """"skip" inside an arm that cannot run, "maybe" inside one that is not decided."""
        modes = {b.mode for b in self.branches}
        return "skip" if "skip" in modes else "maybe" if "maybe" in modes else "run"

    def keyword(self, word: str, offset: int) -> None:
        top = self.branches[-1] if self.branches else None
        is_if = top is not None and top.kind == "if"
        if word == "if":
            self.branches.append(_Branch("if", offset))  # the condition itself runs
            top, is_if = self.branches[-1], True
        elif word == "elif" and is_if:  # reached only when no earlier arm ran
            top.mode = "skip" if top.taken else "maybe" if top.uncertain else "run"
        if word in ("if", "elif") and is_if:
            top.in_condition, top.parts, top.tests, top.negate = True, [], [], False
            top.soft_condition = False
        elif word == "!" and is_if and top.in_condition:
            top.negate = not top.negate
        elif word == "then" and is_if:
            top.in_condition = False
            holds = top.condition()
            # (a condition of several tests is read as the defaults say: forcing its arm could
            # contradict a test on another value, as `[ $SP = true ] && [ $TP -gt 1 ]` would)
            self.start_arm(top, holds, offset, top.tests[0] if len(top.tests) == 1 else None,
                           soft=top.soft_condition and holds is not None and len(top.parts) == 1)
        elif word == "else" and is_if:
            top.default = True
            self.start_arm(top, None if top.uncertain else True, offset, _otherwise(top.said), soft=top.soft)
        elif (word == "fi" and is_if) or (word == "esac" and top is not None and top.kind == "case"):
            self.end_branch(self.branches.pop())

    def start_arm(self, branch: _Branch, holds: bool | None, offset: int,
                  said: tuple[str, str, list[str]] | None = None, soft: bool = False) -> None:
        """An arm begins: taken as ``decide`` says when its condition is not known (``said``:
        what the condition tests, to name the arm). A ``soft`` condition, decided by the default
        of an argument the script may be given, is read as the default says (the run without
        arguments) and its arm is an alternative all the same."""
        index = len(branch.arms)
        branch.arms.append(offset)
        branch.said.append(said)
        if soft and not branch.sure:
            branch.soft = True
            branch.open_arms.append(index)
            if branch.offset in self.decide:
                holds = self.decide[branch.offset] == index
        elif holds is None and not branch.taken:
            branch.open_arms.append(index)
            if branch.offset in self.decide:
                holds = self.decide[branch.offset] == index
        elif holds is True and not branch.uncertain:
            branch.sure = True
        branch.arm(holds)

    def end_branch(self, branch: _Branch) -> None:
        """Record an undecided branch's alternatives: each arm that may run, and "none" when
        no arm is sure to (no else, no * pattern, no arm known to hold)."""
        effective = branch.effective or (branch.soft and branch.touched)  # (soft: arms not taken count)
        if not branch.open_arms or not effective or branch.offset in self.script.undecided:
            return  # (an arm that only echoes and exits reads the same either way)
        def line(offset: int) -> int:
            return self.script.position(offset)[0]

        # (an arm that exits launches nothing: it is no alternative run)
        alternatives = [(k, _name_arm(branch.said[k], f"line {line(branch.arms[k])}",
                                      f"the branch at line {line(branch.arms[k])} runs"))
                        for k in branch.open_arms if k not in branch.exits]
        if not branch.default and (not branch.taken or branch.soft):
            at = f"the {branch.kind} at line {line(branch.offset)}"
            alternatives.append((-1, _name_arm(_otherwise(branch.said), at, f"no branch of {at} runs")))
        if not alternatives:
            return
        self.script.undecided[branch.offset] = alternatives
        tested = {s[0] for s in branch.said if s is not None}
        variable = branch.variable or (next(iter(tested)) if len(tested) == 1 else None)
        self.branch_names[branch.offset] = f"{variable} (line {line(branch.offset)})" if variable \
            else f"the {branch.kind} at line {line(branch.offset)}"

    def condition_part(self, branch: _Branch, words: list, terminator: Op, depth: int) -> None:
        value = self.test(words, depth)
        soft = value is not None and self.argument_test(words, depth)
        branch.soft_condition = branch.soft_condition or soft
        said = self.tested(words, depth) if (value is None or soft) and not branch.negate else None
        if branch.negate and value is not None:
            value = not value
        branch.negate = False
        branch.parts.append((value, terminator.text))
        branch.tests.append(said)

    def argument_test(self, words: list, depth: int) -> bool:
        """Whether a test reads the default of an argument of the script (``${1:-7B}``)."""
        return any(_argument_default(f) for w in words if isinstance(w, Word)
                   for f in self.expand_word(w, depth))

    def tested(self, words: list, depth: int) -> tuple[str, str, list[str]] | None:
        """What a test not decided statically compares: ``[ "$MODEL_SIZE" = 13B ]`` -> ("MODEL_SIZE",
        "is", ["13B"]) (with ``!=``: "is not"; a ``[[ == ]]`` pattern: "matches"); None for other
        tests."""
        words = [w for w in words if isinstance(w, Word)]
        texts = [w.literal() for w in words]
        if texts[:1] == ["test"]:
            words, texts = words[1:], texts[1:]
        elif texts[:1] in (["["], ["[["]) and texts[-1:] in (["]"], ["]]"]):
            words, texts = words[1:-1], texts[1:-1]
        else:
            return None
        if len(words) != 3 or texts[1] not in ("=", "==", "!="):
            return None
        for variable, other in ((words[0], words[2]), (words[2], words[0])):
            name = _variable(variable)
            fields = self.expand_word(other, depth)
            if name and len(fields) == 1 and UNKNOWN not in (fields[0].text or UNKNOWN):
                value = fields[0].text
                how = "is not" if texts[1] == "!=" else "matches" if texts[0] == "[[" and \
                    any(c in value for c in "*?[") else "is"
                return name, how, [value]
        return None

    def test(self, words: list, depth: int) -> bool | None:
        """A ``[ ... ]``, ``[[ ... ]]`` or ``test`` condition decided from known values: string
        (in)equality and ``[[ == ]]`` patterns, -z/-n, integer comparisons, ``!``; None otherwise."""
        texts = [f.text for w in words if isinstance(w, Word) for f in self.expand_word(w, depth)]
        closing = {"[": "]", "[[": "]]", "test": None}.get(texts[0] if texts else None, "")
        if closing == "" or (closing is not None and texts[-1:] != [closing]):
            return None
        double, texts = texts[0] == "[[", texts[1:-1] if closing else texts[1:]
        negate = texts[:1] == ["!"]
        texts = texts[1:] if negate else texts
        if any(t is None or UNKNOWN in t for t in texts):
            return None
        result: bool | None = None
        if len(texts) == 1:
            result = texts[0] != ""
        elif len(texts) == 2 and texts[0] in ("-z", "-n"):
            result = (texts[1] == "") == (texts[0] == "-z")
        elif len(texts) == 3 and texts[1] in ("=", "==", "!="):
            same = fnmatch.fnmatchcase(texts[0], texts[2]) if double else texts[0] == texts[2]
            result = same != (texts[1] == "!=")
        elif len(texts) == 3 and texts[1] in _INT_TESTS:
            try:
                result = _INT_TESTS[texts[1]](int(texts[0]), int(texts[2]))
            except ValueError:
                return None
        return None if result is None else result != negate

    def case_pattern(self, branch: _Branch, words: list, terminator: Op, depth: int) -> None:
        for w in words:
            fields = self.expand_word(w, depth) if isinstance(w, Word) else []
            branch.patterns.append(fields[0].text if len(fields) == 1 else None)
        if terminator.text != ")":
            return
        patterns, branch.patterns, branch.expect_pattern = branch.patterns, [], False
        branch.default = branch.default or "*" in patterns
        offset = next((w.offset for w in words if isinstance(w, Word)), branch.offset)
        if branch.subject is None or any(p is None or UNKNOWN in p for p in patterns):
            self.start_arm(branch, None, offset, _patterns_said(branch, patterns))
        else:
            self.start_arm(branch, any(fnmatch.fnmatchcase(branch.subject, p.lstrip("(")) for p in patterns),
                           offset, _patterns_said(branch, patterns), soft=branch.soft_condition)

    def arm_end(self) -> None:
        top = self.branches[-1] if self.branches else None
        if top is not None and top.kind == "case":
            top.expect_pattern, top.mode = True, "skip"

    # -- commands ----------------------------------------------------------------------------
    def run(self, items: list, depth: int) -> None:
        command: list = []
        open_branches = len(self.branches)
        self.piped = self.conditional = False
        for item in [*items, Op("\n", -1)]:
            if isinstance(item, Op):
                self.simple(command, depth, item)
                command = []
                self.piped = item.text == "|"
                self.conditional = item.text in ("&&", "||")
                if item.text in _ARM_END:
                    self.arm_end()
            else:
                command.append(item)
        del self.branches[open_branches:]  # a string or file's own unclosed branches end with it

    def simple(self, items: list, depth: int, terminator: Op) -> None:
        if not items:
            return
        self.count += 1
        if self.count > MAX_COMMANDS:
            raise _Budget
        words = [i for i in items if isinstance(i, Word | ArrayAssign)]
        redirects = [i for i in items if isinstance(i, Redirect)]
        # keywords: branches open, divide and close (if/case decided where known)
        while words and isinstance(words[0], Word) and words[0].literal() in KEYWORDS:
            word, words = words[0].literal(), words[1:]
            self.keyword(word, items[0].offset)
        top = self.branches[-1] if self.branches else None
        if words and top is not None and top.kind == "if" and top.in_condition:
            self.condition_part(top, words, terminator, depth)
        if not words:
            return
        head = words[0].literal() if isinstance(words[0], Word) else None
        if top is not None and top.kind == "case" and top.expect_pattern and terminator.text in (")", "|"):
            self.case_pattern(top, words, terminator, depth)
            return
        if head == "case":
            subject = self.expand_word(words[1], depth) if len(words) > 1 and isinstance(words[1], Word) \
                else []
            known = subject[0].text if len(subject) == 1 and UNKNOWN not in (subject[0].text or UNKNOWN) \
                else None
            branch = _Branch("case", items[0].offset, mode="skip", subject=known, expect_pattern=True,
                             variable=_variable(words[1]) if len(words) > 1 else None,
                             soft_condition=any(map(_argument_default, subject)))
            self.branches.append(branch)
            if len(words) > 3 and terminator.text in (")", "|"):  # `case $1 in --n)` on one line
                self.case_pattern(branch, words[3:], terminator, depth)
            return
        if head == "exit" and not self.conditional and self.branches and self.branches[-1].arms:
            self.branches[-1].exits.add(len(self.branches[-1].arms) - 1)  # (read in an arm not taken too)
        if head not in INERT and head != "[[":
            for branch in self.branches:
                branch.touched = True
        if head in ("for", "select", "[[", "function") or self.mode() == "skip":
            return
        self.submissions(words, depth)
        if terminator.text == "(" and len(words) == 1 and head:  # name() { ...: a function header
            return
        env: dict[str, Field] = {}
        has_command = any(isinstance(w, Word) and self.assignment(w) is None for w in words)
        while words:
            w = words[0]
            if isinstance(w, ArrayAssign):
                self.assign(w.name, self.array_values(w, depth), False, w.offset, append=w.append,
                            array=True)
            elif (target := self.assignment(w)) is not None:
                name, op, value_parts = target
                segs = self.expand_text(value_parts, depth) or [Seg("", w.offset)]
                if has_command:  # VAR=x cmd: only in cmd's environment
                    env[name] = join(segs)
                else:
                    self.assign(name, [segs], False, w.offset, append=op == "+=")
            else:
                break
            words = words[1:]
        if not words:
            return
        argv = [f for w in words for f in (self.expand_word(w, depth) if isinstance(w, Word) else [])]
        if not argv:
            return
        name = argv[0].text
        if self.script.first_command_offset is None and depth == 0:
            self.script.first_command_offset = items[0].offset
        if name in DECLARE:
            self.declare(name, words[1:], depth)
            return
        if name in ("source", ".") and len(argv) > 1:
            self.source(argv[1], depth)
            return
        if name == "unset":
            for f in argv[1:]:
                if f.text and not f.text.startswith("-"):
                    self.vars.pop(f.text, None)
            return
        if name not in INERT:
            self.mark_effective()
        heredoc, pieces = None, ()
        for r in redirects:
            if r.heredoc is not None:
                body, pieces = self.heredoc_text(r.heredoc.parts, depth)
                heredoc = (body, r.heredoc.body_offset)
        targets = [(r.op, join(self.expand_text(r.target.parts, depth)) if r.target else None)
                   for r in redirects]
        if heredoc is not None:  # kept: a job script written here may be submitted later
            written = next((t for op, t in targets if op in (">", ">|") and t is not None), None)
            self.heredocs.append((written, heredoc, pieces))
        elif name == "sbatch":
            heredoc, pieces = self.job_script(argv)
        self.script.commands.append(Command(argv, env, items[0].offset, targets, heredoc, depth, self.piped))
        self.nested(argv, depth, heredoc, pieces)
        if name == "sbatch" and heredoc is None:
            self.job_file(argv, depth)

    def job_script(self, argv: list[Field]) -> tuple[tuple[str, int] | None, tuple[tuple[int, int], ...]]:
        """The heredoc an ``sbatch`` without one of its own submits: ``cat <<EOF | sbatch``, or a
        file written earlier as ``cat > job.sh <<EOF`` and submitted as ``sbatch job.sh`` (the same
        name, or the same run-time value such as ``$(mktemp)``); (None, ()) when there is none."""
        if self.piped and self.heredocs and self.heredocs[-1][0] is None and self.script.commands and \
                self.script.commands[-1].heredoc == self.heredocs[-1][1]:
            return self.heredocs[-1][1], self.heredocs[-1][2]
        for written, heredoc, pieces in reversed(self.heredocs):
            if written is not None and any(_same_path(written, f) for f in argv[1:]):
                return heredoc, pieces
        return None, ()

    def job_file(self, argv: list[Field], depth: int) -> None:
        """``sbatch [options] SRUN.sh``: a job script that is a file of its own (beside the
        submitting one, as the caller resolves it) runs in a new shell with the exported
        environment and the variables ``--export=A,B`` names."""
        script = next((f for f in reversed(argv[1:]) if (f.text or "").endswith(_JOB_SUFFIXES)), None)
        if script is None or self.resolve_source is None or depth >= MAX_DEPTH:
            return
        named = {n for f in argv[1:] if (f.text or "").startswith("--export=")
                 for n in (f.text or "")[len("--export="):].split(",")}
        passed = {n: Var(v.values, v.array, True, v.offset) for n, v in self.vars.items() if n in named}
        with self.child(True):
            self.vars.update(passed)
            self.source(script, depth)

    def submissions(self, words: list, depth: int) -> None:
        """``JOB=$(sbatch --parsable <<EOF ... EOF)``: a job submitted inside a command
        substitution is read like one submitted on its own (its output, the job id, stays
        unknown)."""
        for word in words:
            for part in word.parts if isinstance(word, Word) else []:
                text = part.text if isinstance(part, Unknown) and part.text.startswith("$(") else ""
                if re.match(r"\$\(\s*sbatch\s", text) and text.endswith(")") and depth < MAX_DEPTH:
                    self.run_text(text[2:-1], part.offset + 2, depth + 1, in_place=True)

    def array_values(self, w: ArrayAssign, depth: int) -> list[list[Seg]]:
        return [[Seg(f.text, f.offset, f.note)] for word in w.words for f in self.expand_word(word, depth)]

    def assignment(self, w: Word) -> tuple[str, str, list] | None:
        first = w.parts[0] if w.parts else None
        if not isinstance(first, Lit) or first.quoted:
            return None
        m = _ASSIGN.match(first.text)
        if not m or m.group(2):
            return None
        rest = first.text[m.end():]
        value_parts = ([Lit(rest, first.offset + m.end())] if rest else []) + w.parts[1:]
        return m.group(1), m.group(3), value_parts

    def declare(self, builtin: str, words: list, depth: int) -> None:
        exported = builtin == "export"
        for w in words:
            if isinstance(w, ArrayAssign):
                self.assign(w.name, self.array_values(w, depth), exported, w.offset,
                            append=w.append, array=True)
                continue
            text = w.literal()
            if text is not None and text.startswith("-"):
                exported = exported or "x" in text
                continue
            target = self.assignment(w)
            if target is not None:
                name, op, parts = target
                segs = self.expand_text(parts, depth) or [Seg("", w.offset)]
                self.assign(name, [segs], exported, w.offset, append=op == "+=")
            elif text and re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", text):
                var = self.vars.get(text)
                if var is not None:
                    var.exported = var.exported or exported

    def heredoc_text(self, parts: list, depth: int) -> tuple[str, tuple[tuple[int, int], ...]]:
        """A heredoc body with its expansions (unknown values become the marker ``<unknown>``),
        and where its pieces were written (as Field.pieces)."""
        texts, pieces, position = [], [], 0
        for seg in self.expand_text(parts, depth):
            text = "<unknown>" if seg.text is None else seg.text
            texts.append(text)
            pieces.append((position, seg.offset))
            position += len(text)
        return "".join(texts), tuple(pieces)

    def nested(self, argv: list[Field], depth: int, heredoc: tuple[str, int] | None,
               heredoc_pieces: tuple[tuple[int, int], ...] = ()) -> None:
        """Strings run by `bash -c`, `sh -c`, `eval`, and an `sbatch <<EOF` script."""
        words = [f.text for f in argv]
        code: Field | None = None
        positional: list[Field] | None = None
        for k, word in enumerate(words):
            if (at := shell_code(words, k)) is not None:
                code, positional = argv[at], argv[at + 2:]
                break
            if word == "eval" and k + 1 < len(argv):
                code = _joined(argv[k + 1:])
                break
        if code is not None and code.text and depth < MAX_DEPTH:
            saved = self.positional
            if positional is not None:
                self.positional = positional
            try:
                with self.child(positional is not None):
                    self.run_text(code.text, code.offset, depth + 1, pieces=code.pieces)
            finally:
                self.positional = saved
        if heredoc is not None and words and words[0] == "sbatch" and depth < MAX_DEPTH:
            with self.child(True):  # the job's shell starts from the submitting one's environment
                self.run_text(heredoc[0], heredoc[1], depth + 1, pieces=heredoc_pieces, in_place=True)

    @contextmanager
    def child(self, new_process: bool):
        """A new shell (``bash -c``, a submitted job) sees only the exported variables: the
        ``$CMD`` of ``bash -c '$CMD'`` is empty unless CMD was exported. What it sets is kept
        afterwards, as the environment of the commands it runs (``export X=1; python ...``)."""
        if not new_process:
            yield
            return
        outer = self.vars
        self.vars = {name: var for name, var in outer.items() if var.exported}
        try:
            yield
        finally:
            inner, self.vars = self.vars, outer
            outer.update((name, var) for name, var in inner.items() if outer.get(name) is not var)

    def source(self, path: Field, depth: int) -> None:
        """Follow `source FILE` when the caller can resolve it (another file being linted)."""
        found = self.resolve_source(path.text) if self.resolve_source and depth < MAX_DEPTH else None
        if found is None:
            return
        name, text = found
        base = self.script.add_file(name, text)
        items, problems, cuts = lex(text, base)
        self.script.problems += problems
        self.script.cuts += cuts
        self.run(items, depth + 1)

    def run_text(self, text: str, offset: int, depth: int, in_place: bool = False,
                 pieces: tuple[tuple[int, int], ...] = ()) -> None:
        """Run code held in a string: each position goes back to where that piece of the string
        was written (``pieces``); without them, to ``offset`` + the position for a heredoc body
        (``in_place``: its lines are the file's) or to the string's place."""
        items, problems, cuts = lex(text, 0)
        where = _placer(pieces, offset, in_place)
        starts = [start for start, _ in pieces[1:]]
        for item in items:
            if starts:
                _split(item, starts)
            _rebase(item, where)
        self.script.problems += [(where(o), message) for o, message in problems]
        self.script.cuts += [(where(o), kind) for o, kind in cuts]
        self.run(items, depth)


_SHELL_OPTION_ARGUMENT = {"-o", "+o", "-O", "+O", "--rcfile", "--init-file"}


def shell_code(words: list[str | None], k: int) -> int | None:
    """The index of the code string when ``words[k]`` is ``bash`` or ``sh`` run with ``-c``
    (``bash -c CODE``, ``-lc``, ``-x -c``, ``--login -c``, ``-o pipefail -c``: bash's options come
    first, the first word after them is the code); None otherwise."""
    if words[k] not in ("bash", "sh"):
        return None
    j, command = k + 1, False
    while j < len(words) and (words[j] or "")[:1] in ("-", "+") and words[j] not in ("-", "--"):
        word = words[j] or ""
        if word in _SHELL_OPTION_ARGUMENT:
            j += 1
        elif not word.startswith("--") and "c" in word[1:]:
            command = True
        j += 1
    j += 1 if j < len(words) and words[j] == "--" else 0
    return j if command and j < len(words) else None


def _placer(pieces: tuple[tuple[int, int], ...], offset: int, shift: bool = False):
    """Position in a string -> offset in the file: within the piece it falls in, counted from
    where that piece was written (approximate inside escapes); without pieces, ``offset`` (+ the
    position when ``shift``)."""
    starts = [start for start, _ in pieces]

    def where(position: int) -> int:
        k = bisect.bisect_right(starts, position) - 1
        if k < 0:
            return offset + position if shift else offset
        start, written = pieces[k]
        return written + (position - start)

    return where


_ARGUMENT_DEFAULT = re.compile(r"^default of \$\{[1-9][0-9]*[:=?+-]")


def _argument_default(f: Field) -> bool:
    """A value that is the default of one of the script's arguments (``${1:-7B}``): the script
    may be given the argument, so a test on it is decided only when it runs."""
    return any(_ARGUMENT_DEFAULT.match(note) for note in (f.note or "").split("; "))


def _variable(word: object) -> str | None:
    """The variable a word is, when it is only one expansion: ``"$MODEL_SIZE"``, ``${SIZE}``,
    ``${1:-7B}`` ("$1")."""
    parts = getattr(word, "parts", None) or []
    if len(parts) != 1 or not isinstance(parts[0], Param) or parts[0].index or parts[0].length or \
            parts[0].indirect or parts[0].op not in ("", ":-", "-"):
        return None
    name = parts[0].name
    return f"${name}" if name[0] in "0123456789@*#?$!-" else name


def _patterns_said(branch: _Branch, patterns: list[str | None]) -> tuple[str, str, list[str]] | None:
    """A case arm's patterns as a test of its subject (None when the subject is not one variable
    or a pattern is not known)."""
    if branch.variable is None or any(p is None or UNKNOWN in p for p in patterns):
        return None
    values = [p.lstrip("(") for p in patterns]
    if "*" in values:
        return _otherwise(branch.said)
    return branch.variable, "matches" if any(c in v for v in values for c in "*?[") else "is", values


def _otherwise(said: list[tuple[str, str, list[str]] | None]) -> tuple[str, str, list[str]] | None:
    """What an else (or ``*``, or no arm) means after arms that each test the same variable for
    values: that it is none of them."""
    if not said or any(s is None or s[1] != "is" or s[0] != said[0][0] for s in said):
        return None
    return said[0][0], "is none of", [v for s in said for v in s[2]]


def _name_arm(said: tuple[str, str, list[str]] | None, where: str, otherwise: str) -> str:
    """How findings name an alternative: "MODEL_SIZE is 13B (line 12)", or ``otherwise`` ("the
    branch at line 12 runs") when its condition is not a test of one variable."""
    if said is None:
        return otherwise
    name, how, values = said
    if how == "is none of" and len(values) == 1:
        how = "is not"
    joined = ", ".join(values) if how == "is none of" else " or ".join(values)
    return f"{name} {how} {joined} ({where})"


def _joined(fields: list[Field]) -> Field:
    """Words joined with spaces (what ``eval`` runs), each piece still placed where it was written."""
    pieces, position = [], 0
    for f in fields:
        pieces += [(position + at, offset) for at, offset in f.pieces or ((0, f.offset),)]
        position += len(f.text or "") + 1
    return Field(" ".join(f.text or "" for f in fields), fields[0].offset, pieces=tuple(pieces))


def _same_path(written: Field, named: Field) -> bool:
    """A file written and a file named are the same: the same text, or, for a run-time value,
    the same one (expanded from the same place)."""
    if UNKNOWN not in (written.text or UNKNOWN):
        return posixpath.normpath(written.text) == posixpath.normpath(named.text or "")
    return written.text == named.text and written.offset == named.offset


def _split(item: object, starts: list[int]) -> None:
    """Cut the literals of a re-lexed string where its pieces begin (``starts``), so each part
    keeps to one piece and goes back to where that piece was written (a command assembled from
    several variables or array elements, run by ``bash -c`` inside a heredoc job)."""
    for name in ("parts", "arg"):
        parts = getattr(item, name, None)
        if not parts:
            continue
        out = []
        for part in parts:
            _split(part, starts)
            if isinstance(part, Lit) and len(part.text) > 1:
                begin = end = part.offset
                end += len(part.text)
                cuts = [c for c in starts[bisect.bisect_right(starts, begin):] if c < end]
                for a, b in zip([begin, *cuts], [*cuts, end], strict=True):
                    out.append(Lit(part.text[a - begin:b - begin], a, part.quoted))
            else:
                out.append(part)
        setattr(item, name, out)
    for name in ("words", "target", "heredoc"):
        child = getattr(item, name, None)
        for grandchild in child if isinstance(child, list) else [child] if child is not None else []:
            _split(grandchild, starts)


def _rebase(item: object, where) -> None:
    """Move every offset of a re-lexed item back into the file (``where(position)``)."""
    if hasattr(item, "offset"):
        item.offset = where(item.offset)
    for name in ("parts", "words", "arg"):
        for child in getattr(item, name, None) or []:
            _rebase(child, where)
    for name in ("target", "heredoc"):
        child = getattr(item, name, None)
        if child is not None:
            _rebase(child, where)
    if hasattr(item, "body_offset"):  # a heredoc's body, re-lexed with the string it is in
        item.body_offset = where(item.body_offset)


def read_script(text: str, name: str = "-", resolve_source=None,
                decide: dict[int, int] | None = None) -> Script:
    """Statically evaluate ``text``. Never raises on bad input; problems are recorded.
    ``resolve_source(path)`` may return (name, text) for a file named by `source`. ``decide``
    takes, for branches a first reading left undecided (``Script.undecided``), the arm at that
    index of their alternatives (its last: none), so each alternative can be read on its own."""
    script = Script(text, name)
    script.add_file(name, text)
    items, problems, cuts = lex(text)
    script.problems += problems
    script.cuts += cuts
    evaluator = Evaluator(script, resolve_source, decide)
    try:
        evaluator.run(items, 0)
    except _Budget:
        script.problems.append((0, f"{STOPPED}: the script exceeds the reader's budget "
                                   f"({MAX_COMMANDS:,} commands, {MAX_VALUE:,}-byte values, "
                                   f"{MAX_WORDS:,}-element arrays)"))
    except RecursionError:
        script.problems.append((0, f"{STOPPED}: nesting too deep to follow"))
    if decide is None and (note := _unread(script.undecided, evaluator.branch_names)) is not None:
        script.problems.append(note)
    return script


def readings(undecided: dict[int, list[tuple[int, str]]]) -> tuple[list[dict[int, int]], bool]:
    """The ``decide`` of each reading of a script's undecided branches, and whether each branch
    is read on its own (the others left open): see MAX_COMBINATIONS and MAX_ARMS. Reading each
    on its own checks every arm, but not a rule between the values two branches set."""
    combinations = math.prod(len(alternatives) for alternatives in undecided.values())
    if combinations <= MAX_COMBINATIONS:
        combos: list[dict[int, int]] = [{}]
        for branch, alternatives in undecided.items():
            combos = [{**c, branch: index} for c in combos for index, _ in alternatives]
        return (combos if undecided else []), False
    if sum(len(alternatives) for alternatives in undecided.values()) <= MAX_ARMS:
        return [{branch: index} for branch, alternatives in undecided.items()
                for index, _ in alternatives], True
    return [], False


def _unread(undecided: dict[int, list[tuple[int, str]]], names: dict[int, str]) -> tuple[int, str] | None:
    """A note, at the first of them, when a script's undecided branches are not read in every
    combination: which branches, how many combinations, and what is read instead."""
    combinations = math.prod(len(alternatives) for alternatives in undecided.values())
    if combinations <= MAX_COMBINATIONS:
        return None
    branches = [names.get(offset, "?") for offset in sorted(undecided)]
    listed = ", ".join(branches[:-1]) + f" and {branches[-1]}"
    what = (f"the branches on {listed}, decided only when the script runs (by its arguments or "
            f"environment), make {combinations:,} combinations, more than the {MAX_COMBINATIONS} lint reads")
    arms = sum(len(alternatives) for alternatives in undecided.values())
    if readings(undecided)[1]:
        return min(undecided), (f"{what}: each branch is read on its own, the others left open; a rule "
                                "between values that two of them set is not checked")
    return min(undecided), (f"{what}, and their {arms} arms more than the {MAX_ARMS} it reads one at a "
                            "time: none is expanded (a size table among them is not read); what they set "
                            "is unknown and not checked")
