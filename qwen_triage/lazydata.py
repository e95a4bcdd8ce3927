"""Dataclasses whose methods are written when first used, not when the class is defined.

``@dataclass`` writes a class's ``__init__``, ``__repr__`` and ``__eq__`` (a frozen one's ``__setattr__``,
``__delattr__`` and ``__hash__`` too) as Python source and compiles each when its module is imported: on
Python 3.11, about 0.2 ms a method. A 10-line ``scan`` imports some forty dataclasses and calls no such method
of most of them: the rule pack's classes come out of the cache's pickle without ``__init__`` and are never
compared or printed, and a clean log makes no hung rank, unexplained line or held-back veto. Their methods
were a third of the package's own start-up (issue 31: within 2.5x of ``python -m json.tool``).

``@lazy_dataclass`` stands where ``@dataclass`` stood, with the same options. The class gets stand-ins for the
methods ``dataclass`` would write and for ``__dataclass_fields__`` / ``__dataclass_params__`` (what
``dataclasses.fields``, ``asdict``, ``replace`` and ``is_dataclass`` read); the first use of any of them applies
``dataclass`` to the class in place, and from then on it is a plain dataclass. An instance the pickle loader
made (no ``__init__``: its fields are set in its ``__dict__``) works before that, as it would after.

Not for a class that is subclassed (a subclass's ``dataclass`` reads its base's fields as it is defined), nor
one with ``slots=True`` (that makes a new class). Leaf module: the standard library only, like lazyre.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass, field
from typing import Any, Callable, TypeVar, dataclass_transform, overload

T = TypeVar("T", bound=type)

_LOCK = threading.RLock()  # two threads using a class first at once process it once (one class may need another)


@overload
def lazy_dataclass(cls: T, /) -> T: ...
@overload
def lazy_dataclass(*, frozen: bool = False) -> Callable[[T], T]: ...


@dataclass_transform(field_specifiers=(field,))
def lazy_dataclass(cls: Any = None, /, **options: Any) -> Any:
    """``@dataclass`` (or ``@dataclass(frozen=True)``), applied to the class when one of its methods is first
    used."""
    if set(options) - {"frozen"}:
        raise TypeError(f"lazy_dataclass takes frozen= only, not {sorted(set(options) - {'frozen'})}")
    if cls is None:
        return lambda c: _deferred(c, options)
    return _deferred(cls, options)


class _ClassData:
    """Stands for ``__dataclass_fields__`` / ``__dataclass_params__`` until the class is processed."""

    def __init__(self, name: str, process: Callable[[], None]) -> None:
        self.name = name
        self.process = process

    def __get__(self, obj: object, owner: type) -> Any:
        self.process()
        return owner.__dict__[self.name]


def _deferred(cls: T, options: dict[str, Any]) -> T:
    frozen = bool(options.get("frozen"))
    methods = ["__init__", "__repr__", "__eq__"] + (["__hash__", "__setattr__", "__delattr__"] if frozen else [])
    stand_ins: dict[str, Any] = {} if frozen else {"__hash__": None}  # as dataclass leaves an eq=True class

    def process() -> None:
        with _LOCK:
            if "__dataclass_params__" in cls.__dict__ and not isinstance(cls.__dict__["__dataclass_params__"],
                                                                         _ClassData):
                return  # processed already (by another thread's first use)
            for name in stand_ins:  # dataclass() keeps a method the class defines: the stand-ins go first
                delattr(cls, name)
            dataclass(cls, **options)

    def stand_in(name: str) -> Callable[..., Any]:
        def method(self: Any, *args: Any, **kwargs: Any) -> Any:
            process()
            return getattr(cls, name)(self, *args, **kwargs)

        method.__name__ = name
        return method

    for name in methods:
        stand_ins[name] = stand_in(name)
    for name in ("__dataclass_fields__", "__dataclass_params__"):
        stand_ins[name] = _ClassData(name, process)
    for name, value in stand_ins.items():
        setattr(cls, name, value)
    return cls


def is_processed(cls: type) -> bool:
    """Whether ``dataclass`` has been applied to ``cls`` yet (a lazy one's stand-ins are gone)."""
    return not isinstance(cls.__dict__.get("__dataclass_params__"), _ClassData)
