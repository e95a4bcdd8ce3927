"""Where a record comes from, and whether a rule's `sources:` lets it fire there.

A rule names the programs whose messages it reads (`sources:`). The engine holds it to
that where the difference is one of trust - the system's records against everyone else's;
among applications the names are a label (a library's message is logged under its host
program's wrapper, so the record names the host, not the library):

* the **system's own records**: ``kernel`` (dmesg, /dev/kmsg, the journal's kernel entries,
  syslog's ``kernel:`` tag, talos' ``kern:``) and ``systemd`` (PID 1 in the journal,
  ``systemd[1]:`` in syslog). Only rules that name that source read them (``any`` means
  any *application*): a vLLM OOM rule has no business on a kernel line, and a line an
  unprivileged program made the kernel print must not read as a GPU fault.
* **application records**: a line whose wrapper or journal fields name a program (vLLM's
  logger, Ollama's logfmt, NCCL's prefix, a journal unit, a syslog tag). Rules that read
  only the system's records (``sources: [kernel]``) never fire on them: a prompt that
  quotes an Xid, logged by a server, is the server's text, not the kernel's word.
* plain text of no known origin (a pasted excerpt, a rule's example) is read by every
  rule, as before: nothing says which program wrote it.

The kernel also prints text others chose (a crashing program's file name in a segfault
report, a task name): on a kernel record a rule's match must begin where the kernel's
message begins, after the device or subsystem prefix the kernel puts first (``pcieport
0000:00:03.0: AER: …``, ``NVRM: Xid …``), and on a process report (``comm[pid]: segfault
at … in FILE``) it must reach past the report's own words. A process report is never the
driver's, whatever the program named itself (``NVRM: x[4242]: segfault …``): the test for one
comes before the driver's prefix is trusted, here and where NVRM messages are joined.
"""

from __future__ import annotations

from collections.abc import Mapping

from qwen_triage.engine.records import SOURCE, LineRecord
from qwen_triage.lazyre import lazy, lazy_with
from qwen_triage.rulepack.pack import compile_pattern

KERNEL = "kernel"
SYSTEMD = "systemd"
APP = "app"  # a known application, whichever it is
SYSTEM_SOURCES = frozenset({KERNEL, SYSTEMD})

# Wrappers only an application's own logger writes (engine.normalize names them).
APP_FORMATS = frozenset({"vllm", "vllm-process", "logfmt", "nccl", "glog", "mpi", "ray", "torch-rank", "tracing"})

# What the kernel puts before a message: an optional syslog tag, timestamps, then up to
# four "device or subsystem:" parts of at most three words each ("pcieport 0000:00:03.0: ",
# "mlx5_core 0000:3b:00.0 enp59s0f0: ", "NVRM: GPU 0000:41:00.0: ", "INFO: ", "mce: [Hardware Error]: ",
# the CPER record number GHES puts first: "{1}[Hardware Error]: "),
# and at most two words of the next (the driver before the device a pattern names: "nvme nvme2: …").
KERNEL_HEAD = lazy_with(compile_pattern,
    r"\s*(?:kernel: )?(?:\{\d{1,4}\})?(?:\[[^\]\n]{0,100}\] ?){0,2}(?:\S{1,64}(?: \S{1,64}){0,2}: ){0,4}(?:\S{1,64} ){0,2}\s*"
)
MAX_HEAD = 240
# Messages a driver prints whole, wrapping long sentences over several lines of its own: what
# follows is the driver's text wherever a rule's phrase falls in it.
DRIVER_PREFIXES = ("NVRM: ",)
# A process report: the kernel names the program first, by its comm (at most 15 bytes, any of them
# the program's choice: `prctl(PR_SET_NAME, "NVRM: x")`), then its pid: `comm[pid]: segfault at …`,
# `traps: comm[pid] general protection fault …`, `comm (pid): drop_caches: 1`. Such a line is never
# the driver's, whatever its comm starts with.
PROCESS_REPORT_PATTERN = r"(?:traps: )?\S.{0,15}?(?:\[\d{1,10}\]:? | \(\d{1,10}\): )"
PROCESS_REPORT = lazy_with(compile_pattern, PROCESS_REPORT_PATTERN)


def family(rec: LineRecord) -> str | None:
    """``kernel``, ``systemd``, ``app`` (some known application) or None (plain text, origin unknown)."""
    program = rec.program
    if program == KERNEL:
        return KERNEL
    if program == SYSTEMD:
        return SYSTEMD
    if program is not None or not APP_FORMATS.isdisjoint(rec.formats) or rec.logged_by_journal:
        return APP
    return None


