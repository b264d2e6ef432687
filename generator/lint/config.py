"""A project's lint configuration, in the manner of ruff: ``[tool.gen-launch]`` in a
``pyproject.toml``, or the top level of a ``gen-launch.toml`` (which wins in the same folder),
found from each linted file upwards; the nearest one applies. It declares what lint cannot
always learn from the files: the parser a script runs (a dialect by default and per path, the
path of a Megatron tree) and which findings to report (``select``, ``ignore``,
``per-file-ignores``, ``exclude``)::

    [tool.gen-launch]
    dialect = "megatron-lm@core_v0.14"               # the default parser of every script
    megatron-tree = "third_party/Megatron-LM"        # read that tree's own parser instead
    per-path-dialects = {"bloom/*.sh" = "megatron-deepspeed/bigscience"}
    ignore = ["GL222"]
    per-file-ignores = {"legacy/*.sh" = ["GL201"]}
    exclude = ["examples/broken/*"]

Globs are matched against the path relative to the configuration's folder (``*`` does not
cross ``/``; ``**`` does). A mistake in the file is a usage error located at its line."""

from __future__ import annotations

import os
import re
from dataclasses import field
from functools import cache
from pathlib import Path, PurePosixPath
from typing import Any

import tomllib

from generator.dialects import dialect_names
from generator.errors import UserError
from generator.values import value

FILES = ("gen-launch.toml", "pyproject.toml")
_KEYS = {
    "dialect": str, "megatron-tree": str, "per-path-dialects": dict, "select": list, "ignore": list,
    "per-file-ignores": dict, "exclude": list,
}


@value
class LintConfig:
    """One configuration file's settings (paths and globs relative to ``folder``)."""

    path: str = ""
    folder: str = "."
    dialect: str | None = None
    megatron_tree: str | None = None
    per_path_dialects: tuple[tuple[str, str], ...] = ()
    select: tuple[str, ...] = ()
    ignore: tuple[str, ...] = ()
    per_file_ignores: tuple[tuple[str, tuple[str, ...]], ...] = ()
    exclude: tuple[str, ...] = ()
    where: dict[str, str] = field(default_factory=dict, compare=False)  # key -> file:line:col

    def relative(self, path: str | Path) -> str | None:
        """``path`` relative to the configuration's folder (POSIX), or None outside it."""
        if not self.path:
            return None  # NONE: nothing is relative to it
        try:
            return Path(path).resolve().relative_to(Path(self.folder).resolve()).as_posix()
        except ValueError:
            return None

    def dialect_of(self, path: str | Path) -> tuple[str, str] | None:
        """(dialect, where it is declared) for a file: the first per-path glob it matches, else
        the default."""
        relative = self.relative(path)
        if relative is not None:
            for glob, name in self.per_path_dialects:
                if matches(relative, glob):
                    return name, self.where.get(f"per-path-dialects.{glob}", self.path)
        return (self.dialect, self.where.get("dialect", self.path)) if self.dialect else None

    def ignored(self, path: str | Path) -> tuple[str, ...]:
        relative = self.relative(path)
        if relative is None:
            return self.ignore
        return self.ignore + tuple(c for glob, codes in self.per_file_ignores
                                   if matches(relative, glob) for c in codes)

    def excluded(self, path: str | Path) -> bool:
        relative = self.relative(path)
        return relative is not None and any(matches(relative, glob) or
                                            matches(relative, f"{glob.rstrip('/')}/**")
                                            for glob in self.exclude)

    @property
    def tree(self) -> Path | None:
        return None if self.megatron_tree is None else Path(self.folder) / self.megatron_tree


NONE = LintConfig()


def matches(relative: str, glob: str) -> bool:
    """A path against a glob as ruff reads them: ``*`` within a folder, ``**`` across; a glob
    without ``/`` matches the file name in any folder."""
    if "/" not in glob.rstrip("/"):
        return PurePosixPath(relative).match(glob) or _glob(glob).fullmatch(relative) is not None
    return _glob(glob.lstrip("./")).fullmatch(relative) is not None


@cache
def _glob(glob: str) -> re.Pattern[str]:
    out, k = [], 0
    while k < len(glob):
        if glob.startswith("**/", k):
            out.append("(?:.*/)?")
            k += 3
        elif glob.startswith("**", k):
            out.append(".*")
            k += 2
        elif glob[k] == "*":
            out.append("[^/]*")
            k += 1
        elif glob[k] == "?":
            out.append("[^/]")
            k += 1
        else:
            out.append(re.escape(glob[k]))
            k += 1
    return re.compile("".join(out))


