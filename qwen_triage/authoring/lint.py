"""Contributor tooling: lint a rule pack, test its examples."""

from __future__ import annotations

import re
import time
from dataclasses import dataclass
from pathlib import Path

from qwen_triage.engine.literals import MIN_LITERAL, required_literals
from qwen_triage.engine.matcher import CompiledPack, Matcher
from qwen_triage.rulepack.pack import (
    LoadedRule,
    RulePack,
    bundled_rules_dir,
    compile_pattern,
    load_classes,
    load_pack,
    load_rule_file,
    rule_files,
)
from qwen_triage.rulepack.fix_defaults import FIX_DEFAULTS_FILE, load_fix_defaults
from qwen_triage.rulepack.schema import FailureClass
from qwen_triage.engine.sources import Block
from qwen_triage.rulepack.yamlload import RuleFileError

PROBE_TIMEOUT = 0.5  # a pattern slower than this on a probe line is hostile
PROBE_SLOW = 0.2  # generous: lint must not flake on a busy machine
PROBE_MAX = 64 * 1024  # the matcher never sees more of a line than this
_NESTED_QUANT = re.compile(r"\((?:[^()\\]|\\.)*[+*](?:\)|\)\?)?[^()]*\)[+*{]")
_PLACEHOLDER = re.compile(r"\{([A-Za-z_][A-Za-z0-9_]*)\}")
_UNBOUNDED_GAP = re.compile(r"(?<!\\)\.[*+](?!$)")
_CHAR_CLASS = re.compile(r"(?<!\\)\[(?:\\.|[^\]\\])*\]")


@dataclass
class Problem:
    path: str
    line: int
    column: int
    level: str  # "error" or "warning"
    message: str
    rule: str | None = None

    def __str__(self) -> str:
        who = f" [{self.rule}]" if self.rule else ""
        return f"{self.path}:{self.line}:{self.column}: {self.level}:{who} {self.message}"