def accepts(sources: frozenset[str], rec: LineRecord, start: int, end: int) -> bool:
    """Whether a rule with these ``sources`` may take this record, matched at ``start``..``end``."""
    if rec.quoted is not None:
        # someone else's words: a client's fields (cut already) are read by no rule; a traceback's quoted
        # code is the program's code, never the system's word, and a string literal or comment in it is
        # no message at all (`log.error("NVRM: Xid …")`); the code itself (which check raised, with the
        # key it looked up: `CONFIG_MAPPING[config_dict["model_type"]]`) may be read
        if rec.quoted != SOURCE or in_code_text(rec.message, start):
            return False
        return "any" in sources or not sources <= SYSTEM_SOURCES
    fam = family(rec)
    if fam is None:
        # text of no known origin is read by every rule, but a process report is the kernel's shape
        # whoever pasted it: a kernel rule's match inside the program's name or file is none of the kernel's
        return KERNEL not in sources or PROCESS_REPORT.match(rec.message) is None \
            or kernel_anchored(rec.message, start, end)
    if fam == APP:
        return "any" in sources or not sources <= SYSTEM_SOURCES
    if fam not in sources:
        return False
    if fam == KERNEL:
        if 0 <= rec.head_len <= start:
            # in a continuation the engine joined on: those lines passed their family's own anchored
            # test (engine.multiline) and lost their prefixes
            return True
        return kernel_anchored(rec.message, start, end)
    return True


# In a line of Python code: a string literal (any prefix and quote, escapes; one left open runs to the
# line's end: a statement printed over several lines) or a comment.
_QUOTES = ("'''", '"""', "'", '"')  # longest first
_CODE_TEXT = lazy(r"[rRbBuUfF]{0,2}(?P<q>" + "|".join(_QUOTES) + r")(?:\\.|(?!(?P=q)).)*(?:(?P=q)|$)|#.*")


def in_code_text(message: str, start: int) -> bool:
    """Whether a match at ``start`` of a line of code begins inside a string literal or comment of it.

    A message's words quoted in code start inside the quotes; a pattern that reads the code itself starts
    in it, whatever literal it then takes in (a key looked up, an argument).
    """
    for m in _CODE_TEXT.finditer(message):
        if m.start() >= start:
            return False  # the next literal starts at or after the match: the match begins in code
        if start < m.end():
            return True
    return False


def kernel_anchored(message: str, start: int, end: int) -> bool:
    """A match on a kernel message begins at the message (after the kernel's own prefix), not inside it.

    A record of several lines (an OOM report, a multi-line NVRM notice) is judged on the
    line the match begins in.
    """
    line = message.rfind("\n", 0, start) + 1
    if start - line > MAX_HEAD:
        return False
    report = PROCESS_REPORT.match(message, line)
    if report is not None:
        if end <= report.end():
            return False  # inside the program's name: its own choice of words
    elif message.startswith(DRIVER_PREFIXES, line):
        return True  # the NVIDIA driver's own message, wrapped over lines as it prints them
    try:
        return KERNEL_HEAD.fullmatch(message, line, start, timeout=0.05) is not None
    except TimeoutError:
        return False


# The NVIDIA fabric manager's own programs (its daemon and its start script): a root daemon of the
# driver stack, run as this unit.
FABRIC_MANAGER_PROGRAMS = ("nv-fabricmanager", "nvidia-fabricmanager")
FABRIC_MANAGER_UNIT = "nvidia-fabricmanager.service"
CLAIMED = " (claimed by "  # a name a journal entry gave itself that journald's own fields do not bear out


def journal_program(fields: Mapping[str, object], name: str | None) -> str | None:
    """The program a journal entry stands for, given the ``name`` it carries (SYSLOG_IDENTIFIER, _COMM, unit).

    SYSLOG_IDENTIFIER is whatever the sender says (``logger -t kernel``, ``logger -t nv-fabricmanager``);
    for the names that carry weight only journald's trusted fields (``_TRANSPORT``, ``_PID``, ``_UID``,
    ``_SYSTEMD_UNIT``, which no sender sets) say who really wrote it: the kernel transport, PID 1, the
    fabric manager's unit run as root. Any other claim is kept as a claim, naming the sender's command.
    """
    if fields.get("_TRANSPORT") == "kernel":
        return KERNEL
    if name is None:
        return None
    if name in (KERNEL, SYSTEMD):
        trusted = name == SYSTEMD and fields.get("_PID") == "1"
    elif name.startswith(FABRIC_MANAGER_PROGRAMS):
        trusted = fields.get("_SYSTEMD_UNIT") == FABRIC_MANAGER_UNIT and fields.get("_UID") == "0"
    else:
        return name
    if trusted:
        return name
    comm = fields.get("_COMM")
    return f"{name}{CLAIMED}{comm if isinstance(comm, str) and 0 < len(comm) <= 64 else 'a process'})"  # comm: 15 bytes


def node_evidence(rec: LineRecord) -> bool:
    """Whether this record may stand for a node-level condition (a drain, a hold until reboot).

    Only the system's own records: the kernel's, systemd's (PID 1), the fabric manager's.
    A server that logs a user's prompt quoting an Xid is still the server talking.
    """
    fam = family(rec)
    if fam in SYSTEM_SOURCES:
        return True
    program = rec.program
    return program is not None and program.startswith(FABRIC_MANAGER_PROGRAMS) and CLAIMED not in program
