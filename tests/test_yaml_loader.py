"""The spec loader reads valid documents with libyaml's parser and the project's constructor;
what it builds must be what the pure-Python loader (the one that reports bad input) builds:
the same data and every node at the same line and column."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml
from hypothesis import given, settings
from hypothesis import strategies as st

from generator.spec import load
from generator.spec.load import _SpecLoader, load_yaml

ROOT = Path(__file__).resolve().parent.parent
DOCUMENTS = sorted([*ROOT.glob("samples/*.yaml"), *ROOT.glob("tests/**/*.yaml")])


def _pure(text: str, display: str):
    loader = _SpecLoader(text)
    loader.name = display
    try:
        root = loader.get_single_node()
        return root, loader.construct_document(root)
    finally:
        loader.dispose()


def _nodes(node: yaml.Node) -> list[tuple]:
    """Every node, depth first: its kind, tag, scalar value and where it starts and ends (an
    empty value by its line only: in a flow mapping, ``{x: }``, PyYAML puts the implicit null
    just after the colon, libyaml at the next token)."""
    empty = isinstance(node, yaml.ScalarNode) and node.value == ""
    here = (type(node).__name__, node.tag, node.value if isinstance(node, yaml.ScalarNode) else None,
            node.start_mark.name, node.start_mark.line, None if empty else node.start_mark.column,
            node.end_mark.line, None if empty else node.end_mark.column)
    if isinstance(node, yaml.MappingNode):
        return [here, *(n for k, v in node.value for n in (*_nodes(k), *_nodes(v)))]
    if isinstance(node, yaml.SequenceNode):
        return [here, *(n for child in node.value for n in _nodes(child))]
    return [here]


def test_libyaml_is_there_so_the_fast_path_is_taken() -> None:
    assert load._FastSpecLoader is not None  # PyYAML's wheels ship libyaml


@pytest.mark.parametrize("path", DOCUMENTS, ids=lambda p: str(p.relative_to(ROOT)))
def test_every_document_reads_as_the_pure_python_loader_reads_it(path: Path) -> None:
    # the samples are ordinary specs: the fast path must read them (not fall back)
    _same_reading(path.read_text(encoding="utf-8"), "spec.yaml", taken=path.parent.name == "samples")


def _same_reading(text: str, display: str, taken: bool = False) -> None:
    """Where the fast path reads ``text``, it reads what the pure-Python loader reads; it never
    accepts what that loader refuses (that would let a bad spec through); ``taken``: it reads it."""
    fast = load._load_fast(text, display)
    try:
        root, data = _pure(text, display)
    except (yaml.YAMLError, load._LocatedYAMLError):
        assert fast is None, text
        return
    if fast is None:
        assert not taken, text
        return
    assert fast[1] == data
    assert _nodes(fast[0]) == _nodes(root)


def test_a_document_libyaml_refuses_is_reported_by_the_pure_python_loader() -> None:
    """A bad document gets the pure-Python loader's message and position, as it always did
    (libyaml words its errors otherwise: "found character '\\t'" is PyYAML's scanner)."""
    from generator.errors import UserError

    for text, message in (
            ("a: 1\na: 2\n", "x.yaml:2:1: duplicate key 'a' (first defined on line 1)"),
            ("a:\n\t- 1\n", "x.yaml:2:1: invalid YAML: found character '\\t' that cannot start any token"),
            ("a: [1, 2\n", "x.yaml:2:1: invalid YAML: expected ',' or ']', but got '<stream end>'"),
            ("a: \x07\n", "x.yaml:1:4: the character '\\x07' (U+0007) is not allowed in YAML; remove it"),
            ("a: !!python/object:os.system x\n", "x.yaml:1:4: tag !!python/object:os.system is not allowed")):
        assert load._load_fast(text, "x.yaml") is None
        with pytest.raises(UserError) as caught:
            load_yaml(text, "x.yaml")
        assert str(caught.value).startswith(message)


def test_a_valid_document_is_not_read_twice(monkeypatch) -> None:
    """The fast path stands on its own: a valid spec never reaches the pure-Python loader."""
    def refuse(*_args, **_kwargs):
        raise AssertionError("the pure-Python loader was used")

    monkeypatch.setattr(load, "_SpecLoader", refuse)
    doc = load_yaml((ROOT / "samples" / "gpt3-175b.yaml").read_text(), "gpt3.yaml")
    assert doc.data["name"] and doc.locate(["model"]).file == "gpt3.yaml"


_SCALARS = st.one_of(
    st.integers(-10**12, 10**12).map(str), st.floats(allow_nan=False).map(repr),
    st.sampled_from(["yes", "no", "on", "off", "null", "~", "true", "False", "0x1F", "0o17", "1_000",
                     "48:00:00", "1e3", ".5", "-.inf", ".NaN", "", "'q'", '"d"', "a b", "ü", "<<",
                     "!", "!!str 1", "0?", "? a", "\tx", "a\tb", "# 中文注释", "{x: }", "{x: 1, y: [2]}",
                     "&a 1", "*a", "|", ">-", "'it''s'", '"\\u00e9"', "-", "- 1", ": x", "a: b"]),
    st.text(st.characters(codec="utf-8", exclude_categories=("Cs",)), max_size=12),
    st.text(st.characters(codec="utf-8", exclude_categories=("Cs",)), max_size=8).map(
        lambda s: "'" + s.replace("'", "''") + "'"),
)


@st.composite
def _documents(draw) -> str:
    lines = []
    for i in range(draw(st.integers(1, 6))):
        key = f"k{i}"
        kind = draw(st.sampled_from(["scalar", "flow", "block", "map"]))
        if kind == "scalar":
            lines.append(f"{key}: {draw(_SCALARS)}")
        elif kind == "flow":
            lines.append(f"{key}: [{', '.join(draw(st.lists(_SCALARS, max_size=4)))}]")
        elif kind == "block":
            lines += [f"{key}:"] + [f"  - {v}" for v in draw(st.lists(_SCALARS, min_size=1, max_size=3))]
        else:
            lines += [f"{key}:"] + [f"  m{j}: {v}" for j, v in enumerate(
                draw(st.lists(_SCALARS, min_size=1, max_size=3)))]
    return "\n".join(lines) + "\n"


@settings(max_examples=400, deadline=None)
@given(_documents())
def test_random_documents_read_the_same_by_both_loaders(text: str) -> None:
    _same_reading(text, "r.yaml")
