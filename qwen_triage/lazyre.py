"""Module-level `re` patterns compiled on first use, so that importing a module costs no regex compile.

A 10-line `scan` imports the normaliser, the multi-line families, the unrecognised-template
masks and the secret masker: over a hundred patterns whose compile was a fifth of the warm
start-up (issue 19 asks for it within 3x of ``python -m json.tool``), though a healthy log
needs few of them. ``lazy(r"...")`` stands where ``re.compile(r"...")`` stood. On first use
it compiles and puts the compiled pattern's bound methods on the instance, so every later
``.search`` is the compiled pattern's own method found in the instance dict: no wrapper on
the hot path. ``pattern`` is known at once; any other attribute (``flags``, ``groupindex``)
compiles.

Leaf module: the standard library only.
"""

from __future__ import annotations

import re
from typing import Any, Callable, overload

_METHODS = ("search", "match", "fullmatch", "sub", "subn", "finditer", "findall", "split", "scanner")


class LazyPattern:
    """An `re.Pattern` compiled the first time one of its methods or attributes is used."""

    def __init__(self, pattern: str | bytes, flags: int = 0, compiler: Callable[[Any], Any] | None = None) -> None:
        self.pattern = pattern
        self._flags = flags
        self._compiler = compiler

    def compiled(self) -> re.Pattern[Any]:
        """The compiled pattern (compiled now if it was not): for an API that wants an `re.Pattern`."""
        found = self.__dict__.get("_compiled")
        if found is None:
            found = self._compiler(self.pattern) if self._compiler else re.compile(self.pattern, self._flags)
            self.__dict__["_compiled"] = found
            for name in _METHODS:
                self.__dict__[name] = getattr(found, name)
        return found

    def __getattr__(self, name: str) -> Any:  # only for names not yet on the instance
        if name.startswith("__") or name in ("_compiled", "_flags", "_compiler"):
            raise AttributeError(name)
        return getattr(self.compiled(), name)

    def __repr__(self) -> str:
        return f"lazy({self.pattern!r})"


@overload
def lazy(pattern: str, flags: int = 0) -> re.Pattern[str]: ...
@overload
def lazy(pattern: bytes, flags: int = 0) -> re.Pattern[bytes]: ...


def lazy(pattern: str | bytes, flags: int = 0) -> Any:
    """``re.compile(pattern, flags)``, deferred to the first use; typed as the pattern it stands for, since every
    method and attribute it answers with is the compiled pattern's own."""
    return LazyPattern(pattern, flags)


def lazy_with(compiler: Callable[[Any], Any], pattern: str) -> LazyPattern:
    """``compiler(pattern)`` deferred to the first use: a `regex` pattern (rules' `where`, the kernel's
    head), so that the `regex` module itself is imported only when a line needs one."""
    return LazyPattern(pattern, compiler=compiler)
