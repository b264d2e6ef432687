"""``@value`` and ``@record``: dataclasses whose methods are shared, not generated.

Python 3.11's ``@dataclass`` compiles each method it adds when the class is created (__init__,
__repr__, __eq__, and for a frozen class __hash__, __setattr__ and __delattr__): 0.3-2 ms a
class, which over the ~70 classes a CLI run imports was most of its own start-up. These
decorators keep the dataclass (``dataclasses.fields``, ``replace`` and ``asdict`` work as
before) and give the class one shared implementation of each method, with the same behaviour:
keyword or positional arguments in field order, defaults and default factories, defaults of
fields outside __init__, equality over the compared fields (same class only), the dataclass
repr. ``@value`` is ``@dataclass(frozen=True)`` (hashed over the compared fields, no assignment
after __init__; the hash is computed once and kept, neither pickled nor copied); ``@record`` is
``@dataclass`` (mutable, unhashable).

The shared __init__ fills the instance's __dict__ in one update: ~0.7 µs slower per instance
than a generated one, so a class created fewer than a few hundred times a run (~0.2-0.4 ms saved
at import) gains; classes with thousands of instances a run stay plain dataclasses.
"""

from __future__ import annotations

import dataclasses

_MISSING = dataclasses.MISSING


def value(cls: type) -> type:
    """``@dataclass(frozen=True)`` with shared methods."""
    cls = _shared(cls)
    cls.__hash__ = _hash
    cls.__getstate__ = _state
    cls.__setattr__ = _frozen
    cls.__delattr__ = _frozen
    return cls


def record(cls: type) -> type:
    """``@dataclass`` (mutable, compared, unhashable) with shared methods."""
    cls = _shared(cls)
    cls.__hash__ = None
    return cls


def _shared(cls: type) -> type:
    cls = dataclasses.dataclass(init=False, repr=False, eq=False)(cls)
    fields = dataclasses.fields(cls)
    names = tuple(f.name for f in fields if f.init)
    filled = [f for f in fields if f.default is not _MISSING or f.default_factory is not _MISSING]
    cls._value_names = names
    cls._value_accepted = frozenset(names)
    cls._value_template = {f.name: f.default for f in filled if f.default is not _MISSING}
    cls._value_factories = tuple((f.name, f.default_factory) for f in filled if f.default is _MISSING)
    cls._value_size = len(names) + sum(1 for f in filled if not f.init)
    cls._value_compared = tuple(f.name for f in fields if f.compare)
    cls._value_shown = tuple(f.name for f in fields if f.repr)
    cls.__init__ = _init
    cls.__repr__ = _repr
    cls.__eq__ = _eq
    return cls


def _init(self, *args, **kwargs) -> None:
    cls = type(self)
    names = cls._value_names
    if len(args) > len(names):
        raise TypeError(f"{cls.__name__}.__init__() takes {len(names)} positional arguments "
                        f"but {len(args)} were given")
    values = cls._value_template.copy()
    values.update(zip(names, args, strict=False))
    if kwargs:
        if not cls._value_accepted.issuperset(kwargs):
            unexpected = next(name for name in kwargs if name not in cls._value_accepted)
            raise TypeError(f"{cls.__name__}.__init__() got an unexpected keyword argument '{unexpected}'")
        if args and not kwargs.keys().isdisjoint(names[:len(args)]):
            doubled = next(name for name in names[:len(args)] if name in kwargs)
            raise TypeError(f"{cls.__name__}.__init__() got multiple values for argument '{doubled}'")
        values.update(kwargs)
    for name, factory in cls._value_factories:
        if name not in values:
            values[name] = factory()
    if len(values) < cls._value_size:
        missing = next(name for name in names if name not in values)
        raise TypeError(f"{cls.__name__}.__init__() missing required argument: '{missing}'")
    self.__dict__.update(values)


def _compared(self) -> tuple:
    return tuple(getattr(self, name) for name in self._value_compared)


def _eq(self, other) -> bool:
    if other.__class__ is not self.__class__:
        return NotImplemented
    return _compared(self) == _compared(other)


def _hash(self) -> int:
    # computed once: a frozen value's fields do not change (lru_cache keys hash a Shape per call)
    found = self.__dict__.get("_value_hash")
    if found is None:
        found = self.__dict__["_value_hash"] = hash(_compared(self))
    return found


def _state(self) -> dict:
    # pickled and copied without the hash: a string's hash differs from process to process
    return {k: v for k, v in self.__dict__.items() if k != "_value_hash"}


def _repr(self) -> str:
    shown = ", ".join(f"{name}={getattr(self, name)!r}" for name in self._value_shown)
    return f"{type(self).__qualname__}({shown})"


def _frozen(self, name: str, *_value) -> None:
    raise dataclasses.FrozenInstanceError(f"cannot assign to field '{name}'")
