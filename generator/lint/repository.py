"""The parser a script runs, learned from the repository it runs from. Found in this order: the
Megatron tree the project declares (``megatron-tree``) or the catalogue dialect it declares; else
the repository's own tree — the entry point the script starts and the ``megatron/arguments.py``
(or ``megatron/training/arguments.py``) above it, or in a folder the script ``cd``s into or puts on
``PYTHONPATH``, or a checked-out submodule — with the options the entry point adds (its own
``add_argument`` calls, an ``arguments.py`` beside it, the modules of a patch layer it imports
them from). Every file is read statically (readers/parser_source.py), never imported, and once a
run (by content). None when nothing is found: the catalogues stand in, as a guess."""

from __future__ import annotations

import dataclasses
import hashlib
import os
import posixpath
import re
from pathlib import Path

from generator.dialects import Catalogue, closest_dialect, dialect
from generator.dialects.script_parser import DECLARED, REPOSITORY, ScriptParser
from generator.lint.config import LintConfig
from generator.lint.discover import SKIP_DIRS, read_text
from generator.readers.bash.evaluate import UNKNOWN
from generator.readers.parser_source import ParserSource, attribute_reads, known_delegate, read_parser_source
from generator.rules import Fact

MEGATRON_PARSERS = ("megatron/training/arguments.py", "megatron/arguments.py")
MAX_SCANNED = 20_000  # .py files a tree's attribute reads are looked for in
MAX_MODULES = 64  # files a parser is followed through (its own, the entry point's, delegates)
_IMPORT = re.compile(r"^\s*from\s+([\w.]+)\s+import\s+", re.M)


def is_root(folder: Path) -> bool:
    """A project's top folder: a git work tree's (a ``.git`` folder, or the file of a checked-out
    submodule) or one with a ``gen-launch.toml``."""
    return (folder / ".git").exists() or (folder / "gen-launch.toml").is_file()


def repository_root(path: Path, fallback: Path) -> Path:
    """The project's top folder above ``path``, else ``fallback`` (the folder lint was given):
    paths a script names are resolved from there, not from where lint runs."""
    resolved = path.resolve()
    for folder in [resolved if resolved.is_dir() else resolved.parent, *resolved.parents]:
        if is_root(folder):
            return folder
    return fallback.resolve()


