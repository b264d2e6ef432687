"""One constructor for every spec section: the dataclass names the fields and their types, the
schema (schemas/spec.schema.json) says what a spec may give for each and its default, and the
field's metadata says what the schema cannot.

``section(cls, given, node, at)`` walks ``cls``'s fields beside the properties of its schema
``node``. A field's value is the one given, else the schema's default, else the field's own
default (the model's: Megatron's, which apply after its preset), else what its ``derive``
computes from the fields already filled, else None. The value is then converted as the schema's
form for it says, so that no field needs a constructor of its own:

- a count (an integer, or a string such as ``4Mi`` or ``2.5T``) to an integer within the
  schema's bounds, refused at its line otherwise;
- a number to a float, a whole-number float where only an integer is allowed to an int;
- a run-time word ({shell: "${NAME}/..."}) to a ShellRef;
- a list to a tuple, and a mapping's properties each by its own form;
- a mapping whose field is typed as a section class to that class, built the same way;

and last by the field's ``convert(value, at)``, where a value takes a form the schema cannot
say (a warmup's unit and amount) or is checked against another field. A section-typed field
with a ``convert`` builds itself from what was given (the model: its preset first).

Adding a spec field is a schema property and a typed dataclass field; this module needs no edit.
"""

from __future__ import annotations

import dataclasses
import sys
from collections.abc import Callable, Mapping
from typing import Any

from generator.errors import Location, UserError
from generator.shell import ShellRef
from generator.spec.schema import _branches, _child_schema, _resolved, json_path, spec_schema
from generator.units import parse_count

MISSING = dataclasses.MISSING
Converter = Callable[[Any, "At"], Any]


class At:
    """Where a value is in the spec, for located errors and for the converters that read another
    setting: the document (None for a model built without one, as import's are) and the path."""

    __slots__ = ("doc", "path")

    def __init__(self, doc: Any, path: tuple = ()) -> None:
        self.doc = doc
        self.path = path

    def child(self, key: str | int) -> At:
        return At(self.doc, (*self.path, key))

    def where(self, *more: str | int) -> str:
        """The JSON path (``$.training.warmup``)."""
        return json_path([*self.path, *more])

    def locate(self, *more: str | int, key: bool = False) -> Location | None:
        return None if self.doc is None else self.doc.locate([*self.path, *more], key=key)

    def setting(self, *path: str) -> Any:
        """Another field's value as the spec gives it, else the schema's default (else None)."""
        data: Any = self.doc.data if self.doc is not None else {}
        node: Any = spec_schema()
        for part in path:
            data = data.get(part, MISSING) if isinstance(data, dict) else MISSING
            node = _resolved(node.get("properties", {}).get(part, {}))
        return node.get("default") if data is MISSING else data


def converted(convert: Converter, **kwargs: Any) -> Any:
    """A dataclass field whose value ``convert(value, at)`` finishes (see the module docstring)."""
    return dataclasses.field(metadata={"convert": convert}, **kwargs)


def fields_of(cls: type, **where: Any) -> tuple[str, ...]:
    """The names of ``cls``'s fields (in order) whose metadata has, for each key of ``where``,
    that value (or one of a tuple of them)."""
    wanted = {k: v if isinstance(v, tuple) else (v,) for k, v in where.items()}
    return tuple(f.name for f in dataclasses.fields(cls)
                 if all(f.metadata.get(k) in accepted for k, accepted in wanted.items()))


def section(cls: type, given: Mapping[str, Any], node: dict, at: At, **extra: Any) -> Any:
    """An instance of ``cls`` from what a spec gives for it (``given``) and its schema ``node``;
    ``extra``: the fields the schema does not have (the spec's file, its document)."""
    values: dict[str, Any] = {}
    derived = []
    for name, default, number, convert, derive in _fields(cls, node):
        found = given.get(name, MISSING)
        if found is MISSING or found is None and derive is not None:
            if derive is not None:
                derived.append((name, derive))
                continue
            found = default
        if found is not None:  # (a number's conversion inline: a spec has ~70 of them)
            if number is float:
                if type(found) is int:
                    found = float(found)
            elif number is int:
                if type(found) is float and found.is_integer():
                    found = int(found)
            elif convert is not None:
                found = convert(found, at.child(name))
        values[name] = found
    for name, derive in derived:  # from the fields filled above (none derives from another derived)
        values[name] = derive(values)
    values.update(extra)
    return cls(**values)


# (cls, id(node)) -> (node, [(name, default, float | int | None, converter, derive)]): what
# section() walks, worked out once per class (the node is kept so that its id is not reused)
_PLANS: dict[tuple[type, int], tuple[dict, list]] = {}


def _fields(cls: type, node: dict) -> list:
    plan = _PLANS.get((cls, id(node)))
    if plan is None:
        plan = _PLANS[(cls, id(node))] = (node, _plan(cls, _resolved(node)))
    return plan[1]


