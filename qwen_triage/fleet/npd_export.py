"""`qwen-triage rules export --to npd`: kernel and journal rules as node-problem-detector configs.

node-problem-detector's *system-log-monitor* (``pkg/systemlogmonitor``) reads the
kernel ring buffer (plugin ``kmsg``) or one journald ``SYSLOG_IDENTIFIER``
(plugin ``journald``) and matches each rule's ``pattern`` with Go's ``regexp``
(RE2 syntax). How it matches (``log_buffer.go``): the last ``bufferSize``
messages, each trimmed of surrounding space, are joined with ``\\n`` and the
pattern, with ``\\z`` appended, is searched in that text. So a pattern may start
anywhere but must run to the end of the newest message; a top-level ``a|b``
would bind the anchor to ``b`` only.

Each exported pattern is therefore:

* converted from the ``regex`` module dialect: named and plain groups become
  non-capturing ``(?:…)`` (NPD uses no captures; Go rejects the duplicate names
  ``regex`` allows), ``{,n}`` becomes ``{0,n}``, ``\\uXXXX`` becomes ``\\x{XXXX}``,
  ``^``/``$``/``\\A``/``\\Z`` become line anchors, and everything that can match a
  newline (``\\s``, ``\\D``, ``\\W``, ``[^…]``) is kept to one line, so a pattern
  never reaches across the buffered messages. Look-arounds, back-references,
  possessive quantifiers, atomic groups, conditionals, recursion, verbose mode and
  repeat counts over 1000 have no RE2 form: the rule is reported, not exported;
* made to run to the end of the message (``.*`` appended, or a trailing ``$``
  dropped), wrapped in ``(?:…)`` when it has a top-level alternation;
* compiled with RE2 (``google-re2``, the ``fleet`` extra), and
* checked with a simulation of NPD's buffer against the rule's examples: every
  ``match`` example must fire, no ``no_match`` example may.

A rule exports as one NPD rule per pattern, all with the same ``reason`` (the
class in CamelCase: ``hardware.xid_fatal`` -> ``HardwareXidFatal``). Rules of a
node-level class with severity critical or error are ``permanent`` and set the
condition ``QwenTriageLog<Reason>`` (default reason ``No<Reason>``); all others
are ``temporary`` (a node Event). A condition type belongs to one config only,
because each NPD monitor re-reports all of its conditions with every status: the
journald config owns the classes that have journal rules, the kmsg config the
rest, and the other config reports the same rule as an Event. The prefix differs
from the ``QwenTriage<Reason>`` conditions of the ``check`` custom plugin for
the same reason.

An ``all`` rule of two patterns within ``window`` lines (``window`` below
``bufferSize``) becomes one multi-line pattern per order. ``unless`` vetoes and
``where`` field constraints cannot be said in NPD: such rules are reported.
"""

from __future__ import annotations

import itertools
import re
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Iterable

from qwen_triage.rulepack.pack import RulePack
from qwen_triage.rulepack.severity import Severity, Status
from qwen_triage.rulepack.spec import RuleSpec

PERMANENT_SEVERITIES = frozenset({Severity.critical, Severity.error})

KMSG = "kmsg"
JOURNALD = "journald"
PLUGINS = (KMSG, JOURNALD)
DEFAULT_IDENTIFIER = "systemd"  # journald SYSLOG_IDENTIFIER: systemd's own unit messages
DEFAULT_BUFFER = 10  # NPD's default bufferSize
DEFAULT_LOOKBACK = "5m"
MAX_BUFFER = 50
LOG_CONDITION_PREFIX = "QwenTriageLog"
CHECK_CONDITION_PREFIX = "QwenTriage"
RE2_MAX_REPEAT = 1000
SOURCE_NAMES = {KMSG: "qwen-triage-kmsg-monitor", JOURNALD: "qwen-triage-journald-monitor"}
LOG_PATHS = {KMSG: "/dev/kmsg", JOURNALD: "/var/log/journal"}