class Configurations:
    """The configuration of each linted file, each folder's looked up once a lint run."""

    def __init__(self) -> None:
        self._in: dict[Path, LintConfig] = {}
        self._of: dict[str, LintConfig] = {}  # by the folder as named

    def of(self, path: str | Path) -> LintConfig:
        """The nearest configuration above ``path`` (a file or folder), or NONE."""
        folder = str(path) if Path(path).is_dir() else os.path.dirname(path) or "."
        if folder not in self._of:
            self._of[folder] = self._config_in(Path(folder).resolve())
        return self._of[folder]

    def _config_in(self, folder: Path) -> LintConfig:
        if folder not in self._in:
            found = next((c for c in map(read_config, (folder / n for n in FILES)) if c is not None), None)
            self._in[folder] = found or (NONE if folder.parent == folder else self._config_in(folder.parent))
        return self._in[folder]


def read_config(path: Path) -> LintConfig | None:
    """The settings of a gen-launch.toml, or of a pyproject.toml's [tool.gen-launch] (None when
    it has none). A malformed file or setting is a UserError at its line."""
    if not path.is_file():
        return None
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise UserError(f"{path}: cannot read the lint configuration: {exc}") from None
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        m = re.search(r"\(at line (\d+), column (\d+)\)", str(exc))
        where = f"{path}:{m[1]}:{m[2]}" if m else str(path)
        raise UserError(f"{where}: not valid TOML: {str(exc).split(' (at line')[0]}") from None
    if path.name == "pyproject.toml":
        data = data.get("tool", {}).get("gen-launch")
        if data is None:
            return None
    return _settings(data, path, text)


def _settings(data: Any, path: Path, text: str) -> LintConfig:
    def at(key: str) -> str:
        m = re.search(rf'^\s*"?{re.escape(key)}"?\s*=', text, re.M)
        line = text.count("\n", 0, m.start()) + 1 if m else 1
        return f"{path}:{line}:1"

    def bad(key: str, message: str) -> UserError:
        return UserError(f"{at(key)}: {key}: {message}")

    if not isinstance(data, dict):
        raise UserError(f"{path}: [tool.gen-launch] must be a table")
    for key, given in data.items():
        if key not in _KEYS:
            near = [k for k in _KEYS if k.replace("-", "") == key.replace("_", "").replace("-", "")]
            hint = f"; did you mean {near[0]!r}?" if near else f"; the settings are {', '.join(_KEYS)}"
            raise bad(key, f"not a setting{hint}")
        if not isinstance(given, _KEYS[key]):
            raise bad(key, f"must be a {_KEYS[key].__name__}, not {type(given).__name__} ({given!r})")
    dialects = _string_map(data.get("per-path-dialects", {}), "per-path-dialects", bad)
    for name in ([data["dialect"]] if "dialect" in data else []) + [d for _, d in dialects]:
        problem = dialect_problem(name)
        if problem:
            raise bad("dialect" if name == data.get("dialect") else "per-path-dialects", problem)
    ignores = []
    for glob, codes in data.get("per-file-ignores", {}).items():
        if not isinstance(codes, list) or not all(isinstance(c, str) for c in codes):
            raise bad("per-file-ignores", f"{glob!r} must map to a list of codes, not {codes!r}")
        ignores.append((glob, tuple(c.upper() for c in codes)))
    for key in ("select", "ignore", "exclude"):
        if not all(isinstance(v, str) for v in data.get(key, [])):
            raise bad(key, f"must be a list of strings, not {data[key]!r}")
    folder = path.parent
    tree = data.get("megatron-tree")
    if tree is not None and not (folder / tree).is_dir():
        raise bad("megatron-tree", f"{tree!r} is not a folder (relative to {folder})")
    where = {key: at(key) for key in data}
    where.update({f"per-path-dialects.{glob}": at(glob) for glob, _ in dialects})
    return LintConfig(str(path), str(folder), data.get("dialect"), tree, tuple(dialects),
                      tuple(c.upper() for c in data.get("select", [])),
                      tuple(c.upper() for c in data.get("ignore", [])), tuple(ignores),
                      tuple(data.get("exclude", [])), where)


def _string_map(given: dict, key: str, bad) -> list[tuple[str, str]]:
    out = []
    for glob, name in given.items():
        if not isinstance(name, str):
            raise bad(key, f"{glob!r} must map to a dialect name, not {name!r}")
        out.append((glob, name))
    return out


def dialect_problem(name: str) -> str | None:
    """Why ``name`` ("megatron-lm", "megatron-lm@core_v0.14", a fork) is not a dialect, or None."""
    known = dialect_names()
    if name in known:
        return None
    return f"{name!r} is not a dialect; choose from {', '.join(known)}"