class Parsers:
    """Finds and reads scripts' parsers; one per lint run (its caches are the run's)."""

    def __init__(self) -> None:
        self._indexes: dict[Path, dict[str, list[Path]]] = {}
        self._reads: dict[Path, frozenset[str]] = {}
        self._nearests: dict[tuple[str, bool], str] = {}
        self._found: dict[tuple, ScriptParser | None] = {}

    def for_script(self, script: Path, facts: dict[str, Fact], root: Path,
                   config: LintConfig) -> ScriptParser | None:
        """The parser a script with Megatron arguments runs: the declared tree or dialect, else
        the repository's own tree (with what it leaves unknown), else a pinned submodule that is
        not checked out, else None (the catalogues guess). Found once for each reading of the
        script that starts the same entry point from the same folders (its alternatives)."""
        if "megatron_dialect" not in facts:
            return None
        key = (script, *(facts[n].value if n in facts else None for n in ("entrypoint", "search_paths")),
               config)
        if key not in self._found:
            self._found[key] = self._find(script, facts, root, config)
        return self._found[key]

    def _find(self, script: Path, facts: dict[str, Fact], root: Path,
              config: LintConfig) -> ScriptParser | None:
        if config.tree is not None:  # declared: the entry point adds nothing unless it is found
            entry = self._entry(script, facts, root, [config.tree])
            return self._tree_parser(config.tree, entry, root,
                                     f"the Megatron tree {config.megatron_tree} (declared in {config.path})",
                                     DECLARED)
        declared = config.dialect_of(script)
        if declared is not None:
            name, at = declared
            return ScriptParser(f"{dialect(name)}, declared at {at}", DECLARED,
                                dialect(name).catalogue, dialect=name)
        entry = self._entry(script, facts, root)
        tree = self._tree_of(entry, script, facts, root)
        if tree is None:
            pinned = _pinned(root)
            return None if pinned is None else ScriptParser(pinned, REPOSITORY, Catalogue("", {}),
                                                            complete=False, pinned=pinned)
        parser = self._tree_parser(tree, entry, root, None, REPOSITORY)
        parser = dataclasses.replace(parser, nearest=self._nearest(parser))
        given = facts["entrypoint"].value if "entrypoint" in facts else None
        if entry is None and given and given.endswith(".py"):
            # run from the root of a repository that is the Megatron tree, a relative path written
            # out must be there; elsewhere (a tree the user cds into first) it may be
            sure = tree == root and UNKNOWN not in given and not posixpath.isabs(given)
            parser = dataclasses.replace(parser, entry_missing=(given.replace(UNKNOWN, "…"), sure))
        return parser

    def for_entry_point(self, script: Path, facts: dict[str, Fact], root: Path) -> ScriptParser | None:
        """The argparse parser of an entry point that is not Megatron's (a fine-tuning script's
        own ``train.py``), where its file is found and read whole: one that makes its parser in
        that file, adds every option there and parses strictly (not parse_known_args)."""
        entry = self._entry(script, facts, root)
        if entry is None:
            return None
        read, _ = _read(entry)
        if read is None or not read.options or not read.complete or read.ignores_unknown or \
                read.allow_abbrev is None or read.unresolved_delegates:
            return None
        return ScriptParser(f"{_shown(entry, root)} (its own argparse parser)", REPOSITORY,
                            read.catalogue(), abbreviations=read.allow_abbrev)

    # -- where things are ---------------------------------------------------------------------
    def _bases(self, script: Path, facts: dict[str, Fact], root: Path) -> list[Path]:
        """Folders a relative path the script names may be relative to: the folders it cds into
        or puts on PYTHONPATH (as far as they are known), the repository root, its own folder."""
        out = []
        for text in facts["search_paths"].value if "search_paths" in facts else ():
            tail = text.rsplit(UNKNOWN, 1)[-1].lstrip("/")
            if UNKNOWN not in text and posixpath.isabs(text):
                out.append(Path(text))
            elif tail or UNKNOWN not in text:
                out += [root / tail, script.parent / tail]
        return [*out, root, script.parent]

    def _entry(self, script: Path, facts: dict[str, Fact], root: Path, first: list[Path] = ()) -> Path | None:
        """The entry point's file: at the path the script gives, from each base; else the one
        file of that name in the repository."""
        given = facts.get("entrypoint")
        if given is None or not given.value or not given.value.endswith(".py"):
            return None
        text = given.value
        tail = text.rsplit(UNKNOWN, 1)[-1].lstrip("/")
        if UNKNOWN not in text and posixpath.isabs(text):
            # a container's path (/workspace/Megatron-LM/pretrain_gpt.py): the one such file here
            return Path(text) if Path(text).is_file() else self._one_named(posixpath.basename(text), root)
        for base in [*first, *self._bases(script, facts, root)]:
            if (base / tail).is_file():
                return (base / tail).resolve()
        # a folder known only at run time ($MEGATRON_PATH/pretrain_gpt.py): the one such file
        return self._one_named(tail, root) if UNKNOWN in text else None

    def _one_named(self, tail: str, root: Path) -> Path | None:
        found = [p for p in self._index(root).get(posixpath.basename(tail), [])
                 if p.as_posix().endswith(tail)]
        trees = {self._tree_above(p, root) for p in found}
        return found[0] if len(trees) == 1 and found else None

    def _index(self, root: Path) -> dict[str, list[Path]]:
        """The repository's Python files by name (walked once a run)."""
        if root not in self._indexes:
            index: dict[str, list[Path]] = {}
            for folder, dirs, files in os.walk(root):  # not into other projects (but submodules)
                dirs[:] = sorted(d for d in dirs if d not in SKIP_DIRS and not d.startswith(".")
                                 and not _other_project(Path(folder, d)))
                for name in files:
                    if name.endswith(".py"):
                        index.setdefault(name, []).append(Path(folder) / name)
            self._indexes[root] = index
        return self._indexes[root]

    def _tree_above(self, path: Path, root: Path) -> Path | None:
        for folder in path.parents:
            if _megatron_parser(folder) is not None:
                return folder
            if folder == root or folder == folder.parent:
                return None
        return None

    def _tree_of(self, entry: Path | None, script: Path, facts: dict[str, Fact], root: Path) -> Path | None:
        if entry is not None and (tree := self._tree_above(entry, root)) is not None:
            return tree
        candidates = [*self._bases(script, facts, root), *_submodules(root)]
        trees = list(dict.fromkeys(c.resolve() for c in candidates if _megatron_parser(c) is not None))
        return trees[0] if trees else None

    # -- reading ------------------------------------------------------------------------------
    def _tree_parser(self, tree: Path, entry: Path | None, root: Path, label: str | None,
                     how: str) -> ScriptParser:
        """The options of the tree's parser, the entry point's, and every module they hand the
        parser to (``add_modelopt_args(parser)`` from megatron/inference/arguments.py, a patch
        layer's ``extra_args_provider``), followed through the files that define them."""
        parser_file = _megatron_parser(tree)
        bases = [tree, root, *([entry.parent] if entry is not None else [])]
        queue: list[Path] = [parser_file] if parser_file is not None else []
        gaps: list[str] = [] if parser_file is not None else [f"no Megatron parser in {tree}"]
        if entry is not None:
            queue.append(entry)
            beside = entry.parent / "arguments.py"
            if beside.is_file() and beside != parser_file:
                queue.append(beside)
            queue += _imported_additions(entry, bases)
        elif how != DECLARED:
            gaps.append("the entry point's file was not found: the options it adds are not known")
        options: dict[str, tuple] = {}
        ignores = abbreviations = False
        files: list[Path] = []
        while queue and len(files) < MAX_MODULES:
            path = queue.pop(0)
            if path in files:
                continue
            files.append(path)
            read, why = _read(path)
            if read is None:
                gaps.append(why)
                continue
            if len(files) == 1:  # the parser's own file makes the ArgumentParser
                abbreviations = bool(read.allow_abbrev)
            for flag, option in read.options.items():
                options.setdefault(flag, option)
            gaps += read.gaps
            ignores = ignores or read.ignores_unknown is True
            for name, line in read.delegates:
                known = known_delegate(name)
                module = _module_file(name.rsplit(".", 1)[0], bases) if "." in name else None
                if known is not None:
                    for flag, option in known.items():
                        options.setdefault(flag, option)
                elif module is not None:
                    queue.append(module)
                elif name.rsplit(".", 1)[-1] != "extra_args_provider" or entry is None:
                    gaps.append(f"{_shown(path, root)}:{line}: calls {name}(parser), not followed")
        shown = _shown(parser_file or tree, root)
        if label is None:
            label = f"{shown} of the repository" if parser_file else f"the entry point {_shown(entry, root)}"
        return ScriptParser(label, how, Catalogue(", ".join(_shown(f, root) for f in files), options),
                            abbreviations=abbreviations,
                            complete=not gaps, gaps=tuple(gaps), ignores_unknown=ignores,
                            capabilities=_validated(parser_file),
                            read_names=lambda: self._names_read([tree, *([entry.parent] if entry else [])]))

    def _nearest(self, parser: ScriptParser) -> str:
        key = (parser.options.source, parser.complete)
        if key not in self._nearests:
            self._nearests[key] = closest_dialect(set(parser.options.defined), parser.complete)
        return self._nearests[key]

    def _names_read(self, folders: list[Path]) -> frozenset[str]:
        """The attribute names the Python code under ``folders`` reads from its arguments."""
        names: set[str] = set()
        seen = 0
        for folder in dict.fromkeys(folders):
            if folder not in self._reads:
                found: set[str] = set()
                for path in _python_files(folder):
                    seen += 1
                    if seen > MAX_SCANNED:
                        break
                    text, _ = read_text(path)
                    if text is not None:
                        found |= attribute_reads(text)
                self._reads[folder] = frozenset(found)
            names |= self._reads[folder]
        return frozenset(names)


