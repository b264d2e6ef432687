"""``@value`` behaves as ``@dataclass(frozen=True)`` does, and ``@record`` as ``@dataclass``: the
same class written both ways is built, compared, hashed, shown, copied and refused assignment
alike (or, mutable, assigned alike)."""

from __future__ import annotations

import copy
import dataclasses
import pickle
from dataclasses import field

import pytest

from generator.values import record, value


def _fields(name: str) -> type:
    """One class body for both decorators (named so that pickle finds the class here)."""

    class Fields:
        a: int
        b: str = "x"
        c: tuple = field(default_factory=tuple)
        hidden: int = field(default=0, repr=False)
        ignored: int = field(default=0, compare=False)
        cache: object = field(default=None, init=False, repr=False, compare=False)

    Fields.__name__ = Fields.__qualname__ = name
    return Fields


Generated = dataclasses.dataclass(frozen=True)(_fields("Generated"))
Shared = value(_fields("Shared"))
GeneratedMutable = dataclasses.dataclass(_fields("GeneratedMutable"))
SharedMutable = record(_fields("SharedMutable"))


CALLS = [((1,), {}), ((1, "y"), {}), ((), {"a": 2, "c": (3,)}), ((1,), {"hidden": 5, "ignored": 7}),
         ((1, "z", (1, 2), 4, 5), {})]


def _state(obj) -> tuple:
    return tuple(getattr(obj, f.name) for f in dataclasses.fields(obj))


def _refused(call) -> bool:
    try:
        call()
    except TypeError:
        return True
    return False


@pytest.mark.parametrize(("args", "kwargs"), CALLS)
def test_built_compared_hashed_and_shown_alike(args, kwargs) -> None:
    g, s = Generated(*args, **kwargs), Shared(*args, **kwargs)
    assert _state(g) == _state(s)
    assert repr(s) == repr(g).replace("Generated", "Shared")
    assert s == Shared(*args, **kwargs) and hash(s) == hash(Shared(*args, **kwargs))
    assert s == dataclasses.replace(s, ignored=99) and g == dataclasses.replace(g, ignored=99)
    assert s != dataclasses.replace(s, hidden=99) and g != dataclasses.replace(g, hidden=99)
    assert s != g and s != _state(s)  # another class, a tuple of the same values
    assert dataclasses.asdict(s) == dataclasses.asdict(g)
    assert _state(dataclasses.replace(s, b="q")) == _state(dataclasses.replace(g, b="q"))
    assert _state(copy.deepcopy(s)) == _state(s) and pickle.loads(pickle.dumps(s)) == s
    # the hash, computed once and kept, is neither pickled nor copied (a string's hash differs
    # from process to process)
    assert "_value_hash" in vars(s) and "_value_hash" not in vars(pickle.loads(pickle.dumps(s)))
    assert "_value_hash" not in vars(copy.deepcopy(s)) and "_value_hash" not in vars(copy.copy(s))


@pytest.mark.parametrize("pair", ["frozen", "mutable"])
def test_bad_calls_are_refused_alike(pair: str) -> None:
    """A missing, extra, doubled, unknown or not-initialised argument: TypeError from both."""
    classes = (Generated, Shared) if pair == "frozen" else (GeneratedMutable, SharedMutable)
    for args, kwargs in [((), {}), ((1, "y", (), 0, 0, 9), {}), ((1,), {"a": 2}), ((1,), {"nope": 1}),
                         ((1,), {"cache": 1})]:
        for cls in classes:
            assert _refused(lambda c=cls, a=args, k=kwargs: c(*a, **k)), (cls, args, kwargs)


def test_no_assignment_after_init() -> None:
    s = Shared(1)
    for action in (lambda: setattr(s, "a", 2), lambda: delattr(s, "a"), lambda: setattr(s, "new", 1)):
        with pytest.raises(dataclasses.FrozenInstanceError):
            action()
    object.__setattr__(s, "cache", 3)  # a cache slot is filled the way a frozen dataclass's is
    assert s.cache == 3 and s == Shared(1)


def test_the_project_value_classes_are_dataclasses_with_shared_methods() -> None:
    from generator.plan.plan import Plan
    from generator.spec.model import Model, Spec

    for cls in (Spec, Model, Plan):
        assert dataclasses.is_dataclass(cls) and cls.__init__ is Shared.__init__


@pytest.mark.parametrize(("args", "kwargs"), CALLS)
def test_record_built_compared_and_shown_as_a_dataclass(args, kwargs) -> None:
    g, s = GeneratedMutable(*args, **kwargs), SharedMutable(*args, **kwargs)
    assert _state(g) == _state(s)
    assert repr(s) == repr(g).replace("GeneratedMutable", "SharedMutable")
    assert s == SharedMutable(*args, **kwargs) and s != g
    assert s == dataclasses.replace(s, ignored=99) and s != dataclasses.replace(s, hidden=99)
    assert dataclasses.asdict(s) == dataclasses.asdict(g)
    assert _state(copy.deepcopy(s)) == _state(s) and pickle.loads(pickle.dumps(s)) == s


def test_record_is_mutable_and_unhashable_as_a_dataclass() -> None:
    g, s = GeneratedMutable(1), SharedMutable(1)
    g.a = s.a = 5
    g.extra = s.extra = 1
    assert _state(g) == _state(s) and s.a == 5
    for obj in (g, s):
        with pytest.raises(TypeError):
            hash(obj)
    assert SharedMutable(1).cache is None and GeneratedMutable(1).cache is None


def test_the_project_record_classes_share_the_methods() -> None:
    from generator.lint.engine import LintResult
    from generator.readers.launch import LaunchRead

    for cls in (LintResult, LaunchRead):
        assert dataclasses.is_dataclass(cls) and cls.__init__ is SharedMutable.__init__
        assert cls.__hash__ is None