def _plan(cls: type, node: dict) -> list:
    properties = next((b["properties"] for b in _branches(node) if "properties" in b), {})
    out = []
    for f in dataclasses.fields(cls):
        if not f.init or f.name not in properties:
            continue  # not a spec field (the document, the stage): given by the caller
        sub = _resolved(properties[f.name])
        if "default" in sub:
            default = sub["default"]
        elif f.default is not MISSING:
            default = f.default
        else:
            default = None
        convert = _field_converter(cls, f, sub)
        number = {_float: float, _int: int}.get(convert)
        out.append((f.name, default, number, None if number else convert, f.metadata.get("derive")))
    return out


def _field_converter(cls: type, f: dataclasses.Field, node: dict) -> Converter | None:
    own = f.metadata.get("convert")
    nested = _section_class(cls, f)
    if nested is not None:  # a section of its own: the field's convert builds it, else section()
        return own or (lambda given, at: section(nested, given, node, at) if isinstance(given, dict)
                       else given)
    form = converter(node)
    if own is None or form is None:
        return own or form
    return lambda given, at: own(form(given, at), at)


def _section_class(cls: type, f: dataclasses.Field) -> type | None:
    """The dataclass a field holds when its type names one (``LRScaling | None``), else None."""
    names = [part.strip() for part in str(f.type).split("|")]
    names = [n for n in names if n != "None"]
    if len(names) != 1 or not names[0].isidentifier():
        return None
    # (the type names a class of the module that declares the field: a subclass's may be another)
    owner = next(c for c in cls.__mro__ if f.name in vars(c).get("__annotations__", {}))
    found = vars(sys.modules[owner.__module__]).get(names[0])
    return found if dataclasses.is_dataclass(found) else None


def as_schema_says(given: Any, at: At) -> Any:
    """``given`` converted as the spec schema's form at ``at.path`` says (for a convert that
    takes a mapping apart: a warmup's {iters: 4K})."""
    node: dict = spec_schema()
    for part in at.path:
        node = _child_schema(_resolved(node), part)
    form = converter(node)
    return given if form is None else form(given, at)


# id(node) -> (node, its converter): each schema form's converter, worked out once
_FORMS: dict[int, tuple[dict, Converter | None]] = {}


def converter(node: dict) -> Converter | None:
    """How a value of the schema form ``node`` becomes the typed value (None: it stays as it is)."""
    hit = _FORMS.get(id(node))
    if hit is None:
        hit = _FORMS[id(node)] = (node, _form(_resolved(node)))
    return hit[1]


def _types(branch: dict) -> list[str]:
    kind = branch.get("type", [])
    return [kind] if isinstance(kind, str) else kind


def _form(node: dict) -> Converter | None:
    forms = _branches(node)
    types = {t for b in forms for t in _types(b)}
    if "integer" in types and "string" in types:
        return _count(next(b for b in forms if "integer" in _types(b)))
    if types - {"null"} == {"array"}:
        items = next((b["items"] for b in forms if isinstance(b.get("items"), dict)), None)
        return _tuple(converter(items) if items is not None else None)
    shell = any(b.get("required") == ["shell"] for b in forms)
    if shell or any("properties" in b for b in forms):
        return _mapping(node, shell)
    if "number" in types:
        return _float
    if "integer" in types:
        return _int
    return None


def _count(integer: dict) -> Converter:
    """A count (4096, 4M, 8Mi), within the bounds of the schema's integer form."""
    low, high = integer.get("minimum"), integer.get("maximum")

    def convert(given: Any, at: At) -> Any:
        if not isinstance(given, int | str) or isinstance(given, bool):
            return given
        where = at.where()
        try:
            number = parse_count(given, where)
        except ValueError as exc:
            raise UserError(str(exc), at.locate()) from None
        if high is not None and number > high:
            raise UserError(f"{where}: {given!r} is {number:,}; at most {high:,}", at.locate())
        if low is not None and number < low:
            bound = "must be positive" if low == 1 else f"must be at least {low}"
            raise UserError(f"{where}: {bound}, got {given!r}", at.locate())
        return number

    return convert


def _tuple(item: Converter | None) -> Converter:
    def convert(given: Any, at: At) -> Any:
        if not isinstance(given, list):
            return given
        if item is None:
            return tuple(given)
        return tuple(item(v, at.child(k)) for k, v in enumerate(given))

    return convert


def _mapping(node: dict, shell: bool) -> Converter:
    """A run-time word to a ShellRef; the properties of any other mapping each by its form."""

    def convert(given: Any, at: At) -> Any:
        if not isinstance(given, dict):
            return given
        if shell and given.keys() == {"shell"}:
            return ShellRef(given["shell"])
        out = dict(given)
        for key, item in given.items():
            form = converter(_child_schema(node, key))
            if form is not None and item is not None:
                out[key] = form(item, at.child(key))
        return out

    return convert


def _float(given: Any, at: At) -> Any:
    return float(given) if isinstance(given, int) and not isinstance(given, bool) else given


def _int(given: Any, at: At) -> Any:
    """A count written as a float (a preset's 1.0e+6) as the integer it is."""
    return int(given) if isinstance(given, float) and given.is_integer() else given