def config_filename(plugin: str) -> str:
    return f"system-log-monitor-{plugin}.json"


def reason_for(class_id: str) -> str:
    """Stable CamelCase from the class id: ``hardware.xid_fatal`` -> ``HardwareXidFatal``."""
    return "".join(part[:1].upper() + part[1:] for part in re.split(r"[._-]+", class_id) if part)


def condition_for(class_id: str, prefix: str = LOG_CONDITION_PREFIX) -> str:
    return prefix + reason_for(class_id)


def healthy_reason(class_id: str) -> str:
    return "No" + reason_for(class_id)


class Unexpressible(ValueError):
    """A pattern, or a rule, that NPD's Go regexp cannot say."""


# --- regex dialect -> RE2 ---------------------------------------------------------------------------

_QUANT = re.compile(r"\{(\d*)(?:(,)(\d*))?\}")
_FUZZY = re.compile(r"\{[^}]*[eids]\s*[<=]")
_FLAGS = re.compile(r"\(\?([aiLmsux-]+)(\)|:)")
_GROUP_NAME = re.compile(r"\(\?P?<([A-Za-z_]\w*)>")
_LINE_SPACE = r"\t\f\r \x0b"  # \s without the newline, for inside a class


def _escape(p: str, i: int, in_class: bool, negated: bool) -> tuple[str, int]:
    """The RE2 form of the escape at ``p[i]`` (a backslash) and the index after it."""
    if i + 1 >= len(p):
        raise Unexpressible("trailing backslash")
    c = p[i + 1]
    nxt = i + 2
    if c.isdigit() and c != "0":
        if in_class:
            return "\\" + c, nxt  # octal in a class; RE2 says if it objects
        raise Unexpressible(f"back-reference \\{c}")
    if c == "g" and not in_class:
        raise Unexpressible("back-reference \\g<…>")
    if c in "uU":
        width = 4 if c == "u" else 8
        digits = p[nxt : nxt + width]
        if len(digits) != width or not re.fullmatch(r"[0-9a-fA-F]+", digits):
            raise Unexpressible(f"bad \\{c} escape")
        return "\\x{" + digits + "}", nxt + width
    if c == "N":
        raise Unexpressible("named character \\N{…}")
    if c in "GKXRhHmMVL" and not in_class:
        raise Unexpressible(f"\\{c} is `regex`-module syntax with no RE2 form")
    if in_class:
        if c == "s":
            return (_LINE_SPACE if not negated else "\\s"), nxt
        if c == "b":
            return "\\x08", nxt
        return "\\" + c, nxt
    if c == "A":
        return "(?m:^)", nxt
    if c in "Zz":
        return "(?m:$)", nxt
    if c == "s":
        return "[^\\S\\n]", nxt
    if c in "DW":
        return f"[^\\{c.lower()}\\n]", nxt
    if c in "pP":  # \p{L} / \pL: RE2 has Unicode classes too
        if p[nxt : nxt + 1] == "{":
            end = p.find("}", nxt)
            if end < 0:
                raise Unexpressible("unterminated \\p{")
            return p[i : end + 1], end + 1
        return p[i : nxt + 1], nxt + 1
    if not c.isascii():
        return c, nxt
    return "\\" + c, nxt


def _char_class(p: str, i: int) -> tuple[str, int]:
    """The RE2 form of the class starting at ``p[i] == '['``; a negated class never matches a newline."""
    j = i + 1
    negated = p[j : j + 1] == "^"
    if negated:
        j += 1
    body: list[str] = []
    first = True
    while True:
        if j >= len(p):
            raise Unexpressible("unterminated character class")
        c = p[j]
        if c == "]" and not first:
            j += 1
            break
        first = False
        if c == "\\":
            text, j = _escape(p, j, in_class=True, negated=negated)
            body.append(text)
            continue
        if c == "[":
            if p.startswith("[:", j):
                raise Unexpressible("POSIX class [:…:] inside a class (a literal in `regex`, a class in RE2)")
            body.append("\\[")
        elif c == "]":
            body.append("\\]")
        else:
            body.append(c)
        j += 1
    if negated:
        body.append("\\n")
    return "[" + ("^" if negated else "") + "".join(body) + "]", j


