"""Small rule files for the lint checks' tests: one clean rule, and a way to break it one way at a time."""

from __future__ import annotations

from pathlib import Path

from qwen_triage.authoring.lint.problem import Problem
from qwen_triage.authoring.lint.run import lint_paths


def quoted(text: str) -> str:
    """YAML single-quoted: backslashes stay as they are, as in a pattern."""
    return "'" + text.replace("'", "''") + "'"


def rule(rid: str = "local.clean", *, cls: str = "config.bad_argument", severity: str = "error",
         match: str = "any: ['(?i)frobnicate failed badly']", example: str = "frobnicate failed badly",
         no_match: str = "frobnicate went fine", fix: str = "- step: \"read the frobnicator docs\"",
         extra: str = "", sources: str = "vllm") -> str:
    fix_block = f"    fix:\n      {fix}\n" if fix else ""
    return (f"  - id: {rid}\n    class: {cls}\n    title: a rule for the lint tests\n    severity: {severity}\n"
            f"    sources: [{sources}]\n    match:\n      {match}\n{extra}{fix_block}"
            f"    examples:\n      match: [{quoted(example)}]\n      no_match: [{quoted(no_match)}]\n")


def rules_dir(tmp_path: Path, *rules: str, **files: str) -> Path:
    """A directory holding ``local.yaml`` with ``rules`` and any other files (name with `_` for `-`/`.`)."""
    d = tmp_path / "rules"
    d.mkdir(parents=True)
    if rules:
        (d / "local.yaml").write_text("rules:\n" + "".join(rules))
    for name, text in files.items():
        (d / name.replace("__", "-").replace("_yaml", ".yaml")).write_text(text)
    return d


def ids(problems: list[Problem]) -> set[str]:
    return {p.check for p in problems}


def lint(directory: Path, **kw: object) -> list[Problem]:
    return lint_paths([directory], **kw)  # type: ignore[arg-type]
