"""``@value``: a frozen dataclass whose methods are shared, not generated.

Python 3.11's ``@dataclass(frozen=True)`` compiles six methods per class when the class is
created (__init__, __repr__, __eq__, __hash__, __setattr__, __delattr__): about 2 ms for a
40-field class, most of a CLI run's own start-up for the spec and plan classes. ``@value``
keeps the dataclass (``dataclasses.fields``, ``replace`` and ``asdict`` work as before) and gives
the class one shared implementation of each method, with the same behaviour: keyword or
positional arguments in field order, defaults and default factories, equality and hashing over
the compared fields (same class only), the dataclass repr, and no assignment after __init__.
For classes with few instances (a spec's sections, a plan): the shared __init__ is slower per
instance than a generated one.
"""

from __future__ import annotations

import dataclasses

_MISSING = dataclasses.MISSING


def value(cls: type) -> type:
    cls = dataclasses.dataclass(init=False, repr=False, eq=False)(cls)
    fields = dataclasses.fields(cls)
    cls._value_init = tuple((f.name, f.default, f.default_factory) for f in fields if f.init)
    cls._value_rest = tuple((f.name, f.default, f.default_factory) for f in fields if not f.init)
    cls._value_compared = tuple(f.name for f in fields if f.compare)
    cls._value_shown = tuple(f.name for f in fields if f.repr)
    cls.__init__ = _init
    cls.__repr__ = _repr
    cls.__eq__ = _eq
    cls.__hash__ = _hash
    cls.__setattr__ = _frozen
    cls.__delattr__ = _frozen
    return cls


def _default(cls: type, name: str, default, factory):
    if default is not _MISSING:
        return default
    if factory is not _MISSING:
        return factory()
    raise TypeError(f"{cls.__name__}.__init__() missing required argument: '{name}'")


def _init(self, *args, **kwargs) -> None:
    cls = type(self)
    spec = cls._value_init
    if len(args) > len(spec):
        raise TypeError(f"{cls.__name__}.__init__() takes {len(spec)} positional arguments "
                        f"but {len(args)} were given")
    for (name, _, _), arg in zip(spec, args, strict=False):
        if name in kwargs:
            raise TypeError(f"{cls.__name__}.__init__() got multiple values for argument '{name}'")
        object.__setattr__(self, name, arg)
    for name, default, factory in spec[len(args):]:
        given = kwargs.pop(name, _MISSING)
        object.__setattr__(self, name, _default(cls, name, default, factory)
                           if given is _MISSING else given)
    if kwargs:
        raise TypeError(f"{cls.__name__}.__init__() got an unexpected keyword argument "
                        f"'{next(iter(kwargs))}'")
    for name, default, factory in cls._value_rest:
        if default is not _MISSING or factory is not _MISSING:
            object.__setattr__(self, name, _default(cls, name, default, factory))


def _compared(self) -> tuple:
    return tuple(getattr(self, name) for name in self._value_compared)


def _eq(self, other) -> bool:
    if other.__class__ is not self.__class__:
        return NotImplemented
    return _compared(self) == _compared(other)


def _hash(self) -> int:
    return hash(_compared(self))


def _repr(self) -> str:
    shown = ", ".join(f"{name}={getattr(self, name)!r}" for name in self._value_shown)
    return f"{type(self).__qualname__}({shown})"


def _frozen(self, name: str, *_value) -> None:
    raise dataclasses.FrozenInstanceError(f"cannot assign to field '{name}'")
