"""The JSON Schema (schemas/spec.schema.json) is the single source of what a spec may contain.

Validation errors become located, one-line messages: ``spec.yaml:6:3: $.parallelism: ...``.
A subschema may carry an ``errorMessage`` (as in ajv-errors) that replaces jsonschema's wording.
"""

from __future__ import annotations

import difflib
import json
import os
import re
from collections.abc import Iterator
from functools import cache
from typing import Any

from generator.errors import UserError, UserErrors
from generator.resources import data_dir
from generator.spec.load import Document

_TYPE_NAMES = {"object": "a mapping", "array": "a list", "integer": "an integer",
               "number": "a number", "string": "a string", "boolean": "true or false",
               "null": "null"}


@cache
def spec_schema() -> dict[str, Any]:
    return json.loads((data_dir("schemas") / "spec.schema.json").read_text(encoding="utf-8"))


@cache
def schema_fields() -> frozenset[str]:
    """Every field a spec may give, dotted (sections and their fields: model, model.num_layers)."""
    out: set[str] = set()

    def walk(node: dict[str, Any], prefix: str) -> None:
        for name, sub in node.get("properties", {}).items():
            out.add(prefix + name)
            walk(sub, f"{prefix}{name}.")

    walk(spec_schema(), "")
    return frozenset(out)


@cache
def _validator():
    # deferred: jsonschema only when a spec is validated (start-up of --version, lint, rules)
    from jsonschema import validators

    schema = spec_schema()
    cls = validators.validator_for(schema)
    return cls(schema)


def json_path(path: Any) -> str:
    return "$" + "".join(f"[{p}]" if isinstance(p, int) else f".{p}" for p in path)


def validate(doc: Document) -> None:
    """Raise UserError (one per problem, sorted by position) if ``doc`` breaks the schema."""
    errors = sorted(
        {(str(e.location), str(e)): e for e in _errors(doc)}.values(),
        key=lambda e: (e.location.line or 0, e.location.col or 0),
    )
    if len(errors) == 1:
        raise errors[0]
    if errors:
        raise UserErrors(errors)


_CONTROL = re.compile(r"[\x00-\x08\x0a-\x1f\x7f]")


def _branches(node: dict) -> list[dict]:
    return [node, *node.get("anyOf", ()), *node.get("oneOf", ())]


def _resolved(node: dict) -> dict:
    ref = node.get("$ref")
    if not ref:
        return node
    target: Any = spec_schema()
    for part in ref.removeprefix("#/").split("/"):
        target = target[part]
    return {**target, **{k: v for k, v in node.items() if k != "$ref"}}


def _integer_only(node: dict) -> bool:
    types = [t for b in _branches(node)
             for t in ([b["type"]] if isinstance(b.get("type"), str) else b.get("type", []))]
    return "integer" in types and "number" not in types


def _whole(value: Any) -> bool:
    """A float that is a count's value written as a float (4.0; not 1e308: the maximum says so)."""
    return isinstance(value, float) and value.is_integer() and abs(value) < 2**63


def _child_schema(node: dict, key: str | int) -> dict:
    """The schema of a mapping's key (its properties, else additionalProperties) or of a list's
    items, looked up through the node's anyOf / oneOf branches."""
    if isinstance(key, int):
        return next((b["items"] for b in _branches(node) if isinstance(b.get("items"), dict)), {})
    return next((b["properties"][key] for b in _branches(node) if key in b.get("properties", {})),
                next((b["additionalProperties"] for b in _branches(node)
                      if isinstance(b.get("additionalProperties"), dict)), {}))


def _normalise(data: Any, node: dict, path: list, doc: Document) -> Iterator[UserError]:
    """Counts written as whole-number floats (4.0, 1.0e+6) become integers, in place, so that
    nothing writes ``4.0`` where a count belongs; a control character (NUL, newline, escape) in
    any string is refused: every string may reach a generated file."""
    node = _resolved(node)
    if isinstance(data, dict | list):
        for key in (data if isinstance(data, dict) else range(len(data))):
            sub = _child_schema(node, key)
            if _whole(data[key]) and _integer_only(_resolved(sub)):
                data[key] = int(data[key])
            yield from _normalise(data[key], sub, [*path, key], doc)
    elif isinstance(data, str) and (bad := _CONTROL.search(data)):
        yield UserError(f"{json_path(path)}: {data[:60]!r} holds the control character {bad.group()!r}; "
                        "every string reaches a generated file (a shell script, #SBATCH lines): remove it",
                        doc.locate(path))