def _probes(pattern: str, examples: list[str]) -> list[str]:
    """Lines that make a backtracking-prone pattern blow up."""
    probes = [c * 20_000 for c in ("a", " ", "0", ".", ":", "-", "x/")]
    req = required_literals(pattern)
    lit = req.alternatives[0] if req else ""
    if lit:
        probes += [lit * (20_000 // max(len(lit), 1)), (lit + " ") * 3000, lit + " " * 20_000, lit + "a" * 20_000]
    # Runs of each character the pattern mentions, after its literal: what an
    # overlapping alternation or nested repeat chokes on.
    for ch in sorted({c for c in pattern if c.isprintable() and c not in "\\()[]{}|+*?^$"})[:40]:
        probes.append(lit + " " + ch * 5000)
        probes.append(lit + ch * 5000)
        # a short run that then fails (`(a|aa)+$` on 45 bytes ran for a minute): exponential backtracking
        # shows on a few dozen characters, long before a long run would
        probes.append(lit + " " + ch * 40 + "\x00")
        probes.append(lit + ch * 40 + "\x00")
    for ex in examples[:3]:
        probes.append((ex + " ") * 50)
        probes.append(ex[: len(ex) // 2] + "a" * 20_000)
    return probes


def probe_pattern(pattern: str, examples: list[str], full: bool = False) -> str | None:
    """A reason when the pattern looks catastrophic, else None.

    ``full``: a `where` constraint, which must match a whole field; probed with
    ``fullmatch``, and on short fields too (a field of 41 characters was enough).
    """
    if _NESTED_QUANT.search(pattern):
        return "nested quantifier (e.g. `(a+)+`): catastrophic backtracking risk"
    compiled = compile_pattern(pattern)
    probes = _probes(pattern, examples)
    if full:  # short fields that almost match: the whole field must be taken, then one character fails
        probes = [p[:40] + end for p in probes for end in ("", "\x00", "!")] + probes
    run = compiled.fullmatch if full else compiled.search
    for probe in probes:
        probe = probe[:PROBE_MAX]
        t0 = time.perf_counter()
        try:
            run(probe, timeout=PROBE_TIMEOUT)
        except TimeoutError:
            return f"timed out (>{PROBE_TIMEOUT}s) on a {len(probe)}-character probe line"
        if time.perf_counter() - t0 > PROBE_SLOW:
            return f"took {time.perf_counter() - t0:.2f}s on a {len(probe)}-character probe line"
    return None


def _class_cycles(classes: dict[str, FailureClass]) -> list[list[str]]:
    cycles = []
    state: dict[str, int] = {}

    def visit(cid: str, stack: list[str]) -> None:
        state[cid] = 1
        for nxt in classes[cid].explains:
            if state.get(nxt) == 1:
                cycles.append(stack[stack.index(nxt) :] + [nxt] if nxt in stack else [cid, nxt])
            elif nxt in classes and state.get(nxt) is None:
                visit(nxt, stack + [nxt])
        state[cid] = 2

    for cid in classes:
        if cid not in state:
            visit(cid, [cid])
    return cycles


def lint_rule(lr: LoadedRule) -> list[Problem]:
    rule = lr.rule
    out: list[Problem] = []

    def problem(level: str, msg: str) -> None:
        out.append(Problem(lr.path, lr.position.line, lr.position.column, level, msg, rule.id))

    patterns = rule.match.any + rule.match.all
    groups: set[str] = set()
    examples = rule.examples.match
    for p in patterns + rule.match.unless:
        compiled = compile_pattern(p)
        groups.update(compiled.groupindex)
        req = required_literals(p)
        if req is None or req.weakest < MIN_LITERAL:
            problem(
                "error",
                f"pattern {p!r} has no required literal of {MIN_LITERAL}+ characters: the pure-Python prefilter "
                "would try it on every line",
            )
        reason = probe_pattern(p, examples)
        if reason:
            problem("error", f"pattern {p!r}: {reason}")
        if _UNBOUNDED_GAP.search(_CHAR_CLASS.sub("", p)):
            problem("warning", f"pattern {p!r} has an unbounded `.*`/`.+` gap; use a bounded one like `.{{0,200}}`")
        if "\\n" in p or "(?s)" in p:
            problem("error", f"pattern {p!r} tries to match across lines; use `all` with a window instead")
    for field_name, constraint in rule.match.where.items():
        reason = probe_pattern(constraint, [], full=True)
        if reason:
            problem("error", f"where {field_name}: {constraint!r}: {reason}")
    for name in rule.extract:
        if name not in groups:
            problem("error", f"extract names {name!r}, which no pattern captures")
    texts = [rule.explain or ""] + [s.step for s in rule.fix]
    texts += [str(v) for s in rule.fix if s.action for v in s.action.values() if isinstance(v, str)]
    for text in texts:
        for name in _PLACEHOLDER.findall(text):
            if name not in groups:
                problem("error", f"template uses {{{name}}}, which no pattern captures")
    for s in rule.fix:
        reason = _action_problem(s.action)
        if reason:
            problem("error", reason)
    if not rule.fix:
        problem("warning", "no fix steps: the class's default fix will be shown")
    return out


def _action_problem(action: dict | None) -> str | None:
    """A fix action aimed at what a rule must never change (the model, credentials, paths, LD_*…)."""
    if not action:
        return None
    from pydantic import TypeAdapter, ValidationError

    from qwen_triage.rulepack.actions import Action, denied_reason

    try:
        parsed = TypeAdapter(Action).validate_python({k: v for k, v in action.items() if k != "safety"})
    except ValidationError:
        return None  # the schema reports it
    why = denied_reason(parsed)
    return f"fix action {action.get('type')}: {why}" if why else None


def lint_fix_defaults(path: Path, classes: dict[str, FailureClass]) -> list[Problem]:
    """The runner's per-class fix defaults: schema (actions from the vocabulary), class ids exist."""
    try:
        load_fix_defaults(path, set(classes))
    except RuleFileError as exc:
        return [Problem(exc.path, exc.line, exc.column, "error", exc.reason)]
    return []


def lint_data_files(directories: list[Path]) -> list[Problem]:
    """The launch stages and the known-benign list beside the rules: schema, patterns, examples."""
    from qwen_triage.rulepack.benign import BENIGN_FILE, load_benign
    from qwen_triage.rulepack.stages import STAGES_FILE, load_stage_file

    problems: list[Problem] = []
    for directory in directories:
        for name, load in ((STAGES_FILE, load_stage_file), (BENIGN_FILE, load_benign)):
            path = directory / name if directory.is_dir() else None
            if path is None or not path.is_file():
                continue
            try:
                load(path)
            except RuleFileError as exc:
                problems.append(Problem(exc.path, exc.line, exc.column, "error", exc.reason))
                continue
            if name == BENIGN_FILE:
                problems += _lint_benign(path)
    return problems


def _lint_benign(path: Path) -> list[Problem]:
    """Benign patterns run on every unexplained error line: probed for backtracking as rules' patterns are."""
    from qwen_triage.rulepack.benign import load_benign_templates

    out = []
    for template in load_benign_templates(path):
        reason = probe_pattern(template.pattern, template.examples)
        if reason:
            out.append(Problem(str(path), 1, 1, "error", f"benign pattern {template.pattern!r}: {reason}"))
    return out


def _place(lr: LoadedRule) -> tuple[str, int, int]:
    return (str(Path(lr.path).resolve()), lr.position.line, lr.position.column)


def lint_paths(paths: list[Path], *, examples: bool = True) -> list[Problem]:
    """Lint rule files or directories (default: the bundled pack).

    ``examples``: also run each rule's ``match``/``no_match`` examples through
    the real matcher (what ``rules test`` does); a failing one is an error.
    """
    problems = _lint_files(paths)
    if examples and not any(p.level == "error" and p.rule is None for p in problems):
        problems += lint_examples(paths)
    return problems


def lint_examples(paths: list[Path]) -> list[Problem]:
    """Each rule's examples as lint errors: a ``match`` that does not fire, a ``no_match`` that does."""
    from qwen_triage.engine.scanner import cache_dir

    try:
        pack = pack_for_paths(paths)
    except RuleFileError:
        return []  # the file checks above said why
    compiled = CompiledPack.build(pack, engine="auto", cache_dir=cache_dir())
    out = []
    for r in test_examples(pack, compiled):
        if not r.ok:
            want = "does not fire" if r.kind == "match" else "fires"
            out.append(Problem(r.path, r.line, 1, "error", f"{r.kind} example {want}: {r.example[:200]!r}", r.rule))
    return out


def _lint_files(paths: list[Path]) -> list[Problem]:
    problems: list[Problem] = []
    base = bundled_rules_dir()
    try:
        classes = load_classes(base / "classes.yaml")
    except RuleFileError as exc:
        return [Problem(exc.path, exc.line, exc.column, "error", exc.reason)]
    for cycle in _class_cycles(classes):
        problems.append(Problem(str(base / "classes.yaml"), 1, 1, "error", "explains cycle: " + " -> ".join(cycle)))
    problems.extend(lint_fix_defaults(base / FIX_DEFAULTS_FILE, classes))
    targets = paths or [base]
    problems.extend(lint_data_files([base, *(t for t in targets if t != base)]))
    seen: dict[str, LoadedRule] = {}
    if paths:  # contributors' rules load beside the bundled ones: ids must not clash
        for f in rule_files(base):
            for lr in load_rule_file(f, classes):
                seen[lr.rule.id] = lr
    for target in targets:
        try:
            files = rule_files(target)
        except RuleFileError as exc:
            problems.append(Problem(exc.path, exc.line, exc.column, "error", exc.reason))
            continue
        for f in files:
            try:
                loaded = load_rule_file(f, classes)
            except RuleFileError as exc:
                # every schema error of the file at once (yamlload.validate collects them), and every
                # unknown class (the loader stops at the first; a file of drafts has one per rule)
                unknown = _unknown_classes(f, classes)
                for e in unknown or getattr(exc, "all_errors", None) or [exc]:
                    problems.append(e if isinstance(e, Problem) else Problem(e.path, e.line, e.column, "error", e.reason))
                continue
            for lr in loaded:
                first = seen.get(lr.rule.id)
                if first is not None and _place(first) != _place(lr):
                    problems.append(
                        Problem(
                            lr.path,
                            lr.position.line,
                            lr.position.column,
                            "error",
                            f"duplicate rule id (first at {first.path}:{first.position.line})",
                            lr.rule.id,
                        )
                    )
                seen.setdefault(lr.rule.id, lr)
                problems.extend(lint_rule(lr))
    return problems


def _unknown_classes(path: Path, classes: dict[str, FailureClass]) -> list[Problem]:
    """Every rule (and table row) of a schema-valid file whose class is not in the catalogue, each with
    its position; empty when the file fails for another reason (the loader's error then says why)."""
    from qwen_triage.authoring.suggest import CLASS_PLACEHOLDER
    from qwen_triage.rulepack.schema import RuleFile
    from qwen_triage.rulepack.yamlload import load_yaml

    try:
        loaded = load_yaml(path)
        parsed = loaded.validate(RuleFile) if loaded.data is not None else None
    except RuleFileError:
        return []
    out = []
    for i, rule in enumerate(parsed.rules if parsed else ()):
        wanted = [(("rules", i, "class"), rule.class_)]
        wanted += [(("rules", i, "table", "rows", r, "class"), row.class_)
                   for r, row in enumerate(rule.table.rows if rule.table else ()) if row.class_ is not None]
        for where, cid in wanted:
            if cid in classes:
                continue
            pos = loaded.position_of(where)
            hint = " (a draft: set it to a class id, `qwen-triage rules classes` lists them)" \
                if cid == CLASS_PLACEHOLDER else " (`qwen-triage rules classes` lists the ids)"
            out.append(Problem(str(path), pos.line, pos.column, "error", f"unknown class {cid!r}{hint}", rule.id))
    return out


@dataclass
class ExampleResult:
    rule: str
    path: str
    line: int
    kind: str  # "match" or "no_match"
    example: str
    ok: bool


def _fires(compiled: CompiledPack, rule_id: str, example: str) -> bool:
    matcher = Matcher(compiled)
    data = "\n".join(example.splitlines() or [""]).encode("utf-8") + b"\n"
    block = Block(data=data, first_line=1)
    found = list(matcher.feed_block(block, "<example>")) + list(matcher.finish())
    return any(f.rule.rule.id == rule_id for f in found)


def test_examples(pack: RulePack, compiled: CompiledPack) -> list[ExampleResult]:
    """Every `match` example fires its rule, every `no_match` one does not (through the real prefilter)."""
    results = []
    for lr in pack.rules:
        rule = lr.rule
        for kind, examples in (("match", rule.examples.match), ("no_match", rule.examples.no_match)):
            for ex in examples:
                fired = _fires(compiled, rule.id, ex)
                results.append(
                    ExampleResult(rule.id, lr.path, lr.position.line, kind, ex, fired == (kind == "match"))
                )
    return results


def pack_for_paths(paths: list[Path]) -> RulePack:
    """The bundled pack plus ``paths``; only the rules from ``paths`` when any are given."""
    pack = load_pack(paths)
    if paths:
        wanted = {str(f.resolve()) for p in paths for f in rule_files(p)}
        pack.rules = [r for r in pack.rules if str(Path(r.path).resolve()) in wanted]
    return pack

