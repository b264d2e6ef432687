"""Regenerate a catalogue of generator/dialects/catalogues/ from a framework's source tree.

    python scripts/extract_flags.py TREE SOURCE-LABEL > generator/dialects/catalogues/NAME.json

TREE is a Megatron-LM or Megatron-DeepSpeed source tree (e.g. an archive of shared/oracles,
unpacked). The framework's own ``parse_args`` builds its parser; ``ArgumentParser.parse_args``
is intercepted just before it parses, and every option of ``parser._actions`` is written with
its dest, action, nargs, type, choices and default (one option per line, as the catalogues
are). Needs the framework's Python dependencies (see tests/oracle/megatron_parse.py, whose
stand-ins for the GPU-only kernels this reuses).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "tests", "oracle"))


class _Captured(Exception):
    pass


def _value(value):
    try:
        json.dumps(value)
        return value
    except TypeError:
        return str(value)


def main() -> None:
    tree, label = sys.argv[1], sys.argv[2]
    import megatron_parse  # noqa: E402  (tests/oracle: the CPU stand-ins)

    megatron_parse._prepare(tree)
    captured = {}
    original = argparse.ArgumentParser.parse_args

    def intercept(self, *args, **kwargs):
        captured["parser"] = self
        raise _Captured

    argparse.ArgumentParser.parse_args = intercept
    try:
        if os.path.isdir(os.path.join(tree, "megatron", "training")):
            from megatron.training import arguments
        else:
            from megatron import arguments
        sys.argv = ["pretrain_gpt.py"]
        with contextlib.suppress(_Captured):
            arguments.parse_args()
    finally:
        argparse.ArgumentParser.parse_args = original
    lines = []
    for action in captured["parser"]._actions:
        if not action.option_strings or isinstance(action, argparse._HelpAction):
            continue
        kind = getattr(action.type, "__name__", None) if action.type is not None else None
        lines.append(json.dumps({
            "options": action.option_strings, "dest": action.dest,
            "action": type(action).__name__.lstrip("_"),
            "nargs": action.nargs, "type": kind,
            "choices": [_value(c) for c in action.choices] if action.choices else None,
            "default": _value(action.default)}, separators=(",", ":")))
    print(f'{{"source": {json.dumps(label)}, "count": {len(lines)}, "flags": [')
    print(",\n".join(lines))
    print("]}")


if __name__ == "__main__":
    main()