_ASYNC_RAISE = re.compile(r"if args\.async_tensor_model_parallel_allreduce:\s*\n\s*raise")


def _validated(parser_file: Path | None) -> dict[str, str]:
    """Capabilities a parser's own validation shows: a raise for the async tensor-parallel
    all-reduce (on unless --no-async-tensor-model-parallel-allreduce) without
    CUDA_DEVICE_MAX_CONNECTIONS=1, as microsoft's fork and older Megatron-LM trees do."""
    text = read_text(parser_file)[0] if parser_file is not None else None
    if text and "CUDA_DEVICE_MAX_CONNECTIONS" in text and _ASYNC_RAISE.search(text):
        return {"cuda_max_connections": "sequence-parallel-or-no-deepspeed"}
    return {}


def _other_project(folder: Path) -> bool:
    """A project nested in another (its own git work tree or gen-launch.toml), not a submodule."""
    return (folder / ".git").is_dir() or (folder / "gen-launch.toml").is_file()


def _python_files(folder: Path):
    for base, dirs, files in os.walk(folder):
        dirs[:] = sorted(d for d in dirs if d not in SKIP_DIRS and not d.startswith("."))
        yield from (Path(base) / f for f in sorted(files) if f.endswith(".py"))


def _megatron_parser(folder: Path) -> Path | None:
    for relative in MEGATRON_PARSERS:
        if (folder / relative).is_file():
            return folder / relative
    return None