@dataclass
class Converted:
    """One pattern in RE2 syntax."""

    text: str
    top_level_alternation: bool
    ends_with_end_anchor: bool  # the last thing at top level is `$` (as `(?m:$)`)


def to_re2(pattern: str) -> Converted:
    """Rewrite a ``regex``-module (VERSION0) pattern in RE2 syntax; :class:`Unexpressible` says why not."""
    return _Rewriter(pattern).run()


# Group openings (the text after "(?") that RE2 has no form for, and why.
_NO_RE2_GROUPS = (
    (("=", "!"), "look-ahead (?=…)/(?!…) has no RE2 form"),
    (("<=", "<!"), "look-behind (?<=…)/(?<!…) has no RE2 form"),
    ((">",), "atomic group (?>…) has no RE2 form"),
    (("(",), "conditional (?(…)…) has no RE2 form"),
    (("|",), "branch reset (?|…) has no RE2 form"),
    (("P=", "P>", "&"), "back-reference or recursion (?P=…)/(?P>…) has no RE2 form"),
)


class _Rewriter:
    """One pattern rewritten token by token; each method consumes one token at :attr:`i`."""

    def __init__(self, pattern: str):
        self.p = pattern
        self.out: list[str] = []
        self.i = 0
        self.depth = 0
        self.alternation = False
        self.last_top = ""  # what the last top-level token was
        self.can_quantify = False

    def run(self) -> Converted:
        p = self.p
        while self.i < len(p):
            c = p[self.i]
            if c == "\\":
                self.escape()
            elif c == "[":
                text, self.i = _char_class(p, self.i)
                self.token(text, 0, True, "x")
            elif c == "(":
                self.group()
            elif c == ")":
                self.depth -= 1
                self.token(")", 1, True, "x")
            elif c == "|":
                self.alternation = self.alternation or self.depth == 0
                self.token("|", 1, False, "|")
            elif c in "*+?{":
                self.quantifier(c)
            elif c == "^":
                self.token("(?m:^)", 1, False, "x")
            elif c == "$":
                self.token("(?m:$)", 1, False, "$" if self.depth == 0 else "x")
            else:
                self.token("\\}" if c == "}" else c, 1, True, "x")
        if self.depth != 0:
            raise Unexpressible("unbalanced parentheses")
        return Converted("".join(self.out), self.alternation, self.last_top == "$")

    def token(self, text: str, width: int, can_quantify: bool, last_top: str | None = None) -> None:
        """Emit ``text`` for the ``width`` characters read; ``last_top`` None: the top-level token is unchanged."""
        self.out.append(text)
        self.i += width
        self.can_quantify = can_quantify
        if last_top is not None:
            self.last_top = last_top

    def open(self, text: str, end: int) -> None:
        """A group opens (non-capturing in RE2: rules never read captures by number)."""
        self.out.append(text)
        self.depth += 1
        self.i = end
        self.can_quantify = False

    def escape(self) -> None:
        text, self.i = _escape(self.p, self.i, in_class=False, negated=False)
        self.out.append(text)
        self.can_quantify = text not in ("(?m:^)", "(?m:$)") and text[:2] not in ("\\b", "\\B")
        self.last_top = "$" if text == "(?m:$)" and self.depth == 0 else "x"

    def group(self) -> None:
        p, i = self.p, self.i
        if not p.startswith("(?", i):
            self.open("(?:", i + 1)
            return
        rest = p[i + 2 : i + 5]
        for starts, why in _NO_RE2_GROUPS:
            if rest.startswith(starts):
                raise Unexpressible(why)
        if rest[:1] == "R" or rest[:1].isdigit() or rest[:1] in "+-" and rest[1:2].isdigit():
            raise Unexpressible("recursion (?R)/(?1) has no RE2 form")
        if rest.startswith("#"):
            end = p.find(")", i)
            if end < 0:
                raise Unexpressible("unterminated comment group")
            self.i = end + 1
            return
        if rest.startswith(":"):
            self.open("(?:", i + 3)
            return
        m = _GROUP_NAME.match(p, i)
        if m:
            self.open("(?:", m.end())
            return
        m = _FLAGS.match(p, i)
        if m:
            self.flags(m)
            return
        raise Unexpressible(f"group syntax {p[i:i + 4]!r}… has no RE2 form")

    def flags(self, m: "re.Match[str]") -> None:
        flags, closer = m.group(1), m.group(2)
        if "x" in flags:
            raise Unexpressible("verbose mode (?x) has no RE2 form")
        if "L" in flags:
            raise Unexpressible("locale mode (?L) has no RE2 form")
        # a/u (ASCII/Unicode) only change \w \d \s \b, which RE2 keeps ASCII;
        # m/s only matter across lines, which messages do not have.
        kept = "".join(f for f in flags if f in "i-").rstrip("-")
        if closer == ")":
            if kept and kept != "-":
                self.out.append(f"(?{kept})")
            self.i = m.end()
            self.can_quantify = False
        else:
            self.open(f"(?{kept}:" if kept and kept != "-" else "(?:", m.end())

    def quantifier(self, c: str) -> None:
        p = self.p
        if c == "{":
            m = _QUANT.match(p, self.i)
            if not m or not self.can_quantify or (m.group(1) == "" and m.group(2) is None):
                if _FUZZY.match(p, self.i):
                    raise Unexpressible("fuzzy matching {e<=…} has no RE2 form")
                self.token("\\{", 1, True)
                return
            lo, comma, hi = m.group(1) or "0", m.group(2), m.group(3)
            for n in (lo, hi):
                if n and int(n) > RE2_MAX_REPEAT:
                    raise Unexpressible(f"repeat count {n} is over RE2's {RE2_MAX_REPEAT}")
            self.out.append("{" + lo + ("," + hi if comma else "") + "}")
            self.i = m.end()
        else:
            if not self.can_quantify:
                raise Unexpressible(f"nothing to repeat at {self.i}")
            self.out.append(c)
            self.i += 1
        if p[self.i : self.i + 1] == "+":
            raise Unexpressible("possessive quantifier (*+, ++, ?+, {…}+) has no RE2 form")
        if p[self.i : self.i + 1] == "?":
            self.out.append("?")
            self.i += 1
        self.can_quantify = False


