"""Layered specs: `extends: base.yaml` (relative to the file, chains, cycles refused) and
`--set a.b=value` overrides. Layers are merged as YAML node trees, so every value keeps the file
and line it came from: mappings merge key by key, lists and scalars are replaced."""

from __future__ import annotations

import hashlib
import re
from dataclasses import replace
from pathlib import Path

import yaml

from generator.errors import Location, UserError
from generator.spec.load import Document, _SpecLoader, load_yaml, read_text

_SET = re.compile(r"^([A-Za-z_][A-Za-z0-9_]*(?:\.[A-Za-z_][A-Za-z0-9_]*)*)=(.*)$", re.S)


def shown_path(display: str) -> str:
    """A path as text: bytes of a file name that are not UTF-8 (surrogate-escaped by Python)
    shown escaped (n\\xffx.yaml), so that the name can reach a generated file or a message."""
    return display.encode("utf-8", "surrogateescape").decode("utf-8", "backslashreplace")


def load_layers(path: Path, display: str, overrides: tuple[str, ...] = ()) -> Document:
    doc = _load_chain(path, shown_path(display), ())
    for item in overrides:  # the result keeps the spec file's name (generated headers cite it)
        doc = replace(merge(doc, _override(item)), file=doc.file)
    return doc


def _load_chain(path: Path, display: str, seen: tuple[Path, ...],
                named_at: Location | None = None) -> Document:
    try:
        real = path.resolve()
    except (RuntimeError, OSError) as exc:  # a loop of symbolic links (RuntimeError before 3.13)
        raise UserError(f"cannot read: {getattr(exc, 'strerror', None) or 'a loop of symbolic links'}",
                        named_at or Location(display)) from None
    if real in seen:
        chain = " → ".join(str(p.name) for p in (*seen, real))
        raise UserError(f"extends forms a cycle: {chain}", named_at or Location(display))
    doc = load_yaml(read_text(path, display), display)
    if not isinstance(doc.root, yaml.MappingNode):
        return doc
    extends = next((v for k, v in doc.root.value if k.value == "extends"), None)
    if extends is None:
        return doc
    if not isinstance(extends, yaml.ScalarNode) or not extends.value:
        raise UserError("$.extends: the path of a base spec, relative to this file",
                        doc.locate(["extends"]))
    base_path = path.parent / extends.value
    base_display = str(Path(display).parent / extends.value)
    try:
        found = base_path.is_file()
    except OSError as exc:  # a name too long for the file system, a loop of links
        raise UserError(f"$.extends: {extends.value[:80]!r} cannot be a file here ({exc.strerror})",
                        doc.locate(["extends"])) from None
    if not found:
        raise UserError(f"$.extends: {extends.value} not found (looked for {base_display})",
                        doc.locate(["extends"]))
    return merge(_load_chain(base_path, base_display, (*seen, real), doc.locate(["extends"])), doc)


def _merge_nodes(base: yaml.Node, over: yaml.Node) -> yaml.Node:
    if not (isinstance(base, yaml.MappingNode) and isinstance(over, yaml.MappingNode)):
        return over
    items = [(k, v) for k, v in base.value if k.value != "extends"]
    index = {k.value: i for i, (k, _) in enumerate(items)}
    for key, value in over.value:
        if key.value == "extends":
            continue
        if key.value in index:
            i = index[key.value]
            items[i] = (key, _merge_nodes(items[i][1], value))
        else:
            index[key.value] = len(items)
            items.append((key, value))
    return yaml.MappingNode(over.tag, items, over.start_mark, over.end_mark, flow_style=over.flow_style)


def merge(base: Document, over: Document) -> Document:
    """``over`` on top of ``base``; the result is named after ``over``'s file."""
    if not isinstance(base.root, yaml.MappingNode) or not isinstance(over.root, yaml.MappingNode):
        return over
    root = _merge_nodes(base.root, over.root)
    loader = _SpecLoader("")
    try:
        data = loader.construct_document(root)
    finally:
        loader.dispose()
    digest = hashlib.sha256((base.digest + over.digest).encode()).hexdigest()
    return Document(over.file, data, root, digest)


def _override(item: str) -> Document:
    """`a.b.c=value`: the value is read as YAML (so 8 is a number, [0.9, 0.95] a list)."""
    m = _SET.match(item)
    if not m:
        path = item.split("=", 1)[0]
        bad = next((k for k, part in enumerate(re.split(r"(\.)", path))
                    if part != "." and not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", part)), None)
        col = len(item) + 1 if "=" not in item else \
            sum(len(p) for p in re.split(r"(\.)", path)[:bad]) + 1 if bad is not None else 1
        raise UserError("expected PATH=VALUE with PATH dotted names, e.g. parallelism.tp=8",
                        Location(f"--set {item}", 1, col))
    parts = m.group(1).split(".")
    text = "".join(f"{'  ' * depth}{part}:\n" for depth, part in enumerate(parts[:-1]))
    text += f"{'  ' * (len(parts) - 1)}{parts[-1]}: {m.group(2)}\n"
    return load_yaml(text, f"--set {item}")


def with_values(doc: Document, values: dict[str, object], label: str) -> Document:
    """``doc`` with dotted-path values set and its sweep removed (a sweep point): still named
    after ``doc``'s file; the set values are located at ``label``."""
    tree: dict = {}
    for dotted, value in values.items():
        node = tree
        parts = dotted.split(".")
        for part in parts[:-1]:
            node = node.setdefault(part, {})
        node[parts[-1]] = value
    merged = merge(doc, load_yaml(yaml.safe_dump(tree, sort_keys=False), label))
    root = yaml.MappingNode(merged.root.tag, [(k, v) for k, v in merged.root.value if k.value != "sweep"],
                            merged.root.start_mark, merged.root.end_mark)
    data = {k: v for k, v in merged.data.items() if k != "sweep"}
    return replace(merged, file=doc.file, data=data, root=root)
