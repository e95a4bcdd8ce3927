"""The console script's first module: the early Ctrl-C handler, then the command line.

It imports nothing heavy before :func:`qwen_triage.interrupts.install`, so that a Ctrl-C during
the imports that follow is noted (see that module for why Python can lose it). A plain
``scan PATH…`` (no option) runs without click (cli.scan_command); every other command line
goes through click (cli.main).
"""

from __future__ import annotations

# The garbage collector's first threshold for the run (Python's default: 700 allocations). Start-up makes tens of
# thousands of objects that live as long as the run (modules, the rule pack), and a collection every 700 walked them
# some forty times for nothing: ~4 ms of a small scan (bench/bench_startup.py).
GC_THRESHOLD = 50_000


def main() -> None:
    import gc
    import sys

    gc.set_threshold(GC_THRESHOLD, *gc.get_threshold()[1:])
    from qwen_triage import interrupts

    interrupts.install()
    paths = plain_scan_paths(sys.argv[1:])
    try:
        if paths is None:
            from qwen_triage.cli.main import main as command_line
        else:
            from qwen_triage.cli.exiting import conclude
            from qwen_triage.cli.scan_command import plain_scan
    except KeyboardInterrupt:  # Ctrl-C before the command line exists: 128+SIGINT, as any later Ctrl-C
        print("Aborted!", file=sys.stderr)
        from qwen_triage.exits import EXIT_INTERRUPTED

        sys.exit(EXIT_INTERRUPTED)
    if paths is None:
        command_line()
    else:
        conclude(lambda: plain_scan(paths))


def plain_scan_paths(args: list[str]) -> tuple[str, ...] | None:
    """The paths of ``scan PATH…`` (none: stdin) when nothing else is on the command line; else None."""
    if not args or args[0] != "scan":
        return None
    paths = args[1:]
    if any(p.startswith("-") and p != "-" for p in paths):
        return None  # an option, or `--`: click parses it
    return tuple(paths)