def npd_pattern(pattern: str) -> str:
    """The one-message NPD pattern for one rule pattern: runs to the end of the message."""
    conv = to_re2(pattern)
    text = conv.text
    if conv.ends_with_end_anchor and not conv.top_level_alternation:
        return text[: -len("(?m:$)")]  # NPD's appended \z is the end of the message
    if conv.top_level_alternation:
        text = f"(?:{text})"
    return text + ".*"


def npd_all_patterns(patterns: list[str], window: int) -> list[str]:
    """Two `all` patterns within ``window`` lines: one multi-line pattern per order."""
    if len(set(patterns)) != 2:
        raise Unexpressible(f"`all` of {len(set(patterns))} patterns: only two can be exported")
    parts = [f"(?:{to_re2(p).text})" for p in dict.fromkeys(patterns)]
    gap = f"(?:.*\\n){{0,{window}}}.*"
    return [f"{a}{gap}{b}.*" for a, b in itertools.permutations(parts)]


# --- RE2 and NPD's buffer -----------------------------------------------------------------------------


def re2_module() -> Any:
    try:
        import re2  # google-re2
    except ImportError as exc:  # pragma: no cover - the fleet extra installs it
        raise ImportError("exporting for NPD needs google-re2: pip install 'qwen-triage[fleet]'") from exc
    return re2


