"""Would a Megatron tree's own load_checkpoint accept the arguments of a run that resumes
another's checkpoint? The check it makes of the arguments before it loads a tensor:
``check_checkpoint_args`` (megatron/training/checkpointing.py; the forks' megatron/checkpointing.py),
run with the resuming run's arguments as the global ones and the saving run's as those the
checkpoint holds (a checkpoint of version 3.0, what every release since 2021 writes).

Each case is ``{"old": {a parse case}, "new": {a parse case}}`` (see megatron_parse.py; a parse case
may give ``padded_vocab_size``, which Megatron sets when it builds the tokenizer); each
result ``{"ok": true}``, or ``{"ok": false, "error": "AssertionError: ..."}`` for a refusal, or
``{"ok": false, "parse": "..."}`` when one of the argument lists does not parse.
"""

from __future__ import annotations

import contextlib
import io
import os
import sys
import types

from megatron_parse import REFUSALS, case_environment, failure


def _stand_in_fused_kernels() -> None:
    """BLOOM's fork imports apex's multi-tensor kernels (CUDA extensions) at the top of
    megatron/utils.py, which its checkpointing imports; nothing that checks arguments calls them."""
    apex = sys.modules.setdefault("apex", types.ModuleType("apex"))
    applier = sys.modules.setdefault("apex.multi_tensor_apply", types.ModuleType("apex.multi_tensor_apply"))
    applier.multi_tensor_applier = None
    apex.multi_tensor_apply = applier
    sys.modules.setdefault("amp_C", types.ModuleType("amp_C"))


def check_args(tree: str, cases: list[dict]) -> list[dict]:
    """Each case through the tree's check_checkpoint_args (``_prepare`` done)."""
    modern = os.path.isdir(os.path.join(tree, "megatron", "training"))
    with contextlib.redirect_stdout(io.StringIO()):
        if modern:
            from megatron.core import num_microbatches_calculator as calc
            from megatron.training import arguments, checkpointing, global_vars
        else:
            _stand_in_fused_kernels()
            from megatron import arguments, checkpointing, global_vars
            calc = None

    def parsed(case: dict, err: io.StringIO):
        with case_environment(global_vars, calc, case), contextlib.redirect_stdout(io.StringIO()), \
                contextlib.redirect_stderr(err):
            args = arguments.parse_args()
            if hasattr(arguments, "validate_args"):
                arguments.validate_args(args)
        if "padded_vocab_size" in case:
            args.padded_vocab_size = case["padded_vocab_size"]
        return args

    results = []
    for case in cases:
        err = io.StringIO()
        try:
            saved, resuming = parsed(case["old"], err), parsed(case["new"], err)
        except (SystemExit, *REFUSALS) as exc:
            results.append({"ok": False, "parse": failure(exc, err)["error"]})
            continue
        global_vars._GLOBAL_ARGS = resuming
        checkpointing._CHECKPOINT_VERSION = 3.0
        try:
            with contextlib.redirect_stdout(io.StringIO()):
                checkpointing.check_checkpoint_args(saved)
            results.append({"ok": True})
        except REFUSALS as exc:
            results.append({"ok": False, "error": f"{type(exc).__name__}: {exc}"[:600]})
    return results
