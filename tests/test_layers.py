"""generator's layers, imports inside functions included.

Every ``import`` in generator/ counts: at module level, inside functions, and under
``if TYPE_CHECKING:`` (a type named from a higher layer is still a dependency on it, and a
checker follows it). A module imports from its own package (``generator.lint.engine`` from
``generator.lint``) or from a lower layer; two packages of one layer do not import each other.
An import inside a function is kept only where start-up time needs it (numpy, jinja2, a
subpackage one command uses), with a ``# deferred:`` comment saying why (docs/architecture.md,
"Layers").
"""

from __future__ import annotations

import ast
from collections import defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PACKAGE = ROOT / "generator"

# lowest first; each entry is a package (a folder) or a module of generator/
LAYERS: tuple[tuple[str, ...], ...] = (
    # leaf helpers: they import nothing of generator's (generator is __init__'s __version__)
    ("generator", "generator.values", "generator.units", "generator.errors", "generator.resources"),
    # leaf helpers over those: the data files (read through resources), shell words (ShellRef is
    # a @value), the estimate's number-or-array operations, the framework and dialect records,
    # bounded file reading (its refusals are located errors)
    ("generator.presets", "generator.data", "generator.shell", "generator.vectors", "generator.frameworks",
     "generator.readfile", "generator.executors"),
    ("generator.spec",),
    ("generator.dialects",),
    ("generator.plan",),
    ("generator.estimate",),
    ("generator.rules",),
    # the calculator (a spec's plan checked by the rules, with its estimate) beside the readers:
    # the issue's order (rules -> readers) holds; the calculator is the part of plan/'s old
    # resolve() that needs the layers above plan, moved up to where they are below it
    ("generator.readers", "generator.calculator"),
    # DEVIATION from the order (which lists autoplan beside artifacts, above lint): a
    # spec's auto fields are chosen wherever a spec is loaded (lint of a spec, a sweep point, a
    # stage, resume-check), and the search resolves its candidates with the calculator, so
    # autoplan sits between the calculator and everything that loads a spec
    ("generator.autoplan",),
    # a spec file's plans: loaded with its auto fields chosen, split into stages, resolved
    ("generator.run",),
    ("generator.lint", "generator.render", "generator.explain", "generator.sweep"),
    # what writes or compares files (artifacts runs the read-back, lint/readback.py)
    # (and the report page: a run's plans, explain's advice, auto-plan's ranking, drawn)
    ("generator.artifacts", "generator.importer", "generator.resume", "generator.drift", "generator.report"),
    # the command line, and the developer tool that regenerates docs/ (python -m generator.docs)
    ("generator.cli", "generator.docs"),
    ("generator.__main__",),  # python -m generator: the command line
)
LAYER = {unit: n for n, units in enumerate(LAYERS) for unit in units}


def _module(path: Path) -> str:
    parts = path.relative_to(ROOT).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _exists(name: str) -> bool:
    path = ROOT.joinpath(*name.split("."))
    return path.with_suffix(".py").is_file() or (path / "__init__.py").is_file()


def _targets(module: str, is_package: bool, node: ast.Import | ast.ImportFrom) -> list[str]:
    """The generator modules an import statement loads."""
    if isinstance(node, ast.Import):
        return [a.name for a in node.names if a.name.split(".")[0] == "generator"]
    base = node.module or ""
    if node.level:
        parts = module.split(".")
        keep = len(parts) - node.level + (1 if is_package else 0)
        base = ".".join(parts[:keep] + ([node.module] if node.module else []))
    if base.split(".")[0] != "generator":
        return []
    # `from generator import presets` loads generator.presets; `from generator import __version__`
    # reads generator itself
    return [f"{base}.{a.name}" if _exists(f"{base}.{a.name}") else base for a in node.names]


def _unit(module: str) -> str:
    """The package or module of generator/ that a module belongs to."""
    parts = module.split(".")
    return ".".join(parts[:2])


def _imports() -> list[tuple[Path, int, str, str, bool, int]]:
    """(file, line, importing module, imported module, inside a function, last line) for every
    import."""
    found = []
    for path in sorted(PACKAGE.rglob("*.py")):
        module = _module(path)
        tree = ast.parse(path.read_text(encoding="utf-8"), str(path))

        def visit(node: ast.AST, in_function: bool, path=path, module=module) -> None:
            for child in ast.iter_child_nodes(node):
                inside = in_function or isinstance(child, ast.FunctionDef | ast.AsyncFunctionDef | ast.Lambda)
                if isinstance(child, ast.Import | ast.ImportFrom):
                    targets = _targets(module, path.name == "__init__.py", child) or [""]
                    found.extend((path, child.lineno, module, t, inside, child.end_lineno) for t in targets)
                visit(child, inside)

        visit(tree, False)
    return found


def test_every_module_has_a_layer():
    unplaced = sorted({_unit(_module(p)) for p in PACKAGE.rglob("*.py")} - set(LAYER))
    assert not unplaced, f"give these a layer in LAYERS: {unplaced}"


def test_imports_go_down_the_layers():
    wrong = []
    for path, line, module, target, _, _ in _imports():
        if not target:
            continue
        source, dest = _unit(module), _unit(target)
        if source == dest:
            continue
        if LAYER[dest] >= LAYER[source]:
            wrong.append(f"{path.relative_to(ROOT)}:{line} imports {target} (layer {LAYER[dest]}, "
                         f"{dest}) from layer {LAYER[source]} ({source})")
    assert not wrong, "imports that go up or across the layers:\n" + "\n".join(wrong)


def test_no_cycle_between_packages():
    edges: dict[str, set[str]] = defaultdict(set)
    for _, _, module, target, _, _ in _imports():
        if target and _unit(module) != _unit(target):
            edges[_unit(module)].add(_unit(target))
    cycles = []
    state: dict[str, int] = {}  # 1: on the path, 2: done

    def walk(unit: str, path: list[str]) -> None:
        state[unit] = 1
        for nxt in sorted(edges[unit]):
            if state.get(nxt) == 1:
                cycles.append(" -> ".join(path[path.index(nxt):] + [nxt]))
            elif nxt not in state:
                walk(nxt, [*path, nxt])
        state[unit] = 2

    for unit in sorted(edges):
        if unit not in state:
            walk(unit, [unit])
    assert not cycles, "import cycles between generator's packages:\n" + "\n".join(cycles)


def test_imports_inside_functions_say_why():
    """An import inside a function is deferred for start-up time only, and says so: a
    ``# deferred: ...`` comment on its line, or on the line above it or above the run of
    imports it ends."""
    silent = []
    said: set[tuple[Path, int]] = set()  # (file, last line) of the imports that say why
    for path, line, _, _, inside, end in sorted(_imports(), key=lambda i: (i[0], i[1])):
        if not inside:
            continue
        lines = path.read_text(encoding="utf-8").splitlines()
        here, above = lines[line - 1], lines[line - 2] if line > 1 else ""
        if "# deferred:" in here or above.strip().startswith("# deferred:") or (path, line - 1) in said:
            said.add((path, end))
        else:
            silent.append(f"{path.relative_to(ROOT)}:{line}: {here.strip()}")
    assert not silent, ("imports inside functions without a '# deferred: why' comment (move them "
                        "to the top of the module unless start-up time needs them there):\n"
                        + "\n".join(sorted(set(silent))))