def re2_compile(pattern: str) -> Any:
    """Compile with RE2 (quietly); :class:`Unexpressible` with RE2's complaint when it will not."""
    re2 = re2_module()
    options = re2.Options()
    options.log_errors = False
    try:
        return re2.compile(pattern, options)
    except re2.error as exc:
        detail = exc.args[0] if exc.args else exc
        if isinstance(detail, bytes):
            detail = detail.decode("utf-8", "replace")
        raise Unexpressible(f"RE2 rejects it: {detail}") from None


class NpdBuffer:
    """NPD's log buffer: the last ``size`` messages (trimmed), joined with newlines, searched with ``pattern\\z``."""

    def __init__(self, patterns: Iterable[str], size: int = DEFAULT_BUFFER):
        # exactly as NPD's CompilePattern: the expression with `\z` appended, not grouped
        self.compiled = [re2_compile(p + r"\z") for p in patterns]
        self.size = size
        self.lines: list[str] = []

    def push(self, message: str) -> list[int]:
        """Add one message; the indexes of the patterns that fire on it."""
        self.lines.append(message.strip())
        del self.lines[: -self.size]
        text = "\n".join(self.lines)
        return [i for i, rx in enumerate(self.compiled) if rx.search(text)]


def npd_fires(patterns: list[str], example: str, buffer_size: int = DEFAULT_BUFFER) -> bool:
    """Does any pattern fire while the example's lines go through a fresh NPD buffer?"""
    buf = NpdBuffer(patterns, buffer_size)
    return any(buf.push(line) for line in (example.splitlines() or [""]))


# --- the export ----------------------------------------------------------------------------------------


@dataclass
class Skipped:
    rule: str
    plugin: str
    why: str

    def __str__(self) -> str:
        return f"{self.rule} ({self.plugin}): {self.why}"


@dataclass
class NpdExport:
    configs: dict[str, dict[str, Any]] = field(default_factory=dict)  # file name -> config
    skipped: list[Skipped] = field(default_factory=list)
    exported: dict[str, list[str]] = field(default_factory=dict)  # plugin -> rule ids


PLUGIN_MONITOR_FILE = "qwen-triage-plugin-monitor.json"
CHECK_PATH = "/usr/local/bin/qwen-triage"
CHECK_ARGS = ("check", "--format", "npd", "--kernel", "--state", "/var/lib/qwen-triage", "--timeout", "3")


def node_level_classes(pack: RulePack) -> list[str]:
    """The catalogue's node-level classes (``node_level`` in rules/classes.yaml: a node condition, a Slurm
    drain), in catalogue order."""
    return [c.id for c in pack.classes.values() if c.node_level]


def plugin_monitor_config(
    pack: RulePack, *, path: str = CHECK_PATH, args: Iterable[str] = CHECK_ARGS, interval: str = "30s"
) -> dict[str, Any]:
    """NPD custom-plugin-monitor config: one condition per node-level class, each a `check --class` run.

    The runs share the state directory (its lock serialises them, so ``concurrency``
    is 1): whichever run reads a new line records the diagnosis, and each run
    answers for its own class from the shared state, so a condition clears when
    the check lets the diagnosis go (hold time; hardware classes at the next boot).
    """
    classes = node_level_classes(pack)
    conditions = [
        {
            "type": condition_for(c, CHECK_CONDITION_PREFIX),
            "reason": healthy_reason(c),
            "message": f"qwen-triage: no active {c}",
        }
        for c in classes
    ]
    rules = [
        {
            "type": "permanent",
            "condition": condition_for(c, CHECK_CONDITION_PREFIX),
            "reason": reason_for(c),
            "path": path,
            "args": [*args, "--class", c],
            "timeout": "5s",
        }
        for c in classes
    ]
    return {
        "plugin": "custom",
        "pluginConfig": {
            "invoke_interval": interval,
            "timeout": "5s",
            "max_output_length": 80,
            "concurrency": 1,
            "enable_message_change_based_condition_update": False,
        },
        "source": "qwen-triage-plugin-monitor",
        "metricsReporting": True,
        "conditions": conditions,
        "rules": rules,
    }


