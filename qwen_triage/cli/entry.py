"""The console script's first module: the early Ctrl-C handler, then the command line.

It imports nothing heavy before :func:`qwen_triage.interrupts.install`, so that a Ctrl-C during
the imports that follow is noted (see that module for why Python can lose it).
"""

from __future__ import annotations


def main() -> None:
    from qwen_triage import interrupts

    interrupts.install()
    from qwen_triage.cli.main import main as command_line

    command_line()