def _errors(doc: Document) -> Iterator[UserError]:
    control = list(_normalise(doc.data, spec_schema(), [], doc))
    if control:
        yield from control
        return
    raw = list(_validator().iter_errors(doc.data))
    enum_paths = {tuple(e.absolute_path) for e in raw if e.validator == "enum"}
    for err in raw:
        path = list(err.absolute_path)
        where = json_path(path)
        if err.validator == "oneOf" and "errorMessage" not in err.schema and tuple(path) in enum_paths:
            continue  # the enum error says the same, better
        if err.validator == "additionalProperties":
            allowed = sorted(err.schema.get("properties", {}))
            for key in sorted(set(err.instance) - set(allowed), key=str):
                hint = _did_you_mean(str(key), allowed)
                yield UserError(
                    f"{where}: unknown key {key!r}{hint} (allowed: {', '.join(allowed)})",
                    doc.locate([*path, key], key=True),
                )
            continue
        specific = _matching_branch(err)
        if specific is not None:  # e.g. tp: -2 is an integer that breaks the integer branch
            err, path = specific, list(specific.absolute_path)
            where = json_path(path)
        yield UserError(f"{where}: {_message(err)}", doc.locate(path))


def _matching_branch(err: Any) -> Any:
    """For an anyOf (integer | "auto" | list) whose value has the right type for one branch, that
    branch's own error (a minimum, an item) rather than the summary of all branches."""
    if err.validator not in ("anyOf", "oneOf") or not err.context:
        return None
    if err.validator == "anyOf":
        relevant = [e for e in err.context if e.validator not in ("type", "const", "enum") or e.path]
    else:  # a oneOf of forms ({iters: N} | {samples: N}, a count | "8Mi"): the error inside the
        # form whose keys match, or the bound a number of the right type breaks (its own wording
        # stays for a string that matches no form)
        relevant = [e for e in err.context if e.path or e.validator in _BOUNDS]
    if len(relevant) != 1:
        return None
    return _matching_branch(relevant[0]) or relevant[0]


_BOUNDS = ("minimum", "exclusiveMinimum", "maximum", "exclusiveMaximum")


def _message(err: Any) -> str:
    schema = err.schema.get("not", {}) if err.validator == "not" else err.schema
    # a schema's own wording replaces jsonschema's for the checks it is written for
    custom = schema.get("errorMessage") if isinstance(schema, dict) and \
        err.validator in ("oneOf", "anyOf", "pattern", "not") else None
    got = _shown(err.instance)
    if custom:
        hint = _did_you_mean(err.instance, ["auto"]) if isinstance(err.instance, str) else ""
        return f"{custom}; got {got}{hint}"
    if err.validator == "required":
        missing = err.message.split("'")[1]
        return f"missing required key {missing!r}"
    if err.validator == "enum":
        choices = [str(c) for c in err.validator_value]
        hint = _did_you_mean(str(err.instance), choices)
        return f"{got} is not one of {', '.join(choices)}{hint}"
    if err.validator == "type":
        wanted = err.validator_value if isinstance(err.validator_value, list) else [err.validator_value]
        return f"expected {' or '.join(_TYPE_NAMES.get(t, t) for t in wanted)}, got {got}"
    if err.validator in ("minimum", "exclusiveMinimum", "maximum", "exclusiveMaximum"):
        relation = {"minimum": "at least", "exclusiveMinimum": "greater than",
                    "maximum": "at most", "exclusiveMaximum": "less than"}[err.validator]
        return f"must be {relation} {err.validator_value}, got {got}"
    if err.validator in ("minItems", "maxItems"):
        return f"expected {err.validator_value} items, got {len(err.instance)}"
    if err.validator == "pattern":
        return f"{got} does not match the pattern {err.validator_value}"
    return err.message


def _shown(value: Any) -> str:
    if isinstance(value, dict):
        return "a mapping"
    if isinstance(value, list):
        return "a list"
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    return repr(value)


def _did_you_mean(word: str, choices: list[str]) -> str:
    """The choice meant: the one equal but for case, the nearest of those that start with (or
    contain) the word (``H100`` → ``h100-80gb``; ``A100``: both A100 presets), else the closest
    by edit distance (ties: the longer common prefix), if any is close. Case does not count."""
    lowered = {c.lower(): c for c in choices}
    key = word.lower()
    if key in lowered:
        return f"; did you mean {lowered[key]!r}?"
    for test in (str.startswith, str.__contains__):
        found = [c for low, c in lowered.items() if key and test(low, key)]
        if found:  # the nearest of them ('megatron' → megatron-lm), or all that are as near
            nearest = min(_distance(key, c.lower()) for c in found)
            found = [c for c in found if _distance(key, c.lower()) == nearest]
            return f"; did you mean {found[0]!r}?" if len(found) == 1 else \
                f"; did you mean one of {', '.join(map(repr, found))}?"
    close = difflib.get_close_matches(key, list(lowered), n=len(choices), cutoff=0.6)
    if not close:
        return ""
    best = min(close, key=lambda c: (_distance(key, c), -len(os.path.commonprefix([key, c]))))
    return f"; did you mean {lowered[best]!r}?"


def _distance(a: str, b: str) -> int:
    previous = list(range(len(b) + 1))
    for i, ca in enumerate(a, 1):
        current = [i]
        for j, cb in enumerate(b, 1):
            current.append(min(previous[j] + 1, current[j - 1] + 1, previous[j - 1] + (ca != cb)))
        previous = current
    return previous[-1]

