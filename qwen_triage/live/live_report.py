"""Printing live findings on stderr, set apart from the child's own output.

Everything qwen-triage says while a child runs goes through a :class:`Sink`: a
file descriptor the child's output goes to as well. While the child runs, the
pump process (:mod:`qwen_triage.live.pump`) writes that output, and a block is
handed to it to print: in one piece between two chunks of the child's output,
never inside one, on a fresh line. Before and after, the sink writes itself.
"""

from __future__ import annotations

import io
import os
import shutil
import threading
import time
from typing import TYPE_CHECKING, Callable, Literal

from qwen_triage.live.pump import same_target, write_all

if TYPE_CHECKING:
    from qwen_triage.live.session import LiveEvent
    from qwen_triage.live.stall import Stall
    from qwen_triage.report.model import Hang, Report

TAG = "qwen-triage"


class Sink:
    """A descriptor the child's output and our own blocks share, and where its last line ends."""

    def __init__(self, fd: int, lock: threading.Lock | None = None, shared: "Sink | None" = None):
        self.fd = fd
        self.lock = lock or threading.Lock()
        self.alive = True
        self.error: OSError | None = None
        self._shared = shared  # another sink on the same terminal/file: one "last byte" for both
        self._last = b"\n"
        # While a child runs, the pump process is the only writer of the descriptor: blocks go through it.
        self.relay: Callable[[bytes], bool] | None = None

    @classmethod
    def pair(cls, out_fd: int = 1, err_fd: int = 2) -> tuple["Sink", "Sink"]:
        """Sinks for stdout and stderr; one lock, and one line state when both are the same terminal."""
        lock = threading.Lock()
        out = cls(out_fd, lock)
        err = cls(err_fd, lock, shared=out if same_target(out_fd, err_fd) else None)
        return out, err

    @property
    def last(self) -> bytes:
        return self._shared._last if self._shared is not None else self._last

    @last.setter
    def last(self, value: bytes) -> None:
        if self._shared is not None:
            self._shared._last = value
        else:
            self._last = value

    def write_block(self, text: str) -> None:
        """A block of our own, on a line of its own."""
        if not self.alive:
            return
        data = text.encode("utf-8", "replace")
        if not data.endswith(b"\n"):
            data += b"\n"
        with self.lock:
            if self.relay is not None and self.relay(data):
                return  # the pump prints it between two chunks and knows where the line ends
            if self.last != b"\n":
                data = b"\n" + data
            try:
                write_all(self.fd, data)
            except OSError as exc:
                self.alive = False
                self.error = exc
                return
            self.last = b"\n"

    def isatty(self) -> bool:
        try:
            return os.isatty(self.fd)
        except OSError:
            return False


