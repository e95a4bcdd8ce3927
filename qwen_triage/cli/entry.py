"""The console script's first module: the early Ctrl-C handler, then the command line.

It imports nothing heavy before :func:`qwen_triage.interrupts.install`, so that a Ctrl-C during
the imports that follow is noted (see that module for why Python can lose it).
"""

from __future__ import annotations


def main() -> None:
    import sys

    from qwen_triage import interrupts

    interrupts.install()
    try:
        from qwen_triage.cli.main import main as command_line
    except KeyboardInterrupt:  # Ctrl-C before the command line exists: 128+SIGINT, as any later Ctrl-C
        print("Aborted!", file=sys.stderr)
        from qwen_triage.exits import EXIT_INTERRUPTED

        sys.exit(EXIT_INTERRUPTED)
    command_line()
