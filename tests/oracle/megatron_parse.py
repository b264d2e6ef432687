"""Run a Megatron source tree's own argument parser over argument lists (one process per tree).

    python megatron_parse.py TREE < cases.json > results.json

(the tests send their cases to megatron_worker.py, which keeps one process per tree).

TREE is an unpacked archive of ``shared/oracles`` (Megatron-LM, or a Megatron-DeepSpeed fork).
Each case is ``{"argv": [...], "world_size": N, "env": {...}, "capability": [9, 0]}``; each result
is, on the last line after MARK, ``{"ok": true, "dp": .., "micro": .., "global": .., "accumulation": ..,
"shown": {the argument values a case's "show" names}}`` (with ``"flops_vocab": V`` in a case,
also ``"flops"``: Megatron-LM's own FLOPs of one step, training.num_floating_point_operations,
the vocabulary V padded by its own tokenizer code) or ``{"ok": false, "error": "..."}``
(argparse's exit, or the AssertionError / ValueError of its validation). The parser is the
framework's own; only what a CPU machine lacks is stood in for (the GPU's compute
capability, the optional batch-invariant kernels that import triton), as shared/oracles/README.md
describes.
"""

from __future__ import annotations

import contextlib
import importlib.abc
import importlib.machinery
import io
import json
import os
import re
import sys
import types

MARK = "GEN_LAUNCH_RESULTS"  # the results line (frameworks print to stdout as they import)


def _kernel(name: str):
    if name.startswith("__"):
        raise AttributeError(name)
    return lambda *args, **kwargs: None


class _TritonKernels(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    """Stands in for the tree's GPU-kernel modules that import triton when imported (≈1 GB that a
    CPU machine does not need): names are imported from them, nothing that parses arguments or
    builds the model on the meta device calls them."""

    def __init__(self, tree: str) -> None:
        self.tree = tree

    def find_spec(self, name, path, target=None):
        if not name.startswith("megatron."):
            return None
        base = os.path.join(self.tree, *name.split("."))
        for file in (base + ".py", os.path.join(base, "__init__.py")):
            if os.path.isfile(file):
                with open(file, encoding="utf-8") as handle:
                    text = handle.read()
                if re.search(r"^(import triton|from triton)", text, re.M):
                    return importlib.machinery.ModuleSpec(name, self)
                return None
        return None

    def create_module(self, spec):
        module = types.ModuleType(spec.name)
        module.is_batch_invariant_mode_enabled = lambda *a, **k: False
        module.__getattr__ = _kernel
        return module

    def exec_module(self, module) -> None:
        pass


def _prepare(tree: str) -> None:
    import typing

    import typing_extensions

    sys.path.insert(0, tree)
    if not hasattr(typing, "override"):
        typing.override = typing_extensions.override
    sys.meta_path.insert(0, _TritonKernels(tree))
    os.environ.setdefault("DS_ACCELERATOR", "cpu")


def _capability(value: list[int]) -> None:
    import torch

    major, minor = value
    torch.cuda.get_device_capability = lambda *a, **k: (major, minor)
    props = types.SimpleNamespace(major=major, minor=minor, name="stand-in", total_memory=80 << 30,
                                  multi_processor_count=132)
    torch.cuda.get_device_properties = lambda *a, **k: props


def _plain(value):
    """An argument's value as JSON holds it (enums by their str)."""
    if isinstance(value, int | float | str | bool) or value is None:
        return value
    if isinstance(value, list | tuple):
        return [_plain(v) for v in value]
    return str(value)


# what a framework's validation raises for arguments it refuses
REFUSALS = (AssertionError, ValueError, TypeError, KeyError, AttributeError, RuntimeError)


@contextlib.contextmanager
def case_environment(global_vars, calc, case: dict):
    """One case's process state: Megatron's globals and microbatch calculator reset, the case's
    environment (rank 0 of its world) and GPU capability, its argv; the environment restored
    after."""
    for name in dir(global_vars):
        if name.startswith("_GLOBAL_"):
            setattr(global_vars, name, None)
    if calc is not None:
        calc.unset_num_microbatches_calculator()
    env = {"RANK": "0", "LOCAL_RANK": "0", "WORLD_SIZE": str(case["world_size"]), **case.get("env", {})}
    saved = {k: os.environ.get(k) for k in (*env, "CUDA_DEVICE_MAX_CONNECTIONS")}
    os.environ.pop("CUDA_DEVICE_MAX_CONNECTIONS", None)
    os.environ.update(env)
    _capability(case.get("capability", [9, 0]))
    sys.argv = ["pretrain_gpt.py", *case["argv"]]
    try:
        yield
    finally:
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v


def failure(exc: BaseException, err: io.StringIO) -> dict:
    """The result of a refused case: argparse's exit (its last line) or the validation error."""
    if isinstance(exc, SystemExit):
        return {"ok": False, "error": f"exit {exc.code}: {err.getvalue().strip().splitlines()[-1:]}"}
    return {"ok": False, "error": f"{type(exc).__name__}: {exc}"[:600]}


def _step_flops(args, vocab: int) -> float:
    """What Megatron-LM's --log-throughput counts for one step of these arguments."""
    with contextlib.redirect_stdout(io.StringIO()):
        try:
            from megatron.training.tokenizer.tokenizer import _vocab_size_with_padding as padded
        except ImportError:  # main moved it to megatron.core.tokenizers
            from megatron.core.tokenizers.utils.build_tokenizer import vocab_size_with_padding as padded
        from megatron.training.training import num_floating_point_operations
    args.padded_vocab_size = padded(vocab, args, logging_enabled=False)
    return num_floating_point_operations(args, args.global_batch_size)


def parse(tree: str, cases: list[dict]) -> list[dict]:
    """Each case through the tree's parse_args and validate_args (``_prepare`` done)."""
    modern = os.path.isdir(os.path.join(tree, "megatron", "training"))
    with contextlib.redirect_stdout(io.StringIO()):
        if modern:
            from megatron.training import arguments, global_vars
        else:
            from megatron import arguments, global_vars
        try:
            from megatron.core import num_microbatches_calculator as calc
        except ImportError:  # the Megatron-DeepSpeed forks keep their own calculator
            calc = None
            from megatron import microbatches
    results = []
    for case in cases:
        out, err = io.StringIO(), io.StringIO()
        try:
            with case_environment(global_vars, calc, case), contextlib.redirect_stdout(out), \
                    contextlib.redirect_stderr(err):
                args = arguments.parse_args()
                if hasattr(arguments, "validate_args"):
                    arguments.validate_args(args)
            result = {"ok": True, "dp": args.data_parallel_size, "micro": args.micro_batch_size,
                      "global": args.global_batch_size,
                      "shown": {name: _plain(getattr(args, name, None)) for name in case.get("show", ())}}
            if "flops_vocab" in case:
                result["flops"] = _step_flops(args, case["flops_vocab"])
            if calc is not None:
                calc.init_num_microbatches_calculator(0, getattr(args, "rampup_batch_size", None),
                                                      args.global_batch_size, args.micro_batch_size,
                                                      args.data_parallel_size, False)
                result["accumulation"] = calc.get_num_microbatches()
            else:
                result["accumulation"] = microbatches.build_num_microbatches_calculator(args).get()
        except (SystemExit, *REFUSALS) as exc:
            result = failure(exc, err)
        results.append(result)
    return results


def main() -> None:
    tree = sys.argv[1]
    _prepare(tree)
    print(f"\n{MARK} {json.dumps(parse(tree, json.load(sys.stdin)))}")


if __name__ == "__main__":
    main()
