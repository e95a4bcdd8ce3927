"""Names and phrases the command line shows about where logs are read from, kept with the readers.

Why here: the help texts of ``check --kernel``, ``bugreport --kernel`` and ``journal --since`` describe what
:mod:`qwen_triage.inputs` does, so they change with it; and this module imports nothing, so the CLI can take
them without paying for the readers at start-up.
"""

JOURNAL_TOOL = "journalctl"  # the journal's command-line tool; only qwen_triage.inputs runs it
KERNEL_CHECK_SOURCES = f"{JOURNAL_TOOL} -k, else /dev/kmsg, else dmesg"  # check --kernel: inputs.kernel.kernel_reader
KERNEL_WINDOW_SOURCES = f"{JOURNAL_TOOL} -k, else dmesg"  # a window of the kernel log: inputs.kernel.read_window
SINCE_FORMS = f"as {JOURNAL_TOOL} --since takes it"  # the journal's window start: 2025-01-07 10:00, -1h, @1736244000