def plugins_for(rule: RuleSpec) -> list[str]:
    """Which monitors read a rule's messages: `kernel` rules the kmsg one, `systemd` rules the journald one. None
    reads a relay's (`relay: true`): it names no failure of its own (EDAC's header before a corrected error's line),
    and an NPD rule sees one message, not the failure printed with it."""
    if rule.relay:
        return []
    out = []
    if "kernel" in rule.sources:
        out.append(KMSG)
    if "systemd" in rule.sources:
        out.append(JOURNALD)
    return out


def rule_patterns(rule: RuleSpec, buffer_size: int) -> list[str]:
    """The NPD patterns of one rule, checked under RE2 and against its examples; Unexpressible if not."""
    m = rule.match
    if m.unless:
        raise Unexpressible("`unless` (a veto within a window) has no NPD form")
    if m.raised_module:
        raise Unexpressible("`raised` (where a traceback's exception was raised) has no NPD form")
    if m.where:
        raise Unexpressible(f"`where` on {', '.join(sorted(m.where))}: NPD rules see the message only")
    problems: list[str] = []
    patterns: list[str] = []
    if m.all:
        if m.window >= buffer_size:
            raise Unexpressible(f"`all` window {m.window} needs more than bufferSize {buffer_size} lines")
        patterns = npd_all_patterns(list(m.all), m.window)
    else:
        for n, source in enumerate(m.any, 1):
            try:
                patterns.append(npd_pattern(source))
            except Unexpressible as exc:
                problems.append(f"pattern {n}: {exc}")
    for n, text in enumerate(patterns, 1):
        try:
            re2_compile(text)
        except Unexpressible as exc:
            problems.append(f"pattern {n}: {exc}")
    if problems:
        raise Unexpressible("; ".join(problems))
    for ex in rule.examples.match:
        if not npd_fires(patterns, ex, buffer_size):
            problems.append(f"match example no longer matches: {ex[:80]!r}")
    for ex in rule.examples.no_match:
        if npd_fires(patterns, ex, buffer_size):
            problems.append(f"no_match example matches: {ex[:80]!r}")
    if problems:
        raise Unexpressible("; ".join(problems))
    return patterns


def _set_group(pattern: str, name: str, body: str) -> str:
    """``pattern`` with the body of its named group ``name`` replaced (escapes and classes respected)."""
    start = pattern.find(f"(?P<{name}>")
    if start < 0:
        raise Unexpressible(f"table key {name!r} is not a named group of the pattern")
    i, depth, in_class = start, 0, False
    while i < len(pattern):
        ch = pattern[i]
        if ch == "\\":
            i += 2
            continue
        if in_class:
            in_class = ch != "]"
        elif ch == "[":
            in_class = True
        elif ch == "(":
            depth += 1
        elif ch == ")":
            depth -= 1
            if depth == 0:
                head = start + len(f"(?P<{name}>")
                return pattern[:head] + body + pattern[i:]
        i += 1
    raise Unexpressible(f"unbalanced group {name!r}")