def _submodules(root: Path) -> list[Path]:
    """The checked-out submodules of a repository (.gitmodules' paths that hold files)."""
    return [root / path for path, _ in _gitmodules(root) if _checked_out(root / path)]


def _pinned(root: Path) -> str | None:
    """How findings name a Megatron tree the repository pins as a submodule but that is not
    checked out (``git clone`` without --recursive, CI's default checkout), or None."""
    for path, url in _gitmodules(root):
        if "megatron" in f"{path} {url}".lower() and not _checked_out(root / path):
            return f"the Megatron submodule {path} ({url}), not checked out"
    return None


def _gitmodules(root: Path) -> list[tuple[str, str]]:
    """(path, url) of each submodule .gitmodules declares."""
    if not (root / ".gitmodules").is_file():
        return []
    text, _ = read_text(root / ".gitmodules")
    out: list[tuple[str, str]] = []
    for block in re.split(r"^\s*\[submodule\b", text or "", flags=re.M)[1:]:
        path = re.search(r"^\s*path\s*=\s*(.+?)\s*$", block, re.M)
        url = re.search(r"^\s*url\s*=\s*(.+?)\s*$", block, re.M)
        if path:
            out.append((path[1], url[1] if url else "?"))
    return out


def _checked_out(folder: Path) -> bool:
    return folder.is_dir() and any(p.name != ".git" for p in folder.iterdir())


def _imported_additions(entry: Path, bases: list[Path]) -> list[Path]:
    """Modules the entry point imports from (``from megatron_patch.arguments import …``) that
    add options: a patch layer's argument additions."""
    text, _ = read_text(entry)
    found = (_module_file(module, bases) for module in _IMPORT.findall(text or ""))
    return [path for path in found if path is not None and "add_argument" in (read_text(path)[0] or "")]


def _module_file(module: str, bases: list[Path]) -> Path | None:
    """The file of a dotted module under the first base that has it (a package's __init__.py)."""
    relative = module.replace(".", "/")
    for base in bases:
        for candidate in (base / f"{relative}.py", base / relative / "__init__.py"):
            if candidate.is_file():
                return candidate
    return None


_READ: dict[str, ParserSource] = {}  # by content: a tree vendored twice is read once


def _read(path: Path) -> tuple[ParserSource | None, str | None]:
    """(what the file defines, None) or (None, why it cannot be read)."""
    text, why = read_text(path)
    if text is None:
        return None, f"{path}: {why}"
    digest = hashlib.sha1(text.encode()).hexdigest()
    if digest not in _READ:
        _READ[digest] = read_parser_source(text, str(path))
    return _READ[digest], None


def _shown(path: Path | None, root: Path) -> str:
    if path is None:
        return "?"
    try:
        return path.resolve().relative_to(root).as_posix()
    except ValueError:
        return str(path)
