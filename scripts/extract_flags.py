"""Regenerate a catalogue of generator/dialects/catalogues/ from a framework's source tree, or
from a launcher installed in this Python.

    python scripts/extract_flags.py TREE SOURCE-LABEL > generator/dialects/catalogues/NAME.json
    python scripts/extract_flags.py --launcher torchrun|deepspeed|accelerate \
        > generator/dialects/catalogues/launcher-NAME.json
    python scripts/extract_flags.py --torchtitan > generator/dialects/catalogues/torchtitan-VERSION.json

TREE is a Megatron-LM or Megatron-DeepSpeed source tree (e.g. an archive of shared/oracles,
unpacked). The framework's own ``parse_args`` builds its parser; ``ArgumentParser.parse_args``
is intercepted just before it parses, and every option of ``parser._actions`` is written with
its dest, action, nargs, type, choices and default (one option per line, as the catalogues
are). Needs the framework's Python dependencies (see tests/oracle/megatron_parse.py, whose
stand-ins for the GPU-only kernels this reuses). A launcher's parser is its own: torch's
``torch.distributed.run.get_args_parser``, accelerate's ``launch_command_parser``, DeepSpeed's
``deepspeed.launcher.runner.parse_args`` (intercepted the same way); the label is
"NAME VERSION" of the installed package. torchtitan's is the argparse parser tyro builds for
``Trainer.Config`` over a config function (what ``--module/--config`` leave to the command
line): each option in tyro's hyphenated and the field's underscored spelling (tyro accepts
both), and each choice of a subcommand (``activation-checkpoint:full``) as a word of its own.
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


def _intercepted(parse) -> argparse.ArgumentParser:
    """The parser that ``parse()`` builds, caught as it is about to parse."""
    captured = {}
    original = argparse.ArgumentParser.parse_args

    def intercept(self, *args, **kwargs):
        captured["parser"] = self
        raise _Captured

    argparse.ArgumentParser.parse_args = intercept
    try:
        with contextlib.suppress(_Captured):
            parse()
    finally:
        argparse.ArgumentParser.parse_args = original
    return captured["parser"]


def _megatron(tree: str) -> argparse.ArgumentParser:
    import megatron_parse  # noqa: E402  (tests/oracle: the CPU stand-ins)

    megatron_parse._prepare(tree)
    if os.path.isdir(os.path.join(tree, "megatron", "training")):
        from megatron.training import arguments
    else:
        from megatron import arguments
    sys.argv = ["pretrain_gpt.py"]
    return _intercepted(arguments.parse_args)


def launcher_parser(name: str) -> tuple[argparse.ArgumentParser, str]:
    """An installed launcher's own parser, and its "NAME VERSION" label."""
    from importlib.metadata import version

    if name == "torchrun":
        from torch.distributed.run import get_args_parser

        return get_args_parser(), f"torch {version('torch')} torchrun"
    if name == "accelerate":
        from accelerate.commands.launch import launch_command_parser

        return launch_command_parser(), f"accelerate {version('accelerate')} launch"
    if name == "deepspeed":
        from deepspeed.launcher import runner

        return _intercepted(lambda: runner.parse_args([])), f"deepspeed {version('deepspeed')} launcher"
    raise SystemExit(f"unknown launcher {name!r}: torchrun, deepspeed or accelerate")


def torchtitan_parser() -> tuple[argparse.ArgumentParser, str]:
    """The parser tyro builds for torchtitan's Trainer.Config as ConfigManager does, over a
    config function's defaults (llama3_8b: the optimizer's parameter group and the activation
    checkpointing subcommands exist only over a config that has them)."""
    from importlib.metadata import version

    import tyro.extras
    from torchtitan.models.llama3.config_registry import llama3_8b

    config = llama3_8b()
    parser = tyro.extras.get_parser(type(config), default=config)
    label = f"torchtitan {version('torchtitan')} Trainer.Config over llama3_8b (tyro {version('tyro')})"
    return parser, label


def _spellings(action: argparse.Action, underscored: bool) -> list[str]:
    if not underscored:
        return list(action.option_strings)
    out = list(action.option_strings)
    out += [o.replace("-", "_").replace("__", "--", 1) for o in action.option_strings if o.startswith("--")]
    return list(dict.fromkeys(out))


def catalogue_text(parser: argparse.ArgumentParser, label: str, underscored: bool = False) -> str:
    """The catalogue JSON of a parser: one option per line."""
    lines = []
    for action in parser._actions:
        if type(action).__name__ == "_SubParsersAction" and underscored:  # tyro's (its own argparse)
            lines += [json.dumps({"options": [choice], "dest": action.dest, "action": "SubcommandAction",
                                  "nargs": 0, "type": None, "choices": None, "default": None},
                                 separators=(",", ":")) for choice in action.choices]
            continue
        if not action.option_strings or type(action).__name__ == "_HelpAction":
            continue
        kind = getattr(action.type, "__name__", None) if action.type is not None else None
        lines.append(json.dumps({
            "options": _spellings(action, underscored), "dest": action.dest.replace("-", "_"),
            "action": type(action).__name__.lstrip("_"),
            "nargs": action.nargs, "type": kind,
            "choices": [_value(c) for c in action.choices] if action.choices else None,
            "default": _value(action.default)}, separators=(",", ":")))
    return (f'{{"source": {json.dumps(label)}, "count": {len(lines)}, "flags": [\n'
            + ",\n".join(lines) + "\n]}\n")


def main() -> None:
    # what a framework prints while its modules import (DeepSpeed's logs, Megatron-LM main's RL
    # logging where its optional packages are installed) goes to stderr: stdout is the catalogue
    titan = sys.argv[1] == "--torchtitan"
    with contextlib.redirect_stdout(sys.stderr):
        if titan:
            parser, label = torchtitan_parser()
        elif sys.argv[1] == "--launcher":
            parser, label = launcher_parser(sys.argv[2])
        else:
            tree, label = sys.argv[1], sys.argv[2]
            parser = _megatron(tree)  # (sets sys.argv for the framework's parse_args)
    sys.stdout.write(catalogue_text(parser, label, underscored=titan))


if __name__ == "__main__":
    main()
