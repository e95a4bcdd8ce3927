"""A live session warms up before the child speaks, and the warm-up leaves nothing in it.

The first error line used to pay for the `regex` module, the normaliser's patterns and the correlator
(60-130 ms between the line and its diagnosis: bench/bench_latency.py); LiveSession.warm pays them while the
child starts, on lines of its own.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

from qwen_triage.live.session import LiveSession
from tests.conftest import ROOT

TRACEBACK = (
    b"Traceback (most recent call last):\n"
    b'  File "/opt/venv/lib/python3.11/site-packages/vllm/config.py", line 1136, in verify_with_parallel_config\n'
    b"    raise ValueError(\n"
    b"ValueError: Total number of attention heads (40) must be divisible by tensor parallel size (6).\n"
)

PROBE = """
import json, sys
from qwen_triage.engine.scanner import compile_pack
from qwen_triage.live.session import LiveSession
events = []
session = LiveSession(compile_pack(), on_event=events.append)
session.warm()
before = set(sys.modules)
session.feed(session.add_input("launch.log"), sys.stdin.buffer.read())
print(json.dumps({"new": sorted(set(sys.modules) - before), "events": [e.class_ for e in events]}))
"""


def test_after_the_warm_up_the_first_diagnosis_imports_nothing(warm_cache) -> None:  # type: ignore[no-untyped-def]
    done = subprocess.run([sys.executable, "-c", PROBE], input=TRACEBACK, capture_output=True, timeout=300,
                          env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert done.returncode == 0, done.stderr
    got = json.loads(done.stdout)
    assert got["events"] == ["config.tp_indivisible"]  # the line was diagnosed…
    assert not [m for m in got["new"] if m.split(".")[0] in ("regex", "qwen_triage")]  # …with nothing left to load


def test_the_warm_up_lines_are_not_the_sessions(compiled) -> None:  # type: ignore[no-untyped-def]
    events: list[object] = []
    session = LiveSession(compiled, on_event=events.append)
    session.warm()
    inp = session.add_input("launch.log")
    session.feed(inp, b"INFO:     Application startup complete.\n")
    report = session.finish()
    assert events == [] and report.diagnoses == [] and report.unrecognised == []
    assert inp.source.lines_read == 1


class _Words:
    """The feed's queue, seen: whether the session was warm when the triage thread first waited for a word."""

    def __init__(self, inner, session) -> None:  # type: ignore[no-untyped-def]
        self.inner, self.session, self.warm_at_first_wait = inner, session, None

    def get(self, *args, **kwargs):  # type: ignore[no-untyped-def]
        if self.warm_at_first_wait is None:
            self.warm_at_first_wait = self.session.warmed
        return self.inner.get(*args, **kwargs)

    def __getattr__(self, name: str):  # type: ignore[no-untyped-def]
        return getattr(self.inner, name)


def test_the_triage_thread_warms_up_at_the_first_word_not_beside_the_childs_start(compiled) -> None:  # type: ignore[no-untyped-def]
    """While a wrapped child's first output flows, the wrapper leaves it the machine: the warm-up (imports,
    compiles) waits for the end of the first burst (its first word to the triage thread)."""
    from qwen_triage.live.feed import TriageFeed
    from qwen_triage.live.hooks import Hooks

    feed = TriageFeed(compiled, None, Hooks())
    feed.open("child")
    session = feed.session
    assert session is not None
    session.warmed = False
    real_warm = session.warm

    def warm() -> None:
        real_warm()
        session.warmed = True

    session.warm = warm
    words = _Words(feed._queue, session)
    feed._queue = words
    feed.end()  # the child's only word: it ended (a burst ends the same way, with READY)
    feed.run()
    assert words.warm_at_first_wait is False  # nothing warmed while the triage thread waited for the child
    assert session.warmed  # and warmed once it spoke