class LiveReporter:
    """Diagnoses, stalls and notes as they happen, rendered with the same panels as `scan`."""

    def __init__(self, sink: Sink, color: bool | None = None, width: int | None = None, quiet: bool = False):
        self.sink = sink
        tty = sink.isatty()
        self.color = tty if color is None else color
        if width is None:
            width = shutil.get_terminal_size((100, 24)).columns if tty else 100
        self.width = max(60, min(width, 160))
        # Boxes and wrapping only on a terminal: in a pipe or a file every line stays whole, so grep finds it.
        self.boxed = tty
        self.quiet = quiet
        self.started = time.monotonic()
        self.shown: set[str] = set()  # classes whose diagnosis panel was printed live: the summary refers to them
        # Import and warm up the renderer now, not when the first diagnosis is due.
        from qwen_triage.report.text import diagnosis_renderable  # noqa: F401

        self._console()

    def _console(self):
        from rich.console import Console

        return Console(
            file=io.StringIO(),
            force_terminal=self.color,
            no_color=not self.color,
            color_system="standard" if self.color else None,
            width=self.width,
            highlight=False,
            soft_wrap=not self.boxed,
        )

    def _render(self, *renderables) -> str:
        console = self._console()
        for r in renderables:
            console.print(r)
        return console.file.getvalue()

    def _rule(self, title: str, style: str = "bold magenta"):
        from rich.rule import Rule
        from rich.text import Text

        return Rule(Text(f"{TAG} ▸ {title}"), style=style, align="left")

    # -- what gets printed --------------------------------------------------

    def event(self, ev: "LiveEvent") -> None:
        if self.quiet:
            return
        from rich.text import Text

        from qwen_triage.report.text import diagnosis_renderable, symptom_line

        if ev.kind == "diagnosis" and ev.item is not None:
            title = f"diagnosis {ev.number} [{ev.severity.value}] at +{ev.elapsed:.1f}s"
            block = self._render(self._rule(title), diagnosis_renderable(ev.item, ev.number, boxed=self.boxed))
            self.sink.write_block(block)
            self.shown.add(ev.item.class_)
        elif ev.kind == "symptom":
            rule = ev.finding.rule.rule
            line = f"{TAG} ▸ " + symptom_line(ev.severity, rule.title, rule.class_, ev.root)
            self.sink.write_block(self._render(Text(line, style="dim" if self.color else "")))
        # observations (info) are benign: they wait for the summary

    def stall(self, stall: "Stall") -> None:
        if self.quiet:
            return
        from rich.panel import Panel
        from rich.text import Text

        from qwen_triage.redact import redact_text
        from qwen_triage.textsafe import clean

        def safe(text: str) -> str:  # log text: no secret, no control character
            return clean(redact_text(text))

        fold: Literal["fold"] | None = "fold" if self.boxed else None  # off a terminal nothing is folded (nor cropped: soft wrap)
        body: list[Text] = [Text(safe(stall.describe()), style="bold")]
        if stall.stage is not None:
            since = f" (for {stall.stage_since:.0f} s)" if stall.stage_since is not None else ""
            body.append(Text(safe(f"stage: {stall.stage.label}{since}, from: {stall.stage_line}"), overflow=fold))
            if stall.stage.hint:
                body.append(Text(safe(f"hint: {stall.stage.hint}"), style="green", overflow=fold))
        if stall.processes is not None:
            body.append(Text(f"processes of the child still alive: {stall.processes}", style="dim"))
        if stall.last_lines:
            body.append(Text("last lines:", style="bold"))
            body += [Text("  " + safe(line), overflow=fold) for line in stall.last_lines]
        from rich.console import Group

        self.sink.write_block(
            self._render(self._rule("stall", "bold yellow"),
                         Panel(Group(*body), border_style="yellow") if self.boxed else Group(*body))
        )

    def hang(self, hang: "Hang") -> None:
        """A multi-rank job's culprit (or, once the output stays quiet, its suspects), as `scan` prints it: who
        stopped first, then one row per rank. Printed when the ranks' timeouts end the silence of a stall."""
        if self.quiet:
            return
        from qwen_triage.report.text import print_hang

        console = self._console()
        console.print(self._rule(f"hang at +{time.monotonic() - self.started:.1f}s", "bold red"))
        print_hang(hang, console)
        self.sink.write_block(console.file.getvalue())

    def note(self, message: str, always: bool = False) -> None:
        if self.quiet and not always:
            return
        from qwen_triage.redact import redact_text
        from qwen_triage.textsafe import clean

        self.sink.write_block(f"{TAG}: {clean(redact_text(message), newlines=True)}")

    def summary(self, report: "Report", title: str = "summary") -> None:
        """The end-of-run report, as `scan` prints it, under a rule.

        A diagnosis whose panel was printed live is listed on one line, not printed again.
        """
        if self.quiet:
            return
        from qwen_triage.report.text import print_text

        console = self._console()
        console.print(self._rule(title))
        print_text(report, console, shown=self.shown, boxed=self.boxed)
        self.sink.write_block(console.file.getvalue())
