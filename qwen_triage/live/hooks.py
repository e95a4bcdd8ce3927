"""The run's notes and its caller's callbacks, shared by the supervisor's parts.

The supervisor's threads (receive, triage, watch, wait, stop) all report through
one :class:`Hooks`, so that a failing callback is caught and said once, whichever
part called it, and the notes that go into the report are one list.
"""

from __future__ import annotations

from typing import Callable


class Hooks:
    """``on_note`` gets remarks worth showing; ``notes`` keeps those that also go into the report."""

    def __init__(self, on_note: Callable[[str], None] | None = None):
        self.on_note = on_note
        self.notes: list[str] = []
        self._warned: set[str] = set()

    def call(self, fn: Callable | None, *args: object) -> None:
        """``fn(*args)``; an exception in it is noted once and does not stop the run."""
        if fn is None:
            return
        try:
            fn(*args)
        except Exception as exc:  # noqa: BLE001 - a callback must not stop the run
            key = getattr(fn, "__qualname__", repr(fn))
            self.warn_once(key, f"callback {key} failed: {exc!r} (the run goes on)")

    def warn_once(self, key: str, text: str) -> None:
        """A note shown the first time ``key`` goes wrong, not on every chunk after it."""
        if key not in self._warned:
            self._warned.add(key)
            self.note(text)

    def note(self, text: str, report: bool = False) -> None:
        if report:
            self.notes.append(text)
        if self.on_note is not None:
            try:
                self.on_note(text)
            except Exception:  # noqa: BLE001
                pass
