"""The three operations the estimate formulas need beyond arithmetic, for a number or an array
of numbers (one per auto-plan candidate): the plan estimates one layout with plain Python
numbers, the search thousands at once with numpy arrays, through the same formulas
(memory.py, performance.py). numpy is imported only when an array is given."""

from __future__ import annotations

from functools import reduce
from typing import Any


def _arrays(*values: Any) -> bool:
    return any(hasattr(v, "shape") for v in values)


def where(condition: Any, yes: Any, no: Any) -> Any:
    """``yes`` where ``condition`` holds, else ``no`` (both are evaluated: neither may raise)."""
    if not _arrays(condition, yes, no):
        return yes if condition else no
    import numpy  # deferred: numpy only for arrays (auto-plan), not on the CLI's path

    return numpy.where(condition, yes, no)


def maximum(*values: Any) -> Any:
    if not _arrays(*values):
        return max(values)
    import numpy  # deferred: numpy only for arrays (auto-plan), not on the CLI's path

    return reduce(numpy.maximum, values)


def minimum(*values: Any) -> Any:
    if not _arrays(*values):
        return min(values)
    import numpy  # deferred: numpy only for arrays (auto-plan), not on the CLI's path

    return reduce(numpy.minimum, values)
