"""The argument parser a script's entry point runs, as lint knows it: declared by the project
(a dialect, or a Megatron tree), or read statically from the repository the script runs (its
``megatron/arguments.py``, the entry point's own options). The catalogues of known releases and
forks are the fallback when neither is at hand; a finding that rests on them is a guess and says
so (rules/launch.py). A repository's parser is known only as far as its source could be read:
``complete`` says whether every option it defines was found."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import field
from functools import cached_property

from generator.dialects import Catalogue
from generator.values import value

DECLARED = "declared"
REPOSITORY = "repository"


@value
class ScriptParser:
    """``label`` names the parser in findings ("megatron/arguments.py of the repository");
    ``how`` is DECLARED or REPOSITORY; ``options`` every option read; ``complete`` whether that is
    all of them (``gaps`` say why not); ``ignores_unknown`` a parser run with parse_known_args;
    ``read_names`` (called once, when a rule asks) the attribute names the tree's own Python code
    reads from its arguments, or None where no tree was read."""

    label: str
    how: str
    options: Catalogue
    complete: bool = True
    gaps: tuple[str, ...] = ()
    ignores_unknown: bool = False
    dialect: str | None = None  # a declared catalogue dialect: its validations and notes apply
    # the entry point's file, when it was not found: (its path as the script gives it, whether it
    # surely should be there — a path from the root of a repository that is the Megatron tree)
    entry_missing: tuple[str, bool] | None = None
    nearest: str | None = None  # the catalogue dialect nearest a parser read from source
    # a Megatron tree the repository pins (a submodule) but that is not checked out: the parser
    # is that snapshot, unknown here; the catalogues judge, never surely
    pinned: str | None = None
    # capabilities read from the parser's own validation, over its nearest dialect's (a fork that
    # still raises without CUDA_DEVICE_MAX_CONNECTIONS=1 for its async all-reduce)
    capabilities: dict[str, str] = field(default_factory=dict, compare=False)
    abbreviations: bool = False  # argparse's allow_abbrev (its default): a unique prefix is accepted

    def defines(self, flag: str) -> bool:
        """Whether the parser accepts ``flag`` (with allow_abbrev, as a prefix of one option)."""
        if flag in self.options:
            return True
        return self.abbreviations and flag.startswith("--") and \
            sum(1 for f in self.options.defined if f.startswith(flag)) == 1
    read_names: Callable[[], frozenset[str]] | None = field(default=None, compare=False, repr=False)

    @property
    def from_source(self) -> bool:
        """Read from a tree's source (else a declared catalogue dialect stands for it, or a
        pinned tree that is not there)."""
        return self.dialect is None and self.pinned is None

    @property
    def certain(self) -> bool:
        """Whether a flag outside ``options`` is surely refused at start-up."""
        return self.complete and not self.ignores_unknown

    @cached_property
    def reads(self) -> frozenset[str] | None:
        return None if self.read_names is None else self.read_names()

    def why_partial(self) -> str:
        """Why a flag outside its options may still be accepted."""
        if self.ignores_unknown:
            return f"{self.label} ignores options it does not define (parse_known_args)"
        shown = "; ".join(self.gaps[:2]) + ("; …" if len(self.gaps) > 2 else "")
        return f"{self.label} was read only in part ({shown})"
