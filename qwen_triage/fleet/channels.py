"""Where a node check's result goes: one interface, channels registered by name.

A channel turns a :class:`~qwen_triage.fleet.check.CheckResult` into something a scheduler or a
monitor reads: ``npd`` (node-problem-detector's exit status and one line), ``textfile``
(node_exporter's textfile-collector metrics) and ``slurm`` (drain this node, resume its own drains).
Each says what it did as :class:`Published`; :meth:`Channel.failed` is its answer when the check
could not run at all. A new channel is a class here and an entry in :data:`CHANNELS`
(docs/architecture.md). Node policy (which classes drain a node) comes with the result, from
rules/classes.yaml.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, ClassVar

from qwen_triage.fleet.check import CheckResult


@dataclass
class Published:
    """What a channel did: the exit status it gives the check (npd), what it says, an error for stderr."""

    status: int | None = None
    text: str = ""
    error: str = ""


class Channel:
    """One consumer of node checks."""

    name: ClassVar[str]

    def publish(self, result: CheckResult) -> Published:
        raise NotImplementedError

    def failed(self, reason: str, now: float) -> Published:
        """The check could not run; by default a channel has nothing to say."""
        return Published()


class NpdChannel(Channel):
    """node-problem-detector's custom plugin: exit 0 OK, 1 problem, 2 unknown, and one short line."""

    name = "npd"

    def __init__(self, max_output: int) -> None:
        self.max_output = max_output

    def publish(self, result: CheckResult) -> Published:
        from qwen_triage.fleet.npd import npd_output

        status, line = npd_output(result, self.max_output)
        return Published(status=status, text=line)

    def failed(self, reason: str, now: float) -> Published:
        from qwen_triage.fleet.npd import npd_failure

        status, line = npd_failure(reason, self.max_output)
        return Published(status=status, text=line)


class TextfileChannel(Channel):
    """node_exporter's textfile collector: the metrics file, replaced atomically."""

    name = "textfile"

    def __init__(self, path: str) -> None:
        self.path = path

    def publish(self, result: CheckResult) -> Published:
        from qwen_triage.fleet.textfile import render, write_textfile

        if result.stored:
            return Published()  # answered from the stored state: the check that holds the lock writes the metrics
        try:
            write_textfile(self.path, render(result))
        except OSError as exc:
            return Published(error=f"cannot write {self.path}: {exc.strerror}")
        return Published()

    def failed(self, reason: str, now: float) -> Published:
        from qwen_triage.fleet.textfile import failure_text, write_textfile

        try:
            write_textfile(self.path, failure_text(now))
        except (OSError, ValueError) as exc:
            return Published(error=f"cannot write {self.path}: {exc}")
        return Published()


class SlurmChannel(Channel):
    """Slurm's HealthCheckProgram: drain this node on node-level classes; with ``resume``, undo its own drains."""

    name = "slurm"

    def __init__(self, node: str | None = None, resume: bool = False, runner: Any = None) -> None:
        self.node, self.resume, self.runner = node, resume, runner

    def publish(self, result: CheckResult) -> Published:
        from qwen_triage.fleet import slurm

        # resume only on a complete reading: a source that could not be read may hold the evidence
        resume = self.resume and not result.errors and result.status != "unknown"
        outcome = slurm.apply(result.active, slurm.node_name(self.node), self.runner or slurm.run_scontrol,
                              resume=resume, policy=result.policy)
        line = f"slurm: node {outcome.node}: {outcome.action}" + (f" ({outcome.detail})" if outcome.detail else "")
        return Published(text=line, error=line if outcome.action == "error" else "")


CHANNELS: dict[str, type[Channel]] = {c.name: c for c in (NpdChannel, TextfileChannel, SlurmChannel)}


def build(name: str, **settings: Any) -> Channel:
    """The channel registered as ``name``, with its settings."""
    return CHANNELS[name](**settings)