def table_variants(rule: RuleSpec) -> tuple[list[RuleSpec], str | None]:
    """A table rule as one rule per row (its codes spelled out in the key group), for engines without tables.

    NPD has one reason per rule, so each row becomes its own rule with the row's class;
    a row's examples are the rule's examples whose code it lists, and the other rows'
    examples are its near misses. The codes no row lists cannot be said in RE2 (no
    negative look-ahead): returned as the reason they are left out, for stderr.
    """
    import regex

    from qwen_triage.rulepack.spec import ExamplesSpec

    table = rule.table
    if table is None:
        return [rule], None
    original = [regex.compile(p, regex.VERSION0) for p in rule.match.any]

    def row_of(line: str) -> int | None:
        for pat in original:
            m = pat.search(line)
            if m and m.groupdict().get(table.key) is not None:
                row = table.row_for(m.group(table.key))
                return table.rows.index(row) if row is not None else None
        return None

    owners = {ex: row_of(ex) for ex in rule.examples.match}
    variants = []
    for n, row in enumerate(table.rows):
        alternation = "|".join(regex.escape(str(v)) for v in row.values)
        if any(not str(v).isdigit() for v in row.values):
            # text values compare case-folded (rulepack's table lookup): the row keeps them so, and RE2 must read
            # the log's own spelling (`NV_ERR_RESET_REQUIRED` for the row's `nv_err_reset_required`)
            alternation = f"(?i:{alternation})"
        # a pattern without the key group cannot tell one row from another: only the rule's own form (not
        # exportable, see left_out) reads it
        patterns = tuple(_set_group(p, table.key, alternation) for p in rule.match.any if f"(?P<{table.key}>" in p)
        mine = tuple(ex for ex, owner in owners.items() if owner == n)
        others = tuple(ex for ex, owner in owners.items() if owner != n)
        variant = replace(
            rule.for_row(row),
            id=f"{rule.id}.{n + 1}",
            table=None,
            match=replace(rule.match, any=patterns),
            examples=ExamplesSpec(match=mine, no_match=(*rule.examples.no_match, *others)),
        )
        variants.append(variant)
    left_out = None
    if table.otherwise == "rule":
        left_out = "codes no row of its table lists keep the rule's own class; RE2 cannot say 'none of these codes'"
    if any(f"(?P<{table.key}>" not in p for p in rule.match.any):
        left_out = (left_out + "; " if left_out else "") + f"its patterns without the {table.key} group are not exported"
    return variants, left_out


def condition_owner(pack: RulePack) -> dict[str, str]:
    """class -> the one plugin whose config sets its condition (journald where it has journal rules)."""
    owner: dict[str, str] = {}
    node_level = set(node_level_classes(pack))
    for rule in (v for lr in pack.rules if lr.rule.status is not Status.deprecated for v in table_variants(lr.rule)[0]):
        if rule.class_ not in node_level or rule.severity not in PERMANENT_SEVERITIES:
            continue
        plugins = plugins_for(rule)
        if JOURNALD in plugins:
            owner[rule.class_] = JOURNALD
        elif plugins:
            owner.setdefault(rule.class_, KMSG)
    return owner


def _with_table_note(rule: RuleSpec, plugin: str, result: NpdExport) -> list[RuleSpec]:
    variants, left_out = table_variants(rule)
    if left_out is not None and plugin in plugins_for(rule):
        result.skipped.append(Skipped(rule.id, plugin, left_out))
    return variants


def _whole_tables(pack: RulePack, plugin: str, exported: list[str], result: NpdExport) -> list[str]:
    """The table rules every row of which went out whole (`otherwise: ignore`, nothing said on stderr): exported as
    themselves too, so that a rule is always either exported or named as left out."""
    done = set(exported)
    noted = {s.rule for s in result.skipped if s.plugin == plugin}
    whole = []
    for lr in pack.rules:
        rule = lr.rule
        if rule.table is None or rule.status is Status.deprecated or rule.id in noted or plugin not in plugins_for(rule):
            continue
        rows = [f"{rule.id}.{n + 1}" for n in range(len(rule.table.rows))]
        if rows and all(r in done for r in rows):
            whole.append(rule.id)
    return whole


