"""Shell words: a run-time reference a spec may give (``ShellRef``), and ``shq``, the quoting
of every value that reaches a script (the templates' filter, the sbatch and srun lines)."""

from __future__ import annotations

import shlex
from typing import Any

from generator.values import value


@value
class ShellRef:
    """An extra argument known at run time: literal text with ${NAME} references (the schema
    allows nothing else), written double-quoted so that only those expand."""

    text: str

    def __str__(self) -> str:
        return self.text


def shq(value: Any) -> str:
    """One shell word: numbers as their exact text, everything else single-quoted as needed."""
    if isinstance(value, bool):
        raise TypeError("booleans have no shell spelling; render a flag instead")
    if isinstance(value, float):
        value = repr(value)
    if isinstance(value, ShellRef):  # ${NAME} references and safe characters only (schema)
        return f'"{value.text}"'
    return shlex.quote(str(value))