def export_npd(
    pack: RulePack,
    *,
    plugins: Iterable[str] = PLUGINS,
    identifier: str = DEFAULT_IDENTIFIER,
    buffer_size: int = DEFAULT_BUFFER,
    lookback: str = DEFAULT_LOOKBACK,
    condition_prefix: str = LOG_CONDITION_PREFIX,
) -> NpdExport:
    """The system-log-monitor configs for ``plugins``, and what could not be exported."""
    if not 1 <= buffer_size <= MAX_BUFFER:
        raise ValueError(f"bufferSize must be 1..{MAX_BUFFER}")
    wanted = [p for p in PLUGINS if p in set(plugins)]
    owner = condition_owner(pack)
    result = NpdExport()
    for plugin in wanted:
        rules_out: list[dict[str, Any]] = []
        conditions: dict[str, dict[str, str]] = {}
        exported: list[str] = []
        for rule in (v for lr in pack.rules if lr.rule.status is not Status.deprecated  # retired: reads nothing
                     for v in _with_table_note(lr.rule, plugin, result)):
            if plugin not in plugins_for(rule):
                continue
            try:
                patterns = rule_patterns(rule, buffer_size)
            except Unexpressible as exc:
                result.skipped.append(Skipped(rule.id, plugin, str(exc)))
                continue
            reason = reason_for(rule.class_)
            permanent = owner.get(rule.class_) == plugin and rule.severity in PERMANENT_SEVERITIES
            if permanent:
                cond = condition_for(rule.class_, condition_prefix)
                conditions.setdefault(
                    cond,
                    {
                        "type": cond,
                        "reason": healthy_reason(rule.class_),
                        "message": f"qwen-triage: no {rule.class_} in the {plugin} log",
                    },
                )
            for text in patterns:
                entry: dict[str, Any] = {"type": "permanent" if permanent else "temporary"}
                if permanent:
                    entry["condition"] = condition_for(rule.class_, condition_prefix)
                entry["reason"] = reason
                entry["pattern"] = text
                entry["patternGeneratedMessageSuffix"] = f"qwen-triage {rule.id}: {rule.title}"
                rules_out.append(entry)
            exported.append(rule.id)
        exported.extend(_whole_tables(pack, plugin, exported, result))
        config: dict[str, Any] = {"plugin": plugin}
        if plugin == JOURNALD:
            config["pluginConfig"] = {"source": identifier}
        config.update(
            {
                "logPath": LOG_PATHS[plugin],
                "lookback": lookback,
                "bufferSize": buffer_size,
                "source": SOURCE_NAMES[plugin],
                "metricsReporting": True,
                "conditions": sorted(conditions.values(), key=lambda c: c["type"]),
                "rules": rules_out,
            }
        )
        result.configs[config_filename(plugin)] = config
        result.exported[plugin] = exported
    return result


@dataclass(frozen=True)
class ExportOptions:
    """``qwen-triage rules export --to npd``'s options."""

    plugins: tuple[str, ...] = ()
    """kmsg, journald and/or custom (the plugin monitor that runs ``check``); none: all"""
    identifier: str = DEFAULT_IDENTIFIER
    buffer_size: int = DEFAULT_BUFFER
    lookback: str = DEFAULT_LOOKBACK


def run(pack: RulePack, options: ExportOptions) -> NpdExport:
    """``rules export --to npd``: the system-log-monitor configs of the chosen plugins and, unless left out, the
    custom plugin monitor's; what could not be exported is in ``skipped``."""
    chosen = options.plugins or (*PLUGINS, "custom")
    result = export_npd(pack, plugins=[p for p in chosen if p != "custom"], identifier=options.identifier,
                        buffer_size=options.buffer_size, lookback=options.lookback)
    if "custom" in chosen:
        result.configs[PLUGIN_MONITOR_FILE] = plugin_monitor_config(pack)
    return result


def write_configs(result: NpdExport, out_dir: Path) -> list[tuple[Path, int]]:
    """Each config as a file of ``out_dir`` (0644: node-problem-detector reads it); the paths and rule counts."""
    import json

    from qwen_triage.atomicfile import write_atomic

    out_dir.mkdir(parents=True, exist_ok=True)
    written = []
    for name, config in result.configs.items():
        path = out_dir / name
        write_atomic(path, json.dumps(config, indent=2) + "\n", mode=0o644)
        written.append((path, len(config["rules"])))
    return written
